"""Shape and layout operators (TOPI's ``topi.reshape``, ``transpose``, ``concatenate``, ``split``, ``take``,
``strided_slice``, ``matmul``, ...), computed as relay's ops compute them (constant shapes), and ``arange``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched import relay, te
from autosched.errors import AutoschedError
from autosched.topi import tag
from autosched.topi._relay import lower_call
from autosched.topi.indexing import (  # noqa: F401 - TOPI has them in topi.transform too
    expand_like,
    gather,
    gather_nd,
    matrix_set_diag,
    one_hot,
    reverse_sequence,
    sequence_mask,
    shape,
    sparse_to_dense,
    strided_set,
    unravel_index,
)
from autosched.topi.utils import flat_load


def reshape(a: te.Tensor, newshape: Sequence[int]) -> te.Tensor:
    """``a``'s elements in row-major order in ``newshape`` (-1 and 0 as relay reads them)."""
    return lower_call("reshape", [a], lambda x: relay.reshape(x, newshape))


def transpose(a: te.Tensor, axes: Sequence[int] | None = None) -> te.Tensor:
    """``a`` with its axes permuted (reversed by default)."""
    return lower_call("transpose", [a], lambda x: relay.transpose(x, axes))


def concatenate(a_tuple: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """The tensors joined along ``axis``."""
    return lower_call("concatenate", list(a_tuple), lambda *xs: relay.concatenate(list(xs), axis))


def stack(tensors: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """The tensors stacked along a new ``axis``."""
    return lower_call("stack", list(tensors), lambda *xs: relay.stack(list(xs), axis))


def split(ary: te.Tensor, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[te.Tensor]:
    """``ary`` cut along ``axis`` into that many equal parts or at those indices: a list of tensors."""
    return lower_call("split", [ary], lambda x: relay.split(x, indices_or_sections, axis))


def expand_dims(a: te.Tensor, axis: int, num_newaxis: int = 1) -> te.Tensor:
    """``a`` with ``num_newaxis`` axes of size 1 inserted at ``axis``."""
    return lower_call("expand_dims", [a], lambda x: relay.expand_dims(x, axis, num_newaxis))


def squeeze(a: te.Tensor, axis: int | Sequence[int] | None = None) -> te.Tensor:
    """``a`` without its axes of size 1 (those of ``axis``, or all)."""
    axes = [axis] if isinstance(axis, int) else axis
    return lower_call("squeeze", [a], lambda x: relay.squeeze(x, axes))


def flip(a: te.Tensor, axis: int = 0) -> te.Tensor:
    """``a`` reversed along ``axis``."""
    return lower_call("flip", [a], lambda x: relay.reverse(x, axis))


def take(a: te.Tensor, indices: Any, axis: int | None = None, mode: str = "clip") -> te.Tensor:
    """``a`` gathered at integer ``indices`` along ``axis`` (of the flattened ``a`` when None); an index out of
    range is clamped (``mode="clip"``), wrapped (``"wrap"``) or trusted (``"fast"``). Any shapes."""
    if mode not in ("clip", "wrap", "fast"):
        raise AutoschedError(f"topi.take: mode {mode!r} is not one of clip, wrap, fast")
    if axis is None:
        size: Any = 1
        for d in a.shape:
            size = size * d
        flat = te.compute((size,), lambda i: flat_load(a, i), name=f"{a.op.name}_flat", tag=tag.INJECTIVE)
        return take(flat, indices, 0, mode)
    axis = axis % len(a.shape)
    n = a.shape[axis]
    ishape = tuple(indices.shape) if isinstance(indices, te.Tensor) else ()

    def f(*i):
        k = indices(*i[axis:axis + len(ishape)]) if isinstance(indices, te.Tensor) else te.const(int(indices))
        k = k.astype("int64")
        if mode == "clip":
            k = te.min(te.max(k, te.const(0, "int64")), n - 1)
        elif mode == "wrap":
            k = te.floormod(k, n)
        return a(*(i[:axis] + (k,) + i[axis + len(ishape):]))

    out_shape = tuple(a.shape[:axis]) + ishape + tuple(a.shape[axis + 1:])
    return te.compute(out_shape, f, name="take", tag=tag.INJECTIVE)


def strided_slice(a: te.Tensor, begin: Sequence[int], end: Sequence[int], strides: Sequence[int] | None = None,
                  axes: Sequence[int] | None = None) -> te.Tensor:
    """``a[begin:end:strides]`` on each axis (or on ``axes``)."""
    return lower_call("strided_slice", [a], lambda x: relay.strided_slice(x, begin, end, strides, axes))


def tile(a: te.Tensor, reps: Sequence[int]) -> te.Tensor:
    """``a`` repeated ``reps`` times along each axis (numpy's ``tile``)."""
    return lower_call("tile", [a], lambda x: relay.tile(x, reps))


def repeat(a: te.Tensor, repeats: int, axis: int) -> te.Tensor:
    """Each element of ``a`` repeated ``repeats`` times along ``axis``."""
    return lower_call("repeat", [a], lambda x: relay.repeat(x, repeats, axis))


def matmul(a: te.Tensor, b: te.Tensor, transp_a: bool = False, transp_b: bool = False) -> te.Tensor:
    """The matrix product of 2-D ``a`` and ``b``, either transposed first."""
    return lower_call("matmul", [a, b], lambda x, y: relay.nn.matmul(x, y, transpose_a=transp_a,
                                                                     transpose_b=transp_b))


def layout_transform(array: te.Tensor, src_layout: str, dst_layout: str) -> te.Tensor:
    """``array`` moved from one data layout to another (NCHW <-> NHWC, NCHW <-> NCHW[x]c)."""
    return lower_call("layout_transform", [array], lambda x: relay.layout_transform(x, src_layout, dst_layout))


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: str = "float32") -> te.Tensor:
    """``start, start + step, ...`` below ``stop`` (``arange(n)`` is 0 .. n - 1)."""
    if stop is None:
        start, stop = 0, start
    n = int(-(-(float(stop) - float(start)) // float(step)))
    if n < 0:
        n = 0
    return te.compute((n,), lambda i: te.const(start, dtype) + te.const(step, dtype) * i.astype(dtype),
                      name="arange", tag=tag.ELEMWISE)
