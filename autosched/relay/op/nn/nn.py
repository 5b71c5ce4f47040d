"""``relay.nn`` (``relay.op.nn``): the calls of the neural-network ops, TVM's names and arguments."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.relay.ir.expr import Call, Constant, Expr, RelayError, TupleGetItem
from autosched.relay.ir.type_infer import infer_type
from autosched.relay.op.elemwise import cast, prelu, where
from autosched.relay.op.nn._nn import dilate, log_softmax, lrn
from autosched.relay.op.op import make_call
from autosched.relay.op.reduce import layer_norm as _layer_norm
from autosched.relay.op.tensor import expand_dims, squeeze, transpose, upsampling, upsampling3d


def _dtype_of(e: Expr) -> str | None:
    """``e``'s element type when known without type inference (a constant, a typed variable, an inferred call)."""
    if isinstance(e, Constant):
        return str(e.data.dtype)
    return getattr(getattr(e, "type_annotation", None) or getattr(e, "_checked_type", None), "dtype", None)


def _summed_in(data: Expr, weight: Expr, out_dtype: str) -> dict:
    """The ``out_dtype`` attribute of a conv2d or dense: none when the operands are known to be of that type
    already (their task keys stay those of plain products), else the type they are cast to and summed in
    (uint8/int8 operands in int32 stay bytes until AlterOpLayout: VNNI targets sum them by vpdpbusd)."""
    if not out_dtype or _dtype_of(data) == _dtype_of(weight) == out_dtype:
        return {}
    return {"out_dtype": out_dtype}


def _in_dtype(e: Expr, dtype: str) -> Expr:
    """``e`` cast to ``dtype`` (TVM's ``out_dtype``: int8 operands multiplied and summed in int32, say), unless
    its type is already known to be ``dtype``."""
    if not dtype:
        return e
    return e if _dtype_of(e) == dtype else cast(e, dtype)


#: axes permutations to NCHW from each data layout, and to OIHW from each kernel layout (NHWC's HWIO; HWOI for
#: depthwise kernels, [KH, KW, C, multiplier])
_TO_NCHW = {"NHWC": (0, 3, 1, 2)}
_TO_OIHW = {"HWIO": (3, 2, 0, 1), "OHWI": (0, 3, 1, 2), "HWOI": (2, 3, 0, 1)}


def _as_nchw(data: Expr, layout: str) -> Expr:
    return transpose(data, _TO_NCHW[layout]) if layout in _TO_NCHW else data


def _from_nchw(out: Expr, layout: str) -> Expr:
    return transpose(out, (0, 2, 3, 1)) if layout == "NHWC" else out


def conv2d(data: Expr, weight: Expr, strides: Any = (1, 1), padding: Any = (0, 0), dilation: Any = (1, 1),
           groups: int = 1, channels: int | None = None, kernel_size: Any = None, data_layout: str = "NCHW",
           kernel_layout: str = "OIHW", out_layout: str = "", out_dtype: str = "") -> Call:
    """2-D convolution (NCHW/OIHW); padding of 1, 2 or 4 ints (top, left, bottom, right); ``out_dtype``: the
    type the products are summed in (the operands are cast to it). NHWC data (with an HWIO, OHWI or HWOI
    kernel) is computed as NCHW between transposes (NCHW is the faster layout here: AlterOpLayout blocks it)."""
    if (data_layout in _TO_NCHW or kernel_layout in _TO_OIHW) and data_layout in ("NCHW", *_TO_NCHW) and \
            kernel_layout in ("OIHW", *_TO_OIHW):
        w = transpose(weight, _TO_OIHW[kernel_layout]) if kernel_layout in _TO_OIHW else weight
        out = conv2d(_as_nchw(data, data_layout), w, strides, padding, dilation, groups, channels, kernel_size,
                     out_dtype=out_dtype)
        return _from_nchw(out, out_layout or data_layout)
    return make_call("nn.conv2d", [data, weight], strides=tuple(strides) if not isinstance(strides, int) else strides,
                     padding=padding if isinstance(padding, int) else tuple(padding),
                     dilation=dilation if isinstance(dilation, int) else tuple(dilation), groups=int(groups),
                     channels=channels, kernel_size=kernel_size, data_layout=data_layout, kernel_layout=kernel_layout,
                     **_summed_in(data, weight, out_dtype))


def dense(data: Expr, weight: Expr, units: int | None = None, out_dtype: str = "") -> Call:
    """``data @ weight.T`` with weight [units, in], summed in ``out_dtype`` (the operands' type by default):
    uint8/int8 operands with ``out_dtype="int32"`` stay 8-bit (VNNI targets sum them by ``vpdpbusd``; others
    in float32 when that is exact, AlterOpLayout decides); other operands are cast to it."""
    return make_call("nn.dense", [data, weight], units=units, **_summed_in(data, weight, out_dtype))


def matmul(a: Expr, b: Expr, units: int | None = None, transpose_a: bool = False, transpose_b: bool = False,
           out_dtype: str = "") -> Call:
    """``a @ b`` (2-D), optionally transposed, summed in ``out_dtype`` (the operands' type by default)."""
    return make_call("nn.matmul", [_in_dtype(a, out_dtype), _in_dtype(b, out_dtype)],
                     transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))


def batch_matmul(x: Expr, y: Expr, out_dtype: str = "", transpose_a: bool = False, transpose_b: bool = True) -> Call:
    """Batched matmul; as in TVM, ``y`` is [batch, N, K] (transposed) by default; summed in ``out_dtype`` (the
    operands' type by default)."""
    return make_call("nn.batch_matmul", [_in_dtype(x, out_dtype), _in_dtype(y, out_dtype)],
                     transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))


def bias_add(data: Expr, bias: Expr, axis: int = 1) -> Call:
    return make_call("nn.bias_add", [data, bias], axis=int(axis))


def relu(data: Expr) -> Call:
    return make_call("nn.relu", [data])


def _pool(name: str, data: Expr, pool_size: Any, strides: Any, dilation: Any, padding: Any, layout: str,
          ceil_mode: bool, **extra: Any) -> Call:
    def norm(v: Any) -> Any:
        return v if isinstance(v, int) else tuple(v)

    if layout in _TO_NCHW:  # NHWC pooled as NCHW between transposes
        return _from_nchw(_pool(name, _as_nchw(data, layout), pool_size, strides, dilation, padding, "NCHW",
                                ceil_mode, **extra), layout)
    return make_call(name, [data], pool_size=norm(pool_size), strides=norm(strides), dilation=norm(dilation),
                     padding=norm(padding), layout=layout, ceil_mode=bool(ceil_mode), **extra)


def max_pool2d(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1), dilation: Any = (1, 1),
               padding: Any = (0, 0), layout: str = "NCHW", out_layout: str = "", ceil_mode: bool = False) -> Call:
    return _pool("nn.max_pool2d", data, pool_size, strides, dilation, padding, layout, ceil_mode)


def avg_pool2d(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1), dilation: Any = (1, 1),
               padding: Any = (0, 0), layout: str = "NCHW", out_layout: str = "", ceil_mode: bool = False,
               count_include_pad: bool = False) -> Call:
    return _pool("nn.avg_pool2d", data, pool_size, strides, dilation, padding, layout, ceil_mode,
                 count_include_pad=bool(count_include_pad))


def global_avg_pool2d(data: Expr, layout: str = "NCHW", out_layout: str = "") -> Call:
    if layout in _TO_NCHW:
        return _from_nchw(make_call("nn.global_avg_pool2d", [_as_nchw(data, layout)], layout="NCHW"), layout)
    return make_call("nn.global_avg_pool2d", [data], layout=layout)


class _BatchNormResult(TupleGetItem):
    """What ``nn.batch_norm`` returns: usable as ``result[0]`` (TVM's TupleWrapper) and as the tuple itself."""

    def __init__(self, call: Call):
        self.tuple_value = call
        self.index = 0
        self.astuple_call = call

    def astuple(self) -> Call:
        return self.astuple_call

    def __getitem__(self, index: int) -> TupleGetItem:  # type: ignore[override]
        return TupleGetItem(self.astuple_call, index)

    def __len__(self) -> int:
        return 3


def batch_norm(data: Expr, gamma: Expr, beta: Expr, moving_mean: Expr, moving_var: Expr, axis: int = 1,
               epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> _BatchNormResult:
    """Inference batch norm; ``[0]`` is the output (as in TVM)."""
    call = make_call("nn.batch_norm", [data, gamma, beta, moving_mean, moving_var], axis=int(axis),
                     epsilon=float(epsilon), center=bool(center), scale=bool(scale))
    return _BatchNormResult(call)


def softmax(data: Expr, axis: int = -1) -> Call:
    return make_call("nn.softmax", [data], axis=int(axis))


def global_max_pool2d(data: Expr, layout: str = "NCHW", out_layout: str = "") -> Call:
    """The maximum over each channel's whole image (NCHW or NHWC), keeping 1x1 spatial axes."""
    if layout not in ("NCHW", "NHWC"):
        raise RelayError(f"nn.global_max_pool2d: layout {layout!r} is not one of NCHW, NHWC")
    return make_call("max", [data], axis=(2, 3) if layout == "NCHW" else (1, 2), keepdims=True)


def leaky_relu(data: Expr, alpha: float = 0.01) -> Call:
    """x where x > 0, else alpha * x."""
    x_dtype = _dtype_of(data)
    zero, slope = Constant(np.array(0, x_dtype)), Constant(np.array(alpha, x_dtype))
    return where(make_call("greater", [data, zero]), data, make_call("multiply", [data, slope]))


def layer_norm(data: Expr, gamma: Expr, beta: Expr, axis: int = -1, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True) -> Expr:
    """Normalise over the one axis ``axis`` (TVM's meaning), then scale by ``gamma`` and shift by ``beta`` (of that
    axis's size) unless ``scale`` / ``center`` are False."""
    shape = infer_type(data).shape
    ndim = len(shape)
    if not -ndim <= axis < ndim:
        raise RelayError(f"nn.layer_norm: axis {axis} is out of range for {ndim} axes")
    axis %= ndim
    x = data if axis == ndim - 1 else transpose(data, [k for k in range(ndim) if k != axis] + [axis])
    if not scale:
        gamma = Constant(np.ones(int(shape[axis]), _dtype_of(data)))
    y = _layer_norm(x, gamma, beta if center else None, axis=-1, epsilon=epsilon)
    if axis == ndim - 1:
        return y
    back = list(range(ndim - 1))
    back.insert(axis, ndim - 1)
    return transpose(y, back)


def conv1d(data: Expr, weight: Expr, strides: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
           channels: int | None = None, kernel_size: Any = None, data_layout: str = "NCW", kernel_layout: str = "OIW",
           out_layout: str = "", out_dtype: str = "") -> Expr:
    """1-D convolution of NCW data by an OIW weight: the 2-D one on a height of 1. ``padding`` is 1 or 2 ints."""
    if data_layout != "NCW" or kernel_layout != "OIW":
        raise RelayError(f"nn.conv1d: layouts {data_layout}/{kernel_layout} are not supported (NCW with OIW are)")

    def one(v: Any, name: str) -> int:
        vals = [int(v)] if isinstance(v, (int, np.integer)) else [int(a) for a in v]
        if len(vals) != 1:
            raise RelayError(f"nn.conv1d: {name} {v} must be one int")
        return vals[0]

    pads = [int(padding)] * 2 if isinstance(padding, (int, np.integer)) else [int(p) for p in padding]
    if len(pads) == 1:
        pads *= 2
    if len(pads) != 2:
        raise RelayError(f"nn.conv1d: padding {padding} must be 1 or 2 ints")
    y = conv2d(expand_dims(data, 2), expand_dims(weight, 2), strides=(1, one(strides, "strides")),
               padding=(0, pads[0], 0, pads[1]), dilation=(1, one(dilation, "dilation")), groups=groups,
               channels=channels, out_dtype=out_dtype)
    return squeeze(y, [2])


def _dtype_of(data: Expr) -> str:
    return str(infer_type(data).dtype)


def dropout(data: Expr, rate: float = 0.5) -> Expr:
    """Dropout at inference: ``data`` itself (relay here is for inference; TVM's SimplifyInference removes it)."""
    if not 0.0 <= float(rate) < 1.0:
        raise RelayError(f"nn.dropout: rate is a probability in [0, 1), got {rate}")
    return data


def batch_flatten(data: Expr) -> Call:
    return make_call("nn.batch_flatten", [data])


def pad(data: Expr, pad_width: Sequence[Sequence[int]], pad_value: float = 0.0, pad_mode: str = "constant") -> Call:
    """Constant padding: ``pad_width`` is ((before, after), ...) per axis."""
    if hasattr(pad_value, "data"):  # a relay constant, as TVM accepts
        pad_value = float(pad_value.data)
    return make_call("nn.pad", [data], pad_width=tuple(tuple(int(v) for v in p) for p in pad_width),
                     pad_value=float(pad_value), pad_mode=pad_mode)


__all__ = ["avg_pool2d", "batch_flatten", "batch_matmul", "batch_norm", "bias_add", "conv2d", "dense", "dilate",
           "conv1d", "dropout", "global_avg_pool2d", "global_max_pool2d", "layer_norm", "leaky_relu", "log_softmax",
           "lrn", "matmul", "max_pool2d", "pad", "prelu", "relu", "softmax", "upsampling",
           "upsampling3d"]
