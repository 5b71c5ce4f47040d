"""A lowered function's loops written back as hybrid-script source (TVM's ``te.hybrid.build``): the schedule's
loop nest in Python, which runs on numpy arrays and parses back into an operation (:class:`HybridModule`)."""

from __future__ import annotations

import math
from typing import Any

from autosched.te import expr as E
from autosched.te.hybrid.parser import HybridError
from autosched.te.hybrid.runtime import HYBRID_GLOBALS
from autosched.te.trace_code import PyNames
from autosched.tir import stmt as S
from autosched.tir.transform import substitute_stmt

_BINARY = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%", E.EQ: "==", E.NE: "!=",
           E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.BitAnd: "&", E.BitOr: "|", E.BitXor: "^",
           E.ShiftLeft: "<<", E.ShiftRight: ">>", E.And: "and", E.Or: "or"}
_CALLS = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "pow": "power", "floor": "floor",
          "ceil": "ceil", "nearbyint": "round", "fabs": "abs", "popcount": "popcount"}
_LOOPS = {"serial": "range", "parallel": "parallel", "vectorized": "vectorize", "unrolled": "unroll"}
_CASTS = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


class _Writer:
    def __init__(self, name: str):
        self.name = name
        self.names = PyNames([*HYBRID_GLOBALS, "min", "max", "abs", "len", "output_tensor", "allocate"])
        self.shape_of: dict[int, str] = {}  # a shape variable that is no argument -> the input dimension it is
        self.lines: list[str] = []

    def _err(self, what: str) -> HybridError:
        return HybridError(f"te.hybrid.build of {self.name}: {what} cannot be written as a hybrid script")

    def name_of(self, obj: Any, text: str) -> str:
        return self.names.name(obj, text)

    def expr(self, e: Any) -> str:  # noqa: C901 - one case per node kind
        if isinstance(e, E.Var):
            return self.shape_of.get(id(e)) or self.name_of(e, e.name)
        if isinstance(e, E.IntImm):
            return str(bool(e.value)) if e.dtype == "bool" else str(e.value)
        if isinstance(e, E.FloatImm):
            if not math.isfinite(e.value):
                raise self._err(f"the constant {e.value}")
            return f"{e.dtype}({e.value!r})" if e.dtype != "float32" else repr(e.value)
        op = _BINARY.get(type(e))
        if op is not None:
            return f"({self.expr(e.a)} {op} {self.expr(e.b)})"
        if isinstance(e, E.Div):
            if not E.is_float(e.dtype):
                raise self._err(f"the integer division {e}")
            return f"({self.expr(e.a)} / {self.expr(e.b)})"
        if isinstance(e, (E.Min, E.Max)):
            return f"{'min' if isinstance(e, E.Min) else 'max'}({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.Not):
            return f"(not {self.expr(e.a)})"
        if isinstance(e, E.Select):
            return f"({self.expr(e.t)} if {self.expr(e.cond)} else {self.expr(e.f)})"
        if isinstance(e, E.Cast):
            if e.dtype not in _CASTS:
                raise self._err(f"a cast to {e.dtype}")
            return f"{e.dtype}({self.expr(e.value)})"
        if isinstance(e, E.Call):
            if e.name == "likely":
                return self.expr(e.args[0])
            if e.name not in _CALLS:
                raise self._err(f"the call {e.name}")
            return f"{_CALLS[e.name]}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, E.Let):
            return self.expr(E.substitute(e.body, {e.var: e.value}))
        if isinstance(e, S.BufferLoad):
            return f"{self.name_of(e.buffer, e.buffer.name)}[{self.indices(e.indices)}]"
        raise self._err(f"the expression {e}")

    def indices(self, idx: Any) -> str:
        return ", ".join(self.expr(i) for i in idx) if idx else "0"

    def shape(self, buf: S.Buffer) -> str:
        dims = [self.expr(d) for d in buf.shape] or ["1"]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def stmt(self, s: S.Stmt, ind: int) -> None:
        pad = "    " * ind
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x, ind)
        elif isinstance(s, S.For):
            v = self.name_of(s.var, s.var.name)
            if s.kind == "thread_binding":
                loop = f'bind("{s.thread_tag}", {self.expr(s.extent)})'
            else:
                loop = f"{_LOOPS[s.kind]}({self.expr(s.extent)})"
            self.lines.append(f"{pad}for {v} in {loop}:")
            self.stmt(s.body, ind + 1)
        elif isinstance(s, S.BufferStore):
            buf = self.name_of(s.buffer, s.buffer.name)
            self.lines.append(f"{pad}{buf}[{self.indices(s.indices)}] = {self.expr(s.value)}")
        elif isinstance(s, S.Allocate):
            b = s.buffer
            self.lines.append(f'{pad}{self.name_of(b, b.name)} = allocate({self.shape(b)}, "{b.dtype}", "{b.scope}")')
            self.stmt(s.body, ind)
        elif isinstance(s, S.IfThenElse):
            self.lines.append(f"{pad}if {self.expr(s.cond)}:")
            self.stmt(s.then_case, ind + 1)
            if s.else_case is not None:
                self.lines.append(f"{pad}else:")
                self.stmt(s.else_case, ind + 1)
        elif isinstance(s, S.LetStmt):
            self.stmt(substitute_stmt(s.body, {s.var: s.value}), ind)
        else:
            raise self._err(f"the statement {type(s).__name__} ({s})".strip())


def hybrid_source(func: S.PrimFunc, n_outputs: int, name: str) -> str:
    """The hybrid script of ``func`` (a lowered function whose last ``n_outputs`` buffers are its outputs):
    ``def name(inputs...)``, the outputs declared with ``output_tensor`` and returned."""
    w = _Writer(name)
    fname = w.name_of(func, name)  # first: a buffer may carry the same name (a module's op is named after it)
    bufs = list(func.params)
    ins, outs = bufs[:len(bufs) - n_outputs], bufs[len(bufs) - n_outputs:]
    args: list[Any] = list(ins)
    for pos, k in func.attrs.get("scalar_args", []):
        args.insert(pos, func.scalar_params[k])
    given = {id(a) for a in args}
    for b in ins:  # a shape variable that is no argument is read from the input it sizes
        for d, ext in enumerate(b.shape):
            if isinstance(ext, E.Var) and id(ext) not in given and id(ext) not in w.shape_of:
                w.shape_of[id(ext)] = f"{w.name_of(b, b.name)}.shape[{d}]"
    params = [w.name_of(a, a.name) for a in args]
    for b in outs:
        w.lines.append(f'    {w.name_of(b, b.name)} = output_tensor({w.shape(b)}, "{b.dtype}")')
    w.stmt(func.body, 1)
    rets = ", ".join(w.name_of(b, b.name) for b in outs)
    return "\n".join([f"def {fname}({', '.join(params)}):", *w.lines, f"    return {rets}", ""])


__all__ = ["hybrid_source"]
