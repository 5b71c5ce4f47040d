"""Linear algebra ops: ``det``, the determinant of each of a batch of square matrices (ONNX's Det, numpy's
``linalg.det``), by Gaussian elimination with partial pivoting (LAPACK's getrf, unblocked) written as te stages:
one pivot search and one elimination step per column, each step a stage of the shrinking trailing submatrix (the
row swap a gather at the pivot the search found), so the kernel is a plain te computation every part of autosched
(workload keys, tuning, FoldConstant) takes."""

from __future__ import annotations

import math
from typing import Any

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType
from autosched.relay.op import schedules
from autosched.relay.op.common import _c, _ishape, _operands
from autosched.relay.op.op import OUT_ELEMWISE_FUSABLE, OpDef, make_call, register_op
from autosched.workloads.tile_sizes import lanes

FLOATS = ("float16", "float32", "float64")
STAGE = "det_"  # the prefix of the elimination's stages, each kept at root (see _det_schedule)


def _det_rel(types, attrs):
    op = "det"
    (x,) = _operands(types, op, "data")
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise RelayError(f"{op}: data {x.shape} must be [..., M, M], a batch of square matrices")
    if x.dtype not in FLOATS:
        raise RelayError(f"{op}: data must be floating point, got {x.dtype}")
    return TensorType(tuple(x.shape[:-2]), x.dtype)


def _pivot(s: te.Tensor, k: int) -> te.Tensor:
    """The row of the largest magnitude in column 0 of each submatrix of ``s`` [B, n, n] (the first of equal ones,
    as LAPACK's isamax): the largest magnitude, then the first row holding it (clamped: a NaN column gives row
    n - 1)."""
    n = _ishape(s)[1]
    r1, r2 = te.reduce_axis((0, n), name="r"), te.reduce_axis((0, n), name="r")
    best = te.compute((_ishape(s)[0],), lambda b: te.max(te.abs(s[b, r1, 0]), axis=r1), name=f"{STAGE}magnitude{k}")
    first = te.compute((_ishape(s)[0],), lambda b: te.min(te.if_then_else(
        te.abs(s[b, r2, 0]) == best[b], te.cast("int64", r2), _c(n, "int64")), axis=r2), name=f"{STAGE}pivot{k}")
    return first


def _det_compute(inputs, attrs, out_type):
    """The matrices as [B, M, M] (float32 for float16 data); per column k the pivot row p_k of the trailing
    [M - k, M - k] submatrix and the next submatrix: its rows but the pivot's (row 0 in the pivot's place), less
    their multiple of the pivot row. The determinant is the product of the pivots, negated for each p_k != 0."""
    (x,) = inputs
    shape = _ishape(x)
    batch, m = shape[:-2], shape[-1]
    acc = "float32" if x.dtype == "float16" else x.dtype
    count = math.prod(batch)

    def flat(b, i, j):
        idx, rest = [], b
        for d in reversed(batch):
            idx.append(rest % d)
            rest = rest // d
        return te.cast(acc, x[tuple(reversed(idx)) + (i, j)])

    # a batch of float32/float64 matrices is read as it is; others reshaped (and float16 widened) first
    s = x if len(shape) == 3 and acc == x.dtype else te.compute((count, m, m), flat, name=f"{STAGE}matrices")
    subs, pivots = [], []
    for k in range(m):
        n = m - k
        p = _pivot(s, k) if n > 1 else None
        subs.append(s)
        pivots.append(p)
        if n == 1:
            break

        def step(b, i, j, s=s, p=p, n=n):
            at = te.min(p[b], _c(n - 1, "int64"))
            below = te.cast("int64", i) + _c(1, "int64")
            src = te.if_then_else(below == at, _c(0, "int64"), below)  # row 0 moves to where the pivot row was
            piv = s[b, at, 0]
            mult = te.if_then_else(piv == _c(0.0, acc), _c(0.0, acc), s[b, src, 0] / piv)  # a zero column: none
            return s[b, src, j + 1] - mult * s[b, at, j + 1]

        s = te.compute((count, n - 1, n - 1), step, name=f"{STAGE}step{k}")

    def row(i):
        b = 0
        for idx, d in zip(i, batch):
            b = b * d + idx
        return b

    def det(*i):
        b = row(i)
        value = None
        for k, (sub, p) in enumerate(zip(subs, pivots)):
            if p is None:
                term = sub[b, 0, 0]
            else:
                at = te.min(p[b], _c(m - k - 1, "int64"))
                term = te.if_then_else(at == _c(0, "int64"), sub[b, at, 0], -sub[b, at, 0])  # a swap negates
            value = term if value is None else value * term
        return te.cast(x.dtype, value)

    return te.compute(out_type.shape, det, name="det", tag="det")


def _rows(sch: Any, t: te.Tensor) -> None:
    """A stage of [B, rows, n] matrices: its rows in parallel (when there are enough elements to share), each row
    one loop, vectorized when it is a vector or more long (a row's elements are contiguous wherever its source row
    lies; lanes across rows would gather)."""
    axes = sch[t].op.axis
    if len(axes) != 3:
        return schedules.flat_parallel_vector(sch, t)
    rows = sch[t].fuse(axes[0], axes[1])
    if math.prod(_ishape(t)) >= schedules.PARALLEL_MIN_ELEMENTS:
        sch[t].parallel(rows)
    if _ishape(t)[2] >= lanes(t.dtype):
        _, inner = sch[t].split(axes[2], factor=lanes(t.dtype))
        sch[t].vectorize(inner)
    return None


def _det_schedule(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """Each elimination step (and the matrices' copy) at root, parallel and vectorized (inlined, each would
    recompute all the steps before it), each pivot search at root in parallel over the batch; the products of
    the pivots in the output's loops."""
    steps = tuple(t for t in schedules.compute_stages(out) if t.op.name.startswith(STAGE)
                  and not schedules.is_reduction(t))
    kept = {id(t.op) for t in steps}
    schedules.inline_injective(sch, out, keep=steps)
    for t in schedules.compute_stages(out):
        if t is out:
            continue
        if schedules.is_reduction(t):
            schedules.root_parallel(sch, t)
        elif id(t.op) in kept:
            _rows(sch, t)
    if schedules.is_reduction(out):
        schedules.root_parallel(sch, out)
    else:
        schedules.flat_parallel_vector(sch, out)


register_op(OpDef("det", _det_rel, _det_compute, OUT_ELEMWISE_FUSABLE, num_inputs=1, schedule=_det_schedule,
                  doc="the determinant of each square matrix of [..., M, M] (LU with partial pivoting)"))


def det(data: Any) -> Any:
    """The determinant of each matrix of ``data`` [..., M, M]: [...] (a scalar for one matrix), as numpy's
    ``linalg.det`` and ONNX's Det."""
    return make_call("det", [data])


__all__ = ["det"]
