"""Relay ops that read or write at computed positions, under TVM's names: ``gather`` (ONNX GatherElements),
``gather_nd``, ``scatter_nd``, ``scatter_elements`` and ``one_hot``.

Gathers are injective (each output reads one element). Scatters are written as reductions over the updates: an
output element sums the updates whose index hits it (``add``) or takes the last of them (``update``, the data
where none does). That is n x m comparisons for n outputs and m updates, where a serial loop over the updates
would be m stores; it keeps scatters in the one kernel form every backend schedules (parallel over the
outputs, on CPU and GPU), and the scatters of exported models (Swin's shifted-window mask) are on constants,
evaluated at import. Negative indices count from the end, as ONNX says; out-of-range ones are clamped by
gathers and hit nothing in scatters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType, Tuple
from autosched.relay.op import schedules
from autosched.relay.op.common import _bload, _c, _ishape, _operands, clamped_index, wrapped_index
from autosched.relay.op.op import INJECTIVE, OPAQUE, OpDef, make_call, register_op

_INT = ("int32", "int64")


def _axis(axis: int, rank: int, op: str, shape: Sequence[int]) -> int:
    if not -rank <= axis < rank:
        raise RelayError(f"{op}: axis {axis} is out of range for data shape {tuple(shape)}")
    return axis % rank


def _int_indices(op: str, t: TensorType) -> None:
    if t.dtype not in _INT:
        raise RelayError(f"{op}: indices must be int32 or int64, got {t.shape} {t.dtype}")


# ---------------------------------------------------------------------------------------------------- gather
def _gather_rel(types, attrs):
    op = "gather"
    x, idx = _operands(types, op, "data", "indices")
    _int_indices(op, idx)
    axis = _axis(attrs["axis"], len(x.shape), op, x.shape)
    if len(idx.shape) != len(x.shape) or any(i > d for k, (i, d) in enumerate(zip(idx.shape, x.shape))
                                             if k != axis):
        raise RelayError(f"{op}: indices {idx.shape} must have the rank of data {x.shape} and no longer axes "
                         f"than it, except along axis {axis}")
    return TensorType(tuple(idx.shape), x.dtype)


def _gather_compute(inputs, attrs, out_type):
    x, idx = inputs
    shape = _ishape(x)
    axis = attrs["axis"] % len(shape)
    return te.compute(out_type.shape, lambda *i: x[i[:axis] + (clamped_index(idx[i], shape[axis]),) + i[axis + 1:]],
                      name="gather")


register_op(OpDef("gather", _gather_rel, _gather_compute, INJECTIVE, attrs={"axis": 0}, num_inputs=2,
                  doc="out[i][j][k] = data[i][indices[i][j][k]][k] along axis (ONNX GatherElements, torch.gather)"))


# ------------------------------------------------------------------------------------------------- gather_nd
def _gather_nd_rel(types, attrs):
    op = "gather_nd"
    x, idx = _operands(types, op, "data", "indices")
    _int_indices(op, idx)
    b = int(attrs["batch_dims"])
    if not idx.shape or not 1 <= idx.shape[0] <= len(x.shape) - b or b < 0:
        raise RelayError(f"{op}: indices {idx.shape} must be (M, ...) with 1 <= M <= rank of data {x.shape} "
                         f"less batch_dims={b}")
    if tuple(idx.shape[1:1 + b]) != tuple(x.shape[:b]):
        raise RelayError(f"{op}: the first {b} batch axes of indices {idx.shape[1:]} and data {x.shape} differ")
    return TensorType(tuple(idx.shape[1:]) + tuple(x.shape[b + idx.shape[0]:]), x.dtype)


def _gather_nd_compute(inputs, attrs, out_type):
    x, idx = inputs
    shape, m, b = _ishape(x), int(idx.shape[0]), int(attrs["batch_dims"])
    ny = len(idx.shape) - 1

    def f(*i):
        y, rest = i[:ny], i[ny:]
        return x[y[:b] + tuple(clamped_index(idx[(q,) + y], shape[b + q]) for q in range(m)) + rest]

    return te.compute(out_type.shape, f, name="gather_nd")


register_op(OpDef("gather_nd", _gather_nd_rel, _gather_nd_compute, INJECTIVE, attrs={"batch_dims": 0},
                  num_inputs=2, doc="slices of data at the index tuples indices[:, y...] (TVM's layout: M first)"))


# ------------------------------------------------------------------------------------------------ scatter_nd
_MODES = ("update", "add")


def _scatter_nd_rel(types, attrs):
    op = "scatter_nd"
    x, idx, upd = _operands(types, op, "data", "indices", "updates")
    _int_indices(op, idx)
    if attrs["mode"] not in _MODES:
        raise RelayError(f"{op}: mode {attrs['mode']!r} is not supported; one of {', '.join(_MODES)}")
    if not idx.shape or not 1 <= idx.shape[0] <= len(x.shape):
        raise RelayError(f"{op}: indices {idx.shape} must be (M, ...) with 1 <= M <= rank of data {x.shape}")
    want = tuple(idx.shape[1:]) + tuple(x.shape[idx.shape[0]:])
    if tuple(upd.shape) != want or upd.dtype != x.dtype:
        raise RelayError(f"{op}: updates must be {want} {x.dtype} for data {x.shape} and indices {idx.shape}, got "
                         f"{upd.shape} {upd.dtype}")
    return x


def _scattered(x: te.Tensor, axes: Sequence[Any], hit: Any, value: Any, mode: str, name: str) -> te.Tensor:
    """``x`` with the updates that hit each element (``hit(i)``: a condition over the reduce ``axes``, one point
    per update) added (``add``), or the last of them written (``update``: the largest linear position among
    the hits, as onnxruntime's loop over the updates leaves it; ``value(i, axes)`` reads one)."""
    if mode == "add":
        total = te.compute(x.shape, lambda *i: te.sum(te.if_then_else(hit(i), value(i, axes), _c(0, x.dtype)),
                                                      axis=list(axes)), name=f"{name}_sum")
        return te.compute(x.shape, lambda *i: x[i] + total[i], name=name)
    extents = [int(a.dom.extent.value) for a in axes]
    lin: Any = te.const(0, "int64")
    for a, n in zip(axes, extents):
        lin = lin * n + te.cast("int64", a.var)
    last = te.compute(x.shape, lambda *i: te.max(te.if_then_else(hit(i), lin, te.const(-1, "int64")),
                                                 axis=list(axes)), name=f"{name}_last")

    def pick(*i):
        at, rest = [], last[i]
        for n in reversed(extents):
            at.insert(0, te.floormod(rest, n))
            rest = te.floordiv(rest, n)
        return te.if_then_else(last[i] >= 0, value(i, at), x[i])

    return te.compute(x.shape, pick, name=name)


def _scatter_nd_compute(inputs, attrs, out_type):
    x, idx, upd = inputs
    shape, m = _ishape(x), int(idx.shape[0])
    ys = [te.reduce_axis((0, int(d)), name=f"u{k}") for k, d in enumerate(idx.shape[1:])]
    single = not ys  # indices (M,): one update, read without update axes (a reduction over one point)
    if single:
        ys = [te.reduce_axis((0, 1), name="u0")]

    def hit(i):
        return te.all(*[wrapped_index(idx[(q,) + (() if single else tuple(ys))], shape[q]) == i[q] for q in range(m)])

    return _scattered(x, ys, hit, lambda i, at: upd[(() if single else tuple(at)) + tuple(i[m:])], attrs["mode"],
                      "scatter_nd")


register_op(OpDef("scatter_nd", _scatter_nd_rel, _scatter_nd_compute, OPAQUE, attrs={"mode": "update"},
                  num_inputs=3, schedule=schedules.reduction,
                  doc="data with updates[y...] written (mode update) or added (add) at the index tuples "
                      "indices[:, y...] (TVM's layout: M first)"))


# ------------------------------------------------------------------------------------------ scatter_elements
def _scatter_elements_rel(types, attrs):
    op = "scatter_elements"
    x, idx, upd = _operands(types, op, "data", "indices", "updates")
    _int_indices(op, idx)
    axis = _axis(attrs["axis"], len(x.shape), op, x.shape)
    if attrs["reduction"] not in _MODES:
        raise RelayError(f"{op}: reduction {attrs['reduction']!r} is not supported; one of {', '.join(_MODES)}")
    if tuple(upd.shape) != tuple(idx.shape) or upd.dtype != x.dtype:
        raise RelayError(f"{op}: updates {upd.shape} {upd.dtype} must have the shape of indices {idx.shape} and "
                         f"the dtype of data {x.dtype}")
    if len(idx.shape) != len(x.shape) or any(i > d for k, (i, d) in enumerate(zip(idx.shape, x.shape))
                                             if k != axis):
        raise RelayError(f"{op}: indices {idx.shape} must have the rank of data {x.shape} and no longer axes "
                         f"than it, except along axis {axis}")
    return x


def _scatter_elements_compute(inputs, attrs, out_type):
    x, idx, upd = inputs
    shape, ishape = _ishape(x), _ishape(idx)
    axis = attrs["axis"] % len(shape)
    u = te.reduce_axis((0, ishape[axis]), name="u")

    def at(i, pos=(u,)):
        return i[:axis] + tuple(pos) + i[axis + 1:]

    def hit(i):
        points = wrapped_index(idx[at(i)], shape[axis]) == i[axis]
        inside = [i[k] < ishape[k] for k in range(len(shape)) if k != axis and ishape[k] < shape[k]]
        # outside the indices' extent nothing is read from them (a select reads only the branch it takes)
        return te.if_then_else(te.all(*inside), points, te.const(False)) if inside else points

    return _scattered(x, [u], hit, lambda i, pos: upd[at(i, pos)], attrs["reduction"], "scatter_elements")


register_op(OpDef("scatter_elements", _scatter_elements_rel, _scatter_elements_compute, OPAQUE,
                  attrs={"axis": 0, "reduction": "update"}, num_inputs=3, schedule=schedules.reduction,
                  doc="data with updates[i][j] written (or added) at [i][indices[i][j]] along axis "
                      "(ONNX ScatterElements, torch.scatter)"))


# --------------------------------------------------------------------------------------------------- one_hot
def _one_hot_rel(types, attrs):
    op = "one_hot"
    idx, on, off = _operands(types, op, "indices", "on_value", "off_value")
    if idx.dtype == "bool":
        raise RelayError(f"{op}: indices must be numbers, got {idx.shape} bool")
    if on.shape or off.shape:
        raise RelayError(f"{op}: on_value and off_value must be scalars, got shapes {on.shape} and {off.shape}")
    depth = int(attrs["depth"])
    if depth < 1:
        raise RelayError(f"{op}: depth must be positive, got {depth}")
    axis = _axis(attrs["axis"], len(idx.shape) + 1, op, idx.shape)
    shape = list(idx.shape)
    shape.insert(axis, depth)
    return TensorType(tuple(shape), attrs["dtype"] or on.dtype)


def _one_hot_compute(inputs, attrs, out_type):
    idx, on, off = inputs
    depth = int(attrs["depth"])
    axis = attrs["axis"] % len(out_type.shape)
    dtype = out_type.dtype

    def f(*i):  # compared in the indices' type: a float index that is not a whole number hits nothing
        k = idx[i[:axis] + i[axis + 1:]]
        k = te.if_then_else(k < te.const(0, idx.dtype), k + te.const(depth, idx.dtype), k)
        return te.if_then_else(k == te.cast(idx.dtype, i[axis]), te.cast(dtype, _bload(on, ())),
                               te.cast(dtype, _bload(off, ())))

    return te.compute(out_type.shape, f, name="one_hot")


register_op(OpDef("one_hot", _one_hot_rel, _one_hot_compute, INJECTIVE, attrs={"depth": 1, "axis": -1,
                                                                              "dtype": ""},
                  num_inputs=3, doc="on_value where the new axis equals the index, off_value elsewhere"))


# ------------------------------------------------------------------------------------------------------ topk
def _topk_rel(types, attrs):
    op = "topk"
    (x,) = _operands(types, op, "data")
    axis = _axis(attrs["axis"], len(x.shape), op, x.shape)
    k = int(attrs["k"])
    if not 1 <= k <= x.shape[axis]:
        raise RelayError(f"{op}: k={k} must be between 1 and the {x.shape[axis]} elements of axis {axis}")
    if attrs["ret_type"] not in ("values", "indices"):
        raise RelayError(f"{op}: ret_type {attrs['ret_type']!r} must be values or indices (relay.topk's 'both' "
                         "is the two calls)")
    shape = list(x.shape)
    shape[axis] = k
    return TensorType(tuple(shape), x.dtype if attrs["ret_type"] == "values" else attrs["dtype"])


def _topk_compute(inputs, attrs, out_type):
    """Each element's rank along the axis (how many come before it: larger ones, or smaller with
    ``is_ascend``, then equal ones at lower positions, as onnxruntime orders ties), then the position of each
    rank below k: n^2 comparisons a row, in parallel over the rows."""
    (x,) = inputs
    shape = _ishape(x)
    axis = attrs["axis"] % len(shape)
    n, ascend = shape[axis], bool(attrs["is_ascend"])
    j = te.reduce_axis((0, n), name="j")

    def at(i, pos):
        return tuple(i[:axis]) + (pos,) + tuple(i[axis + 1:])

    def before(i):
        a, b = x[at(i, j)], x[i]
        ahead = a < b if ascend else a > b
        return te.if_then_else(te.any(ahead, te.all(a == b, j < i[axis])), _c(1, "int32"), _c(0, "int32"))

    rank = te.compute(x.shape, lambda *i: te.sum(before(i), axis=j), name="topk_rank")
    r = te.reduce_axis((0, n), name="r")
    pos = te.compute(out_type.shape, lambda *i: te.sum(
        te.if_then_else(rank[at(i, r)] == i[axis], te.cast("int64", r), te.const(0, "int64")), axis=r),
        name="topk_position")
    if attrs["ret_type"] == "indices":
        return te.compute(out_type.shape, lambda *i: te.cast(out_type.dtype, pos[i]), name="topk_indices")
    return te.compute(out_type.shape, lambda *i: x[at(i, pos[i])], name="topk_values")


register_op(OpDef("topk", _topk_rel, _topk_compute, OPAQUE, attrs={"k": 1, "axis": -1, "ret_type": "values",
                                                                   "is_ascend": False, "dtype": "int64"},
                  num_inputs=1, schedule=schedules.reduction,
                  doc="the k largest (or smallest) elements along an axis, or their positions, in order"))


# ---------------------------------------------------------------------------------------------------- unique
UNIQUE_OUTPUTS = ("values", "indices", "inverse_indices", "num_unique", "counts")


def _unique_rel(types, attrs):
    op = "unique"
    (x,) = _operands(types, op, "data")
    if len(x.shape) != 1:
        raise RelayError(f"{op}: data must be 1-D, got shape {x.shape} (reshape it to 1-D first)")
    if attrs["output"] not in UNIQUE_OUTPUTS:
        raise RelayError(f"{op}: output {attrs['output']!r} is not one of {', '.join(UNIQUE_OUTPUTS)}")
    if attrs["output"] == "values":
        return TensorType(x.shape, x.dtype)
    return TensorType((1,) if attrs["output"] == "num_unique" else x.shape, "int32")


def _unique_compute(inputs, attrs, out_type):
    """Each element's first occurrence; the first occurrences' slots (by value when sorted, else by position);
    then per slot its source, or per element its slot, or per slot its count: n^2 comparisons each, in parallel
    over the elements, for the few thousand elements models take unique of."""
    (x,) = inputs
    n = _ishape(x)[0]
    i32 = lambda v: _c(v, "int32")  # noqa: E731

    def over(name):
        return te.reduce_axis((0, n), name=name)

    k = over("k")
    first = te.compute((n,), lambda i: te.min(te.if_then_else(x[k] == x[i], te.cast("int32", k), i32(n)), axis=k),
                       name="unique_first")
    is_first = lambda i: first[i] == te.cast("int32", i)  # noqa: E731
    k = over("k")
    if attrs["is_sorted"]:  # distinct values below it
        slot_of_first = te.compute((n,), lambda i: te.sum(te.if_then_else(
            te.all(is_first(k), x[k] < x[i]), i32(1), i32(0)), axis=k), name="unique_rank")
    else:  # first occurrences before it
        slot_of_first = te.compute((n,), lambda i: te.sum(te.if_then_else(
            te.all(is_first(k), k < i), i32(1), i32(0)), axis=k), name="unique_rank")
    output = attrs["output"]
    if output == "inverse_indices":
        return te.compute((n,), lambda i: slot_of_first[first[i]], name="unique_inverse")
    if output == "num_unique":
        k = over("k")
        return te.compute((1,), lambda _: te.sum(te.if_then_else(is_first(k), i32(1), i32(0)), axis=k),
                          name="unique_count")
    if output == "counts":
        k = over("k")
        return te.compute((n,), lambda j: te.sum(te.if_then_else(slot_of_first[first[k]] == j, i32(1), i32(0)),
                                                 axis=k), name="unique_counts")
    k = over("k")
    source = te.compute((n,), lambda j: te.min(te.if_then_else(te.all(is_first(k), slot_of_first[k] == j),
                                                               te.cast("int32", k), i32(n)), axis=k),
                        name="unique_source")  # n past the last slot
    if output == "indices":
        return te.compute((n,), lambda j: te.if_then_else(source[j] < n, source[j], i32(0)), name="unique_indices")
    return te.compute((n,), lambda j: te.if_then_else(source[j] < n, x[te.minimum(source[j], i32(n - 1))],
                                                      _c(0, x.dtype)), name="unique_values")


register_op(OpDef("unique", _unique_rel, _unique_compute, OPAQUE,
                  attrs={"is_sorted": True, "output": "values"}, num_inputs=1, schedule=schedules.reduction,
                  doc="one output of unique: the distinct values (padded), their first positions, each element's "
                      "slot, their number or their counts"))


# ----------------------------------------------------------------------------------------- the Python API
def gather(data: Any, axis: int, indices: Any) -> Any:
    """``out[..., j, ...] = data[..., indices[..., j, ...], ...]`` along ``axis`` (TVM's argument order)."""
    return make_call("gather", [data, indices], axis=int(axis))


def gather_nd(data: Any, indices: Any, batch_dims: int = 0) -> Any:
    """Slices of ``data`` at the index tuples ``indices[:, y...]`` (the tuple axis first, as TVM has it)."""
    return make_call("gather_nd", [data, indices], batch_dims=int(batch_dims))


def scatter_nd(data: Any, indices: Any, updates: Any, mode: str = "update") -> Any:
    """``data`` with ``updates[y...]`` written (``mode="update"``) or added (``"add"``) at ``indices[:, y...]``."""
    return make_call("scatter_nd", [data, indices, updates], mode=str(mode))


def scatter_elements(data: Any, indices: Any, updates: Any, axis: int = 0, reduction: str = "update") -> Any:
    """``data`` with each ``updates`` element written (or added) where ``indices`` points along ``axis``."""
    return make_call("scatter_elements", [data, indices, updates], axis=int(axis), reduction=str(reduction))


def one_hot(indices: Any, on_value: Any, off_value: Any, depth: int, axis: int = -1, dtype: str = "") -> Any:
    """A new axis of ``depth`` at ``axis``: ``on_value`` where it equals the index, ``off_value`` elsewhere."""
    return make_call("one_hot", [indices, on_value, off_value], depth=int(depth), axis=int(axis), dtype=str(dtype))


def topk(data: Any, k: int = 1, axis: int = -1, ret_type: str = "both", is_ascend: bool = False,
         dtype: str = "int32") -> Any:
    """The ``k`` largest (``is_ascend``: smallest) elements along ``axis`` in order (``ret_type="values"``), their
    positions (``"indices"``, of ``dtype``), or both as a tuple (TVM's default), ties in position order."""
    if ret_type == "both":
        return Tuple([topk(data, k, axis, kind, is_ascend, dtype) for kind in ("values", "indices")])
    return make_call("topk", [data], k=int(k), axis=int(axis), ret_type=str(ret_type), is_ascend=bool(is_ascend),
                     dtype=str(dtype))


def unique(data: Any, is_sorted: bool = True, return_counts: bool = False) -> Tuple:
    """The distinct values of 1-D ``data`` as TVM returns them, padded to the data's length: a tuple (values,
    indices: each value's first position, inverse_indices: each element's slot, num_unique [1], and with
    ``return_counts`` counts); ``is_sorted`` orders the values ascending, else by first occurrence. Slots past
    num_unique hold zeros (shapes are static: slice them off with the count outside the graph)."""
    outputs = UNIQUE_OUTPUTS if return_counts else UNIQUE_OUTPUTS[:4]
    return Tuple([make_call("unique", [data], is_sorted=bool(is_sorted), output=o) for o in outputs])


__all__ = ["gather", "gather_nd", "one_hot", "scatter_elements", "scatter_nd", "topk", "unique"]
