"""Graph passes: ``Sequential`` under a ``PassContext(opt_level=...)`` (``autosched.transform``'s, TVM's
``tvm.transform.PassContext``; the default level is 3: everything on, as TVM's tutorials build).

InferType (0), SimplifyInference (0: batch_norm to scale and shift, folded into conv2d weights),
FoldConstant (2), EliminateCommonSubexpr (3), DeadCodeElimination (1), AlterOpLayout (3: blocked layouts,
alter_layout.py), FuseOps (0; fusion from level 1); MergeComposite, AnnotateTarget and PartitionGraph (0) for
external compilers (partition.py). FoldConstant evaluates with relay/op/interp.py; type inference is the IR's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autosched.relay import op as _op
from autosched.relay.ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    IRModule,
    RelayError,
    TensorType,
    Tuple,
    TupleGetItem,
    Var,
    children,
    const,
    post_order,
    rebuild,
    rewrite,
)
from autosched.relay.ir.type_infer import infer_type
from autosched.relay.op.interp import evaluate
from autosched.transform import Pass as _BasePass
from autosched.transform import PassContext, Sequential


class Pass(_BasePass):
    """A pass over relay modules (IRModule in, IRModule out): ``tvm.transform.Pass`` with the module checked."""

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.name} runs on an IRModule, got {type(mod).__name__}")
        return super().__call__(mod)


def function_pass(pass_func: Any = None, opt_level: int = 0, name: str | None = None,
                  required: Sequence[str] | None = None) -> Any:
    """TVM's decorator of a pass over each relay function of a module: a function ``f(func, mod, ctx) -> func``,
    or a class whose ``transform_function(self, func, mod, ctx)`` does it (calling the decorated class with its
    arguments makes the pass, named after the class)."""

    def over_functions(fn: Callable[[Function, IRModule], Function], pass_name: str) -> Callable[[IRModule], IRModule]:
        def run(mod: IRModule) -> IRModule:
            out = {}
            for gname, f in mod.functions.items():
                new = f if f.attrs.get("Compiler") else fn(f, mod)
                if not isinstance(new, Function):
                    raise TypeError(f"function pass {pass_name}: must return a relay Function, got "
                                    f"{type(new).__name__}")
                out[gname] = new
            return IRModule(out)
        return run

    def make(obj: Any) -> Any:
        pass_name = name or obj.__name__
        if isinstance(obj, type):
            def construct(*args: Any, **kwargs: Any) -> Pass:
                inst = obj(*args, **kwargs)
                return Pass(pass_name, opt_level, over_functions(
                    lambda f, mod: inst.transform_function(f, mod, PassContext.current()), pass_name))

            construct.__name__ = obj.__name__
            construct.__doc__ = obj.__doc__
            return construct
        if not callable(obj):
            raise TypeError(f"function_pass: {obj!r} is neither a function nor a class")
        return Pass(pass_name, opt_level, over_functions(lambda f, mod: obj(f, mod, PassContext.current()), pass_name))

    return make(pass_func) if pass_func is not None else make


def _map_functions(mod: IRModule, fn: Callable[[Function], Function]) -> IRModule:
    """Apply ``fn`` to every function but those partitioned out for an external compiler (they belong to it)."""
    return IRModule({name: f if f.attrs.get("Compiler") else fn(f) for name, f in mod.functions.items()})


def _is_external(n: Expr) -> bool:
    return isinstance(n, Call) and isinstance(n.op, Function) and bool(n.op.attrs.get("Compiler"))


# ----------------------------------------------------------------- InferType
def InferType() -> Pass:  # noqa: N802 - TVM's name
    """Infer and check the shapes and dtypes of every expression (ir.type_infer.infer_type on each function)."""
    def run(mod: IRModule) -> IRModule:
        for f in mod.functions.values():
            infer_type(f)
        return mod

    return Pass("InferType", 0, run)


# ------------------------------------------------------------- FoldConstant
def _is_const(e: Expr) -> bool:
    return isinstance(e, Constant) or (isinstance(e, Tuple) and all(_is_const(f) for f in e.fields))


_FOLD_CHUNK = 16  # constant expressions evaluated per compiled kernel


def fold_constant(func: Function) -> Function:
    """Evaluate every call whose arguments are all constants (compiled and run, a kernel per few results)."""
    infer_type(func)
    nodes = post_order(func.body)
    const_calls: set[int] = set()
    for n in nodes:
        if isinstance(n, Call) and not isinstance(n.op, Function) and isinstance(n.checked_type, TensorType):
            if all(isinstance(a, Constant) or id(a) in const_calls or
                   (isinstance(a, Tuple) and all(isinstance(f, Constant) or id(f) in const_calls for f in a.fields))
                   for a in n.args):
                const_calls.add(id(n))
    if not const_calls:
        return func
    users_nonconst: set[int] = set()
    for n in nodes:
        if id(n) in const_calls:
            continue
        for c in children(n):
            users_nonconst.add(id(c))
            if isinstance(c, Tuple):
                users_nonconst.update(id(f) for f in c.fields)
    users_nonconst.add(id(func.body))
    roots = [n for n in nodes if id(n) in const_calls and id(n) in users_nonconst]
    # a kernel per few roots: one for all of them nests a buffer per stage (a QDQ ResNeXt's 53 dequantized
    # weights, each a few stages, nested past Python's recursion limit in codegen)
    values = [v for k in range(0, len(roots), _FOLD_CHUNK) for v in evaluate(roots[k:k + _FOLD_CHUNK])]
    repl = {id(n): Constant(v) for n, v in zip(roots, values)}
    body = rewrite_by_id(func.body, repl)
    return Function(func.params, body, func.ret_type, func.attrs)


def rewrite_by_id(expr: Expr, repl: dict[int, Expr]) -> Expr:
    """Rebuild ``expr`` with the nodes whose ids are in ``repl`` replaced."""
    memo: dict[int, Expr] = {}
    for node in post_order(expr):
        if id(node) in repl:
            memo[id(node)] = repl[id(node)]
        else:
            memo[id(node)] = rebuild(node, [memo[id(c)] for c in children(node)])
    return memo[id(expr)]


def FoldConstant() -> Pass:  # noqa: N802
    """Replace subgraphs of constants by their value."""
    return Pass("FoldConstant", 2, lambda mod: _map_functions(mod, fold_constant))


# -------------------------------------------------------- SimplifyInference
def _bn_scale_shift(args: Sequence[Expr], attrs: dict, ndim: int, axis: int) -> tuple[Expr, Expr]:
    x, gamma, beta, mean, var = args
    shape = (-1,) + (1,) * (ndim - axis - 1)
    eps = float(attrs["epsilon"])
    if all(isinstance(a, Constant) for a in args[1:]):
        g = gamma.data if attrs["scale"] else np.ones_like(var.data)
        b = beta.data if attrs["center"] else np.zeros_like(mean.data)
        scale = (g / np.sqrt(var.data + np.asarray(eps, var.data.dtype))).astype(var.data.dtype)
        shift = (b - mean.data * scale).astype(var.data.dtype)
        return Constant(scale.reshape(shape)), Constant(shift.reshape(shape))
    dt = infer_type(var).dtype
    scale = _op.divide(gamma, _op.make_call("sqrt", [_op.add(var, const(eps, dt))])) if attrs["scale"] else (
        _op.divide(const(1.0, dt), _op.make_call("sqrt", [_op.add(var, const(eps, dt))])))
    shift = _op.subtract(beta, _op.multiply(mean, scale)) if attrs["center"] else _op.subtract(
        const(0.0, dt), _op.multiply(mean, scale))
    return _op.make_call("reshape", [scale], newshape=shape), _op.make_call("reshape", [shift], newshape=shape)


def _channel_vector(c: Expr, channels: int) -> np.ndarray | None:
    """The per-output-channel values of a constant shaped (C,1,1) or (1,C,1,1), else None."""
    if not isinstance(c, Constant):
        return None
    s = c.data.shape
    if s in ((channels, 1, 1), (1, channels, 1, 1)):
        return c.data.reshape(channels)
    return None


def simplify_inference(func: Function) -> Function:
    """batch_norm -> x * scale + shift (per channel), then a constant per-channel scale after a conv2d with
    constant weights is folded into those weights (inference only: the statistics are constants)."""
    infer_type(func)
    def bn(node: Expr) -> Expr | None:
        if isinstance(node, TupleGetItem) and isinstance(node.tuple_value, Call) and \
                getattr(node.tuple_value.op, "name", "") == "nn.batch_norm":
            call = node.tuple_value
            if node.index != 0:
                raise RelayError("SimplifyInference: only output 0 of nn.batch_norm is used at inference")
            x = call.args[0]
            ndim = len(infer_type(x).shape)
            axis = call.attrs["axis"] % ndim
            scale, shift = _bn_scale_shift(call.args, call.attrs, ndim, axis)
            return _op.add(_op.multiply(x, scale), shift)
        return None

    body = rewrite(func.body, bn)
    func = Function(func.params, body, func.ret_type, func.attrs)
    infer_type(func)
    uses: dict[int, int] = {}
    for n in post_order(func.body):
        for c in children(n):
            uses[id(c)] = uses.get(id(c), 0) + 1

    def fold_scale(node: Expr) -> Expr | None:
        if not (isinstance(node, Call) and getattr(node.op, "name", "") == "multiply"):
            return None
        lhs, rhs = node.args
        inner = lhs
        bias = None
        if isinstance(inner, Call) and getattr(inner.op, "name", "") in ("nn.bias_add", "add") and \
                uses.get(id(inner), 0) <= 1:
            bias_name = inner.op.name
            conv_candidate, bias = inner.args
            if bias_name == "add":
                bias_vec = _channel_vector(bias, _channels(conv_candidate))
                if bias_vec is None:
                    return None
            inner = conv_candidate
        if not (isinstance(inner, Call) and getattr(inner.op, "name", "") == "nn.conv2d"
                and isinstance(inner.args[1], Constant) and uses.get(id(inner), 0) <= 1):
            return None
        w = inner.args[1].data
        if not np.issubdtype(w.dtype, np.floating):  # integer filters (a quantized model's) stay integers
            return None
        vec = _channel_vector(rhs, w.shape[0])
        if vec is None:
            return None
        conv = Call(inner.op, [inner.args[0], Constant((w * vec.reshape(-1, 1, 1, 1)).astype(w.dtype))], inner.attrs)
        if bias is None:
            return conv
        if not isinstance(bias, Constant):
            return None
        scaled = Constant((bias.data.reshape(-1) * vec).astype(bias.data.dtype).reshape(bias.data.shape))
        return Call(lhs.op, [conv, scaled], lhs.attrs)

    body = rewrite(func.body, fold_scale)
    return Function(func.params, body, func.ret_type, func.attrs)


def _channels(e: Expr) -> int:
    t = infer_type(e)
    return t.shape[1] if isinstance(t, TensorType) and len(t.shape) == 4 else -1


def SimplifyInference() -> Pass:  # noqa: N802
    """Rewrite batch_norm for inference and fold its scale into the preceding conv2d's weights."""
    return Pass("SimplifyInference", 0, lambda mod: _map_functions(mod, simplify_inference))


# --------------------------------------------------- EliminateCommonSubexpr
def eliminate_common_subexpr(func: Function) -> Function:
    """Calls of the same op with the same arguments and attributes are computed once."""
    seen: dict[Any, Expr] = {}

    def key_of(node: Expr) -> Any:
        if isinstance(node, Call) and not isinstance(node.op, Function):
            return ("call", node.op.name, tuple(id(a) for a in node.args), repr(sorted(node.attrs.items())))
        if isinstance(node, TupleGetItem):
            return ("get", id(node.tuple_value), node.index)
        if isinstance(node, Tuple):
            return ("tuple", tuple(id(f) for f in node.fields))
        if isinstance(node, Constant) and node.data.size <= 16:
            return ("const", str(node.data.dtype), node.data.shape, node.data.tobytes())
        return None

    def visit(node: Expr) -> Expr | None:
        k = key_of(node)
        if k is None:
            return None
        first = seen.get(k)
        if first is None:
            seen[k] = node
            return None
        return first

    return Function(func.params, rewrite(func.body, visit), func.ret_type, func.attrs)


def EliminateCommonSubexpr() -> Pass:  # noqa: N802
    """Merge identical computations."""
    return Pass("EliminateCommonSubexpr", 3, lambda mod: _map_functions(mod, eliminate_common_subexpr))


# ------------------------------------------------------ DeadCodeElimination
def dead_code_elimination(func: Function) -> Function:
    """Drop what the output does not need: unused fields of literal tuples (``(a, b).0`` is ``a``) and,
    by rebuilding from the output, every node it does not reach."""
    def visit(node: Expr) -> Expr | None:
        if isinstance(node, TupleGetItem) and isinstance(node.tuple_value, Tuple):
            return node.tuple_value.fields[node.index]
        return None

    return Function(func.params, rewrite(func.body, visit), func.ret_type, func.attrs)


def DeadCodeElimination() -> Pass:  # noqa: N802
    """Remove computations the output does not use."""
    return Pass("DeadCodeElimination", 1, lambda mod: _map_functions(mod, dead_code_elimination))


# ------------------------------------------------------------------ FuseOps
def _pattern(node: Call) -> int:
    return node.op.pattern


#: the most ops one kernel gets (TVM's default): a graph exporters wrote as hundreds of small ops (torch's
#: decomposed adaptive pooling: 300 gathers and adds) would otherwise become one expression that deep
FUSE_MAX_DEPTH = 256


def fuse_ops(func: Function, fuse: bool = True, max_depth: int = FUSE_MAX_DEPTH) -> Function:
    """Group ops into primitive Functions, one per kernel: elementwise and broadcast consumers fuse into a
    conv2d/dense/matmul/pool producer of the same shape (its epilogue), injective chains fuse together, up
    to ``max_depth`` ops a kernel; ``fuse=False`` gives one kernel per op. Non-scalar constants become
    kernel arguments."""
    if max_depth < 1:
        raise RelayError(f"FuseOps: max_depth is the most ops in one kernel, at least 1; got {max_depth}")
    infer_type(func)
    nodes = post_order(func.body)
    uses: dict[int, int] = {}
    for n in nodes:
        for c in children(n):
            uses[id(c)] = uses.get(id(c), 0) + 1
    uses[id(func.body)] = uses.get(id(func.body), 0) + 1
    group: dict[int, int] = {}  # call id -> group id
    gnodes: dict[int, list[Call]] = {}
    gpattern: dict[int, int] = {}
    groot: dict[int, Call] = {}
    next_gid = 0
    for n in nodes:
        if not isinstance(n, Call) or _is_external(n):  # external calls are kernels of their own compiler
            continue
        if isinstance(n.op, Function):
            raise RelayError("FuseOps: the graph already has fused functions")
        if not isinstance(n.checked_type, TensorType):
            raise RelayError(f"FuseOps: {n.op.name} returns {n.checked_type!r}; run SimplifyInference first "
                             "(only single-tensor ops become kernels)")
        gid = next_gid
        next_gid += 1
        group[id(n)] = gid
        gnodes[gid] = [n]
        gpattern[gid] = _pattern(n)
        groot[gid] = n
        if not fuse:
            continue
        p = _pattern(n)
        for a in n.args:
            if not isinstance(a, Call) or id(a) not in group or uses.get(id(a), 0) != 1:
                continue
            g = group[id(a)]
            if g == group[id(n)] or groot[g] is not a:
                continue
            mine = group[id(n)]
            if len(gnodes[g]) + len(gnodes[mine]) > max_depth:
                continue
            gp, mp = gpattern[g], gpattern[mine]
            ok = False
            if p <= _op.BROADCAST and gp == _op.OUT_ELEMWISE_FUSABLE and mp <= _op.BROADCAST:
                ok = a.checked_type.shape == n.checked_type.shape
            elif p <= _op.INJECTIVE and gp <= _op.INJECTIVE and mp <= _op.INJECTIVE:
                ok = True
            if not ok:
                continue
            for m in gnodes[g]:
                group[id(m)] = mine
            gnodes[mine] = gnodes.pop(g) + gnodes[mine]
            gpattern[mine] = max(gpattern[mine], gpattern.pop(g))
            groot.pop(g)
    memo: dict[int, Expr] = {}
    built: dict[int, Expr] = {}
    for n in nodes:
        if isinstance(n, Call) and not _is_external(n):
            gid = group[id(n)]
            if groot[gid] is not n:
                continue
            members = {id(m) for m in gnodes[gid]}
            params: list[Var] = []
            args: list[Expr] = []
            pmap: dict[int, Var] = {}
            inner: dict[int, Expr] = {}

            def arg_of(a: Expr) -> Expr:
                if id(a) in members:
                    return inner[id(a)]
                if isinstance(a, Constant) and a.data.ndim == 0:
                    return a
                if isinstance(a, Tuple):
                    return Tuple([arg_of(f) for f in a.fields])
                new = memo[id(a)]
                if id(new) not in pmap:
                    v = Var(f"p{len(params)}", a.checked_type)
                    pmap[id(new)] = v
                    params.append(v)
                    args.append(new)
                return pmap[id(new)]

            order = [m for m in nodes if id(m) in members]
            for m in order:
                inner[id(m)] = Call(m.op, [arg_of(a) for a in m.args], m.attrs)
            names = [m.op.name.split(".")[-1] for m in order]
            fn = Function(params, inner[id(n)], n.checked_type,
                          {"Primitive": 1, "name": "fused_" + "_".join(names[:6])})
            memo[id(n)] = Call(fn, args)
            built[id(n)] = memo[id(n)]
        else:
            memo[id(n)] = rebuild(n, [memo[id(c)] for c in children(n)])
    out = Function(func.params, memo[id(func.body)], func.ret_type, func.attrs)
    infer_type(out)
    return out


def FuseOps(fuse_opt_level: int = -1) -> Pass:  # noqa: N802
    """Fuse ops into kernels (primitive functions); at opt_level 0 every op is its own kernel, and
    ``config={"relay.FuseOps.max_depth": n}`` caps the ops of one kernel."""
    def run(mod: IRModule) -> IRModule:
        ctx = PassContext.current()
        level = fuse_opt_level if fuse_opt_level >= 0 else ctx.opt_level
        depth = int(ctx.config.get("relay.FuseOps.max_depth", FUSE_MAX_DEPTH))
        return _map_functions(mod, lambda f: fuse_ops(f, fuse=level >= 1, max_depth=depth))

    return Pass("FuseOps", 0, run)


def bind_params(func: Function, params: dict[str, Any]) -> Function:
    """Replace the parameters named in ``params`` by constants (the weights of a model)."""
    if not params:
        return func
    by_name = {p.name_hint: p for p in func.params}
    unknown = [k for k in params if k not in by_name]
    if unknown:
        raise RelayError(f"params {', '.join(unknown)} are not inputs of the function "
                         f"(its inputs: {', '.join(by_name)})")
    repl: dict[int, Expr] = {}
    for k, v in params.items():
        p = by_name[k]
        arr = np.asarray(v.numpy() if hasattr(v, "numpy") else v)
        t = p.type_annotation
        if isinstance(t, TensorType) and (tuple(arr.shape) != t.shape or str(arr.dtype) != t.dtype):
            raise RelayError(f"param {k!r} has shape {arr.shape} {arr.dtype}, the graph expects {t.shape} {t.dtype}")
        repl[id(p)] = Constant(np.ascontiguousarray(arr))
    body = rewrite_by_id(func.body, repl)
    return Function([p for p in func.params if p.name_hint not in params], body, None, func.attrs)


__all__ = [
    "DeadCodeElimination", "EliminateCommonSubexpr", "FoldConstant", "FuseOps", "InferType", "Pass", "PassContext",
    "Sequential", "SimplifyInference", "bind_params", "infer_type",
]
