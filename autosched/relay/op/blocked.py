"""Relay ops of the blocked-channel layouts that AlterOpLayout rewrites a model into (TVM's names in brackets):

- ``layout_transform`` (same): NCHW <-> NCHW[x]c and NCHW[x]c <-> NCHW[y]c;
- ``nn.conv2d_nchwc`` (``nn.contrib_conv2d_NCHWc``): data NCHW[x]c (or NCHW for x = 1: the stem), weights
  OIHW[x]i[y]o packed ahead of time, output NCHW[y]c; groups;
- ``nn.depthwise_conv2d_nchwc`` (``nn.contrib_depthwise_conv2d_NCHWc``): weights [C/x, 1, KH, KW, 1, x];
- ``nn.dense_pack`` (``nn.contrib_dense_pack``): weights [units/x, in, x];
- ``nn.dense_vnni``: uint8 data, int8 weights [units/x, in/4, x, 4], int32 sums (VNNI's ``vpdpbusd``);
- ``nn.conv2d_nchwc_vnni``: uint8 data NCHW[x]c, int8 weights [O/y, I/x, KH, KW, x/4, y, 4], int32 sums;
- ``nn.dense_i16``, ``nn.conv2d_nchwc_i16``: the same in int16 pairs (``pmaddwd``), 8-bit operands widened on
  CPUs without VNNI: weights [units/x, in/2, x, 2] and [O/y, I/x, KH, KW, x/2, y, 2];
- ``nn.dense_int4``: float32 data, 4-bit weights packed [N/16, K/2, 16] with scales per block of k, dequantized
  in the loop (an LLM's MatMulNBits).

Pooling takes ``layout="NCHW16c"`` on the plain ops (``nn.max_pool2d``, ``nn.avg_pool2d``,
``nn.global_avg_pool2d``). The computes are those of the blocked workloads (autosched/workloads/blocked_layout.py);
the default schedules are in autosched/relay/op/schedules.py.
"""

from __future__ import annotations

import math
from typing import Any

from autosched import te
from autosched.codegen.ops import DOT2_I16, DOT4_U8S8, DOTS
from autosched.relay.ir.expr import RelayError, TensorType
from autosched.relay.op import schedules
from autosched.relay.op.common import _operands, _pair, _same_dtype, pad4
from autosched.relay.op.nn._nn import _canon_spatial, channel_block_of
from autosched.relay.op.op import INJECTIVE, OUT_ELEMWISE_FUSABLE, OpDef, make_call, register_op
from autosched.te import expr as E
from autosched.workloads.blocked_layout import (
    conv2d_nchwc_compute,
    conv2d_winograd_nchwc_compute,
    dense_pack_compute,
    depthwise_conv2d_nchwc_compute,
    pad_blocked,
)


# ------------------------------------------------------------ layout_transform
def _nchw_shape(shape: tuple[int, ...], layout: str, op: str) -> tuple[int, int, int, int]:
    block = channel_block_of(layout, op)
    if block is None:
        if len(shape) != 4:
            raise RelayError(f"{op}: data in layout NCHW must be 4-D, got shape {shape}")
        return shape  # type: ignore[return-value]
    if len(shape) != 5 or shape[4] != block:
        raise RelayError(f"{op}: data in layout {layout} must be [N, C/{block}, H, W, {block}], got shape {shape}")
    return shape[0], shape[1] * block, shape[2], shape[3]


def _in_layout(nchw: tuple[int, int, int, int], layout: str, op: str) -> tuple[int, ...]:
    N, C, H, W = nchw
    block = channel_block_of(layout, op)
    if block is None:
        return nchw
    if C % block:
        raise RelayError(f"{op}: {C} channels do not divide into blocks of {block} ({layout})")
    return (N, C // block, H, W, block)


def _layout_transform_rel(types, attrs):
    op = "layout_transform"
    (x,) = _operands(types, op, "data")
    nchw = _nchw_shape(x.shape, attrs["src_layout"], op)
    return TensorType(_in_layout(nchw, attrs["dst_layout"], op), x.dtype)


def _layout_transform_compute(inputs, attrs, out_type):
    (x,) = inputs
    src = channel_block_of(attrs["src_layout"], "layout_transform")
    dst = channel_block_of(attrs["dst_layout"], "layout_transform")

    def read(n, c, y, w):  # the element at logical NCHW index (n, c, y, w)
        return x[n, c, y, w] if src is None else x[n, c // src, y, w, c % src]

    if dst is None:
        return te.compute(out_type.shape, lambda n, c, y, w: read(n, c, y, w), name="layout_transform",
                          tag="layout_transform")
    return te.compute(out_type.shape, lambda n, cb, y, w, b: read(n, cb * dst + b, y, w), name="layout_transform",
                      tag="layout_transform")


register_op(OpDef("layout_transform", _layout_transform_rel, _layout_transform_compute, INJECTIVE, num_inputs=1,
                  attrs={"src_layout": "NCHW", "dst_layout": "NCHW"}, schedule=schedules.layout_transform,
                  doc="NCHW <-> NCHW[x]c, or NCHW[x]c <-> NCHW[y]c"))


def layout_transform(data: Any, src_layout: str, dst_layout: str) -> Any:
    """``data`` moved from one layout to another: a permutation of the same axes (NCHW <-> NHWC) is a transpose;
    NCHW <-> NCHW[x]c and NCHW[x]c <-> NCHW[y]c regroup the channels into blocks of x."""
    src, dst = str(src_layout), str(dst_layout)
    if src.isalpha() and dst.isalpha() and sorted(src) == sorted(dst) and len(set(src)) == len(src):
        return data if src == dst else make_call("transpose", [data], axes=tuple(src.index(a) for a in dst))
    return make_call("layout_transform", [data], src_layout=src, dst_layout=dst)


# ------------------------------------------------------------------- conv2d
def _blocked_conv_geometry(data: TensorType, weight: TensorType, attrs: dict, op: str):
    """``(N, CI, H, W, ib, OCB, ICBg, KH, KW, ib_w, ob, OH, OW)`` of a blocked convolution, checked."""
    N, CI, H, W = _nchw_shape(data.shape, attrs["data_layout"], op)
    ib = channel_block_of(attrs["data_layout"], op) or 1
    if len(weight.shape) != 6:
        raise RelayError(f"{op}: weight must be 6-D [O/y, I/x, KH, KW, x, y] ({attrs['kernel_layout']}), "
                         f"got shape {weight.shape}")
    OCB, ICBg, KH, KW, ibw, ob = weight.shape
    if attrs["kernel_layout"] != f"OIHW{ibw}i{ob}o" or attrs["out_layout"] != f"NCHW{ob}c":
        raise RelayError(f"{op}: weight shape {weight.shape} is in OIHW{ibw}i{ob}o with output NCHW{ob}c, but the "
                         f"attributes say {attrs['kernel_layout']} and {attrs['out_layout']}")
    OH, OW = _blocked_out_size(H, W, KH, KW, attrs, op)
    return N, CI, H, W, ib, OCB, ICBg, KH, KW, ibw, ob, OH, OW


def _blocked_out_size(H: int, W: int, KH: int, KW: int, attrs: dict, op: str) -> tuple[int, int]:
    sh, sw = _pair(attrs["strides"], op, "strides")
    dh, dw = _pair(attrs["dilation"], op, "dilation")
    pt, pl, pb, pr = pad4(attrs["padding"], op)
    return (H + pt + pb - (KH - 1) * dh - 1) // sh + 1, (W + pl + pr - (KW - 1) * dw - 1) // sw + 1


def _canon_blocked(attrs: dict) -> dict:
    """:func:`_canon_spatial`, and no dilation when it is 1: task keys (and tuning records) of the blocked
    convolutions are what they were before they took one."""
    out = _canon_spatial(attrs)
    if out.get("dilation") == [1, 1]:
        del out["dilation"]
    return out


def _conv2d_nchwc_rel(types, attrs):
    op = "nn.conv2d_nchwc"
    d, w = _operands(types, op, "data", "weight")
    N, CI, H, W, ib, OCB, ICBg, KH, KW, ibw, ob, OH, OW = _blocked_conv_geometry(d, w, attrs, op)
    g = int(attrs["groups"])
    if ibw != ib or ICBg * ib * g != CI or OCB % g:
        raise RelayError(f"{op}: data {d.shape} ({attrs['data_layout']}) and weight {w.shape} do not match with "
                         f"groups={g}")
    if OH <= 0 or OW <= 0:
        raise RelayError(f"{op}: data {d.shape} with weight {w.shape} gives an empty output {OH}x{OW}")
    return TensorType((N, OCB, OH, OW, ob), _same_dtype(op, d, w))


def _conv2d_nchwc_compute(inputs, attrs, out_type):
    data, weight = inputs
    return conv2d_nchwc_compute(data, weight, _pair(attrs["strides"], "nn.conv2d_nchwc", "strides"),
                                pad4(attrs["padding"], "nn.conv2d_nchwc"), int(attrs["groups"]),
                                name="conv2d_nchwc", dilation=_pair(attrs["dilation"], "nn.conv2d_nchwc", "dilation"))


register_op(OpDef(
    "nn.conv2d_nchwc", _conv2d_nchwc_rel, _conv2d_nchwc_compute, OUT_ELEMWISE_FUSABLE, num_inputs=2,
    attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1, "data_layout": "NCHW16c",
           "kernel_layout": "OIHW16i16o", "out_layout": "NCHW16c"},
    schedule=schedules.conv2d_nchwc, doc="2-D convolution in blocked layouts (weights packed ahead of time)",
    canonical_attrs=_canon_blocked))


def _depthwise_rel(types, attrs):
    op = "nn.depthwise_conv2d_nchwc"
    d, w = _operands(types, op, "data", "weight")
    N, C, H, W = _nchw_shape(d.shape, attrs["data_layout"], op)
    b = channel_block_of(attrs["data_layout"], op)
    if b is None or len(w.shape) != 6 or w.shape[0] * b != C or w.shape[1] != 1 or w.shape[4] != 1 or w.shape[5] != b:
        raise RelayError(f"{op}: weight must be [C/{b}, 1, KH, KW, 1, {b}] for data {d.shape}, got {w.shape}")
    OH, OW = _blocked_out_size(H, W, w.shape[2], w.shape[3], attrs, op)
    if OH <= 0 or OW <= 0:
        raise RelayError(f"{op}: data {d.shape} with weight {w.shape} gives an empty output {OH}x{OW}")
    return TensorType((N, d.shape[1], OH, OW, b), _same_dtype(op, d, w))


def _depthwise_compute(inputs, attrs, out_type):
    data, weight = inputs
    op = "nn.depthwise_conv2d_nchwc"
    return depthwise_conv2d_nchwc_compute(data, weight, _pair(attrs["strides"], op, "strides"),
                                          pad4(attrs["padding"], op), name="depthwise_conv2d_nchwc",
                                          dilation=_pair(attrs["dilation"], op, "dilation"))


register_op(OpDef(
    "nn.depthwise_conv2d_nchwc", _depthwise_rel, _depthwise_compute, OUT_ELEMWISE_FUSABLE, num_inputs=2,
    attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "data_layout": "NCHW16c"},
    schedule=schedules.depthwise_conv2d_nchwc, doc="depthwise 2-D convolution, channels in vector lanes",
    canonical_attrs=_canon_blocked))


# -------------------------------------------------------------------- dense
def _dense_pack_rel(types, attrs):
    op = "nn.dense_pack"
    d, w = _operands(types, op, "data", "weight")
    if len(d.shape) < 2 or len(w.shape) != 3 or d.shape[-1] != w.shape[1]:
        raise RelayError(f"{op}: data [..., in] and weight [units/x, in, x] do not match: {d.shape}, {w.shape}")
    units = int(attrs["units"]) if attrs.get("units") is not None else w.shape[0] * w.shape[2]
    if not (w.shape[0] - 1) * w.shape[2] < units <= w.shape[0] * w.shape[2]:
        raise RelayError(f"{op}: units={units} does not fit weight {w.shape}")
    return TensorType(tuple(d.shape[:-1]) + (units,), _same_dtype(op, d, w))


def _dense_pack_compute(inputs, attrs, out_type):
    """2-D data: the dense_pack workload's compute; more axes (a transformer's [batch, tokens, features]) are
    rows too, read in place, so the layer's epilogue (bias, GELU, residual add) has its shape and fuses."""
    data, weight = inputs
    if len(data.shape) == 2:
        full = dense_pack_compute(data, weight, name="dense_pack")
    else:
        JB, CI, B = (int(d) for d in weight.shape)
        k = te.reduce_axis((0, CI), name="k")
        lead = tuple(int(d) for d in data.shape[:-1])
        full = te.compute(lead + (JB * B,), lambda *i: te.sum(data[tuple(i[:-1]) + (k,)]
                                                              * weight[i[-1] // B, k, i[-1] % B], axis=k),
                          name="dense_pack")
    units = out_type.shape[-1]
    if units == int(full.shape[-1]):
        return full
    return te.compute(out_type.shape, lambda *i: full[i], name="dense_pack_units")


register_op(OpDef("nn.dense_pack", _dense_pack_rel, _dense_pack_compute, OUT_ELEMWISE_FUSABLE, num_inputs=2,
                  attrs={"units": None}, schedule=schedules.dense_pack,
                  doc="data @ weight.T with the weight packed [units/x, in, x] ahead of time"))



#: the ops of 8-bit products summed in int32 by a packed dot product: op -> (its intrinsic, data dtype, weight
#: dtype); the weight keeps a word's worth of its reduction axis (4 bytes, 2 int16) innermost, beside the lanes
_DOT_OPS = {"nn.dense_vnni": (DOT4_U8S8, "uint8", "int8"), "nn.dense_i16": (DOT2_I16, "int16", "int16"),
            "nn.conv2d_nchwc_vnni": (DOT4_U8S8, "uint8", "int8"), "nn.conv2d_nchwc_i16": (DOT2_I16, "int16", "int16")}


def _dense_dot_rel(op: str):
    dot, dt, wt = _DOT_OPS[op]
    k = DOTS[dot][1]

    def rel(types, attrs):
        d, w = _operands(types, op, "data", "weight")
        if d.dtype != dt or w.dtype != wt or len(d.shape) < 2 or len(w.shape) != 4 or w.shape[3] != k \
                or d.shape[-1] != k * w.shape[1]:
            raise RelayError(f"{op}: data [..., in] {dt} and weight [units/x, in/{k}, x, {k}] {wt} do not match: "
                             f"{d.shape} {d.dtype}, {w.shape} {w.dtype}")
        return TensorType(tuple(d.shape[:-1]) + (w.shape[0] * w.shape[2],), "int32")
    return rel


def _dense_dot_compute(op: str):
    dot = _DOT_OPS[op][0]
    k_word = DOTS[dot][1]

    def compute(inputs, attrs, out_type):
        """Each output column's int32 sum over k a word at a time: the packed dot product of the data's word
        and the column's weight word (packed side by side), so that x columns in vector lanes are one
        vpdpbusd (VNNI) or pmaddwd step."""
        data, weight = inputs
        _, KW, B, _ = (int(d) for d in weight.shape)
        k = te.reduce_axis((0, KW), name="k")
        lead = tuple(int(d) for d in data.shape[:-1])
        return te.compute(lead + (int(out_type.shape[-1]),), lambda *i: te.sum(E.Call("int32", dot, [
            E.const(0, "int32"), data[tuple(i[:-1]) + (k * k_word,)], weight[i[-1] // B, k, i[-1] % B, 0]]),
            axis=k), name=op[3:])
    return compute


for _op_name, _doc in (("nn.dense_vnni", "uint8 data @ int8 weight.T summed in int32, the weight packed "
                                         "[units/x, in/4, x, 4] ahead of time for VNNI's vpdpbusd"),
                       ("nn.dense_i16", "int16 data @ int16 weight.T summed in int32 (8-bit operands widened on "
                                        "CPUs without VNNI), the weight packed [units/x, in/2, x, 2] ahead of time "
                                        "for pmaddwd")):
    register_op(OpDef(_op_name, _dense_dot_rel(_op_name), _dense_dot_compute(_op_name), OUT_ELEMWISE_FUSABLE,
                      num_inputs=2, schedule=schedules.dense_pack, doc=_doc))


def _conv2d_dot_rel(op: str):
    dot, dt, wt = _DOT_OPS[op]
    k = DOTS[dot][1]

    def rel(types, attrs):
        d, w = _operands(types, op, "data", "weight")
        N, CI, H, W = _nchw_shape(d.shape, attrs["data_layout"], op)
        ib = channel_block_of(attrs["data_layout"], op) or 1
        if d.dtype != dt or w.dtype != wt or len(w.shape) != 7 or w.shape[6] != k or ib % k \
                or w.shape[1] * ib != CI or w.shape[4] * k != ib:
            raise RelayError(f"{op}: {dt} data NCHW[x]c (x a multiple of {k}) and {wt} weight "
                             f"[O/y, I/x, KH, KW, x/{k}, y, {k}] do not match: {d.shape} {d.dtype} "
                             f"({attrs['data_layout']}), {w.shape} {w.dtype}")
        OCB, _, KH, KW, _, ob, _ = w.shape
        OH, OW = _blocked_out_size(H, W, KH, KW, {**attrs, "dilation": (1, 1)}, op)
        if OH <= 0 or OW <= 0:
            raise RelayError(f"{op}: data {d.shape} with weight {w.shape} gives an empty output {OH}x{OW}")
        return TensorType((N, OCB, OH, OW, ob), "int32")
    return rel


def _conv2d_dot_compute(op: str):
    dot = _DOT_OPS[op][0]
    k_word = DOTS[dot][1]

    def compute(inputs, attrs, out_type):
        """Each output channel's int32 sum over the input-channel blocks, the window and a block's channels a
        word at a time: the packed dot product of a pixel's word of channels and the output channel's weight
        word (packed side by side), so that the y output channels of a block, in vector lanes, take one
        vpdpbusd per four input channels (VNNI) or one pmaddwd per two. The padding (zeros) is a stage of its
        own, a load for the dot product to read."""
        data, weight = inputs
        sh, sw = _pair(attrs["strides"], op, "strides")
        src = pad_blocked(data, pad4(attrs["padding"], op))
        _, ICB, KH, KW, IBW, _, _ = (int(d) for d in weight.shape)
        icb = te.reduce_axis((0, ICB), name="icb")
        kh = te.reduce_axis((0, KH), name="kh")
        kw = te.reduce_axis((0, KW), name="kw")
        iw = te.reduce_axis((0, IBW), name="i4" if k_word == 4 else "i2")
        return te.compute(out_type.shape, lambda n, ob, y, x, o: te.sum(E.Call("int32", dot, [
            E.const(0, "int32"), src[n, icb, y * sh + kh, x * sw + kw, iw * k_word],
            weight[ob, icb, kh, kw, iw, o, 0]]), axis=[icb, kh, kw, iw]), name=op[3:])
    return compute


for _op_name, _doc in (("nn.conv2d_nchwc_vnni", "uint8 NCHW[x]c data convolved with int8 weights packed "
                                                "[O/y, I/x, KH, KW, x/4, y, 4] ahead of time, summed in int32 "
                                                "(VNNI's vpdpbusd)"),
                       ("nn.conv2d_nchwc_i16", "int16 NCHW[x]c data (8-bit activations widened on CPUs without "
                                               "VNNI) convolved with int16 weights packed [O/y, I/x, KH, KW, x/2, "
                                               "y, 2] ahead of time, summed in int32 (pmaddwd)")):
    register_op(OpDef(_op_name, _conv2d_dot_rel(_op_name), _conv2d_dot_compute(_op_name), OUT_ELEMWISE_FUSABLE,
                      num_inputs=2, attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "data_layout": "NCHW16c"},
                      schedule=schedules.conv2d_nchwc, doc=_doc, canonical_attrs=_canon_spatial))


#: the columns of one nn.dense_int4 block: a 16-byte load holds two k of each
INT4_BLOCK = 16


def _dense_int4_rel(types, attrs):
    op = "nn.dense_int4"
    d, w, s, z = _operands(types, op, "data", "weight", "scales", "scaled_zero_points")
    block = int(attrs["block_size"])
    ok = (d.dtype == "float32" and w.dtype == "uint8" and len(d.shape) >= 2 and len(w.shape) == 3
          and w.shape[2] == INT4_BLOCK and d.shape[-1] == 2 * w.shape[1] and block > 0 and d.shape[-1] % block == 0
          and s.shape == z.shape == (w.shape[0], d.shape[-1] // block, INT4_BLOCK))
    if not ok:
        raise RelayError(f"{op}: float32 data [..., K], uint8 weight [N/16, K/2, 16] and float32 scales and scaled "
                         f"zero points [N/16, K/{block}, 16] do not match: {d.shape} {d.dtype}, {w.shape} {w.dtype}, "
                         f"{s.shape}, {z.shape}")
    return TensorType(tuple(d.shape[:-1]) + (w.shape[0] * INT4_BLOCK,), "float32")


#: rows from which nn.dense_int4 dequantizes its weight once per call (a prompt) rather than in its loop (a step)
INT4_PANEL_ROWS = 8


def _dense_int4_compute(inputs, attrs, out_type):
    """data @ W.T for W's 4-bit values: column n, k is ``q * scale - zero_point * scale`` of its block of k, q the
    low nibble of byte [n/16, k/2, n%16] for even k, the high one for odd k. A few rows (a decode step, bound by
    the weight's bytes) dequantize in the loop: the k loop unrolled by 4 makes each nibble's choice a constant,
    and 16 columns in lanes read 16 bytes a step. From INT4_PANEL_ROWS rows (a prompt) the weight is dequantized
    once, [N/16, K, 16] as nn.dense_pack's, and the packed GEMM's tile reads it."""
    data, weight, scales, zs = inputs
    B, block = INT4_BLOCK, int(attrs["block_size"])
    K = int(data.shape[-1])
    lead = tuple(int(d) for d in data.shape[:-1])

    def dequantized(nb, k, lane):
        byte = weight[nb, k // 2, lane]
        q = te.if_then_else(k % 2 == 0, byte % 16, byte // 16).astype("float32")
        return q * scales[nb, k // block, lane] - zs[nb, k // block, lane]

    k = te.reduce_axis((0, K), name="k")
    if math.prod(lead) >= INT4_PANEL_ROWS:
        w = te.compute((int(weight.shape[0]), K, B), dequantized, name="dense_int4_weight")
        return te.compute(lead + (int(out_type.shape[-1]),), lambda *i: te.sum(
            data[tuple(i[:-1]) + (k,)] * w[i[-1] // B, k, i[-1] % B], axis=k), name="dense_int4")
    return te.compute(lead + (int(out_type.shape[-1]),), lambda *i: te.sum(
        data[tuple(i[:-1]) + (k,)] * dequantized(i[-1] // B, k, i[-1] % B), axis=k), name="dense_int4")


register_op(OpDef("nn.dense_int4", _dense_int4_rel, _dense_int4_compute, OUT_ELEMWISE_FUSABLE, num_inputs=4,
                  attrs={"block_size": 32}, schedule=schedules.dense_int4,
                  doc="float32 data @ W.T, W [N, K] held as 4-bit values (two a byte, packed [N/16, K/2, 16]) with "
                      "a scale and a zero point (premultiplied by it) per block of k, dequantized in the loop: "
                      "onnxruntime's MatMulNBits"))


# ----------------------------------------------------------------- Winograd
def _winograd_rel(types, attrs):
    op = "nn.conv2d_winograd_nchwc"
    d, u = _operands(types, op, "data", "weight")
    N, C, H, W = _nchw_shape(d.shape, attrs["data_layout"], op)
    tile = int(attrs["tile"])
    if len(u.shape) != 5 or u.shape[0] != tile + 2 or u.shape[1] != tile + 2 or u.shape[3] != C:
        raise RelayError(f"{op}: the transformed weight must be [{tile + 2}, {tile + 2}, O/y, {C}, y] for F({tile}, 3) "
                         f"on data {d.shape}, got {u.shape}")
    if attrs["out_layout"] != f"NCHW{u.shape[4]}c":
        raise RelayError(f"{op}: weight {u.shape} gives output NCHW{u.shape[4]}c, the attributes say "
                         f"{attrs['out_layout']}")
    pt, pl, pb, pr = pad4(attrs["padding"], op)
    return TensorType((N, u.shape[2], H + pt + pb - 2, W + pl + pr - 2, u.shape[4]), _same_dtype(op, d, u))


def _winograd_compute(inputs, attrs, out_type):
    data, u = inputs
    return conv2d_winograd_nchwc_compute(data, u, pad4(attrs["padding"], "nn.conv2d_winograd_nchwc"),
                                         int(attrs["tile"]), name="conv2d_winograd_nchwc")


register_op(OpDef(
    "nn.conv2d_winograd_nchwc", _winograd_rel, _winograd_compute, OUT_ELEMWISE_FUSABLE, num_inputs=2,
    attrs={"padding": (1, 1, 1, 1), "tile": 4, "data_layout": "NCHW16c", "out_layout": "NCHW16c"},
    schedule=schedules.conv2d_winograd_nchwc,
    doc="3x3 stride-1 conv2d by Winograd's F(tile, 3), filters transformed ahead of time",
    canonical_attrs=_canon_spatial))
