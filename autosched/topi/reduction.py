"""Reductions over axes (TOPI's ``topi.sum``, ``max``, ``min``, ``prod``, ``all``, ``any``, ``argmax``,
``argmin``), over symbolic shapes too; the stages carry the attributes the default schedules read."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from autosched import te
from autosched.errors import AutoschedError
from autosched.relay.op.reduce import source_index
from autosched.topi import tag
from autosched.topi.utils import flat_load


def _axes(ndim: int, axis: Any, what: str) -> list[int]:
    if axis is None:
        return list(range(ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    if builtins.any(not -ndim <= int(a) < ndim for a in axes):
        raise AutoschedError(f"topi.{what}: axis {axis} is out of range for {ndim} dimensions")
    return sorted({int(a) % ndim for a in axes})


def _reduce(what: str, combine: Callable, data: te.Tensor, axis: Any, keepdims: bool) -> te.Tensor:
    shape = list(data.shape)
    axes = _axes(len(shape), axis, what)
    ks = {a: te.reduce_axis((0, shape[a]), name=f"k{a}") for a in axes}
    out_shape = tuple(1 if k in ks else d for k, d in enumerate(shape) if keepdims or k not in ks)

    def f(*i):
        return combine(data(*source_index(i, len(shape), ks, keepdims)), axis=list(ks.values()))

    out = te.compute(out_shape, f, name=f"{data.op.name}_{what}", tag=tag.COMM_REDUCE)
    out.op.topi_anchor = {"op": what, "axis": axes, "keepdims": bool(keepdims)}
    return out


_prod = te.comm_reducer(lambda a, b: a * b, lambda t: te.const(1, t), name="prod")
_all = te.comm_reducer(lambda a, b: te.all(a, b), lambda t: te.const(1, t), name="all")
_any = te.comm_reducer(lambda a, b: te.any(a, b), lambda t: te.const(0, t), name="any")


def sum(data: te.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """The sum over ``axis`` (all axes by default)."""
    return _reduce("sum", te.sum, data, axis, keepdims)


def max(data: te.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """The maximum over ``axis`` (all axes by default)."""
    return _reduce("max", te.max, data, axis, keepdims)


def min(data: te.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """The minimum over ``axis`` (all axes by default)."""
    return _reduce("min", te.min, data, axis, keepdims)


def prod(data: te.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> te.Tensor:
    """The product over ``axis`` (all axes by default)."""
    return _reduce("prod", _prod, data, axis, keepdims)


def all(data: te.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """Whether every element over ``axis`` is true (a bool tensor)."""
    return _reduce("all", _all, _as_bool(data), axis, keepdims)


def any(data: te.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """Whether some element over ``axis`` is true (a bool tensor)."""
    return _reduce("any", _any, _as_bool(data), axis, keepdims)


def _as_bool(x: te.Tensor) -> te.Tensor:
    if x.dtype == "bool":
        return x
    return te.compute(x.shape, lambda *i: x(*i) != te.const(0, x.dtype), name=f"{x.op.name}_bool",
                      tag=tag.ELEMWISE)


def _arg(what: str, data: te.Tensor, axis: int | None, keepdims: bool, select_last_index: bool) -> te.Tensor:
    """The index of the extremum along ``axis`` (of the flattened tensor when None), int32 as TOPI gives: the
    first one, or the last with ``select_last_index``."""
    if axis is None:
        n = 1
        for d in data.shape:
            n = n * d
        flat = te.compute((n,), lambda i: flat_load(data, i), name=f"{data.op.name}_flat", tag=tag.INJECTIVE)
        idx = _arg(what, flat, 0, False, select_last_index)
        if not keepdims:
            return idx
        return te.compute((1,) * len(data.shape), lambda *i: idx(), name=f"{what}_keepdims", tag=tag.INJECTIVE)
    shape = list(data.shape)
    ax = _axes(len(shape), [axis], what)[0]
    k = te.reduce_axis((0, shape[ax]), name="k")
    better = (lambda a, b: a > b) if what == "argmax" else (lambda a, b: a < b)
    last = bool(select_last_index)

    def fcombine(x, y):
        # x, y: (index, value); ties keep the smaller index (or the larger one with select_last_index)
        take_y = te.any(better(y[1], x[1]), te.all(y[1] == x[1], (y[0] > x[0]) if last else (y[0] < x[0])))
        return te.if_then_else(take_y, y[0], x[0]), te.if_then_else(take_y, y[1], x[1])

    def fidentity(t0, t1):
        worst = te.min_value(t1) if what == "argmax" else te.max_value(t1)
        return te.const(-1, t0), worst

    reducer = te.comm_reducer(fcombine, fidentity, name=what)
    out_shape = tuple(1 if d == ax else s for d, s in enumerate(shape) if keepdims or d != ax)

    def f(*i):
        i = list(i)
        if keepdims:
            i.pop(ax)
        idx = i[:ax] + [k] + i[ax:]
        return reducer((k.var.astype("int32"), data(*idx)), axis=k)

    idx, _ = te.compute(out_shape, f, name=what, tag=tag.COMM_REDUCE_IDX)
    return idx


def argmax(data: te.Tensor, axis: int | None = None, keepdims: bool = False,
           select_last_index: bool = False) -> te.Tensor:
    """The index of the largest element along ``axis`` (int32)."""
    return _arg("argmax", data, axis, keepdims, select_last_index)


def argmin(data: te.Tensor, axis: int | None = None, keepdims: bool = False,
           select_last_index: bool = False) -> te.Tensor:
    """The index of the smallest element along ``axis`` (int32)."""
    return _arg("argmin", data, axis, keepdims, select_last_index)
