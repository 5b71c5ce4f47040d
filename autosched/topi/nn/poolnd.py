"""Pooling over any number of spatial dimensions and any layout, written in te: ``pool1d``, ``pool3d``,
``adaptive_pool`` / ``adaptive_pool3d``. ``pool2d`` itself is relay's computation (topi.nn.pool2d), which these
agree with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched import te
from autosched.errors import AutoschedError
from autosched.topi.utils import const_shape


def _spatial(layout: str, n: int, who: str) -> list[int]:
    """The positions of the ``n`` spatial dimensions (D, H, W) in ``layout``."""
    axes = [k for k, c in enumerate(layout) if c in "DHW"]
    if len(axes) != n or "N" not in layout or "C" not in layout or len(layout) != n + 2:
        raise AutoschedError(f"topi.nn.{who}: layout {layout!r} is not a {n}-D pooling layout (N, C and "
                             f"{'DHW'[3 - n:]} in some order)")
    return axes


def poolnd(data: te.Tensor, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
           padding: Sequence[int], pool_type: str, ceil_mode: bool, layout: str, count_include_pad: bool,
           who: str) -> te.Tensor:
    """Max or average pooling over the spatial axes of ``layout``; ``padding`` is the pads before each spatial
    axis, then those after. ``ceil_mode`` rounds the output up, as ONNX and PyTorch do (a last window that
    would start in the trailing pad is dropped; TVM keeps it)."""
    n = len(kernel)
    if pool_type not in ("max", "avg"):
        raise AutoschedError(f"topi.nn.{who}: pool_type {pool_type!r} is not max or avg")
    if len(stride) != n or len(dilation) != n or len(padding) != 2 * n:
        raise AutoschedError(f"topi.nn.{who}: {n} kernel sizes need {n} strides and dilations and {2 * n} pads")
    axes = _spatial(layout, n, who)
    shape = const_shape(data, f"topi.nn.{who}")
    before, after = list(padding[:n]), list(padding[n:])
    out_shape = list(shape)
    for q, ax in enumerate(axes):
        span = shape[ax] + before[q] + after[q] - (kernel[q] - 1) * dilation[q] - 1
        out_shape[ax] = (-(-span // stride[q]) if ceil_mode else span // stride[q]) + 1
        if ceil_mode and (out_shape[ax] - 1) * stride[q] >= shape[ax] + before[q]:
            out_shape[ax] -= 1  # the last window starts inside the input or the leading pad (as relay's pool2d)
        if out_shape[ax] <= 0:
            raise AutoschedError(f"topi.nn.{who}: the window does not fit the input {tuple(shape)}")
    red = [te.reduce_axis((0, kernel[q]), name=f"r{q}") for q in range(n)]

    def taps(i: tuple) -> tuple[list, Any]:
        src, inside = list(i), []
        for q, ax in enumerate(axes):
            pos = i[ax] * stride[q] + red[q].var * dilation[q] - before[q]
            src[ax] = pos
            if before[q] or after[q] or ceil_mode:
                inside += [pos >= 0, pos < shape[ax]]
        return src, (te.all(*inside) if inside else None)

    if pool_type == "max":
        def fmax(*i: Any) -> Any:
            src, inside = taps(i)
            v = data[tuple(src)]
            return te.max(v if inside is None else te.if_then_else(inside, v, te.min_value(data.dtype)), axis=red)

        return te.compute(tuple(out_shape), fmax, name=f"max_{who}", tag=f"{who}_max")

    def fsum(*i: Any) -> Any:
        src, inside = taps(i)
        v = data[tuple(src)]
        return te.sum(v if inside is None else te.if_then_else(inside, v, te.const(0, data.dtype)), axis=red)

    total = te.compute(tuple(out_shape), fsum, name=f"{who}_sum")

    def count(i: tuple) -> Any:
        c = te.const(1, "int64")
        for q, ax in enumerate(axes):  # the taps of start + t * dilation (t < kernel) inside [lo, hi)
            lo, hi = (-before[q], shape[ax] + after[q]) if count_include_pad else (0, shape[ax])
            start = i[ax] * stride[q] - before[q]
            first = te.max(te.floordiv(lo - start + (dilation[q] - 1), dilation[q]), 0)
            last = te.min(te.floordiv(hi - 1 - start, dilation[q]), kernel[q] - 1)
            c = c * te.max(last - first + 1, 0)
        return te.max(c, 1).astype(data.dtype)

    return te.compute(tuple(out_shape), lambda *i: total[i] / count(i), name=f"avg_{who}", tag=f"{who}_avg")


def pool1d(data: te.Tensor, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
           padding: Sequence[int], pool_type: str, ceil_mode: bool = False, layout: str = "NCW",
           count_include_pad: bool = True) -> te.Tensor:
    """1-D max or average pooling (``padding`` = (before, after))."""
    return poolnd(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad, "pool1d")


def pool3d(data: te.Tensor, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
           padding: Sequence[int], pool_type: str, ceil_mode: bool = False, layout: str = "NCDHW",
           count_include_pad: bool = True) -> te.Tensor:
    """3-D max or average pooling (``padding`` = front, top, left, back, bottom, right)."""
    return poolnd(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad, "pool3d")


def _adaptive(data: te.Tensor, output_size: Sequence[int], pool_type: str, layout: str, who: str) -> te.Tensor:
    n = len(output_size)
    if pool_type not in ("max", "avg"):
        raise AutoschedError(f"topi.nn.{who}: pool_type {pool_type!r} is not max or avg")
    axes = _spatial(layout, n, who)
    shape = const_shape(data, f"topi.nn.{who}")
    out_shape = list(shape)
    windows = []
    for q, ax in enumerate(axes):
        size, out = shape[ax], int(output_size[q])
        out_shape[ax] = out
        # output o covers [floor(o * size / out), ceil((o + 1) * size / out))
        windows.append(max(-(-(o + 1) * size // out) - (o * size // out) for o in range(out)))
    red = [te.reduce_axis((0, w), name=f"r{q}") for q, w in enumerate(windows)]

    def bounds(i: tuple, q: int) -> tuple[Any, Any]:
        size, out = shape[axes[q]], int(output_size[q])
        return te.floordiv(i[axes[q]] * size, out), te.floordiv((i[axes[q]] + 1) * size + (out - 1), out)

    def f(*i: Any) -> Any:
        src, inside = list(i), []
        for q, ax in enumerate(axes):
            start, end = bounds(i, q)
            src[ax] = start + red[q].var
            inside.append(src[ax] < end)
        v = data[tuple(src)]
        if pool_type == "max":
            return te.max(te.if_then_else(te.all(*inside), v, te.min_value(data.dtype)), axis=red)
        return te.sum(te.if_then_else(te.all(*inside), v, te.const(0, data.dtype)), axis=red)

    pooled = te.compute(tuple(out_shape), f, name=f"adaptive_{pool_type}_{who}",
                        tag=f"adaptive_pool_{pool_type}" if pool_type == "max" else "")
    if pool_type == "max":
        return pooled

    def mean(*i: Any) -> Any:
        area = te.const(1, "int64")
        for q in range(n):
            start, end = bounds(i, q)
            area = area * (end - start)
        return pooled[i] / area.astype(data.dtype)

    return te.compute(tuple(out_shape), mean, name=f"adaptive_avg_{who}", tag="adaptive_pool_avg")


def adaptive_pool(data: te.Tensor, output_size: Sequence[int], pool_type: str, layout: str = "NCHW") -> te.Tensor:
    """Pooling to a fixed ``output_size`` (PyTorch's adaptive pooling): output ``o`` of a dimension of size
    ``s`` pools ``[floor(o s / out), ceil((o + 1) s / out))``. 1-, 2- or 3-D by ``len(output_size)``."""
    return _adaptive(data, output_size, pool_type, layout, "adaptive_pool")


def adaptive_pool1d(data: te.Tensor, output_size: Sequence[int], pool_type: str, layout: str = "NCW") -> te.Tensor:
    return _adaptive(data, output_size, pool_type, layout, "adaptive_pool1d")


def adaptive_pool3d(data: te.Tensor, output_size: Sequence[int], pool_type: str,
                    layout: str = "NCDHW") -> te.Tensor:
    return _adaptive(data, output_size, pool_type, layout, "adaptive_pool3d")


__all__ = ["adaptive_pool", "adaptive_pool1d", "adaptive_pool3d", "pool1d", "pool3d", "poolnd"]
