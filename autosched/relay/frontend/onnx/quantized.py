"""ONNX converters of quantized models, as onnxruntime's quantization tool writes them: the QDQ format
(QuantizeLinear/DequantizeLinear around float ops), dynamic quantization (DynamicQuantizeLinear, MatMulInteger,
ConvInteger, and onnxruntime's fusions of them: ``com.microsoft`` MatMulIntegerToFloat and
DynamicQuantizeMatMul), the operator format (QLinearConv, QLinearMatMul, and onnxruntime's ``com.microsoft``
QGemm, QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat, QLinearLeakyRelu,
QLinearSigmoid) and block-quantized LLM weights (``com.microsoft`` MatMulNBits, dequantized at import).

uint8 activations by a constant int8 weight of zero point 0 (what quantize_static and quantize_dynamic write)
stay bytes, ``nn.conv2d`` / ``nn.dense`` with ``out_dtype="int32"``, less the zero point times the weight's sums:
AlterOpLayout runs them by VNNI's vpdpbusd where the CPU has it, and as below elsewhere. So do QDQ models'
products: a float Conv, MatMul or Gemm of such dequantized operands is rewritten into the integer product,
scaled after the sum (``_qdq_conv``, ``_qdq_matmul``).

Other integer products run in float32 where that is exact, else in int32. An 8-bit value less its zero point is an
integer of at most 9 bits, so every product is exact in float32, and every partial sum of a dot product is an
integer no larger than the sum of its terms' magnitudes: when that bound (the largest activation times the
largest column sum of the constant weight's magnitudes) is below 2^24, float32 holds each partial sum exactly, in
any order of summation. The result is then the integer the operator defines, computed by the float kernels
(packed, blocked, tuned); requantization multiplies by the scales in float32 and rounds halves to even, as
onnxruntime does."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _attrs, _GraphConverter, op_key
from autosched.relay.frontend.onnx.nn import _from_2d, conv_of, matmul_of
from autosched.relay.frontend.onnx.registry import register, rewrite
from autosched.relay.ir.expr import Expr
from autosched.relay.op.blocked import INT4_BLOCK
from autosched.relay.op.common import exact_sum_dtype, pad4

if TYPE_CHECKING:  # pragma: no cover
    import onnx

_QRANGE = {"uint8": (0, 255), "int8": (-128, 127)}
_MS = "com.microsoft."  # onnxruntime's contrib-op domain


# ------------------------------------------------------------------ QDQ: QuantizeLinear / DequantizeLinear
def _per_axis(g: _GraphConverter, node: onnx.NodeProto, i: int, attrs: dict) -> Expr:
    """Input ``i`` (a scale or zero point): a scalar, or one value per slice along ``axis`` (default 1) reshaped
    to broadcast over the data."""
    name = node.input[i]
    shape, rank = g.shape(name), len(g.shape(node.input[0]))
    v = g.tensor(name)
    if math.prod(shape) == 1:
        return relay_op.reshape(v, ()) if shape else v
    if len(shape) != 1:
        g._fail(f"{name!r} has shape {list(shape)}: only per-tensor and per-axis (1-D) values are supported "
                "(blocked quantization is not)")
    axis = int(attrs.get("axis", 1)) % rank
    return relay_op.reshape(v, (shape[0],) + (1,) * (rank - axis - 1))


def _saturated(q: Expr, dtype: str) -> Expr:
    """The float integers ``q`` clipped to ``dtype``'s range and cast to it."""
    lo, hi = _QRANGE[dtype]
    return relay_op.cast(relay_op.clip(q, float(lo), float(hi)), dtype)


@register("QuantizeLinear")
def _quantize(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """saturate(round(x / scale) + zero_point) in the zero point's type (uint8 by default, or int8), rounding
    halves to even; per tensor or per axis."""
    zp_name = g.optional(node, 2)
    dtype = g.dtype(zp_name) if zp_name else "uint8"
    if dtype not in _QRANGE:
        g._fail(f"quantizing to {dtype} is not supported (uint8 and int8 are)")
    if attrs.get("block_size", 0):
        g._fail("blocked quantization (block_size) is not supported")
    x = g.tensor(node.input[0])
    q = relay_op.round(relay_op.divide(x, _per_axis(g, node, 1, attrs)))
    if zp_name:
        q = relay_op.add(q, relay_op.cast(_per_axis(g, node, 2, attrs), g.dtype(node.input[0])))
    return _saturated(q, dtype)


@register("DequantizeLinear")
def _dequantize(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """(x - zero_point) * scale in the scale's type; per tensor or per axis. On constant weights (a QDQ model's)
    it is evaluated at build, so the layer runs on float weights."""
    if g.dtype(node.input[0]) not in ("uint8", "int8", "int32"):
        g._fail(f"dequantizing {g.dtype(node.input[0])} is not supported (uint8, int8 and int32 are)")
    if attrs.get("block_size", 0):
        g._fail("blocked quantization (block_size) is not supported")
    x = relay_op.cast(g.tensor(node.input[0]), "int32")
    zp_name = g.optional(node, 2)
    if zp_name:
        x = relay_op.subtract(x, relay_op.cast(_per_axis(g, node, 2, attrs), "int32"))
    scale = _per_axis(g, node, 1, attrs)
    return relay_op.multiply(relay_op.cast(x, g.dtype(node.input[1])), scale)


# ------------------------------------------------------------------ QDQ products run on their integers
def _dequantized_bytes(g: _GraphConverter, name: str) -> tuple[str, str | None, np.ndarray, int] | None:
    """``(q, zero point, scale, axis)`` when ``name`` is a DequantizeLinear of the 8-bit ``q`` by constant scale
    and zero point (a scalar, or one per slice along ``axis``); else None."""
    node = g.producers.get(name)
    if node is None or op_key(node) != "DequantizeLinear" or g.dtype(node.input[0]) not in _QRANGE:
        return None
    attrs = _attrs(node)
    zp = g.optional(node, 2)
    if attrs.get("block_size", 0) or not g.is_const(node.input[1]) or (zp is not None and not g.is_const(zp)):
        return None
    scale = g.value(node.input[1], "").astype(np.float32)
    return node.input[0], zp, scale, int(attrs.get("axis", 1)) % len(g.shape(node.input[0]))


def _product_scale(xs: np.ndarray, ws: np.ndarray, w_axis: int, channel_axis: int) -> np.ndarray | None:
    """x_scale * w_scale, per output channel when w's scale is (along ``channel_axis`` of w), for a QDQ product's
    int32 result; None for other layouts of the scales."""
    if xs.size != 1:
        return None
    if ws.size == 1:
        return (xs.reshape(()) * ws.reshape(())).astype(np.float32)
    return (xs.reshape(()) * ws.reshape(-1)).astype(np.float32) if w_axis == channel_axis else None


@rewrite("Conv")
def _qdq_conv(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr | None:
    """A float Conv of dequantized uint8 data (one scale and zero point) and a dequantized constant int8 filter
    (zero point 0, a scale per tensor or per output channel), as quantize_static's QDQ format writes it, run on
    the integers: the int32 convolution of the bytes (QLinearConv's: VNNI's vpdpbusd where the CPU has it) times
    x_scale * w_scale, plus the bias. It differs from the float reference by that reference's roundings."""
    x, w = _dequantized_bytes(g, node.input[0]), _dequantized_bytes(g, node.input[1])
    if x is None or w is None or not _bytes_by_filter(g, x[0], x[1], w[0], w[1]):
        return None
    scale = _product_scale(x[2], w[2], w[3], 0)
    if scale is None:
        return None
    nd = len(g.shape(w[0])) - 2
    y = relay_op.multiply(relay_op.cast(_bytes_conv(g, node, attrs, x[0], x[1], w[0]), "float32"),
                          relay_ir.const(scale.reshape(-1, 1, 1) if scale.ndim else scale))
    bias = g.optional(node, 2)
    if bias is not None:
        y = relay_op.nn.bias_add(y, g.tensor(bias), axis=1)
    return _from_2d(y, nd)


@rewrite("MatMul", "Gemm")
def _qdq_matmul(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr | None:
    """A float MatMul (or Gemm, alpha and beta 1, A not transposed) of dequantized uint8 activations (one scale and
    zero point) by a dequantized constant 2-D int8 weight (zero point 0, a scale per tensor or per column), as the
    QDQ format writes it, run on the integers: QLinearMatMul's int32 product of the bytes (VNNI's vpdpbusd where
    the CPU has it) times a_scale * b_scale, plus Gemm's C."""
    gemm = node.op_type == "Gemm"
    if gemm and (attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0):
        return None
    a, b = _dequantized_bytes(g, node.input[0]), _dequantized_bytes(g, node.input[1])
    if a is None or b is None or not _bytes_by_weight(g, a[0], a[1], b[0], b[1]):
        return None
    trans_b = gemm and attrs.get("transB", 0)
    scale = _product_scale(a[2], b[2], b[3], 0 if trans_b else 1)
    if scale is None:
        return None
    w = g.value(b[0], "the weight")
    y = relay_op.multiply(relay_op.cast(_bytes_dense(g, a[0], a[1], w if trans_b else w.T), "float32"),
                          relay_ir.const(scale))
    c = g.optional(node, 2) if gemm else None
    return relay_op.add(y, g.tensor(c)) if c is not None else y


# ------------------------------------------------------------------ dynamic quantization
@register("DynamicQuantizeLinear")
def _dynamic_quantize(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Expr]:
    """uint8 values, their scale and zero point from the tensor's range (0 included): scale = (max - min) / 255
    (1 when the range is empty), zero point = round(-min / scale), y = saturate(round(x / scale) + zero point)."""
    if g.dtype(node.input[0]) != "float32":
        g._fail(f"the input is {g.dtype(node.input[0])}; DynamicQuantizeLinear takes float32")
    x = g.tensor(node.input[0])
    zero = relay_ir.const(np.float32(0))
    hi = relay_op.maximum(relay_op.max(x), zero)
    lo = relay_op.minimum(relay_op.min(x), zero)
    span = relay_op.where(relay_op.compare("equal", hi, lo), relay_ir.const(np.float32(1)), relay_op.subtract(hi, lo))
    scale = relay_op.divide(span, relay_ir.const(np.float32(255)))
    zp = relay_op.clip(relay_op.round(relay_op.negative(relay_op.divide(lo, scale))), 0.0, 255.0)
    y = _saturated(relay_op.add(relay_op.round(relay_op.divide(x, scale)), zp), "uint8")
    return [y, scale, relay_op.cast(zp, "uint8")]


# ------------------------------------------------------------------ integer products
def _int_range(g: _GraphConverter, name: str) -> tuple[int, int]:
    dtype = g.dtype(name)
    if dtype not in _QRANGE:
        g._fail(f"input {name!r} is {dtype}; quantized operands must be uint8 or int8")
    return _QRANGE[dtype]


def _magnitude(g: _GraphConverter, name: str, zp: str | None) -> int:
    """The largest |x - zero_point| of the 8-bit tensor ``name`` (runtime values: its type's whole range)."""
    lo, hi = _int_range(g, name)
    if zp is None:
        return max(-lo, hi)
    if g.is_const(zp):
        z = g.value(zp, "the zero point").astype(np.int64)
        return int(max(hi - z.min(), z.max() - lo))
    return hi - lo


def _const_shifted(g: _GraphConverter, name: str, zp: str | None, zp_shape: Sequence[int]) -> np.ndarray:
    """The constant 8-bit tensor ``name`` less its zero point (a scalar, or one per slice, reshaped to
    ``zp_shape`` to broadcast), as int64."""
    _int_range(g, name)
    v = g.value(name, "the weight").astype(np.int64)
    if zp is None:
        return v
    z = g.value(zp, "the weight's zero point").astype(np.int64)
    return v - (z.reshape(()) if z.size == 1 else z.reshape(zp_shape))


def _shifted(g: _GraphConverter, name: str, zp: str | None, dtype: str, zp_shape: Sequence[int] = ()) -> Expr:
    """x - zero_point in ``dtype`` for the 8-bit tensor ``name``; a zero point of several values is reshaped to
    ``zp_shape`` to broadcast."""
    _int_range(g, name)
    x = relay_op.cast(g.tensor(name), dtype)
    if zp is None:
        return x
    if g.is_const(zp):
        z = g.value(zp, "the zero point").astype(dtype)
        if not z.any():
            return x
        return relay_op.subtract(x, relay_ir.const(z.reshape(()) if z.size == 1 else z.reshape(zp_shape)))
    z = relay_op.cast(g.tensor(zp), dtype)
    z = relay_op.reshape(z, () if math.prod(g.shape(zp)) == 1 else tuple(zp_shape))
    return relay_op.subtract(x, z)


def _integer_matmul(g: _GraphConverter, a: str, azp: str | None, b: str, bzp: str | None,
                    b_layout: str = "kn", bias_bound: float = 0.0) -> tuple[Expr, str]:
    """(a - azp) @ (b - bzp) with numpy.matmul's shapes (``b_layout`` "nk": a 2-D b stored transposed, QGemm's
    transB), and the dtype it is computed in. a's zero point: a scalar or one per row; b's: one per column."""
    sa, sb = g.shape(a), g.shape(b)
    if _bytes_by_weight(g, a, azp, b, bzp):
        return _bytes_dense(g, a, azp, g.value(b, "the weight") if b_layout == "nk" else g.value(b, "").T), "int32"
    if b_layout == "nk":
        sb = (sb[1], sb[0])
    rows = (sa[-2], 1) if len(sa) >= 2 else ()
    a_mag = _magnitude(g, a, azp)
    if g.is_const(b):
        w = _const_shifted(g, b, bzp, (-1, 1) if b_layout == "nk" else (-1,))
        w = w.T if b_layout == "nk" else w
        dtype = exact_sum_dtype(a_mag * float(np.abs(w).sum(axis=-2 if w.ndim > 1 else 0).max()) + bias_bound)
        y, b_const = relay_ir.const(np.ascontiguousarray(w.astype(dtype))), True
    else:
        dtype = exact_sum_dtype(a_mag * _magnitude(g, b, bzp) * float(sb[-2 if len(sb) > 1 else 0]) + bias_bound)
        y = _shifted(g, b, bzp, dtype, (-1, 1) if b_layout == "nk" else (-1,))
        y, b_const = (relay_op.transpose(y, (1, 0)) if b_layout == "nk" else y), False
    x = _shifted(g, a, azp, dtype, rows)
    return matmul_of(g, x, y, sa, sb, b_const), dtype


def _bytes_by_weight(g: _GraphConverter, a: str, azp: str | None, b: str, bzp: str | None) -> bool:
    """Whether ``a @ b`` is uint8 activations (one zero point, any) by a constant 2-D int8 weight of zero point 0:
    what quantize_dynamic writes, and what VNNI's vpdpbusd multiplies as it is."""
    return (g.dtype(a) == "uint8" and len(g.shape(a)) >= 2 and g.is_const(b) and g.dtype(b) == "int8"
            and len(g.shape(b)) == 2 and (bzp is None or (g.is_const(bzp) and not g.value(bzp, "").any()))
            and (azp is None or math.prod(g.shape(azp)) == 1))


def _bytes_dense(g: _GraphConverter, a: str, azp: str | None, w_nk: np.ndarray) -> Expr:
    """(a - azp) @ w_nk.T in int32 as ``nn.dense(a, w_nk, out_dtype="int32")`` on the bytes, less azp times the
    weight's row sums: AlterOpLayout keeps the bytes for VNNI targets and runs the float32 kernels elsewhere
    where that is exact."""
    acc = relay_op.make_call("nn.dense", [g.tensor(a), relay_ir.const(np.ascontiguousarray(w_nk))], units=None,
                             out_dtype="int32")
    if azp is None or (g.is_const(azp) and not g.value(azp, "").any()):
        return acc
    zp = relay_op.reshape(relay_op.cast(g.tensor(azp), "int32"), ())
    sums = relay_ir.const(w_nk.astype(np.int32).sum(axis=1, dtype=np.int32))
    return relay_op.subtract(acc, relay_op.multiply(zp, sums))


def _integer_conv(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, x: str, xzp: str | None, w: str,
                  wzp: str | None, bias_bound: float = 0.0) -> tuple[Expr, str]:
    """The 4-D result of the Conv-like ``node`` on (x - xzp) and (w - wzp) (the weight's zero point a scalar or
    one per output channel), and the dtype it is computed in. The data's padding is its zero point, so the
    shifted data pads with 0."""
    if _bytes_by_filter(g, x, xzp, w, wzp):
        return _bytes_conv(g, node, attrs, x, xzp, w), "int32"
    wshape = g.shape(w)
    per_out = (-1,) + (1,) * (len(wshape) - 1)
    x_mag = _magnitude(g, x, xzp)
    if g.is_const(w):
        wv = _const_shifted(g, w, wzp, per_out)
        dtype = exact_sum_dtype(x_mag * float(np.abs(wv).reshape(wv.shape[0], -1).sum(axis=1).max()) + bias_bound)
        weight = relay_ir.const(np.ascontiguousarray(wv.astype(dtype)))
    else:
        dtype = exact_sum_dtype(x_mag * _magnitude(g, w, wzp) * math.prod(wshape[1:]) + bias_bound)
        weight = _shifted(g, w, wzp, dtype, per_out)
    if xzp is not None and math.prod(g.shape(xzp)) != 1:
        g._fail(f"the data's zero point {xzp!r} has shape {list(g.shape(xzp))}; it must be one value")
    return conv_of(g, node, attrs, _shifted(g, x, xzp, dtype), weight, wshape), dtype


def _bytes_by_filter(g: _GraphConverter, x: str, xzp: str | None, w: str, wzp: str | None) -> bool:
    """Whether a convolution is uint8 data (one constant zero point, any) by a constant int8 filter of zero point
    0: what onnxruntime's static quantization writes (uint8 activations, symmetric int8 weights), and what
    VNNI's vpdpbusd multiplies as it is."""
    return (g.dtype(x) == "uint8" and g.is_const(w) and g.dtype(w) == "int8"
            and (wzp is None or (g.is_const(wzp) and not g.value(wzp, "").any()))
            and (xzp is None or (g.is_const(xzp) and math.prod(g.shape(xzp)) == 1)))


def _bytes_conv(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, x: str, xzp: str | None, w: str) -> Expr:
    """(x - xzp) conv w in int32 as ``nn.conv2d(x, w, out_dtype="int32")`` on the bytes, less xzp times each
    filter's sum; the padding, which is xzp in x's terms, explicit when xzp is not 0. AlterOpLayout keeps the bytes
    for VNNI targets and runs the float32 kernels elsewhere where that is exact."""
    wv = g.value(w, "the weight")
    conv = conv_of(g, node, attrs, g.tensor(x), relay_ir.const(wv), g.shape(w))
    data, weight = conv.args
    zp = int(g.value(xzp, "the zero point").reshape(())) if xzp is not None else 0
    conv_attrs = {**conv.attrs, "out_dtype": "int32"}
    pt, pl, pb, pr = pad4(conv.attrs["padding"], "nn.conv2d")
    if zp and (pt or pl or pb or pr):
        data = relay_op.nn.pad(data, [(0, 0), (0, 0), (pt, pb), (pl, pr)], pad_value=float(zp))
        conv_attrs["padding"] = (0, 0, 0, 0)
    acc = relay_ir.Call(conv.op, [data, weight], conv_attrs)
    if not zp:
        return acc
    sums = zp * wv.astype(np.int64).reshape(wv.shape[0], -1).sum(axis=1)
    return relay_op.subtract(acc, relay_ir.const(sums.astype(np.int32).reshape(-1, 1, 1)))


def _as_int32(acc: Expr, dtype: str) -> Expr:
    return acc if dtype == "int32" else relay_op.cast(acc, "int32")


def _as_float(acc: Expr, dtype: str) -> Expr:
    return acc if dtype == "float32" else relay_op.cast(acc, "float32")


@register("MatMulInteger")
def _matmul_integer(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """(A - a_zero_point) @ (B - b_zero_point) in int32 (MatMul's shapes; a's zero point per tensor or per row,
    b's per tensor or per column)."""
    acc, dtype = _integer_matmul(g, node.input[0], g.optional(node, 2), node.input[1], g.optional(node, 3))
    return _as_int32(acc, dtype)


@register("ConvInteger")
def _conv_integer(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Conv of (x - x_zero_point) and (w - w_zero_point) in int32 (w's zero point per tensor or per output
    channel)."""
    acc, dtype = _integer_conv(g, node, attrs, node.input[0], g.optional(node, 2), node.input[1],
                               g.optional(node, 3))
    return _from_2d(_as_int32(acc, dtype), len(g.shape(node.input[1])) - 2)


# ------------------------------------------------------------------ the operator format (QLinear*)
def _scale(g: _GraphConverter, name: str, what: str) -> np.ndarray:
    """A constant float32 scale (a scalar, or 1-D per channel)."""
    if not g.is_const(name):
        g._fail(f"{what} {name!r} is computed at run time; quantized operators need constant scales")
    v = g.value(name, what).astype(np.float32)
    if v.ndim > 1 and v.size != 1:
        g._fail(f"{what} {name!r} has shape {list(v.shape)}: a scalar or one value per channel is supported")
    return v.reshape(()) if v.size == 1 else v.reshape(-1)


def _zero_point_of(g: _GraphConverter, name: str | None, default_dtype: str = "uint8") -> tuple[np.ndarray, str]:
    """A constant zero point as float32 (0 when absent) and the quantized dtype it gives."""
    if name is None:
        return np.float32(0), default_dtype
    dtype = g.dtype(name)
    if dtype not in _QRANGE:
        g._fail(f"zero point {name!r} is {dtype}; uint8 and int8 are supported")
    if not g.is_const(name):
        g._fail(f"zero point {name!r} is computed at run time; quantized operators need constant zero points")
    v = g.value(name, "the zero point").astype(np.float32)
    return (v.reshape(()) if v.size == 1 else v.reshape(-1)), dtype


def _requantized(g: _GraphConverter, acc: Expr, multiplier: np.ndarray, y_zp: str | None,
                 channel_shape: Sequence[int] = ()) -> Expr:
    """saturate(round(acc * multiplier) + y_zero_point): onnxruntime's requantization of an integer accumulator
    (a float32 multiply, halves rounded to even); a multiplier per channel is reshaped to ``channel_shape``."""
    zp, dtype = _zero_point_of(g, y_zp)
    if zp.ndim:
        g._fail(f"the output's zero point {y_zp!r} has {zp.size} values; it must be one")
    m = multiplier if multiplier.ndim == 0 else multiplier.reshape(channel_shape)
    q = relay_op.round(relay_op.multiply(acc, relay_ir.const(m.astype(np.float32))))
    if zp != 0:
        q = relay_op.add(q, relay_ir.const(np.float32(zp)))
    return _saturated(q, dtype)


def _bias_int32(g: _GraphConverter, name: str | None, dtype: str, channel_shape: Sequence[int]) -> Expr | None:
    if name is None:
        return None
    if g.dtype(name) != "int32" or not g.is_const(name):
        g._fail(f"the bias {name!r} must be a constant int32 tensor")
    return relay_ir.const(g.value(name, "the bias").astype(dtype).reshape(channel_shape))


def _bias_bound(g: _GraphConverter, name: str | None) -> float:
    return float(np.abs(g.value(name, "the bias").astype(np.int64)).max()) if name and g.is_const(name) else 0.0


@register("QLinearConv")
def _qlinear_conv(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Conv of quantized x and w (w per tensor or per output channel) plus an int32 bias, requantized to y's
    scale and zero point."""
    x, xs, xzp, w, ws, wzp, ys, yzp = node.input[:8]
    bias = g.optional(node, 8)
    acc, dtype = _integer_conv(g, node, attrs, x, xzp, w, wzp, _bias_bound(g, bias))
    b = _bias_int32(g, bias, dtype, (-1, 1, 1))
    if b is not None:
        acc = relay_op.add(acc, b)
    multiplier = _scale(g, xs, "the data's scale") * _scale(g, ws, "the weight's scale") / _scale(g, ys, "y_scale")
    out = _requantized(g, _as_float(acc, dtype), multiplier, yzp, (-1, 1, 1))
    return _from_2d(out, len(g.shape(w)) - 2)


@register("QLinearMatMul")
def _qlinear_matmul(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """MatMul of quantized a and b (b per tensor or per column), requantized to y's scale and zero point."""
    a, as_, azp, b, bs, bzp, ys, yzp = node.input[:8]
    if _scale(g, as_, "a_scale").ndim or _scale(g, ys, "y_scale").ndim:
        g._fail("a_scale and y_scale must be one value each (per-row scales of a are not supported)")
    acc, dtype = _integer_matmul(g, a, azp, b, bzp)
    multiplier = _scale(g, as_, "a_scale") * _scale(g, bs, "b_scale") / _scale(g, ys, "y_scale")
    return _requantized(g, _as_float(acc, dtype), multiplier, yzp, (-1,))


@register(_MS + "QGemm")
def _qgemm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """onnxruntime's Gemm of quantized A and B (B per tensor or per column) plus an int32 C (at scale alpha *
    a_scale * b_scale, zero point 0): requantized to y's scale and zero point, or float32 when y_scale is
    absent."""
    a, as_, azp, b, bs, bzp = node.input[:6]
    c, ys, yzp = g.optional(node, 6), g.optional(node, 7), g.optional(node, 8)
    if attrs.get("transA", 0):
        g._fail("transA=1 is not supported")
    for i in (0, 3):
        if len(g.shape(node.input[i])) != 2:
            g._fail(f"input {node.input[i]!r} must be 2-D")
    acc, dtype = _integer_matmul(g, a, azp, b, bzp, "nk" if attrs.get("transB", 0) else "kn", _bias_bound(g, c))
    bias = _bias_int32(g, c, dtype, (-1,))
    if bias is not None:
        acc = relay_op.add(acc, bias)
    scale = np.float32(attrs.get("alpha", 1.0)) * _scale(g, as_, "a_scale") * _scale(g, bs, "b_scale")
    if ys is None:
        return relay_op.multiply(_as_float(acc, dtype), relay_ir.const(scale.astype(np.float32)))
    return _requantized(g, _as_float(acc, dtype), scale / _scale(g, ys, "y_scale"), yzp, (-1,))


def _dequantized_float(g: _GraphConverter, x: str, xs: str, xzp: str | None) -> Expr:
    """(x - zero_point) * scale in float32, a tensor's scale and zero point one value each."""
    s = _scale(g, xs, "the scale")
    if s.ndim:
        g._fail(f"the scale {xs!r} has {s.size} values; this operator takes one")
    return relay_op.multiply(_shifted(g, x, xzp, "float32"), relay_ir.const(s))


def _quantized(g: _GraphConverter, value: Expr, ys: str, yzp: str | None) -> Expr:
    """saturate(round(value / y_scale) + y_zero_point), as QuantizeLinear."""
    q = relay_op.round(relay_op.divide(value, relay_ir.const(_scale(g, ys, "y_scale"))))
    zp, dtype = _zero_point_of(g, yzp)
    return _saturated(q if zp == 0 else relay_op.add(q, relay_ir.const(np.float32(zp))), dtype)


def _binary_qlinear(op: str):
    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
        a, as_, azp, b, bs, bzp, cs = node.input[:7]
        x, y = _dequantized_float(g, a, as_, azp or None), _dequantized_float(g, b, bs, bzp or None)
        value = relay_op.add(x, y) if op == "add" else relay_op.multiply(x, y)
        return _quantized(g, value, cs, g.optional(node, 7))

    convert.__name__ = f"_qlinear_{op}"
    convert.__doc__ = (f"onnxruntime's QLinear{op.capitalize()}: the {op} of the dequantized tensors, quantized "
                       "(its x86 kernels use fixed-point multipliers instead, one step apart at some ties).")
    return convert


register(_MS + "QLinearAdd")(_binary_qlinear("add"))
register(_MS + "QLinearMul")(_binary_qlinear("mul"))


def _channels_first(g: _GraphConverter, attrs: dict) -> dict:
    if attrs.get("channels_last", 0):
        g._fail("channels_last=1 (NHWC data) is not supported")
    return {k: v for k, v in attrs.items() if k != "channels_last"}


def _unary_qlinear(op_type: str, float_attrs):
    """onnxruntime's QLinear form of a float op: the dequantized input through ``op_type``, quantized again (what
    onnxruntime's lookup tables hold, value by value)."""

    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
        x, xs, xzp, ys = node.input[:4]
        yzp = g.optional(node, 4)
        v = g.convert_as(node, op_type, [_dequantized_float(g, x, xs, xzp or None)], float_attrs(g, attrs))
        return _quantized(g, v, ys, yzp)

    convert.__name__ = f"_qlinear_{op_type.lower()}"
    convert.__doc__ = f"onnxruntime's QLinear{op_type}: {op_type} between dequantizing and quantizing."
    return convert


for _op, _float_attrs in (("LeakyRelu", lambda g, a: {"alpha": float(a.get("alpha", 0.01))}),
                          ("Sigmoid", lambda g, a: {}),
                          ("AveragePool", _channels_first),
                          ("GlobalAveragePool", _channels_first)):
    register(_MS + "QLinear" + _op)(_unary_qlinear(_op, _float_attrs))


@register(_MS + "QLinearConcat")
def _qlinear_concat(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """onnxruntime's QLinearConcat (Y_scale, Y_zero_point, then a (tensor, scale, zero point) triple per input):
    the dequantized inputs concatenated, quantized again."""
    ys, yzp, rest = node.input[0], node.input[1] or None, list(node.input[2:])
    if len(rest) % 3:
        g._fail(f"{len(rest)} inputs after Y_scale and Y_zero_point; they must come in (tensor, scale, zero point)")
    values = [_dequantized_float(g, rest[i], rest[i + 1], rest[i + 2] or None) for i in range(0, len(rest), 3)]
    return _quantized(g, g.convert_as(node, "Concat", values, {"axis": int(attrs["axis"])}), ys, yzp)


# ------------------------------------------------------------------ onnxruntime's fused integer matmuls
def _scaled_float(g: _GraphConverter, acc: Expr, dtype: str, scales: Sequence[str], bias: str | None) -> Expr:
    """The integer product ``acc`` as float32, times the scales (each a scalar, or one per column), plus bias."""
    y = _as_float(acc, dtype)
    for s in scales:
        y = relay_op.multiply(y, relay_ir.const(g.value(s, "").astype(np.float32)) if g.is_const(s) else
                              relay_op.cast(g.tensor(s), "float32"))
    return y if bias is None else relay_op.add(y, g.tensor(bias))


@register(_MS + "MatMulIntegerToFloat")
def _matmul_integer_to_float(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """(A - a_zero_point) @ (B - b_zero_point) * a_scale * b_scale (+ bias), in float32: what onnxruntime's graph
    fusion makes of DynamicQuantizeLinear, MatMulInteger and the scaling after it."""
    acc, dtype = _integer_matmul(g, node.input[0], g.optional(node, 4), node.input[1], g.optional(node, 5))
    return _scaled_float(g, acc, dtype, node.input[2:4], g.optional(node, 6))


@register(_MS + "DynamicQuantizeMatMul")
def _dynamic_quantize_matmul(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """A quantized to uint8 by its range (as DynamicQuantizeLinear), times (B - b_zero_point), times both scales
    (+ bias), in float32."""
    names = [f"{node.output[0]}/{part}" for part in ("a_q", "a_scale", "a_zero_point")]
    for name, value in zip(names, g.convert_as(node, "DynamicQuantizeLinear", [node.input[0]], {})):
        g.exprs[name] = value
    acc, dtype = _integer_matmul(g, names[0], names[2], node.input[1], g.optional(node, 3))
    return _scaled_float(g, acc, dtype, [names[1], node.input[2]], g.optional(node, 4))


def _unpack_bits(packed: np.ndarray, bits: int) -> np.ndarray:
    """The ``bits``-bit values packed into the last axis of ``packed`` (uint8), lowest bits first."""
    per = 8 // bits
    shifts = np.arange(per, dtype=np.uint8) * bits
    out = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return out.reshape(*packed.shape[:-1], packed.shape[-1] * per)


@register(_MS + "MatMulNBits")
def _matmul_nbits(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """A @ W (+ bias) for W [K, N] stored in blocks of ``block_size`` ``bits``-bit values along K (LLM weights
    quantized to 4 bits), each block with its scale and zero point (packed like the values, default 2^(bits-1),
    or floats): 4-bit weights stay 4-bit, dequantized in the kernel's loop (``nn.dense_int4``); others (and
    shapes it does not take) are dequantized at import for the float kernels."""
    k, n = int(attrs["K"]), int(attrs["N"])
    bits, block = int(attrs.get("bits", 4)), int(attrs["block_size"])
    if bits not in (2, 4, 8):
        g._fail(f"bits={bits} is not supported (2, 4 or 8)")
    if g.optional(node, 4) is not None:
        g._fail("g_idx (act-order block indices) is not supported")
    blocks = -(-k // block)
    q = _unpack_bits(g.value(node.input[1], "the packed weight").astype(np.uint8).reshape(n, -1), bits)
    q = q[:, :blocks * block].reshape(n, blocks, block).astype(np.float32)
    scales = g.value(node.input[2], "the scales").astype(np.float32).reshape(n, blocks, 1)
    zp_name = g.optional(node, 3)
    if zp_name is None:
        zp = np.float32(1 << (bits - 1))
    else:
        z = g.value(zp_name, "the zero points")
        if z.dtype == np.uint8:
            zp = _unpack_bits(z.reshape(n, -1), bits)[:, :blocks].astype(np.float32).reshape(n, blocks, 1)
        else:
            zp = z.astype(np.float32).reshape(n, blocks, 1)
    dtype = g.dtype(node.input[0])
    sa = g.shape(node.input[0])
    if bits == 4 and n % INT4_BLOCK == 0 and k == blocks * block and block % 2 == 0 and dtype == "float32" \
            and len(sa) >= 2:
        y = _int4_dense(g.tensor(node.input[0]), q.astype(np.uint8), scales, zp, block)
    else:
        w = ((q - zp) * scales).reshape(n, blocks * block)[:, :k]
        y = matmul_of(g, g.tensor(node.input[0]), relay_ir.const(np.ascontiguousarray(w.T.astype(dtype))), sa,
                      (k, n), True)
    bias = g.optional(node, 5)
    return y if bias is None else relay_op.add(y, g.tensor(bias))


def _int4_dense(a: Expr, q: np.ndarray, scales: np.ndarray, zp: np.ndarray, block: int) -> Expr:
    """``nn.dense_int4`` of ``a`` by the 4-bit values ``q`` [N, blocks, block] with their scales and zero points
    ([N, blocks, 1], or one zero point): two k a byte (even k in the low nibble), 16 columns side by side, so
    the weight stays at half a byte a value and is dequantized in the kernel's loop."""
    n, blocks, _ = q.shape
    pairs = q.reshape(n // INT4_BLOCK, INT4_BLOCK, blocks * block // 2, 2)
    packed = (pairs[..., 0] | (pairs[..., 1] << 4)).transpose(0, 2, 1)
    zs = np.broadcast_to(np.asarray(zp, np.float32) * scales, scales.shape)

    def per_block(v: np.ndarray) -> np.ndarray:  # [N, blocks, 1] -> [N/16, blocks, 16]
        return np.ascontiguousarray(v.reshape(n // INT4_BLOCK, INT4_BLOCK, blocks).transpose(0, 2, 1))

    return relay_op.make_call("nn.dense_int4", [a, relay_ir.const(np.ascontiguousarray(packed)),
                                                relay_ir.const(per_block(scales)), relay_ir.const(per_block(zs))],
                              block_size=block)
