"""TOPI's neural-network operators (``topi.nn``): convolutions, dense, pooling, softmax and friends, computed as
relay's ops compute them (constant shapes), so they take relay's default schedules (``topi.generic``,
``topi.x86``, ``topi.cuda``) and tuning spaces; the activations are elementwise and take symbolic shapes."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any

from autosched import relay, te
from autosched.errors import AutoschedError
from autosched.topi import tag
from autosched.topi._relay import lower_call
from autosched.topi.nn.poolnd import adaptive_pool, adaptive_pool1d, adaptive_pool3d, pool1d, pool3d
from autosched.topi.nn.utils import get_pad_tuple, get_pad_tuple1d, get_pad_tuple3d, pads_of
from autosched.topi.utils import get_const_tuple


def _out_dtype(out_dtype: str | None, data: te.Tensor) -> str:
    return "" if out_dtype in (None, "", data.dtype) else str(out_dtype)


def _pad4(padding: Any, kernel: Sequence[int], dilation: Any = 1) -> tuple[int, int, int, int]:
    """Four pads; SAME pads by the dilated kernel's extent."""
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
    kernel = ((kernel[0] - 1) * int(dh) + 1, (kernel[1] - 1) * int(dw) + 1)
    if isinstance(padding, str) or isinstance(padding, int) or len(padding) in (1, 2, 4):
        return get_pad_tuple(padding, kernel)
    raise AutoschedError(f"topi: padding {padding!r} is an int, (h, w), (top, left, bottom, right), SAME or VALID")


def conv2d_nchw(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any, dilation: Any,  # noqa: N803
                out_dtype: str | None = None) -> te.Tensor:
    """2-D convolution of NCHW data by an OIHW filter (groups from the channel counts)."""
    kh, kw = (int(d) for d in Filter.shape[2:])
    groups = int(Input.shape[1]) // int(Filter.shape[1]) if int(Filter.shape[1]) else 1
    pad = _pad4(padding, (kh, kw), dilation)
    return lower_call("nn.conv2d_nchw", [Input, Filter], lambda d, w: relay.nn.conv2d(
        d, w, strides=stride, padding=pad, dilation=dilation, groups=groups,
        out_dtype=_out_dtype(out_dtype, Input)))


def conv2d_nhwc(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any, dilation: Any,  # noqa: N803
                out_dtype: str | None = "float32") -> te.Tensor:
    """2-D convolution of NHWC data by an HWIO filter (computed in NCHW between transposes, as relay does)."""
    kh, kw = (int(d) for d in Filter.shape[:2])
    pad = _pad4(padding, (kh, kw), dilation)
    return lower_call("nn.conv2d_nhwc", [Input, Filter], lambda d, w: relay.nn.conv2d(
        d, w, strides=stride, padding=pad, dilation=dilation, data_layout="NHWC", kernel_layout="HWIO",
        out_dtype=_out_dtype(out_dtype, Input)))


def group_conv2d_nchw(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any, dilation: Any,  # noqa: N803
                      groups: int, out_dtype: str | None = None) -> te.Tensor:
    """Grouped convolution of NCHW data by an [O, I / groups, kh, kw] filter (relay's ``nn.conv2d`` with groups)."""
    kh, kw = (int(d) for d in Filter.shape[2:])
    pad = _pad4(padding, (kh, kw), dilation)
    return lower_call("nn.group_conv2d_nchw", [Input, Filter], lambda d, w: relay.nn.conv2d(
        d, w, strides=stride, padding=pad, dilation=dilation, groups=int(groups),
        out_dtype=_out_dtype(out_dtype, Input)))


def group_conv2d_nhwc(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any, dilation: Any,  # noqa: N803
                      groups: int, out_dtype: str | None = None) -> te.Tensor:
    """Grouped convolution of NHWC data by a [kh, kw, I / groups, O] filter (computed in NCHW between transposes)."""
    kh, kw = (int(d) for d in Filter.shape[:2])
    pad = _pad4(padding, (kh, kw), dilation)
    return lower_call("nn.group_conv2d_nhwc", [Input, Filter], lambda d, w: relay.nn.conv2d(
        d, w, strides=stride, padding=pad, dilation=dilation, groups=int(groups), data_layout="NHWC",
        kernel_layout="HWIO", out_dtype=_out_dtype(out_dtype, Input)))


def conv2d(input: te.Tensor, filter: te.Tensor, strides: Any, padding: Any, dilation: Any,  # noqa: A002
           layout: str = "NCHW", out_dtype: str | None = None) -> te.Tensor:
    """2-D convolution in ``layout`` NCHW (OIHW filter) or NHWC (HWIO filter)."""
    if layout == "NCHW":
        return conv2d_nchw(input, filter, strides, padding, dilation, out_dtype)
    if layout == "NHWC":
        return conv2d_nhwc(input, filter, strides, padding, dilation, out_dtype)
    raise AutoschedError(f"topi.nn.conv2d: layout {layout!r} is not NCHW or NHWC")


def depthwise_conv2d_nchw(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any,  # noqa: N803
                          dilation: Any, out_dtype: str | None = None) -> te.Tensor:
    """Depthwise convolution of NCHW data by a [channels, multiplier, kh, kw] filter."""
    c, mult, kh, kw = (int(d) for d in Filter.shape)
    pad = _pad4(padding, (kh, kw), dilation)
    return lower_call("nn.depthwise_conv2d_nchw", [Input, Filter], lambda d, w: relay.nn.conv2d(
        d, relay.reshape(w, (c * mult, 1, kh, kw)), strides=stride, padding=pad, dilation=dilation, groups=c,
        out_dtype=_out_dtype(out_dtype, Input)))


def conv2d_transpose_nchw(Input: te.Tensor, Filter: te.Tensor, strides: Any, padding: Any,  # noqa: N803
                          out_dtype: str | None = None, output_padding: Any = (0, 0)) -> te.Tensor:
    """Transposed 2-D convolution of NCHW data by an IOHW filter."""
    kh, kw = (int(d) for d in Filter.shape[2:])
    pad = _pad4(padding, (kh, kw))
    return lower_call("nn.conv2d_transpose_nchw", [Input, Filter], lambda d, w: relay.nn.conv2d_transpose(
        d, w, strides=strides, padding=pad, output_padding=output_padding, out_dtype=_out_dtype(out_dtype, Input)))


def _dims(t: te.Tensor, layout: str, what: str, name: str) -> tuple[int, ...]:
    """``t``'s constant shape, which must have one axis per letter of ``layout``."""
    shape = get_const_tuple(t.shape)
    if len(shape) != len(layout) or not all(isinstance(d, int) for d in shape):
        raise AutoschedError(f"topi.{what}: {name} must be a {len(layout)}-D {layout} tensor of constant shape, got "
                             f"shape {tuple(shape)}")
    return shape


def _same_channels(what: str, data_c: int, kernel_c: int, kernel: tuple[int, ...], groups: int = 1,
                   names: tuple[str, str] = ("data", "kernel")) -> None:
    """The kernel's input channels must be the data's (a multiple of ``groups`` where there are groups)."""
    if data_c != kernel_c or groups < 1 or data_c % groups:
        rule = "" if groups == 1 else f" and a multiple of groups={groups}"
        raise AutoschedError(f"topi.{what}: {names[0]} has {data_c} channels but {names[1]} of shape {kernel} has "
                             f"{kernel_c} input channels; they must be equal{rule}")


_IF = ("Input", "Filter")  # the operand names of TVM's conv3d, conv2d_hwcn and conv3d_transpose


def _ints(v: Any, n: int, name: str, what: str, least: int = 1) -> tuple[int, ...]:
    """An int or 1 or ``n`` ints as ``n`` ints, each at least ``least``."""
    vals = [v] if isinstance(v, Integral) else list(v) if isinstance(v, (list, tuple)) else None
    if vals is not None and len(vals) == 1:
        vals *= n
    if vals is None or len(vals) != n or not all(isinstance(x, Integral) and x >= least for x in vals):
        raise AutoschedError(f"topi.{what}: {name} {v!r} must be an int or {n} ints, each >= {least}")
    return tuple(int(x) for x in vals)


def _dilated(kernel: Sequence[int], dilation: Sequence[int]) -> list[int]:
    return [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]


def _cast_to(out_dtype: str | None, data: te.Tensor) -> Any:
    """The operands cast to ``out_dtype`` before the products (relay's transposed convolutions take no out_dtype)."""
    od = _out_dtype(out_dtype, data)
    return (lambda e: relay.cast(e, od)) if od else (lambda e: e)


def conv1d_ncw(data: te.Tensor, kernel: te.Tensor, strides: Any = 1, padding: Any = "VALID", dilation: Any = 1,
               out_dtype: str | None = None) -> te.Tensor:
    """1-D convolution of NCW data by an OIW kernel (relay's ``nn.conv1d``)."""
    what = "nn.conv1d_ncw"
    dshape, wshape = _dims(data, "NCW", what, "data"), _dims(kernel, "OIW", what, "kernel")
    _same_channels(what, dshape[1], wshape[1], wshape)
    (s,), (d,) = _ints(strides, 1, "strides", what), _ints(dilation, 1, "dilation", what)
    pads = pads_of(padding, _dilated(wshape[2:], [d]), what)
    return lower_call(what, [data, kernel], lambda x, w: relay.nn.conv1d(
        x, w, strides=s, padding=pads, dilation=d, out_dtype=_out_dtype(out_dtype, data)))


def conv1d_nwc(data: te.Tensor, kernel: te.Tensor, strides: Any = 1, padding: Any = "VALID", dilation: Any = 1,
               out_dtype: str | None = None) -> te.Tensor:
    """1-D convolution of NWC data by a WIO kernel (the NCW one between transposes)."""
    what = "nn.conv1d_nwc"
    dshape, wshape = _dims(data, "NWC", what, "data"), _dims(kernel, "WIO", what, "kernel")
    _same_channels(what, dshape[2], wshape[1], wshape)
    (s,), (d,) = _ints(strides, 1, "strides", what), _ints(dilation, 1, "dilation", what)
    pads = pads_of(padding, _dilated(wshape[:1], [d]), what)
    return lower_call(what, [data, kernel], lambda x, w: relay.transpose(relay.nn.conv1d(
        relay.transpose(x, (0, 2, 1)), relay.transpose(w, (2, 1, 0)), strides=s, padding=pads, dilation=d,
        out_dtype=_out_dtype(out_dtype, data)), (0, 2, 1)))


def conv1d(data: te.Tensor, kernel: te.Tensor, strides: Any = 1, padding: Any = "VALID", dilation: Any = 1,
           layout: str = "NCW", out_dtype: str | None = None) -> te.Tensor:
    """1-D convolution in ``layout`` NCW (OIW kernel) or NWC (WIO kernel)."""
    if layout == "NCW":
        return conv1d_ncw(data, kernel, strides, padding, dilation, out_dtype)
    if layout == "NWC":
        return conv1d_nwc(data, kernel, strides, padding, dilation, out_dtype)
    raise AutoschedError(f"topi.nn.conv1d: layout {layout!r} is not NCW or NWC")


def conv3d_ncdhw(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any, dilation: Any,  # noqa: N803
                 out_dtype: str | None = None) -> te.Tensor:
    """3-D convolution of NCDHW data by an OIDHW filter (relay's ``nn.conv3d``; no groups, as TVM v0.8)."""
    what = "nn.conv3d_ncdhw"
    dshape, wshape = _dims(Input, "NCDHW", what, "Input"), _dims(Filter, "OIDHW", what, "Filter")
    _same_channels(what, dshape[1], wshape[1], wshape, names=_IF)
    s, d = _ints(stride, 3, "stride", what), _ints(dilation, 3, "dilation", what)
    pads = pads_of(padding, _dilated(wshape[2:], d), what)
    return lower_call(what, [Input, Filter], lambda x, w: relay.nn.conv3d(
        x, w, strides=s, padding=pads, dilation=d, out_dtype=_out_dtype(out_dtype, Input)))


def conv3d_ndhwc(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any, dilation: Any,  # noqa: N803
                 out_dtype: str | None = "float32") -> te.Tensor:
    """3-D convolution of NDHWC data by a DHWIO filter (the NCDHW one between transposes)."""
    what = "nn.conv3d_ndhwc"
    dshape, wshape = _dims(Input, "NDHWC", what, "Input"), _dims(Filter, "DHWIO", what, "Filter")
    _same_channels(what, dshape[4], wshape[3], wshape, names=_IF)
    s, d = _ints(stride, 3, "stride", what), _ints(dilation, 3, "dilation", what)
    pads = pads_of(padding, _dilated(wshape[:3], d), what)
    return lower_call(what, [Input, Filter], lambda x, w: relay.transpose(relay.nn.conv3d(
        relay.transpose(x, (0, 4, 1, 2, 3)), relay.transpose(w, (4, 3, 0, 1, 2)), strides=s, padding=pads,
        dilation=d, out_dtype=_out_dtype(out_dtype, Input)), (0, 2, 3, 4, 1)))


def conv2d_hwcn(Input: te.Tensor, Filter: te.Tensor, stride: Any, padding: Any, dilation: Any,  # noqa: N803
                out_dtype: str | None = None) -> te.Tensor:
    """2-D convolution of HWCN data by an HWIO filter (the NCHW one between transposes)."""
    what = "nn.conv2d_hwcn"
    dshape, wshape = _dims(Input, "HWCN", what, "Input"), _dims(Filter, "HWIO", what, "Filter")
    _same_channels(what, dshape[2], wshape[2], wshape, names=_IF)
    s, d = _ints(stride, 2, "stride", what), _ints(dilation, 2, "dilation", what)
    pad = _pad4(padding, wshape[:2], d)
    return lower_call(what, [Input, Filter], lambda x, w: relay.transpose(relay.nn.conv2d(
        relay.transpose(x, (3, 2, 0, 1)), w, strides=s, padding=pad, dilation=d, kernel_layout="HWIO",
        out_dtype=_out_dtype(out_dtype, Input)), (2, 3, 1, 0)))


def _outpads_of(output_padding: Any, strides: tuple[int, ...], what: str) -> tuple[int, ...]:
    """``output_padding`` per axis: each >= 0 and below its stride (it picks one of the output sizes a stride
    leaves open)."""
    pads = _ints(output_padding, len(strides), "output_padding", what, least=0)
    if any(p >= s for p, s in zip(pads, strides)):
        raise AutoschedError(f"topi.{what}: output_padding {output_padding!r} must be smaller than the strides "
                             f"{strides}")
    return pads


def conv1d_transpose_ncw(data: te.Tensor, kernel: te.Tensor, stride: Any, padding: Any, out_dtype: str | None,
                         output_padding: Any = 0) -> te.Tensor:
    """Transposed 1-D convolution of NCW data by an IOW kernel (relay's 2-D one on a height of 1)."""
    what = "nn.conv1d_transpose_ncw"
    dshape, wshape = _dims(data, "NCW", what, "data"), _dims(kernel, "IOW", what, "kernel")
    _same_channels(what, dshape[1], wshape[0], wshape)
    s = _ints(stride, 1, "stride", what)
    (op,) = _outpads_of(output_padding, s, what)
    left, right = pads_of(padding, wshape[2:], what)
    cast = _cast_to(out_dtype, data)
    return lower_call(what, [data, kernel], lambda x, w: relay.squeeze(relay.nn.conv2d_transpose(
        cast(relay.expand_dims(x, 2)), cast(relay.expand_dims(w, 2)), strides=(1, s[0]), padding=(0, left, 0, right),
        output_padding=(0, op)), [2]))


def conv3d_transpose_ncdhw(Input: te.Tensor, Filter: te.Tensor, strides: Any, padding: Any,  # noqa: N803
                           out_dtype: str | None, output_padding: Any = (0, 0, 0)) -> te.Tensor:
    """Transposed 3-D convolution of NCDHW data by an IODHW filter (relay's ``nn.conv3d_transpose``)."""
    what = "nn.conv3d_transpose_ncdhw"
    dshape, wshape = _dims(Input, "NCDHW", what, "Input"), _dims(Filter, "IODHW", what, "Filter")
    _same_channels(what, dshape[1], wshape[0], wshape, names=_IF)
    s = _ints(strides, 3, "strides", what)
    op = _outpads_of(output_padding, s, what)
    pads = pads_of(padding, wshape[2:], what)
    cast = _cast_to(out_dtype, Input)
    return lower_call(what, [Input, Filter], lambda x, w: relay.nn.conv3d_transpose(
        cast(x), cast(w), strides=s, padding=pads, output_padding=op))


def group_conv2d_transpose_nchw(data: te.Tensor, kernel: te.Tensor, stride: Any, padding: Any,
                                out_dtype: str | None, output_padding: Any, groups: int) -> te.Tensor:
    """Grouped transposed 2-D convolution of NCHW data by an [C_in, C_out / groups, kh, kw] kernel."""
    what = "nn.group_conv2d_transpose_nchw"
    dshape, wshape = _dims(data, "NCHW", what, "data"), _dims(kernel, "IOHW", what, "kernel")
    _same_channels(what, dshape[1], wshape[0], wshape, int(groups))
    s = _ints(stride, 2, "stride", what)
    op = _outpads_of(output_padding, s, what)
    pad = _pad4(padding, wshape[2:])
    cast = _cast_to(out_dtype, data)
    return lower_call(what, [data, kernel], lambda x, w: relay.nn.conv2d_transpose(
        cast(x), cast(w), strides=s, padding=pad, output_padding=op, groups=int(groups)))


def deformable_conv2d_nchw(data: te.Tensor, offset: te.Tensor, kernel: te.Tensor, strides: Any, padding: Any,
                           dilation: Any, deformable_groups: int, groups: int,
                           out_dtype: str | None = None) -> te.Tensor:
    """Deformable 2-D convolution of NCHW data by an OIHW kernel, each tap read at its place moved by ``offset``
    [N, 2 * deformable_groups * KH * KW, OH, OW] ((y, x) pairs), bilinearly; relay's nn.deformable_conv2d."""
    kh, kw = (int(d) for d in kernel.shape[2:])
    pad = _pad4(padding, (kh, kw), dilation)
    return lower_call("nn.deformable_conv2d_nchw", [data, offset, kernel], lambda d, o, w: relay.nn.deformable_conv2d(
        d, o, w, strides=strides, padding=pad, dilation=dilation, deformable_groups=deformable_groups, groups=groups,
        out_dtype=_out_dtype(out_dtype, data)))


def dense(data: te.Tensor, weight: te.Tensor, bias: te.Tensor | None = None,
          out_dtype: str | None = None) -> te.Tensor:
    """``data @ weight.T`` (+ bias), weight [units, in]."""
    od = _out_dtype(out_dtype, data)
    if bias is None:
        return lower_call("nn.dense", [data, weight], lambda d, w: relay.nn.dense(d, w, out_dtype=od))
    return lower_call("nn.dense", [data, weight, bias],
                      lambda d, w, b: relay.nn.bias_add(relay.nn.dense(d, w, out_dtype=od), b, axis=-1))


def matmul(tensor_a: te.Tensor, tensor_b: te.Tensor, bias: te.Tensor | None = None, out_dtype: str | None = None,
           transpose_a: bool = False, transpose_b: bool = False) -> te.Tensor:
    """The 2-D matrix product, either operand transposed first (+ bias)."""
    def build(a, b, *rest):
        out = relay.nn.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b,
                              out_dtype=_out_dtype(out_dtype, tensor_a))
        return relay.nn.bias_add(out, rest[0], axis=-1) if rest else out

    return lower_call("nn.matmul", [tensor_a, tensor_b] + ([bias] if bias is not None else []), build)


def batch_matmul(tensor_a: te.Tensor, tensor_b: te.Tensor, oshape: Any = None, out_dtype: str | None = None,
                 transpose_a: bool = False, transpose_b: bool = True) -> te.Tensor:
    """Batched matrix products ``[b, m, k] x [b, n, k] -> [b, m, n]`` (TOPI's default: the second transposed)."""
    return lower_call("nn.batch_matmul", [tensor_a, tensor_b], lambda a, b: relay.nn.batch_matmul(
        a, b, out_dtype=_out_dtype(out_dtype, tensor_a), transpose_a=transpose_a, transpose_b=transpose_b))


def relu(x: te.Tensor) -> te.Tensor:
    """max(x, 0)."""
    return te.compute(x.shape, lambda *i: te.maximum(x(*i), te.const(0, x.dtype)), name="relu", tag=tag.ELEMWISE)


def leaky_relu(x: te.Tensor, alpha: float) -> te.Tensor:
    """x where positive, else alpha * x."""
    a = te.const(alpha, x.dtype)
    return te.compute(x.shape, lambda *i: te.if_then_else(x(*i) > te.const(0, x.dtype), x(*i), x(*i) * a),
                      name="leaky_relu", tag=tag.ELEMWISE)


def prelu(x: te.Tensor, slope: te.Tensor, axis: int = 1) -> te.Tensor:
    """x where positive, else slope[channel] * x (the channel on ``axis``)."""
    ax = axis % len(x.shape)
    return te.compute(x.shape, lambda *i: te.if_then_else(x(*i) > te.const(0, x.dtype), x(*i), x(*i) * slope(i[ax])),
                      name="prelu", tag=tag.BROADCAST)


def softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """exp(x) / sum(exp(x)) along ``axis`` (less the maximum first)."""
    return lower_call("nn.softmax", [x], lambda d: relay.nn.softmax(d, axis))


def log_softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """x - log(sum(exp(x))) along ``axis``."""
    return lower_call("nn.log_softmax", [x], lambda d: relay.nn.log_softmax(d, axis))


def pool2d(data: te.Tensor, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
           padding: Sequence[int], pool_type: str, ceil_mode: bool = False, layout: str = "NCHW",
           count_include_pad: bool = True) -> te.Tensor:
    """Max or average pooling; ``padding`` (top, left, bottom, right)."""
    if pool_type == "max":
        return lower_call("nn.pool2d", [data], lambda d: relay.nn.max_pool2d(
            d, kernel, stride, dilation, tuple(padding), layout=layout, ceil_mode=ceil_mode))
    if pool_type == "avg":
        return lower_call("nn.pool2d", [data], lambda d: relay.nn.avg_pool2d(
            d, kernel, stride, dilation, tuple(padding), layout=layout, ceil_mode=ceil_mode,
            count_include_pad=count_include_pad))
    raise AutoschedError(f"topi.nn.pool2d: pool_type {pool_type!r} is not max or avg")


def pool_grad(grads: te.Tensor, data: te.Tensor, kernel: Sequence[int], stride: Sequence[int],
              padding: Sequence[int], pool_type: str, ceil_mode: bool = False, layout: str = "NCHW",
              count_include_pad: bool = True) -> te.Tensor:
    """The gradient of ``pool2d(data, ...)`` given ``grads``, the gradient of its output: each output's
    gradient goes to its window's maximum (max; to every maximum where several tie) or is shared by the
    window's counted taps (avg). Computed by ``te.gradient``, so it is exactly pool2d's adjoint."""
    pooled = pool2d(data, kernel, stride, (1, 1), padding, pool_type, ceil_mode, layout, count_include_pad)
    want = [int(getattr(d, "value", d)) for d in pooled.shape]
    got = [int(getattr(d, "value", d)) for d in grads.shape]
    if want != got:
        raise AutoschedError(f"topi.nn.pool_grad: grads of shape {tuple(got)}; the pooled output is {tuple(want)}")
    (out,) = te.gradient(pooled, [data], head=grads)
    return out


def global_pool(data: te.Tensor, pool_type: str, layout: str = "NCHW") -> te.Tensor:
    """Max or average over each image's pixels (kept as 1 x 1)."""
    if pool_type not in ("max", "avg"):
        raise AutoschedError(f"topi.nn.global_pool: pool_type {pool_type!r} is not max or avg")
    fn = relay.nn.global_max_pool2d if pool_type == "max" else relay.nn.global_avg_pool2d
    return lower_call("nn.global_pool", [data], lambda d: fn(d, layout=layout))


def pad(data: te.Tensor, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
        pad_value: float = 0.0, name: str = "PadInput") -> te.Tensor:
    """``data`` padded with ``pad_value``: ``pad_before[k]`` elements before axis k, ``pad_after[k]`` after."""
    after = pad_before if pad_after is None else pad_after
    if len(pad_before) != len(data.shape) or len(after) != len(data.shape):
        raise AutoschedError(f"topi.nn.pad: {len(data.shape)} dimensions need as many pads before and after, got "
                             f"{list(pad_before)} and {list(after)}")
    return lower_call("nn.pad", [data], lambda d: relay.nn.pad(d, [(int(b), int(a)) for b, a in zip(pad_before, after)],
                                                              pad_value))


def flatten(data: te.Tensor) -> te.Tensor:
    """``[n, ...]`` as ``[n, the rest]``."""
    return lower_call("nn.flatten", [data], lambda d: relay.nn.batch_flatten(d))


def upsampling(data: te.Tensor, scale_h: int, scale_w: int, layout: str = "NCHW",
               method: str = "nearest_neighbor", align_corners: bool = False) -> te.Tensor:
    """Nearest-neighbour upsampling by integer factors."""
    return lower_call("nn.upsampling", [data], lambda d: relay.nn.upsampling(d, scale_h, scale_w, layout, method,
                                                                            align_corners))


def upsampling3d(data: te.Tensor, scale_d: float, scale_h: float, scale_w: float, layout: str = "NCDHW",
                 method: str = "nearest_neighbor", coordinate_transformation_mode: str = "half_pixel",
                 output_shape: Any = None) -> te.Tensor:
    """``data`` scaled to round(extent * scale) on D, H and W (relay's ``nn.upsampling3d``, a resize)."""
    if output_shape is not None:
        raise AutoschedError("topi.nn.upsampling3d: output_shape (a shape computed at run time) is not supported")
    return lower_call("nn.upsampling3d", [data], lambda d: relay.nn.upsampling3d(
        d, scale_d, scale_h, scale_w, layout, method, coordinate_transformation_mode))


def depth_to_space(data: te.Tensor, block_size: int, layout: str = "NCHW", mode: str = "DCR") -> te.Tensor:
    """Channels to ``block_size`` x ``block_size`` blocks of pixels (``mode`` DCR or CRD)."""
    return lower_call("nn.depth_to_space", [data], lambda d: relay.nn.depth_to_space(d, block_size, layout, mode))


def space_to_depth(data: te.Tensor, block_size: int, layout: str = "NCHW") -> te.Tensor:
    """Blocks of ``block_size`` x ``block_size`` pixels to channels."""
    return lower_call("nn.space_to_depth", [data], lambda d: relay.nn.space_to_depth(d, block_size, layout))


def space_to_batch_nd(data: te.Tensor, block_shape: Sequence[int], pad_before: Sequence[int],
                      pad_after: Sequence[int], pad_value: float = 0.0) -> te.Tensor:
    """The axes after the batch padded, then cut into ``block_shape`` blocks that go to the batch."""
    paddings = list(zip(pad_before, pad_after))
    return lower_call("nn.space_to_batch_nd", [data], lambda d: relay.nn.space_to_batch_nd(
        d, block_shape, paddings, pad_value))


def batch_to_space_nd(data: te.Tensor, block_shape: Sequence[int], crop_begin_list: Sequence[int],
                      crop_end_list: Sequence[int]) -> te.Tensor:
    """The batch's ``block_shape`` blocks back into the axes after it, then cropped."""
    crops = list(zip(crop_begin_list, crop_end_list))
    return lower_call("nn.batch_to_space_nd", [data], lambda d: relay.nn.batch_to_space_nd(d, block_shape, crops))


def dilate(data: te.Tensor, strides: Sequence[int], dilation_value: float = 0.0,
           name: str = "DilatedInput") -> te.Tensor:
    """``data`` with ``strides[k] - 1`` values inserted between neighbours on axis k."""
    return lower_call("nn.dilate", [data], lambda d: relay.nn.dilate(d, strides, dilation_value))


def lrn(data: te.Tensor, size: int, axis: int = 1, alpha: float = 0.0001, beta: float = 0.75,
        bias: float = 2.0) -> te.Tensor:
    """Local response normalisation across ``size`` neighbouring channels."""
    return lower_call("nn.lrn", [data], lambda d: relay.nn.lrn(d, size, axis, bias, alpha, beta))


def layer_norm(data: te.Tensor, gamma: te.Tensor, beta: te.Tensor, axis: int = -1,
               epsilon: float = 1e-5) -> te.Tensor:
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over ``axis``."""
    return lower_call("nn.layer_norm", [data, gamma, beta],
                      lambda d, g, b: relay.nn.layer_norm(d, g, b, axis=axis, epsilon=epsilon))


def nll_loss(predictions: te.Tensor, targets: te.Tensor, weights: te.Tensor, reduction: str = "mean",
             ignore_index: int | None = -100) -> te.Tensor:
    """The negative log-likelihood loss of ``predictions`` [N, C, d...] at ``targets`` [N, d...] weighted by
    ``weights`` [C]: none, sum, or mean over the targets' weights (``relay.nn.nll_loss``)."""
    return lower_call("nn.nll_loss", [predictions, targets, weights],
                      lambda p, t, w: relay.nn.nll_loss(p, t, w, reduction, ignore_index))


def sparse_dense(dense_data: te.Tensor, sparse_data: te.Tensor, sparse_indices: te.Tensor,
                 sparse_indptr: te.Tensor, sparse_lhs: bool = False) -> te.Tensor:
    """``dense_data @ W.T`` for a sparse W in BSR (data [blocks, bs_r, bs_c]) or CSR (data [nonzeros]); the
    kernel reads the structure, so one build serves every weight with as many blocks."""
    return lower_call("nn.sparse_dense", [dense_data, sparse_data, sparse_indices, sparse_indptr],
                      lambda x, d, i, p: relay.nn.sparse_dense(x, (d, i, p), sparse_lhs=sparse_lhs))


__all__ = ["adaptive_pool", "adaptive_pool1d", "adaptive_pool3d", "batch_matmul", "batch_to_space_nd", "conv1d",
           "conv1d_ncw", "conv1d_nwc", "conv1d_transpose_ncw", "conv2d", "conv2d_hwcn", "conv2d_nchw", "conv2d_nhwc",
           "conv2d_transpose_nchw", "conv3d_ncdhw", "conv3d_ndhwc", "conv3d_transpose_ncdhw", "deformable_conv2d_nchw",
           "dense", "depth_to_space", "depthwise_conv2d_nchw", "dilate", "flatten", "get_pad_tuple", "get_pad_tuple1d",
           "get_pad_tuple3d", "global_pool", "group_conv2d_nchw", "group_conv2d_nhwc", "group_conv2d_transpose_nchw",
           "layer_norm", "leaky_relu", "log_softmax", "lrn", "matmul", "nll_loss", "pad", "pool1d", "pool2d", "pool3d",
           "pool_grad", "prelu", "relu", "softmax", "space_to_batch_nd", "space_to_depth", "sparse_dense",
           "upsampling",
           "upsampling3d"]
