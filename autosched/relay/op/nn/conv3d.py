"""3-D convolutions and pools (TVM's ``relay.nn.conv3d``, ``conv3d_transpose``, ``max_pool3d``, ``avg_pool3d``;
NCDHW data) as the 2-D ops relay already compiles well, applied to every output depth at once.

The depth window is unfolded into channels: the K depth slices of the padded input that output depth d reads are
the input's channels side by side, so a K x KH x KW convolution is one KH x KW ``nn.conv2d`` of K times the
channels over a batch of N x D_out images (the weight's depth taps joined to its input channels): the same
multiply-adds, in the blocked, tuned 2-D kernels. A pool reduces its depth window first (a maximum or a sum of K
slices), then pools each depth image in 2-D. A transposed convolution runs the 2-D one for every depth tap at
once (their output channels side by side) and adds each tap's result at its depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.relay.ir.expr import Constant, Expr, RelayError, const
from autosched.relay.ir.type_infer import infer_type
from autosched.relay.op.nn._nn import dilate
from autosched.relay.op.nn.conv_transpose import conv_transpose_cropped
from autosched.relay.op.nn.nn import avg_pool2d, conv2d, max_pool2d, pad
from autosched.relay.op.op import add, make_call, multiply
from autosched.relay.op.tensor import concatenate, reshape, strided_slice, transpose


def _triple(v: Any, name: str, op: str) -> tuple[int, int, int]:
    vals = [int(v)] * 3 if isinstance(v, (int, np.integer)) else [int(a) for a in v]
    if len(vals) == 1:
        vals *= 3
    if len(vals) != 3:
        raise RelayError(f"{op}: {name} {v} must be 1 or 3 ints")
    return vals[0], vals[1], vals[2]


def _pads(padding: Any, op: str) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(front, top, left), (back, bottom, right) from 1, 3 or 6 ints."""
    vals = [int(padding)] if isinstance(padding, (int, np.integer)) else [int(p) for p in padding]
    if len(vals) in (1, 3):
        lo = _triple(vals, "padding", op)
        return lo, lo
    if len(vals) != 6:
        raise RelayError(f"{op}: padding {padding} must be 1, 3 or 6 ints")
    return (vals[0], vals[1], vals[2]), (vals[3], vals[4], vals[5])


def _shape5(e: Expr, what: str, op: str) -> list[int]:
    shape = infer_type(e).shape
    if len(shape) != 5 or not all(isinstance(d, (int, np.integer)) for d in shape):
        raise RelayError(f"{op}: the {what} must be 5-D (NCDHW) with a static shape, got {shape}")
    return [int(d) for d in shape]


def _check_layouts(op: str, data_layout: str, kernel_layout: str | None = None, want_kernel: str = "OIDHW") -> None:
    if data_layout != "NCDHW" or kernel_layout not in (None, want_kernel):
        raise RelayError(f"{op}: layouts {data_layout}/{kernel_layout} are not supported (NCDHW data"
                         f"{'' if kernel_layout is None else f' with an {want_kernel} weight'} are)")


def _depths_first(x: Expr) -> Expr:
    return transpose(x, (0, 2, 1, 3, 4))


def _depth_out(size: int, k: int, stride: int, dil: int, lo: int, hi: int, ceil_mode: bool = False) -> int:
    span = size + lo + hi - dil * (k - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + lo:  # the last window must start inside the data or its front pad
        out -= 1
    return out


def _depth_slices(x: Expr, depth: int, k: int, stride: int, dil: int, lo: int, hi: int, out: int, axis: int,
                  pad_value: float = 0.0) -> list[Expr]:
    """The ``k`` slices along ``axis`` (the depth) that outputs 0..out-1 read, tap by tap: slice t holds
    x[d * stride + t * dil - lo] for each output d (``pad_value`` outside the data)."""
    need_hi = max(hi, (out - 1) * stride + dil * (k - 1) + 1 - depth - lo)
    if lo or need_hi:
        widths = [(0, 0)] * 5
        widths[axis] = (lo, need_hi)
        x = pad(x, widths, pad_value=pad_value)
    return [strided_slice(x, [t * dil], [t * dil + (out - 1) * stride + 1], [stride], axes=[axis]) for t in range(k)]


def conv3d(data: Expr, weight: Expr, strides: Any = (1, 1, 1), padding: Any = (0, 0, 0), dilation: Any = (1, 1, 1),
           groups: int = 1, channels: int | None = None, kernel_size: Any = None, data_layout: str = "NCDHW",
           kernel_layout: str = "OIDHW", out_layout: str = "", out_dtype: str = "") -> Expr:
    """3-D convolution of NCDHW data by an OIDHW weight; padding 1, 3 or 6 ints (front, top, left, back, bottom,
    right). One ``nn.conv2d`` over the depth-unfolded input (see the module docstring)."""
    op = "nn.conv3d"
    _check_layouts(op, data_layout, kernel_layout)
    n, c, depth, h, w = _shape5(data, "data", op)
    o, cg, kd, kh, kw = _shape5(weight, "weight", op)
    (sd, sh, sw), (dd, dh, dw) = _triple(strides, "strides", op), _triple(dilation, "dilation", op)
    (fd, ft, fl), (bd, bt, br) = _pads(padding, op)
    groups = int(groups)
    if groups < 1 or c != cg * groups or o % groups:
        raise RelayError(f"{op}: the data has {c} channels but the weight {[o, cg, kd, kh, kw]} expects {cg} x "
                         f"groups={groups}")
    if kernel_size is not None and _triple(kernel_size, "kernel_size", op) != (kd, kh, kw):
        raise RelayError(f"{op}: kernel_size {kernel_size} does not match the weight's {[o, cg, kd, kh, kw]}")
    if channels is not None and int(channels) != o:
        raise RelayError(f"{op}: channels={channels}, but the weight has {o} output channels")
    out_d = _depth_out(depth, kd, sd, dd, fd, bd)
    if out_d < 1 or min(sd, sh, sw, dd, dh, dw) < 1 or min(fd, ft, fl, bd, bt, br) < 0:
        raise RelayError(f"{op}: no output depth for data depth {depth}, kernel depth {kd}, stride {sd}, dilation "
                         f"{dd} and padding {padding} (strides and dilations >= 1, padding >= 0)")
    x = _depths_first(data)  # [N, D, C, H, W]: the depth slices concatenate along the channels
    slices = _depth_slices(x, depth, kd, sd, dd, fd, bd, out_d, axis=1)
    if kd == 1:
        unfolded = slices[0]
    elif groups == 1:
        unfolded = concatenate(slices, axis=2)
    else:  # channels ordered (group, depth tap, channel), as the grouped conv2d reads them
        split = [reshape(s, (n, out_d, groups, 1, cg, h, w)) for s in slices]
        unfolded = concatenate(split, axis=3)
    x2 = reshape(unfolded, (n * out_d, groups * kd * cg, h, w))
    w2shape = (o, kd * cg, kh, kw)
    if isinstance(weight, Constant):
        w2: Expr = const(np.ascontiguousarray(weight.data.transpose(0, 2, 1, 3, 4).reshape(w2shape)))
    else:
        w2 = reshape(transpose(weight, (0, 2, 1, 3, 4)), w2shape)
    y = conv2d(x2, w2, strides=(sh, sw), padding=(ft, fl, bt, br), dilation=(dh, dw), groups=groups, channels=o,
               kernel_size=(kh, kw), out_dtype=out_dtype)
    oh, ow = (int(d) for d in infer_type(y).shape[2:])
    return _depths_first(reshape(y, (n, out_d, o, oh, ow)))


def _pool3d(kind: str, data: Expr, pool_size: Any, strides: Any, dilation: Any, padding: Any, layout: str,
            ceil_mode: bool, count_include_pad: bool = False) -> Expr:
    op = f"nn.{kind}_pool3d"
    _check_layouts(op, layout)
    n, c, depth, h, w = _shape5(data, "data", op)
    (kd, kh, kw), (sd, sh, sw) = _triple(pool_size, "pool_size", op), _triple(strides, "strides", op)
    (dd, dh, dw) = _triple(dilation, "dilation", op)
    (fd, ft, fl), (bd, bt, br) = _pads(padding, op)
    if kind == "avg" and max(dd, dh, dw) > 1:
        raise RelayError(f"{op}: dilation {dilation} is not supported for average pooling (only 1)")
    out_d = _depth_out(depth, kd, sd, dd, fd, bd, ceil_mode)
    if out_d < 1 or min(sd, sh, sw, dd, dh, dw) < 1 or min(fd, ft, fl, bd, bt, br) < 0:
        raise RelayError(f"{op}: no output depth for data depth {depth}, window {kd}, stride {sd} and padding "
                         f"{padding} (strides and dilations >= 1, padding >= 0)")
    dtype = str(infer_type(data).dtype)
    low = float(np.finfo(dtype).min) if np.dtype(dtype).kind == "f" else float(np.iinfo(dtype).min)
    slices = _depth_slices(data, depth, kd, sd, dd, fd, bd, out_d, axis=2, pad_value=low if kind == "max" else 0.0)
    y = slices[0]
    for s in slices[1:]:
        y = make_call("maximum", [y, s]) if kind == "max" else add(y, s)
    if kind == "avg":  # the depth part of the divisor, per output depth (the 2-D pool divides by the rest)
        starts = np.arange(out_d) * sd - fd
        ends = np.minimum(starts + kd, depth + bd)
        counts = ends - starts if count_include_pad else np.minimum(ends, depth) - np.maximum(starts, 0)
        y = multiply(y, const((1.0 / counts).astype(dtype).reshape(1, 1, out_d, 1, 1)))
    x2 = reshape(_depths_first(y), (n * out_d, c, h, w))
    kw2 = {"pool_size": (kh, kw), "strides": (sh, sw), "padding": (ft, fl, bt, br), "ceil_mode": ceil_mode}
    if kind == "max":
        p = max_pool2d(x2, dilation=(dh, dw), **kw2)
    else:
        p = avg_pool2d(x2, count_include_pad=count_include_pad, **kw2)
    oh, ow = (int(d) for d in infer_type(p).shape[2:])
    return _depths_first(reshape(p, (n, out_d, c, oh, ow)))


def max_pool3d(data: Expr, pool_size: Any = (1, 1, 1), strides: Any = (1, 1, 1), dilation: Any = (1, 1, 1),
               padding: Any = (0, 0, 0), layout: str = "NCDHW", out_layout: str = "", ceil_mode: bool = False) -> Expr:
    """3-D max pooling of NCDHW data: the maximum over the depth window, then ``nn.max_pool2d`` per depth."""
    return _pool3d("max", data, pool_size, strides, dilation, padding, layout, bool(ceil_mode))


def avg_pool3d(data: Expr, pool_size: Any = (1, 1, 1), strides: Any = (1, 1, 1), dilation: Any = (1, 1, 1),
               padding: Any = (0, 0, 0), layout: str = "NCDHW", out_layout: str = "", ceil_mode: bool = False,
               count_include_pad: bool = False) -> Expr:
    """3-D average pooling of NCDHW data: the depth window's mean, then ``nn.avg_pool2d`` per depth (the divisor
    of a box is the product of its depth and its H x W counts)."""
    return _pool3d("avg", data, pool_size, strides, dilation, padding, layout, bool(ceil_mode),
                   bool(count_include_pad))


def conv3d_transpose(data: Expr, weight: Expr, strides: Any = (1, 1, 1), padding: Any = (0, 0, 0),
                     dilation: Any = (1, 1, 1), groups: int = 1, channels: int | None = None, kernel_size: Any = None,
                     data_layout: str = "NCDHW", kernel_layout: str = "IODHW", out_layout: str = "",
                     output_padding: Any = (0, 0, 0), out_dtype: str = "") -> Expr:
    """The transposed 3-D convolution of NCDHW data by an IODHW weight ([C_in, C_out / groups, kd, kh, kw]):
    output size ``(n - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + 1 + output_padding`` per axis."""
    op = "nn.conv3d_transpose"
    # (TVM 0.8 names the same [C_in, C_out / groups, kd, kh, kw] weight "OIDHW": both are read that way)
    _check_layouts(op, data_layout, "IODHW" if kernel_layout in ("IODHW", "OIDHW") else kernel_layout, "IODHW")
    (fd, ft, fl), (bd, bt, br) = _pads(padding, op)
    return conv3d_transpose_cropped(data, weight, _triple(strides, "strides", op), _triple(dilation, "dilation", op),
                                    int(groups), (fd, ft, fl), (bd, bt, br),
                                    _triple(output_padding, "output_padding", op), channels, kernel_size)


def conv3d_transpose_cropped(data: Expr, weight: Expr, strides: Sequence[int], dilation: Sequence[int], groups: int,
                             begins: Sequence[int], ends: Sequence[int], out_pad: Sequence[int],
                             channels: int | None = None, kernel_size: Any = None) -> Expr:
    """The full transposed-convolution output less ``begins`` / ``ends`` per axis (an end below 0 extends it with
    zeros): the 2-D transposed convolution of every depth slice for all depth taps at once, each tap's result
    spread to its depths (every stride-th, from tap * dilation) and the taps added."""
    op = "nn.conv3d_transpose"
    n, c, depth, h, w = _shape5(data, "data", op)
    cin, og, kd, kh, kw = _shape5(weight, "weight", op)
    if groups < 1 or c != cin or cin % groups:
        raise RelayError(f"{op}: the data has {c} channels, but the weight {[cin, og, kd, kh, kw]} needs {cin}, a "
                         f"multiple of groups={groups}")
    if kernel_size is not None and _triple(kernel_size, "kernel_size", op) != (kd, kh, kw):
        raise RelayError(f"{op}: kernel_size {kernel_size} does not match the weight's {[cin, og, kd, kh, kw]}")
    if channels is not None and int(channels) != og * groups:
        raise RelayError(f"{op}: channels={channels}, but the weight with groups={groups} gives {og * groups}")
    sd, dd = strides[0], dilation[0]
    if min(*strides, *dilation) < 1 or min(*begins, *out_pad) < 0:
        raise RelayError(f"{op}: strides {list(strides)} and dilation {list(dilation)} must be >= 1, padding and "
                         f"output_padding >= 0")
    full_d = (depth - 1) * sd + dd * (kd - 1) + 1 + out_pad[0]
    out_d = full_d - begins[0] - ends[0]
    if out_d < 1:
        raise RelayError(f"{op}: padding crops all of the output depth (full depth {full_d})")
    # one 2-D transposed convolution: output channels (group, depth tap, channel) for every depth slice
    w2shape = (cin, kd * og, kh, kw)
    if isinstance(weight, Constant):
        w2: Expr = const(np.ascontiguousarray(weight.data.transpose(0, 2, 1, 3, 4).reshape(w2shape)))
    else:
        w2 = reshape(transpose(weight, (0, 2, 1, 3, 4)), w2shape)
    x2 = reshape(_depths_first(data), (n * depth, c, h, w))
    y = conv_transpose_cropped(x2, w2, (n * depth, c, h, w), w2shape, strides[1:], dilation[1:], groups,
                               begins[1:], ends[1:], out_pad[1:])
    oh, ow = (int(d) for d in infer_type(y).shape[2:])
    y = reshape(y, (n, depth, groups, kd, og, oh, ow))
    total = None
    spread = (depth - 1) * sd + 1
    for t in range(kd):
        tap = reshape(strided_slice(y, [t], [t + 1], axes=[3]), (n, depth, groups * og, oh, ow))
        if sd > 1:
            tap = dilate(tap, (1, sd, 1, 1, 1))
        before, after = t * dd - begins[0], full_d - ends[0] - (t * dd + spread)
        crop = [max(-before, 0), spread - max(-after, 0)]
        if crop != [0, spread]:
            tap = strided_slice(tap, [crop[0]], [crop[1]], axes=[1])
        if max(before, 0) or max(after, 0):
            tap = pad(tap, [(0, 0), (max(before, 0), max(after, 0)), (0, 0), (0, 0), (0, 0)])
        total = tap if total is None else add(total, tap)
    return _depths_first(total)
