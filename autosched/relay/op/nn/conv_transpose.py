"""``relay.nn.conv2d_transpose`` (TVM's name and arguments) as ops relay already compiles well.

A stride-s transposed convolution writes each output pixel from the taps of one phase (its position modulo s).
It runs as one stride-1 ``nn.conv2d`` whose output channels are the s x s phases of every output channel (the
kernel split by phase and flipped), then a reshape and transpose that interleave the phases: every multiply-add
is a real one. The textbook form (TVM's topi) convolves the input dilated by s, where (s^2 - 1) of s^2 taps read
inserted zeros. Dilated kernels, and kernels smaller than their stride, keep that form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.relay.ir.expr import Constant, Expr, RelayError, const
from autosched.relay.ir.type_infer import infer_type
from autosched.relay.op.common import pad4
from autosched.relay.op.nn._nn import dilate
from autosched.relay.op.nn.nn import conv2d, pad
from autosched.relay.op.tensor import reshape, strided_slice, transpose


def conv2d_transpose(data: Expr, weight: Expr, strides: Any = (1, 1), padding: Any = (0, 0), dilation: Any = (1, 1),
                     groups: int = 1, channels: int | None = None, kernel_size: Any = None, data_layout: str = "NCHW",
                     kernel_layout: str = "IOHW", out_layout: str = "", output_padding: Any = (0, 0),
                     out_dtype: str = "") -> Expr:
    """The transposed 2-D convolution of NCHW ``data`` with an IOHW ``weight`` ([C_in, C_out / groups, kh, kw]):
    output size ``(n - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + 1 + output_padding`` per axis;
    ``padding`` of 1, 2 or 4 ints (top, left, bottom, right) crops the full output."""
    if data_layout != "NCHW" or kernel_layout not in ("IOHW", "OIHW") or out_layout not in ("", "NCHW"):
        raise RelayError(f"nn.conv2d_transpose: layouts {data_layout}/{kernel_layout} are not supported "
                         "(NCHW data with an IOHW weight are)")
    # (TVM 0.8 names the same [C_in, C_out / groups, kh, kw] weight "OIHW": both are read that way)
    dshape, wshape = _static_shape(data, "data"), _static_shape(weight, "weight")
    strides, dilation, out_pad = (_pair(v, name) for v, name in ((strides, "strides"), (dilation, "dilation"),
                                                                  (output_padding, "output_padding")))
    top, left, bottom, right = pad4(padding, "nn.conv2d_transpose")
    if min(top, left, bottom, right, *out_pad) < 0 or min(*strides, *dilation) < 1:
        raise RelayError(f"nn.conv2d_transpose: padding {padding} and output_padding {output_padding} must be "
                         f">= 0, strides {strides} and dilation {dilation} >= 1")
    if kernel_size is not None and tuple(_pair(kernel_size, "kernel_size")) != tuple(wshape[2:]):
        raise RelayError(f"nn.conv2d_transpose: kernel_size {kernel_size} does not match the weight's {wshape}")
    if channels is not None and int(channels) != wshape[1] * int(groups):
        raise RelayError(f"nn.conv2d_transpose: channels={channels}, but the weight {wshape} with groups={groups} "
                         f"gives {wshape[1] * int(groups)}")
    return conv_transpose_cropped(data, weight, dshape, wshape, strides, dilation, int(groups), (top, left),
                                  (bottom, right), out_pad)


def conv_transpose_cropped(data: Expr, weight: Expr, dshape: Sequence[int], wshape: Sequence[int],
                           strides: Sequence[int], dilation: Sequence[int], groups: int, begins: Sequence[int],
                           ends: Sequence[int], out_pad: Sequence[int]) -> Expr:
    """The transposed convolution's full output ``(n - 1) * s + d * (k - 1) + 1 + output_padding`` per axis, less
    ``begins`` and ``ends`` (an end below 0 extends it with zeros, as ONNX's ``output_shape`` may)."""
    n, cin, *size = dshape
    wcin, og, *kernel = wshape
    if groups < 1 or cin != wcin or cin % groups:
        raise RelayError(f"nn.conv2d_transpose: the data has {cin} channels, but the weight {list(wshape)} needs "
                         f"{wcin}, a multiple of groups={groups}")
    full = [(m - 1) * s + d * (k - 1) + 1 + a for m, s, d, k, a in zip(size, strides, dilation, kernel, out_pad)]
    out = [f - b - e for f, b, e in zip(full, begins, ends)]
    if min(out) < 1:
        raise RelayError(f"nn.conv2d_transpose: padding (begin {list(begins)}, end {list(ends)}) crops all of the "
                         f"output (full size {full})")
    if max(dilation) == 1 and all(k >= s for k, s in zip(kernel, strides)) and max(strides) > 1:
        return _by_phases(data, weight, size, wshape, strides, groups, begins, out)
    return _dilated(data, weight, size, wshape, strides, dilation, groups, begins, ends, out_pad)


def _by_phases(data: Expr, weight: Expr, size: Sequence[int], wshape: Sequence[int], strides: Sequence[int],
               groups: int, begins: Sequence[int], out: Sequence[int]) -> Expr:
    """One stride-1 convolution for all s_h x s_w phases (output channel ``(c, r_h, r_w)``), interleaved."""
    cin, og, *kernel = wshape
    taps = [math.ceil(k / s) for k, s in zip(kernel, strides)]  # a phase's taps per axis (some zero)
    # outputs per phase: enough that the interleaved rows reach the last one kept
    rows = [max(m, math.ceil((b + o) / s)) for m, b, o, s in zip(size, begins, out, strides)]
    (sh, sw), (jh, jw) = strides, taps
    y = conv2d(data, _phase_weight(weight, wshape, strides, taps, groups), padding=(
        jh - 1, jw - 1, rows[0] - size[0], rows[1] - size[1]), groups=groups, channels=groups * og * sh * sw,
        kernel_size=(jh, jw))
    y = reshape(y, (0, groups * og, sh, sw, rows[0], rows[1]))
    y = reshape(transpose(y, (0, 1, 4, 2, 5, 3)), (0, groups * og, rows[0] * sh, rows[1] * sw))
    if [rows[0] * sh, rows[1] * sw] == list(out):
        return y
    return strided_slice(y, begin=list(begins), end=[b + o for b, o in zip(begins, out)], axes=[2, 3])


def _phase_weight(weight: Expr, wshape: Sequence[int], strides: Sequence[int], taps: Sequence[int],
                  groups: int) -> Expr:
    """The OIHW weight of :func:`_by_phases`: tap ``t`` of phase ``r`` is the kernel's ``r + (J - 1 - t) * s``
    (zero past the kernel), output channels ordered (group, channel, r_h, r_w). In numpy for a constant."""
    cin, og, kh, kw = wshape
    (sh, sw), (jh, jw) = strides, taps
    widths = ((0, 0), (0, 0), (0, jh * sh - kh), (0, jw * sw - kw))
    split = (groups, cin // groups, og, jh, sh, jw, sw)
    order = (0, 2, 4, 6, 1, 3, 5)
    final = (groups * og * sh * sw, cin // groups, jh, jw)
    if isinstance(weight, Constant):
        w = np.pad(weight.data, widths).reshape(split)[:, :, :, ::-1, :, ::-1, :]
        return const(np.ascontiguousarray(w.transpose(order).reshape(final)))
    w = reshape(pad(weight, widths), split)
    w = strided_slice(w, begin=[jh - 1, jw - 1], end=[-jh - 1, -jw - 1], strides=[-1, -1], axes=[3, 5])
    return reshape(transpose(w, order), final)


def _dilated(data: Expr, weight: Expr, size: Sequence[int], wshape: Sequence[int], strides: Sequence[int],
             dilation: Sequence[int], groups: int, begins: Sequence[int], ends: Sequence[int],
             out_pad: Sequence[int]) -> Expr:
    """The stride-1 convolution of the input dilated by the strides, padded by ``d * (k - 1) - pad`` (a negative
    amount crops the dilated input), with the weight's channel axes swapped per group and its kernel flipped."""
    kernel = wshape[2:]
    lo = [d * (k - 1) - b for k, d, b in zip(kernel, dilation, begins)]
    hi = [d * (k - 1) - e + a for k, d, e, a in zip(kernel, dilation, ends, out_pad)]
    dilated = [(m - 1) * s + 1 for m, s in zip(size, strides)]
    x = dilate(data, (1, 1, *strides)) if max(strides) > 1 else data
    if min(lo + hi) < 0:
        x = strided_slice(x, begin=[max(-p, 0) for p in lo], end=[m - max(-q, 0) for m, q in zip(dilated, hi)],
                          axes=[2, 3])
    return conv2d(x, _flipped_weight(weight, wshape, groups), padding=(max(lo[0], 0), max(lo[1], 0),
                  max(hi[0], 0), max(hi[1], 0)), dilation=tuple(dilation), groups=groups,
                  channels=wshape[1] * groups, kernel_size=tuple(kernel))


def _flipped_weight(weight: Expr, wshape: Sequence[int], groups: int) -> Expr:
    """[C_in, C_out/g, kh, kw] as the OIHW [C_out, C_in/g, kh, kw] of a convolution: channel axes swapped per
    group, kernel flipped in H and W. In numpy for a constant."""
    cin, og, kh, kw = wshape
    split, final = (groups, cin // groups, og, kh, kw), (groups * og, cin // groups, kh, kw)
    if isinstance(weight, Constant):
        w = weight.data.reshape(split).transpose(0, 2, 1, 3, 4).reshape(final)[:, :, ::-1, ::-1]
        return const(np.ascontiguousarray(w))
    w = reshape(transpose(reshape(weight, split), (0, 2, 1, 3, 4)), final)
    flip = [(a, k) for a, k in ((2, kh), (3, kw)) if k > 1]
    if not flip:
        return w
    return strided_slice(w, begin=[k - 1 for _, k in flip], end=[-k - 1 for _, k in flip],
                         strides=[-1] * len(flip), axes=[a for a, _ in flip])


def _pair(v: Any, name: str) -> tuple[int, int]:
    vals = (int(v),) * 2 if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)
    if len(vals) != 2:
        raise RelayError(f"nn.conv2d_transpose: {name} {v} must be 1 or 2 ints")
    return vals  # type: ignore[return-value]


def _static_shape(e: Expr, what: str) -> list[int]:
    shape = infer_type(e).shape
    if len(shape) != 4 or not all(isinstance(d, (int, np.integer)) for d in shape):
        raise RelayError(f"nn.conv2d_transpose: the {what} must be 4-D with a static shape, got {shape}")
    return [int(d) for d in shape]
