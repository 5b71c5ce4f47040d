"""TOPI's indexing and shape operators written directly in te (symbolic shapes allowed where the output shape
does not depend on values): gather, gather_nd, one_hot, sequence_mask, reverse_sequence, sparse_to_dense,
matrix_set_diag, unravel_index, strided_set, shape, ndarray_size, expand_like, meshgrid, invert_permutation,
adv_index."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from autosched import te
from autosched.topi import tag
from autosched.topi.utils import const_shape


def _norm_axis(axis: int, ndim: int, who: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{who}: axis {axis} is out of range for rank {ndim}")
    return axis % ndim


def _idx(e: Any) -> Any:
    """An index value as the index type (int64)."""
    return e.astype("int64") if e.dtype != "int64" else e


def gather(data: te.Tensor, axis: int, indices: te.Tensor) -> te.Tensor:
    """``out[i..., j, k...] = data[i..., indices[i..., j, k...], k...]`` along ``axis`` (numpy's
    ``take_along_axis``); ``indices`` has ``data``'s rank."""
    axis = _norm_axis(axis, data.ndim, "gather")
    if indices.ndim != data.ndim:
        raise ValueError(f"gather: indices of rank {indices.ndim} for data of rank {data.ndim}")

    def f(*i: Any) -> Any:
        src = list(i)
        src[axis] = _idx(indices[i])
        return data[tuple(src)]

    return te.compute(indices.shape, f, name="gather", tag=tag.INJECTIVE)


def gather_nd(a: te.Tensor, indices: te.Tensor) -> te.Tensor:
    """``indices`` of shape ``(M, Y...)`` picks ``a[indices[:, y]]``: the output is ``Y... + a.shape[M:]``."""
    m = indices.shape[0]
    m = getattr(m, "value", m)
    if not isinstance(m, int) or m > a.ndim:
        raise ValueError(f"gather_nd: indices' first dimension ({m}) must be a constant <= the data's rank {a.ndim}")
    ny = indices.ndim - 1

    def f(*i: Any) -> Any:
        y, rest = i[:ny], i[ny:]
        return a[tuple(_idx(indices[(k, *y)]) for k in range(m)) + tuple(rest)]

    return te.compute(tuple(indices.shape[1:]) + tuple(a.shape[m:]), f, name="gather_nd", tag=tag.INJECTIVE)


def one_hot(indices: te.Tensor, on_value: Any, off_value: Any, depth: int, axis: int, dtype: str) -> te.Tensor:
    """``on_value`` where the new ``depth``-long axis equals the index, ``off_value`` elsewhere."""
    nd = indices.ndim + 1
    axis = _norm_axis(axis, nd, "one_hot")
    on, off = te.const(on_value, dtype) if not isinstance(on_value, te.Expr) else on_value.astype(dtype), \
        te.const(off_value, dtype) if not isinstance(off_value, te.Expr) else off_value.astype(dtype)
    shape = list(indices.shape)
    shape.insert(axis, depth)

    def f(*i: Any) -> Any:
        k = i[axis]
        rest = i[:axis] + i[axis + 1:]
        return te.if_then_else(_idx(indices[rest]) == k, on, off)

    return te.compute(tuple(shape), f, name="one_hot", tag=tag.INJECTIVE)


def sequence_mask(data: te.Tensor, valid_length: te.Tensor, mask_value: float = 0, axis: int = 0) -> te.Tensor:
    """``mask_value`` past each sequence's length: ``data`` is ``[MAX_LEN, batch, ...]`` (``axis`` 0) or
    ``[batch, MAX_LEN, ...]`` (``axis`` 1), ``valid_length`` ``[batch]``."""
    if data.ndim < 2 or axis not in (0, 1):
        raise ValueError(f"sequence_mask: data of rank >= 2 and axis 0 or 1, got rank {data.ndim}, axis {axis}")
    mask = te.const(mask_value, data.dtype)

    def f(*i: Any) -> Any:
        step, batch = i[axis], i[1 - axis]
        return te.if_then_else(step >= _idx(valid_length[batch]), mask, data[i])

    return te.compute(data.shape, f, name="sequence_mask", tag=tag.INJECTIVE)


def reverse_sequence(a: te.Tensor, seq_lengths: te.Tensor, seq_axis: int = 1, batch_axis: int = 0) -> te.Tensor:
    """Each batch entry's first ``seq_lengths[b]`` elements along ``seq_axis`` reversed, the rest kept."""
    seq_axis = _norm_axis(seq_axis, a.ndim, "reverse_sequence")
    batch_axis = _norm_axis(batch_axis, a.ndim, "reverse_sequence")
    if seq_axis == batch_axis:
        raise ValueError("reverse_sequence: seq_axis and batch_axis must differ")
    n_len, n_batch = getattr(seq_lengths.shape[0], "value", seq_lengths.shape[0]), a.shape[batch_axis]
    if isinstance(n_len, int) and isinstance(getattr(n_batch, "value", n_batch), int) and \
            n_len != getattr(n_batch, "value", n_batch):
        raise ValueError(f"reverse_sequence: {n_len} sequence lengths for a batch axis of {n_batch}")
    dim = a.shape[seq_axis]

    def f(*i: Any) -> Any:
        n = te.min(te.max(_idx(seq_lengths[i[batch_axis]]), 0), dim)
        src = list(i)
        src[seq_axis] = te.if_then_else(i[seq_axis] < n, n - 1 - i[seq_axis], i[seq_axis])
        return a[tuple(src)]

    return te.compute(a.shape, f, name="reverse_sequence", tag=tag.INJECTIVE)


def sparse_to_dense(sparse_indices: te.Tensor, output_shape: Sequence[int], sparse_values: te.Tensor,
                    default_value: Any = 0) -> te.Tensor:
    """A dense tensor of ``output_shape`` holding ``sparse_values`` at ``sparse_indices`` (``[N]`` or ``[N,
    ndim]``; the values ``[N]`` or one scalar) and ``default_value`` elsewhere."""
    shape = tuple(int(getattr(d, "value", d)) for d in output_shape)
    n_idx = sparse_indices.shape[0] if sparse_indices.ndim else 1
    if sparse_indices.ndim > 2 or (sparse_indices.ndim == 2 and int(getattr(sparse_indices.shape[1], "value",
                                                                            sparse_indices.shape[1])) != len(shape)):
        raise ValueError(f"sparse_to_dense: indices of shape {tuple(sparse_indices.shape)} for an output of rank "
                         f"{len(shape)}")
    k = te.reduce_axis((0, n_idx), name="k")

    def hit(i: Any, kk: Any) -> Any:
        if sparse_indices.ndim == 0:
            return _idx(sparse_indices()) == i[0]
        if sparse_indices.ndim == 1:
            return _idx(sparse_indices[kk]) == i[0]
        return te.all(*[_idx(sparse_indices[kk, d]) == i[d] for d in range(len(shape))])

    # the position of the (last) entry naming each element, -1 where none does
    pos = te.compute(shape, lambda *i: te.max(te.if_then_else(hit(i, k.var), k.var, te.const(-1, "int64")),
                                              axis=k), name="sparse_to_dense_pos")
    default = te.const(default_value, sparse_values.dtype) if not isinstance(default_value, te.Tensor) else None

    def f(*i: Any) -> Any:
        p = pos[i]
        if sparse_values.ndim == 0:
            v = sparse_values()
        else:
            v = sparse_values[te.max(p, 0)]
        d = default if default is not None else default_value()
        return te.if_then_else(p >= 0, v, d)

    return te.compute(shape, f, name="sparse_to_dense", tag=tag.INJECTIVE)


def matrix_set_diag(data: te.Tensor, diagonal: te.Tensor, k: int | Sequence[int] = 0,
                    align: str = "RIGHT_LEFT") -> te.Tensor:
    """``data`` (``[..., M, N]``) with diagonal ``k`` (or the band ``k = (lo, hi)``) replaced by
    ``diagonal``; in a band, ``align`` says how the shorter diagonals sit in ``diagonal``'s rows
    (superdiagonals first, then subdiagonals: LEFT or RIGHT each, TensorFlow's MatrixSetDiagV3)."""
    lo, hi = (k, k) if isinstance(k, int) else (int(k[0]), int(k[1]))
    if lo > hi:
        raise ValueError(f"matrix_set_diag: k = {k} is an empty band")
    if align not in ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"):
        raise ValueError(f"matrix_set_diag: align must be LEFT_LEFT, LEFT_RIGHT, RIGHT_LEFT or RIGHT_RIGHT, "
                         f"got {align!r}")
    m_dim, n_dim = data.shape[-2], data.shape[-1]
    max_len = diagonal.shape[-1]
    super_right, sub_right = align.split("_")[0] == "RIGHT", align.split("_")[1] == "RIGHT"

    def f(*i: Any) -> Any:
        batch, m, n = i[:-2], i[-2], i[-1]
        d = n - m
        inside = te.all(d >= lo, d <= hi)
        pos = te.min(m, n)
        if lo == hi:
            src = diagonal[(*batch, pos)]
        else:
            diag_len = te.min(m_dim + te.min(0, d), n_dim - te.max(0, d))
            right = te.if_then_else(d >= 0, te.const(super_right), te.const(sub_right))
            offset = te.if_then_else(right, max_len - diag_len, te.const(0, "int64"))
            row = te.min(te.max(hi - d, 0), hi - lo)
            src = diagonal[(*batch, row, te.min(te.max(pos + offset, 0), max_len - 1))]
        return te.if_then_else(inside, src, data[i])

    return te.compute(data.shape, f, name="matrix_set_diag", tag=tag.INJECTIVE)


def unravel_index(indices: te.Tensor, shape: te.Tensor) -> te.Tensor:
    """The coordinates of flat ``indices`` (a scalar or ``[N]``) in an array of ``shape`` (a 1-D tensor):
    ``[len(shape)]`` or ``[len(shape), N]``."""
    (nd,) = const_shape(shape, "unravel_index")
    out_shape = (nd,) + tuple(indices.shape)

    def f(d: Any, *i: Any) -> Any:
        flat = _idx(indices[i] if i else indices())
        coord = None
        for dd in range(nd):  # coordinate dd of flat: (flat // prod(shape[dd+1:])) % shape[dd]
            stride = te.const(1, "int64")
            for later in range(dd + 1, nd):
                stride = stride * _idx(shape[later])
            c = (flat // stride) % _idx(shape[dd])
            coord = c if coord is None else te.if_then_else(d == dd, c, coord)
        return coord.astype(indices.dtype)

    return te.compute(out_shape, f, name="unravel_index", tag=tag.INJECTIVE)


def strided_set(a: te.Tensor, v: te.Tensor, begin: te.Tensor, end: te.Tensor,
                strides: te.Tensor | None = None) -> te.Tensor:
    """``a`` with the slice ``begin:end:strides`` replaced by ``v``, as numpy slices it: ``begin``, ``end`` and
    ``strides`` are 1-D tensors read at run time (negative bounds count from the end, negative strides walk
    backwards, bounds are clipped); dimensions past their length are taken whole, missing strides are 1."""
    nd = a.ndim
    (nb,) = const_shape(begin, "strided_set")
    ns = const_shape(strides, "strided_set")[0] if strides is not None else 0
    one, zero = te.const(1, "int64"), te.const(0, "int64")

    def clip(x: Any, lo: Any, hi: Any) -> Any:
        return te.min(te.max(x, lo), hi)

    def f(*i: Any) -> Any:
        conds, src = [], []
        for d in range(nd):
            if d >= nb:
                src.append(i[d])
                continue
            dim = _idx(te.const(a.shape[d]) if isinstance(a.shape[d], int) else a.shape[d])
            st = _idx(strides[d]) if d < ns else one
            b, e = _idx(begin[d]), _idx(end[d])
            b = te.if_then_else(b < 0, b + dim, b)
            e = te.if_then_else(e < 0, e + dim, e)
            fwd = st > 0
            b = te.if_then_else(fwd, clip(b, zero, dim), clip(b, -one, dim - 1))
            e = te.if_then_else(fwd, clip(e, zero, dim), clip(e, -one, dim - 1))
            off = te.if_then_else(fwd, i[d] - b, b - i[d])  # steps from the slice's start
            step = te.if_then_else(fwd, st, zero - st)
            conds += [te.if_then_else(fwd, te.all(i[d] >= b, i[d] < e), te.all(i[d] <= b, i[d] > e)),
                      off % step == 0]
            src.append(off // step)
        return te.if_then_else(te.all(*conds), v[tuple(src)], a[i])

    return te.compute(a.shape, f, name="strided_set", tag=tag.INJECTIVE)


def shape(array: te.Tensor, dtype: str = "int32") -> te.Tensor:
    """``array``'s shape as a 1-D tensor."""
    dims = [te.const(d, dtype) if isinstance(d, int) else getattr(d, "astype", lambda _: d)(dtype)
            for d in array.shape]

    def f(i: Any) -> Any:
        out = dims[-1] if dims else te.const(0, dtype)
        for d in range(len(dims) - 2, -1, -1):
            out = te.if_then_else(i == d, dims[d], out)
        return out

    return te.compute((len(dims),), f, name="shape", tag=tag.INJECTIVE)


def ndarray_size(array: te.Tensor, dtype: str = "int32") -> te.Tensor:
    """The number of elements of ``array``, as a 0-d tensor."""
    size = math.prod(int(getattr(d, "value", d)) for d in array.shape) if all(
        isinstance(getattr(d, "value", d), int) for d in array.shape) else None
    if size is not None:
        return te.compute((), lambda: te.const(size, dtype), name="ndarray_size", tag=tag.INJECTIVE)
    prod = te.const(1, "int64")
    for d in array.shape:
        prod = prod * d
    return te.compute((), lambda: prod.astype(dtype), name="ndarray_size", tag=tag.INJECTIVE)


def expand_like(a: te.Tensor, shape_like: te.Tensor, axis: Sequence[int]) -> te.Tensor:
    """``a`` broadcast to ``shape_like``'s shape along the new dimensions ``axis``."""
    nd = shape_like.ndim
    axes = sorted(_norm_axis(x, nd, "expand_like") for x in axis)
    if a.ndim + len(axes) != nd:
        raise ValueError(f"expand_like: {a.ndim} + {len(axes)} new axes do not make rank {nd}")
    keep = [d for d in range(nd) if d not in axes]
    return te.compute(shape_like.shape, lambda *i: a[tuple(i[d] for d in keep)], name="expand_like",
                      tag=tag.BROADCAST)


def meshgrid(a_tuple: Sequence[te.Tensor], indexing: str = "ij") -> list[te.Tensor]:
    """numpy's ``meshgrid`` of 1-D tensors (``indexing`` "ij" or "xy")."""
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    n = len(a_tuple)
    shape = [t.shape[0] for t in a_tuple]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    outs = []
    for k, t in enumerate(a_tuple):
        pos = (1 - k if k < 2 else k) if indexing == "xy" and n >= 2 else k
        outs.append(te.compute(tuple(shape), lambda *i, t=t, pos=pos: t[i[pos]], name=f"meshgrid{k}",
                               tag=tag.INJECTIVE))
    return outs


def invert_permutation(data: te.Tensor) -> te.Tensor:
    """``out[data[i]] = i`` for a permutation ``data``."""
    (n,) = data.shape
    k = te.reduce_axis((0, n), name="k")
    return te.compute((n,), lambda j: te.sum(te.if_then_else(_idx(data[k]) == j, k.var.astype(data.dtype),
                                                             te.const(0, data.dtype)), axis=k),
                      name="invert_permutation")


def adv_index(data: te.Tensor, indices: Sequence[te.Tensor]) -> te.Tensor:
    """numpy's advanced indexing ``data[indices[0], indices[1], ...]`` with index tensors broadcast together."""
    bshape: list = []
    for t in indices:
        dims = list(t.shape)
        if len(dims) > len(bshape):
            bshape = [None] * (len(dims) - len(bshape)) + bshape
        for q in range(1, len(dims) + 1):
            d, cur = dims[-q], bshape[-q]
            dv = getattr(d, "value", d)
            if cur is None or getattr(cur, "value", cur) == 1:
                bshape[-q] = d
            elif dv != 1 and dv != getattr(cur, "value", cur):
                raise ValueError(f"adv_index: index shapes {[tuple(x.shape) for x in indices]} do not broadcast")
    nb = len(bshape)

    def f(*i: Any) -> Any:
        b, rest = i[:nb], i[nb:]
        src = []
        for t in indices:
            sub = b[nb - t.ndim:]
            sub = tuple(0 if getattr(t.shape[q], "value", t.shape[q]) == 1 else sub[q] for q in range(t.ndim))
            src.append(_idx(t[sub]))
        return data[tuple(src) + tuple(rest)]

    return te.compute(tuple(bshape) + tuple(data.shape[len(indices):]), f, name="adv_index", tag=tag.INJECTIVE)
