"""Whole-computation facts: a canonical structural form (for workload keys), FLOP counts, and the computation
printed one stage a line (:class:`ComputeDAG`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from autosched.te import expr as E
from autosched.te.stage import _post_order
from autosched.te.tensor import ComputeOp, Operation, PlaceholderOp, Tensor


def _ops(outputs: Sequence[Tensor | Operation]) -> list[Operation]:
    return _post_order([t.op if isinstance(t, Tensor) else t for t in outputs])


def structural_form(outputs: Sequence[Tensor | Operation]) -> list:
    """A JSON-able canonical form of the computation producing ``outputs``.

    Shapes, dtypes and expressions are kept; names of tensors and variables are
    replaced by positions, so renaming a stage or an axis keeps the form, while
    any change to what is computed changes it.
    """
    ops = _ops(outputs)
    op_index = {id(op): k for k, op in enumerate(ops)}
    shape_vars: dict[int, int] = {}

    def ser(e: E.Expr, local: dict[int, Any]) -> Any:
        if isinstance(e, E.Var):
            if id(e) in local:
                return local[id(e)]
            return ["sv", shape_vars.setdefault(id(e), len(shape_vars))]
        if isinstance(e, E.IntImm):
            return ["i", e.value, e.dtype]
        if isinstance(e, E.FloatImm):
            v = e.value
            return ["f", repr(v), e.dtype]
        if isinstance(e, E.TensorLoad):
            out = ["T", op_index[id(e.tensor.op)], [ser(i, local) for i in e.indices]]
            vi = getattr(e.tensor, "value_index", 0)
            return out + [vi] if vi else out  # the second output of a multi-output compute
        if isinstance(e, E.Reduce):
            loc = dict(local)
            axes = []
            for k, ax in enumerate(e.axis):
                loc[id(ax.var)] = ["rv", k]
                axes.append([ser(ax.dom.min, local), ser(ax.dom.extent, local)])
            if len(e.sources) > 1:  # one value of a tuple reduction (argmax): the whole tuple, and which value
                dts = [x.dtype for x in e.sources]
                xs, ys = [E.Var("x", d) for d in dts], [E.Var("y", d) for d in dts]
                cl = dict(loc)
                for k, (x, y) in enumerate(zip(xs, ys)):
                    cl[id(x)], cl[id(y)] = ["lhs", k], ["rhs", k]
                return ["RT", e.value_index, [ser(c, cl) for c in e.combiner.combine_tuple(xs, ys)],
                        [ser(i, loc) for i in e.combiner.identity_tuple(dts)], axes,
                        [ser(x, loc) for x in e.sources],
                        ser(e.condition, loc) if e.condition is not None else None]
            x, y = E.Var("x", e.dtype), E.Var("y", e.dtype)
            comb = e.combiner.combine(x, y)
            cl = dict(loc)
            cl[id(x)], cl[id(y)] = ["lhs"], ["rhs"]
            return ["R", ser(comb, cl), ser(e.combiner.identity(e.dtype), loc), axes, ser(e.source, loc),
                    ser(e.condition, loc) if e.condition is not None else None]
        extra: list = []
        if isinstance(e, E.Call):
            extra = [e.name]
        elif isinstance(e, E.Cast):
            extra = [e.dtype]
        return [type(e).__name__, *extra, *[ser(c, local) for c in E.children(e)]]

    form = []
    for op in ops:
        shape = [ser(d, {}) for d in op.shape]
        if isinstance(op, PlaceholderOp):
            form.append(["placeholder", shape, op.dtype])
        elif isinstance(op, ComputeOp):
            local = {id(ax.var): ["ax", k] for k, ax in enumerate(op.axis)}
            entry = ["compute", shape, op.dtype, ser(op.bodies[0], local)]
            if len(op.bodies) > 1:  # the other outputs of a multi-output compute
                entry.append([[b.dtype, ser(b, local)] for b in op.bodies[1:]])
            form.append(entry)
        else:  # pragma: no cover
            raise TypeError(f"unknown operation {op!r}")
    return form


def structural_hash(outputs: Sequence[Tensor | Operation]) -> str:
    """sha256 of :func:`structural_form` (hex)."""
    text = json.dumps(structural_form(outputs), separators=(",", ":"), sort_keys=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _const_int(e: E.Expr) -> int:
    if not isinstance(e, E.IntImm):
        raise ValueError(f"FLOP count needs constant shapes, got {e}")
    return e.value


def _extent(op: ComputeOp, ax: Any) -> float:
    """A reduction axis's extent; one that the data decides (a sparse row's length) counts as its mean, which
    the compute states in ``attrs["mean_extent"]`` by axis name."""
    if isinstance(ax.dom.extent, E.IntImm):
        return ax.dom.extent.value
    mean = ((getattr(op, "attrs", None) or {}).get("mean_extent") or {}).get(ax.var.name)
    if mean is None:
        raise ValueError(f"FLOP count needs constant shapes, got {ax.dom.extent} (a data-dependent extent counts "
                         f"when the compute gives attrs={{'mean_extent': {{'{ax.var.name}': ...}}}})")
    return float(mean)


def _arith_ops(e: E.Expr) -> int:
    n = 0
    for x in E.walk(e):
        if isinstance(x, (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max)) and E.is_float(x.dtype):
            n += 1
        elif isinstance(x, E.Call):
            n += 1
    return n


def flop_count(outputs: Sequence[Tensor | Operation]) -> int:
    """Floating-point operations to compute ``outputs`` once (a multiply-add counts 2)."""
    total = 0
    for op in _ops(outputs):
        if not isinstance(op, ComputeOp):
            continue
        size = 1
        for d in op.shape:
            size *= _const_int(d)
        body = op.bodies[0]
        if isinstance(body, E.Reduce):
            red = 1.0
            for ax in body.axis:
                red *= _extent(op, ax)
            per = sum(_arith_ops(x) for x in body.sources) + len(body.sources)
            total += round(size * red * per)
        else:
            total += size * sum(_arith_ops(b) for b in op.bodies)
    return total


class ComputeDAG:
    """The computation producing ``tensors``, printed one stage a line as TVM's auto_scheduler shows it:
    ``A = PLACEHOLDER [1024, 1024]`` for an input, ``C(i, j) += (A[i, k]*B[k, j])`` for a sum."""

    def __init__(self, tensors: Sequence[Tensor]):
        self.tensors = list(tensors)
        self.ops = _ops(self.tensors)

    @property
    def flop_ct(self) -> int:
        return flop_count(self.tensors)

    def __str__(self) -> str:
        lines = []
        for op in self.ops:
            if isinstance(op, PlaceholderOp):
                lines.append(f"{op.name} = PLACEHOLDER [{', '.join(str(d) for d in op.shape)}]")
            elif isinstance(op, ComputeOp):
                axes = ", ".join(a.var.name for a in op.axis)
                b = op.bodies[0]
                if isinstance(b, E.Reduce) and b.combiner.name == "sum" and len(b.sources) == 1:
                    lines.append(f"{op.name}({axes}) += {b.source}")
                else:
                    lines.append(f"{op.name}({axes}) = {b}")
            else:
                lines.append(f"{op.name} = {type(op).__name__}")
        return "\n".join(lines) + "\n"

    __repr__ = __str__
