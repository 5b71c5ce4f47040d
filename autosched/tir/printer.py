"""A readable text form of expressions and loop nests, one loop per line, like ``tvm.lower``."""

from __future__ import annotations

import math

from autosched.te import expr as E
from autosched.tir import stmt as S
from autosched.tir.stmt import BufferLoad, BufferRef

_PREC = {
    E.Or: 1,
    E.And: 2,
    E.EQ: 4,
    E.NE: 4,
    E.LT: 4,
    E.LE: 4,
    E.GT: 4,
    E.GE: 4,
    E.Add: 5,
    E.Sub: 5,
    E.Mul: 6,
    E.Div: 6,
    E.FloorDiv: 6,
    E.FloorMod: 6,
}


def _prec(e: E.Expr) -> int:
    if isinstance(e, E.IntImm) and e.value < 0 or isinstance(e, E.FloatImm) and e.value < 0:
        return 7
    return _PREC.get(type(e), 9)


def expr_str(e: E.Expr) -> str:
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.IntImm):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value) if e.dtype in ("int64", "int32") else f"{e.dtype}({e.value})"
    if isinstance(e, E.FloatImm):
        v = e.value
        s = repr(v) if math.isfinite(v) else ("inf" if v > 0 else "-inf")
        return s + ("f" if e.dtype == "float32" and math.isfinite(v) else "")
    if isinstance(e, (E.Min, E.Max)):
        return f"{e.symbol}({expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, E.BinaryOp):
        p = _prec(e)
        left = expr_str(e.a)
        if _prec(e.a) < p:
            left = f"({left})"
        right = expr_str(e.b)
        # right operand of a non-commutative op needs parens at equal precedence
        if _prec(e.b) < p or (_prec(e.b) == p and not isinstance(e, (E.Add, E.Mul, E.And, E.Or))):
            right = f"({right})"
        sep = "" if isinstance(e, E.Mul) else " "
        return f"{left}{sep}{e.symbol}{sep}{right}"
    if isinstance(e, E.Not):
        inner = expr_str(e.a)
        return f"!({inner})" if _prec(e.a) < 9 else f"!{inner}"
    if isinstance(e, E.Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})"
    if isinstance(e, E.Cast):
        return f"{e.dtype}({expr_str(e.value)})"
    if isinstance(e, E.Call):
        for prefix, fn in (("packed:", "call_packed"), ("extern:", "call_extern")):
            if e.name.startswith(prefix):
                args = [f'"{e.name[len(prefix):]}"'] + [expr_str(a) for a in e.args]
                return f"{fn}({', '.join(args)})"
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, E.Let):
        return f"(let {e.var.name} = {expr_str(e.value)} in {expr_str(e.body)})"
    if isinstance(e, E.TensorLoad):
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, BufferRef):
        return e.buffer.name
    if isinstance(e, BufferLoad):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, E.Reduce):
        axes = ", ".join(a.name for a in e.axis)
        cond = f", where={expr_str(e.condition)}" if e.condition is not None else ""
        return f"{e.combiner.name}({expr_str(e.source)}, axis=[{axes}]{cond})"
    return f"<{type(e).__name__}>"


def stmt_str(s, indent: int = 0) -> str:
    lines: list[str] = []
    _stmt(s, indent, lines)
    return "\n".join(lines)


def _stmt(s, ind: int, out: list[str]) -> None:
    pad = "  " * ind
    if isinstance(s, S.SeqStmt):
        for x in s.seq:
            _stmt(x, ind, out)
    elif isinstance(s, S.For):
        kind = {"serial": "for", "parallel": "parallel", "vectorized": "vectorized", "unrolled": "unrolled"}.get(
            s.kind, f"bind[{s.thread_tag}]"
        )
        out.append(f"{pad}{kind} ({s.var.name}, 0, {expr_str(s.extent)}) {{")
        _stmt(s.body, ind + 1, out)
        out.append(pad + "}")
    elif isinstance(s, S.BufferStore):
        idx = ", ".join(expr_str(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}")
    elif isinstance(s, S.Allocate):
        shape = ", ".join(expr_str(d) for d in s.buffer.shape)
        out.append(f"{pad}allocate {s.buffer.name}: {s.buffer.dtype}[{shape}], {s.buffer.scope}")
        _stmt(s.body, ind, out)
    elif isinstance(s, S.IfThenElse):
        out.append(f"{pad}if ({expr_str(s.cond)}) {{")
        _stmt(s.then_case, ind + 1, out)
        if s.else_case is not None:
            out.append(pad + "} else {")
            _stmt(s.else_case, ind + 1, out)
        out.append(pad + "}")
    elif isinstance(s, S.LetStmt):
        out.append(f"{pad}let {s.var.name} = {expr_str(s.value)}")
        _stmt(s.body, ind, out)
    elif isinstance(s, S.Barrier):
        out.append(f"{pad}__syncthreads()")
    elif isinstance(s, S.Evaluate):
        out.append(f"{pad}{expr_str(s.value)}")
    else:
        out.append(f"{pad}<{type(s).__name__}>")


def func_str(f) -> str:
    params = [f"{b.name}: {b.dtype}[{', '.join(expr_str(d) for d in b.shape)}]" for b in f.params]
    for pos, k in f.attrs.get("scalar_args", []):  # te.var arguments, where the call passes them
        v = f.scalar_params[k]
        params.insert(pos, f"{v.name}: {v.dtype}")
    head = f"primfn {f.name}({', '.join(params)}) {{"
    return head + "\n" + stmt_str(f.body, 1) + "\n}"
