"""``ccompiler``: the built-in example external target. It takes float32 conv2d and dense composites (with an
optional bias and relu tail) and add/subtract/multiply/relu/bias_add calls, and emits plain C, one loop nest
per op, that the system C compiler builds into the model's library.

It is the template for a new target: a pattern table, support predicates, and a codegen registered as
``relay.ext.ccompiler`` that turns a partitioned function into a ``CSourceModule``. See docs/relay_byoc.md.
"""

from __future__ import annotations

import math
from typing import Any

from autosched.relay.dataflow_pattern import is_constant, is_op, register_pattern_table, wildcard
from autosched.relay.ir.expr import Call, Constant, Expr, Function, RelayError, TensorType, Tuple, Var, post_order
from autosched.relay.op import register_op_attr
from autosched.relay.op.common import _pair, pad4
from autosched.runtime.csource import CSourceModule, signature
from autosched.runtime.registry import get_global_func, register_func

TARGET = "ccompiler"


def _float32(call: Expr) -> bool:
    ts = [call.checked_type] + [a.checked_type for a in getattr(call, "args", ())]
    return all(isinstance(t, TensorType) and t.dtype == "float32" for t in ts)


# ------------------------------------------------------------ what it takes
def _with_tail(anchor: Any) -> Any:
    """``anchor``, optionally followed by a bias (bias_add or add of a constant) and then a relu."""
    biased = anchor.optional(lambda x: is_op("nn.bias_add")(x, is_constant()) | is_op("add")(x, is_constant()))
    return biased.optional(is_op("nn.relu"))


@register_pattern_table(TARGET)
def pattern_table() -> list[tuple]:
    conv = is_op("nn.conv2d")(wildcard(), is_constant())
    dense = is_op("nn.dense")(wildcard(), is_constant())
    return [
        (f"{TARGET}.conv2d", _with_tail(conv), lambda root: _all_float32(root)),
        (f"{TARGET}.dense", _with_tail(dense), lambda root: _all_float32(root)),
    ]


def _all_float32(root: Expr) -> bool:
    return all(_float32(n) for n in post_order(root) if isinstance(n, Call))


for _name in ("add", "subtract", "multiply", "nn.relu", "nn.bias_add"):
    register_op_attr(_name, f"target.{TARGET}", _float32)


# ------------------------------------------------------------ the C emitter
class _Emitter:
    """C for one partitioned function: parameters and outputs are the arguments, intermediates are heap."""

    def __init__(self, fn: Function, name: str):
        self.fn = fn
        self.name = name
        self.body: list[str] = []
        self.temps: list[tuple[str, int]] = []
        self.loop = 0

    def operand(self, e: Expr, names: dict[int, str]) -> str:
        if isinstance(e, Constant):
            if e.data.ndim != 0:
                raise RelayError(f"{TARGET}: tensor constants must be parameters of {self.name} (run PartitionGraph)")
            return _c_float(float(e.data))
        return names[id(e)]

    def temp(self, t: TensorType) -> str:
        name = f"t{len(self.temps)}"
        self.temps.append((name, max(1, math.prod(t.shape))))
        return name

    def graph(self, body: Expr, names: dict[int, str], dest: dict[int, str]) -> None:
        """Emit the calls of ``body`` (composite calls inline their own bodies)."""
        for n in post_order(body):
            if isinstance(n, (Var, Constant)):
                if id(n) not in names and isinstance(n, Var):
                    raise RelayError(f"{TARGET}: variable {n.name_hint} is not a parameter of {self.name}")
                continue
            if isinstance(n, Tuple):
                continue
            if not isinstance(n, Call):
                raise RelayError(f"{TARGET}: cannot compile a {type(n).__name__} in {self.name}")
            out = dest.get(id(n)) or self.temp(n.checked_type)
            names[id(n)] = out
            if isinstance(n.op, Function):
                inner = {id(p): self.operand(a, names) for p, a in zip(n.op.params, n.args)}
                self.graph(n.op.body, inner, {id(n.op.body): out})
            else:
                self.op(n, [self.operand(a, names) for a in n.args], out)

    def op(self, call: Call, args: list[str], out: str) -> None:
        name = call.op.name
        if not _float32(call):
            raise RelayError(f"{TARGET} compiles float32 only; {name} in {self.name} has type {call.checked_type!r}")
        emit = _OPS.get(name)
        if emit is None:
            raise RelayError(f"{TARGET} cannot compile op {name} (in {self.name}); it takes "
                             f"{', '.join(sorted(_OPS))}")
        self.body.append(f"  /* {name} */")
        self.body += ["  " + line for line in emit(call, args, out)]

    def source(self) -> tuple[str, dict]:
        fn = self.fn
        names: dict[int, str] = {}
        sig_args = []
        decl = []
        for k, p in enumerate(fn.params):
            t = p.type_annotation
            if not isinstance(t, TensorType):
                raise RelayError(f"{TARGET}: parameter {p.name_hint} of {self.name} is not a tensor")
            names[id(p)] = f"in{k}"
            sig_args.append((p.name_hint, t.shape, t.dtype))
            decl.append(f"void *arg_in{k}")
        outs = list(fn.body.fields) if isinstance(fn.body, Tuple) else [fn.body]
        dest = {}
        for k, o in enumerate(outs):
            if id(o) in dest or not isinstance(o, Call):
                raise RelayError(f"{TARGET}: output {k} of {self.name} must be a distinct call")
            dest[id(o)] = f"out{k}"
            sig_args.append((f"out{k}", o.checked_type.shape, o.checked_type.dtype))
            decl.append(f"void *arg_out{k}")
        self.graph(fn.body, names, dest)
        lines = [f"int32_t {self.name}({', '.join(decl)}) {{"]
        lines += [f"  const float *restrict in{k} = (const float *)arg_in{k};" for k in range(len(fn.params))]
        lines += [f"  float *restrict out{k} = (float *)arg_out{k};" for k in range(len(outs))]
        for t, n in self.temps:
            lines.append(f"  float *{t} = (float *)malloc({n} * sizeof(float));")
        if self.temps:
            lines.append(f"  if ({' || '.join('!' + t for t, _ in self.temps)}) {{")
            lines += [f"    free({t});" for t, _ in self.temps]
            lines += ["    return -1;", "  }"]
        lines += self.body
        lines += [f"  free({t});" for t, _ in self.temps]
        lines += ["  return 0;", "}"]
        return "\n".join(lines) + "\n", signature(self.name, sig_args, len(outs))


def _c_float(v: float) -> str:
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return f"{v!r}f"


def _shape(e: Expr) -> tuple[int, ...]:
    return e.checked_type.shape


def _loops(shape: tuple[int, ...]) -> tuple[list[str], list[str], str]:
    """Loop headers over ``shape``, their closing braces, and the flat output index."""
    heads = [f"for (int64_t i{d} = 0; i{d} < {n}; ++i{d}) {{" for d, n in enumerate(shape)]
    flat = "0"
    for d, n in enumerate(shape):
        flat = f"({flat}) * {n} + i{d}" if d else f"i{d}"
    return heads, ["}"] * len(shape), flat


def _broadcast_index(shape: tuple[int, ...], out: tuple[int, ...]) -> str:
    """The flat index into a tensor of ``shape`` broadcast to ``out`` (loop variables i0...)."""
    off = len(out) - len(shape)
    terms, stride = [], 1
    for d in range(len(shape) - 1, -1, -1):
        if shape[d] != 1:
            terms.append(f"i{d + off} * {stride}" if stride != 1 else f"i{d + off}")
        stride *= shape[d]
    return " + ".join(reversed(terms)) or "0"


def _elementwise(expr_of: Any) -> Any:
    def emit(call: Call, args: list[str], out: str) -> list[str]:
        oshape = _shape(call)
        heads, tails, flat = _loops(oshape)
        vals = []
        for a, arg in zip(call.args, args):
            if isinstance(a, Constant) and a.data.ndim == 0:
                vals.append(arg)
            else:
                vals.append(f"{arg}[{_broadcast_index(_shape(a), oshape)}]")
        return heads + [f"{out}[{flat}] = {expr_of(*vals)};"] + tails

    return emit


def _bias_add(call: Call, args: list[str], out: str) -> list[str]:
    shape = _shape(call)
    axis = call.attrs["axis"] % len(shape)
    heads, tails, flat = _loops(shape)
    return heads + [f"{out}[{flat}] = {args[0]}[{flat}] + {args[1]}[i{axis}];"] + tails


def _conv2d(call: Call, args: list[str], out: str) -> list[str]:
    data, weight = args
    N, C, H, W = _shape(call.args[0])
    O, Ig, KH, KW = _shape(call.args[1])
    _, _, OH, OW = _shape(call)
    a = call.attrs
    sh, sw = _pair(a["strides"], "nn.conv2d", "strides")
    dh, dw = _pair(a["dilation"], "nn.conv2d", "dilation")
    pt, pl, _, _ = pad4(a["padding"], "nn.conv2d")
    og = O // int(a["groups"])
    return [
        f"for (int64_t n = 0; n < {N}; ++n)",
        f"for (int64_t o = 0; o < {O}; ++o)",
        f"for (int64_t y = 0; y < {OH}; ++y)",
        f"for (int64_t x = 0; x < {OW}; ++x) {{",
        "  float acc = 0.0f;",
        f"  for (int64_t c = 0; c < {Ig}; ++c) {{",
        f"    const int64_t ic = (o / {og}) * {Ig} + c;",
        f"    for (int64_t kh = 0; kh < {KH}; ++kh) {{",
        f"      const int64_t iy = y * {sh} + kh * {dh} - {pt};",
        f"      if (iy < 0 || iy >= {H}) continue;",
        f"      for (int64_t kw = 0; kw < {KW}; ++kw) {{",
        f"        const int64_t ix = x * {sw} + kw * {dw} - {pl};",
        f"        if (ix < 0 || ix >= {W}) continue;",
        f"        acc += {data}[((n * {C} + ic) * {H} + iy) * {W} + ix]",
        f"             * {weight}[((o * {Ig} + c) * {KH} + kh) * {KW} + kw];",
        "      }",
        "    }",
        "  }",
        f"  {out}[((n * {O} + o) * {OH} + y) * {OW} + x] = acc;",
        "}",
    ]


def _dense(call: Call, args: list[str], out: str) -> list[str]:
    data, weight = args
    dshape = _shape(call.args[0])
    U, K = _shape(call.args[1])
    M = math.prod(dshape[:-1])
    return [
        f"for (int64_t m = 0; m < {M}; ++m)",
        f"for (int64_t u = 0; u < {U}; ++u) {{",
        "  float acc = 0.0f;",
        f"  for (int64_t k = 0; k < {K}; ++k) acc += {data}[m * {K} + k] * {weight}[u * {K} + k];",
        f"  {out}[m * {U} + u] = acc;",
        "}",
    ]


_OPS = {
    "add": _elementwise(lambda a, b: f"{a} + {b}"),
    "subtract": _elementwise(lambda a, b: f"{a} - {b}"),
    "multiply": _elementwise(lambda a, b: f"{a} * {b}"),
    "nn.relu": _elementwise(lambda a: f"({a} > 0.0f ? {a} : 0.0f)"),
    "nn.bias_add": _bias_add,
    "nn.conv2d": _conv2d,
    "nn.dense": _dense,
}

HEADER = "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n"


def codegen(fn: Function) -> CSourceModule:
    """``relay.ext.ccompiler``: C source for one partitioned function (its ``global_symbol``)."""
    name = fn.attrs["global_symbol"]
    src, sig = _Emitter(fn, name).source()
    return CSourceModule(HEADER + src, [sig])


if get_global_func(f"relay.ext.{TARGET}", allow_missing=True) is None:
    register_func(f"relay.ext.{TARGET}", codegen)

__all__ = ["TARGET", "codegen", "pattern_table"]
