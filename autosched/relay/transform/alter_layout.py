"""AlterOpLayout (opt_level 3): a CNN in NCHW becomes one in blocked-channel layouts (NCHW[x]c), the layout
of onnxruntime's NCHWc transformer and TVM's x86 conv2d_NCHWc.

Each 4-D activation gets a layout as the pass walks the graph in order:

- ``nn.conv2d`` with constant weights becomes ``nn.conv2d_nchwc`` (or ``nn.depthwise_conv2d_nchwc``), its
  weights packed once here (OIHW -> OIHW[x]i[y]o, a numpy transform folded into the params), reading its input
  in the input's block when that divides its channels (else one ``layout_transform``); the 3-channel stem
  reads NCHW directly. Block sizes come from the target (one native vector: 16 floats on AVX-512, 8 on AVX2).
  Output channels that no block of 8 divides (27, 75, 116) are padded with zero filters to a multiple of 8,
  and the real channels are sliced out in NCHW. A dilated convolution (FCN's and DeepLab's backbones, their
  ASPP) runs blocked too, after losing the kernel rows and columns that read only padding (at rate 24 or 36
  on a 14x14 map a 3x3 becomes a 1x1). uint8 data by int8 filters summed in int32 (a quantized CNN) becomes
  ``nn.conv2d_nchwc_vnni`` on CPUs with AVX-512 VNNI, elsewhere ``nn.conv2d_nchwc_i16`` (int16 pairs,
  pmaddwd) or, for a stem or groups, the blocked float32 convolution where exact.
- Elementwise ops (pattern ELEMWISE, any op of the user's too), and broadcasting binary ones whose other operand
  is another activation in the same layout, a scalar or a constant broadcast per channel (a bias, a batch-norm
  scale or shift: re-laid out here), keep the layout;
  so do pooling, global pooling, padding of the rows and columns, and a channel concatenation of inputs with one
  block.
- ``nn.dense`` with constant weights becomes ``nn.dense_pack`` (weights packed [units/x, in, x]); 8-bit operands
  summed in int32 ``nn.dense_vnni`` on VNNI CPUs, elsewhere float32 where exact, else ``nn.dense_i16``.
- ``nn.batch_matmul`` with a transposed operand gets a transposed copy of it and ``transpose_a/b=False``, unless
  it has a few rows against a transposed y (a decode step's scores: dot products of contiguous rows).
- Anything else, and the function's outputs, get NCHW back through one ``layout_transform`` per tensor.

A tensor needed in two layouts is transformed once per layout; transforms are only made where a consumer
needs another layout, so back-to-back inverse pairs do not arise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched.relay import op as _op
from autosched.relay.ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    TensorType,
    Tuple,
    TupleGetItem,
    Var,
    post_order,
)
from autosched.relay.ir.type_infer import infer_type
from autosched.relay.op import schedules as _schedules
from autosched.relay.op.common import _pair, exact_sum_dtype, pad4
from autosched.relay.transform.transform import Pass, PassContext, _map_functions
from autosched.target import Target
from autosched.workloads.blocked_layout import winograd_weight
from autosched.workloads.cpu import winograd_tile
from autosched.workloads.reference import oihw_to_blocked
from autosched.workloads.tile_sizes import channel_block, lanes

_PAD_BLOCK = 8  # output channels that no block divides are padded to a multiple of this


def _block_for(channels: int) -> int:
    return channel_block(channels)


def _worth_blocking(channels: int) -> bool:
    """Whether ``channels`` divide into blocks of at least 8 floats (a whole AVX2 vector, half an AVX-512
    one): 116 channels would give blocks of 4, quarter vectors, and the split, shuffled and concatenated
    tensors of such models (ShuffleNet) would pay a layout transform at every step (slower than staying in
    NCHW: docs/measured_choices.md), as onnxruntime's NCHWc transformer also leaves such layers alone."""
    return _block_for(channels) >= min(8, lanes())


def _winograd_tile(node: Call, w: np.ndarray) -> int | None:
    """F(m, 3)'s m for a 3x3 stride-1 convolution that Winograd's algorithm makes faster (the PassContext
    option ``relay.winograd`` = False turns it off), else None: with enough channels it does a quarter of the
    multiplications, and with few channels the transforms cost more than they save. Images under 8x8 outputs
    (F(2, 3)) stay direct: alone, with its filters in cache, F(2, 3) is faster, but in a model its
    transformed filters (more bytes than the direct ones) stream from memory and the model runs slower. The
    figures: docs/relay.md, "Layouts". Integer filters stay direct: their sums are exact only so."""
    if not PassContext.current().config.get("relay.winograd", True):
        return None
    if w.shape[2:] != (3, 3) or int(node.attrs["groups"]) != 1 or _pair(node.attrs["strides"], "", "") != (1, 1) \
            or _pair(node.attrs["dilation"], "", "") != (1, 1):
        return None
    if min(w.shape[0], w.shape[1]) < 32:
        return None
    if not np.issubdtype(w.dtype, np.floating) or np.array_equal(w, np.round(w)):
        # integer filters (an int32 conv, or a quantized model's integer conv run in float32, whose sums are
        # exact integers only when computed directly): Winograd's fractions would round them
        return None
    _, _, oh, ow = node.checked_type.shape
    tile = winograd_tile(int(oh), int(ow))
    return tile if tile == 4 else None


def _without_padding_taps(node: Call) -> Call | None:
    """A dilated convolution without the kernel rows and columns that read only padding (an ASPP branch of
    DeepLab: at rate 24 or 36 on a 14x14 map every tap but the centre does), its padding shifted to match; an
    axis left with one tap needs no dilation, so a 3x3 at rate 36 becomes a 1x1 convolution, which runs
    blocked. None when no tap can go."""
    _, _, H, W = node.args[0].checked_type.shape
    _, _, OH, OW = node.checked_type.shape
    w = node.args[1].data
    strides = _pair(node.attrs["strides"], "nn.conv2d", "strides")
    dilation = _pair(node.attrs["dilation"], "nn.conv2d", "dilation")
    pt, pl, pb, pr = pad4(node.attrs["padding"], "nn.conv2d")
    kept = []
    for k_size, d, s, before, n, out in ((w.shape[2], dilation[0], strides[0], pt, H, OH),
                                         (w.shape[3], dilation[1], strides[1], pl, W, OW)):
        taps = [k for k in range(k_size) if any(0 <= k * d - before + o * s < n for o in range(out))]
        lo, hi = taps[0], taps[-1]
        d2 = d if hi > lo else 1
        begin = before - lo * d
        end = (out - 1) * s + (hi - lo) * d2 + 1 - n - begin
        if begin < 0 or end < 0:
            return None
        kept.append((lo, hi, d2, begin, end))
    (lo_h, hi_h, dh, top, bottom), (lo_w, hi_w, dw, left, right) = kept
    if (hi_h - lo_h + 1, hi_w - lo_w + 1) == w.shape[2:]:
        return None
    sub = np.ascontiguousarray(w[:, :, lo_h:hi_h + 1, lo_w:hi_w + 1])
    call = Call(node.op, [node.args[0], Constant(sub)], {**node.attrs, "dilation": (dh, dw),
                                                           "padding": (top, left, bottom, right),
                                                           "kernel_size": sub.shape[2:]})
    infer_type(call)
    return call


#: int32 lanes of AVX-512 VNNI's vpdpbusd: the output columns of one nn.dense_vnni block
VNNI_LANES = 16


def _packed_dense_weight(w: np.ndarray) -> tuple[Constant, int | None]:
    """A dense weight [units, in] packed [units/x, in, x], and ``units`` when it was padded to whole blocks: units
    that divide into no whole vector (a vocabulary of 50257) get zero rows up to blocks of one vector, and the
    layer keeps the first ``units`` columns of the padded product."""
    b = _block_for(w.shape[0])
    units = None
    if b < min(8, lanes()) and w.shape[0] >= 4 * lanes():
        b = lanes()
        units = w.shape[0]
        w = np.concatenate([w, np.zeros((-units % b, w.shape[1]), w.dtype)])
    return Constant(np.ascontiguousarray(w.reshape(w.shape[0] // b, b, w.shape[1]).transpose(0, 2, 1))), units


def _merged_groups(w: np.ndarray, groups: int) -> tuple[np.ndarray, int] | None:
    """``(weight, k)``: the OIHW weight of a grouped convolution with ``k`` neighbouring groups joined into one
    (block-diagonal: zeros where a group's outputs would read another's inputs), ``k`` the fewest that give
    output groups of a whole block; None when no such ``k`` up to 4 (at most 4x the multiply-adds) divides the
    groups."""
    co, cig = w.shape[0], w.shape[1]
    cog = co // groups
    k = next((k for k in range(2, min(groups, 4) + 1) if groups % k == 0 and _worth_blocking(cog * k)), None)
    if k is None:
        return None
    merged = np.zeros((co, cig * k, *w.shape[2:]), w.dtype)
    for o in range(co):
        j = o // cog % k  # the group's place in its merged group
        merged[o, j * cig:(j + 1) * cig] = w[o]
    return merged, k


def pack_conv_weight(w: np.ndarray, ic_block: int, oc_block: int) -> np.ndarray:
    """OIHW (I per group) -> [O/oc_block, I/ic_block, KH, KW, ic_block, oc_block]."""
    return np.ascontiguousarray(oihw_to_blocked(w, ic_block, oc_block))


def to_blocked_const(c: np.ndarray, channels: int, block: int) -> np.ndarray | None:
    """A constant operand of a binary op on an NCHW activation of ``channels`` channels, re-laid out for the
    activation in NCHW[block]c; None when it does not broadcast per channel (or per element) that way."""
    a = np.asarray(c)
    if a.ndim <= 1 and a.size == 1:
        return a  # a scalar broadcasts in any layout
    if a.ndim > 4:
        return None
    a = a.reshape((1,) * (4 - a.ndim) + a.shape)
    n, ch, h, w = a.shape
    if ch == 1:
        return a.reshape(n, 1, h, w, 1)
    if ch != channels:
        return None
    return np.ascontiguousarray(a.reshape(n, ch // block, block, h, w).transpose(0, 1, 3, 4, 2))


def _int16_products() -> bool:
    """Whether 8-bit products summed in int32 take the int16 kernels (``nn.conv2d_nchwc_i16``,
    ``nn.dense_i16``: a ``pmaddwd`` per two products of a lane, exact): on CPUs without VNNI, unless the
    PassContext option ``relay.int16_products`` is False (then float32 where exact, as before). On a Zen 3 they
    ran a quantized ResNet-50 in 52 ms against 74 (docs/relay_onnx.md)."""
    return not Target.current().cpu.dot_u8s8 and PassContext.current().config.get("relay.int16_products", True)


def _bytes_to_int32(node: Call) -> bool:
    """Whether a conv2d or dense with ``out_dtype`` sums 8-bit operands in int32 (a quantized model's product;
    other casts keep the generic kernels)."""
    return node.attrs["out_dtype"] == "int32" and all(a.checked_type.dtype in ("uint8", "int8") for a in node.args)


class _Alter:
    def __init__(self) -> None:
        self.new: dict[int, Expr] = {}  # id(old node) -> rebuilt node
        self.block: dict[int, int | None] = {}  # id(rebuilt node) -> its block (None: NCHW or not an image)
        self.converted: dict[tuple[int, int | None], Expr] = {}
        self.packed_dense: dict[int, tuple[Constant, int | None]] = {}  # id(weight) -> (packed, units)

    # ------------------------------------------------------------ layouts
    def in_layout(self, e: Expr, block: int | None) -> Expr:
        """``e`` (rebuilt) in layout NCHW[block]c (None: NCHW), through one cached layout_transform."""
        have = self.block.get(id(e))
        if have == block:
            return e
        key = (id(e), block)
        got = self.converted.get(key)
        if got is None:
            src = "NCHW" if have is None else f"NCHW{have}c"
            dst = "NCHW" if block is None else f"NCHW{block}c"
            got = self.converted[key] = _op.make_call("layout_transform", [e], src_layout=src, dst_layout=dst)
            self.block[id(got)] = block
        return got

    def nchw(self, e: Expr) -> Expr:
        return self.in_layout(e, None) if self.block.get(id(e)) is not None else e

    def done(self, old: Expr, new: Expr, block: int | None = None) -> None:
        self.new[id(old)] = new
        self.block[id(new)] = block

    # -------------------------------------------------------------- rules
    def visit(self, node: Expr) -> None:
        if isinstance(node, (Var, Constant)):
            return self.done(node, node)
        if isinstance(node, Tuple):  # fields keep their layouts: their consumer (a concatenation) decides
            return self.done(node, Tuple([self.new[id(f)] for f in node.fields]))
        if isinstance(node, TupleGetItem):
            return self.done(node, TupleGetItem(self._arg_nchw(node.tuple_value), node.index))
        if isinstance(node, Function):
            return self.done(node, node)
        if not isinstance(node, Call) or isinstance(node.op, Function):  # an external function's call
            args = [self.nchw(self.new[id(a)]) for a in node.args] if isinstance(node, Call) else []
            return self.done(node, Call(node.op, args, node.attrs) if isinstance(node, Call) else node)
        rule = getattr(self, "_" + node.op.name.replace(".", "_"), None)
        if rule is None and node.op.pattern == _op.ELEMWISE and len(node.args) == 1:
            rule = self._unary  # elementwise: any layout (relu, clip, sigmoid, an op of the user's)
        if rule is None and node.op.pattern == _op.BROADCAST and len(node.args) == 2 and not node.attrs:
            rule = self._binary  # add, multiply, ...: numpy broadcasting, so a per-channel constant is re-laid out
        out = rule(node) if rule is not None else None
        if out is None:
            out = (Call(node.op, [self._arg_nchw(a) for a in node.args], node.attrs), None)
        self.done(node, *out)

    def _arg_nchw(self, a: Expr) -> Expr:
        new = self.new[id(a)]
        if isinstance(new, Tuple):
            return Tuple([self.nchw(f) for f in new.fields])
        return self.nchw(new)

    def _nn_conv2d(self, node: Call) -> tuple[Expr, int | None] | None:
        data, weight = node.args
        if not isinstance(weight, Constant) or node.attrs["data_layout"] != "NCHW" or \
                node.attrs["kernel_layout"] != "OIHW":
            return None
        if tuple(_pair(node.attrs["dilation"], "nn.conv2d", "dilation")) != (1, 1):
            node = _without_padding_taps(node) or node
        if node.attrs.get("out_dtype"):
            return self._integer_conv(node) if _bytes_to_int32(node) else None
        return self._conv(node, self.new[id(data)], node.args[1].data)

    def _integer_conv(self, node: Call) -> tuple[Expr, int | None]:
        """A convolution of 8-bit operands summed in int32, its weight constant: on targets with VNNI (uint8 data,
        int8 weights, no groups, whole blocks of 16 output and 4 input channels) ``nn.conv2d_nchwc_vnni``, the
        weight packed for vpdpbusd; elsewhere (groups 1, blocks of 8 channels in and out) ``nn.conv2d_nchwc_i16``:
        pmaddwd on int16 pairs, faster than float32 on every ResNet-50 layer on a Zen 3 (1.2-2x); else (a stem,
        groups, or the PassContext option ``relay.int16_products`` off) the convolution of the operands cast to
        float32 where every partial sum is an integer below 2^24 (exact, in the blocked float kernels), uint8
        data less 128 where only that makes it so (the 128s added back per output channel), else in int32."""
        data, weight = node.args
        x, w = self.new[id(data)], weight.data
        CO, CI, KH, KW = w.shape
        have = self.block.get(id(x))
        uint8 = data.checked_type.dtype == "uint8"
        if (Target.current().cpu.dot_u8s8 and uint8 and w.dtype == np.int8
                and int(node.attrs["groups"]) == 1 and CO % VNNI_LANES == 0 and (CI % 4 == 0 or have is None)
                and tuple(_pair(node.attrs["dilation"], "nn.conv2d", "dilation")) == (1, 1)):
            if CI % 4:  # a stem's 3 channels: a fourth of zeros (zero filters too), then blocks of 4
                x = self.nchw(x)
                x = _op.nn.pad(x, [(0, 0), (0, -CI % 4), (0, 0), (0, 0)])
                w = np.concatenate([w, np.zeros((CO, -CI % 4, KH, KW), w.dtype)], axis=1)
                CI = w.shape[1]
            ib = have if have is not None and have % 4 == 0 and CI % have == 0 else \
                next(b for b in (16, 8, 4) if CI % b == 0)
            packed = np.ascontiguousarray(w.reshape(CO // VNNI_LANES, VNNI_LANES, CI // ib, ib // 4, 4, KH, KW)
                                          .transpose(0, 2, 5, 6, 3, 1, 4))
            call = _op.make_call("nn.conv2d_nchwc_vnni", [self.in_layout(x, ib), Constant(packed)],
                                 strides=_pair(node.attrs["strides"], "nn.conv2d", "strides"),
                                 padding=pad4(node.attrs["padding"], "nn.conv2d"), data_layout=f"NCHW{ib}c")
            return call, VNNI_LANES
        if (_int16_products() and int(node.attrs["groups"]) == 1 and _worth_blocking(CO)
                and _worth_blocking(CI) and tuple(_pair(node.attrs["dilation"], "nn.conv2d", "dilation")) == (1, 1)):
            return self._int16_conv(node, x, w, have)
        bound = float(np.abs(w.astype(np.int64)).reshape(CO, -1).sum(axis=1).max())
        shift = 128 if uint8 and exact_sum_dtype(255 * bound) != "float32" else 0
        dtype = exact_sum_dtype((255 if uint8 and not shift else 128) * bound)
        attrs = {k: v for k, v in node.attrs.items() if k != "out_dtype"}
        if shift:  # the zeros of the padding are less 128 too: padded explicitly, before the shift
            pt, pl, pb, pr = pad4(node.attrs["padding"], "nn.conv2d")
            if pt or pl or pb or pr:
                x = self._keep(_op.nn.pad(x, [(0, 0), (0, 0), (pt, pb), (pl, pr)] + [(0, 0)] * (have is not None)),
                               have)
                attrs["padding"] = (0, 0, 0, 0)
        x = self._keep(_op.cast(x, dtype), have)
        if shift:
            x = self._keep(_op.subtract(x, Constant(np.array(shift, dtype))), have)
        plain = Call(node.op, node.args, attrs)
        out = self._conv(plain, x, w.astype(dtype))
        call, block = out if out is not None else (Call(node.op, [self.nchw(x), Constant(w.astype(dtype))], attrs),
                                                   None)
        if dtype != "int32":
            call = _op.cast(call, "int32")
        if shift:
            back = (shift * w.astype(np.int64).reshape(CO, -1).sum(axis=1)).astype(np.int32).reshape(-1, 1, 1)
            call = _op.add(call, Constant(back if block is None else to_blocked_const(back, CO, block)))
        return call, block

    def _int16_conv(self, node: Call, x: Expr, w: np.ndarray, have: int | None) -> tuple[Expr, int]:
        """An 8-bit convolution summed in int32 on a CPU without VNNI: ``nn.conv2d_nchwc_i16``, the activations
        widened to int16 in their layout and the weight packed as int16 pairs, one ``pmaddwd`` per two input
        channels of a vector of output channels (exact for any 8-bit operands)."""
        CO, CI, KH, KW = w.shape
        x = self._keep(_op.cast(x, "int16"), have)
        ib = have if have is not None and have % 2 == 0 and CI % have == 0 else _block_for(CI)
        ob = _block_for(CO)
        packed = np.ascontiguousarray(w.astype(np.int16).reshape(CO // ob, ob, CI // ib, ib // 2, 2, KH, KW)
                                      .transpose(0, 2, 5, 6, 3, 1, 4))
        call = _op.make_call("nn.conv2d_nchwc_i16", [self.in_layout(x, ib), Constant(packed)],
                             strides=_pair(node.attrs["strides"], "nn.conv2d", "strides"),
                             padding=pad4(node.attrs["padding"], "nn.conv2d"), data_layout=f"NCHW{ib}c")
        return call, ob

    def _keep(self, e: Expr, block: int | None) -> Expr:
        """``e`` (an elementwise op on an activation in ``block``) recorded in that layout."""
        self.block[id(e)] = block
        return e

    def _nn_pad(self, node: Call) -> tuple[Expr, int] | None:
        """Padding of an image's rows and columns (an explicit Pad before a convolution) in its blocked layout."""
        x = self.new[id(node.args[0])]
        block = self.block.get(id(x))
        pw = [tuple(int(v) for v in p) for p in node.attrs["pad_width"]]
        if block is None or len(pw) != 4 or pw[0] != (0, 0) or pw[1] != (0, 0):
            return None
        return Call(node.op, [x], {**node.attrs, "pad_width": pw + [(0, 0)]}), block

    def _conv(self, node: Call, x: Expr, w: np.ndarray) -> tuple[Expr, int | None] | None:
        """``node`` (an NCHW conv2d) on the rebuilt input ``x`` with weight ``w`` in a blocked layout."""
        CI = node.args[0].checked_type.shape[1]
        CO = w.shape[0]
        g = int(node.attrs["groups"])
        have = self.block.get(id(x))
        common = dict(strides=_pair(node.attrs["strides"], "nn.conv2d", "strides"),
                      padding=pad4(node.attrs["padding"], "nn.conv2d"),
                      dilation=_pair(node.attrs["dilation"], "nn.conv2d", "dilation"))
        if g > 1 and g == CI == CO and w.shape[1] == 1:  # depthwise: channels in lanes, one block throughout
            if not _worth_blocking(CI):
                return None
            b = have if have is not None and CI % have == 0 else _block_for(CI)
            packed = np.ascontiguousarray(w.reshape(CI // b, b, 1, *w.shape[2:]).transpose(0, 2, 3, 4, 1)
                                          [:, :, :, :, None, :])
            call = _op.make_call("nn.depthwise_conv2d_nchwc", [self.in_layout(x, b), Constant(packed)],
                                 data_layout=f"NCHW{b}c", **common)
            return call, b
        cig, cog = CI // g, CO // g
        if g == 1 and not _worth_blocking(CO) and CO > _PAD_BLOCK:
            # output channels that divide into no block of 8 (a detector head's 75, a segmentation head's 21,
            # ESPCN's 27): zero filters pad them to whole blocks, the real ones are kept, in NCHW (the plain
            # NCHW kernel took twice as long)
            padded = np.concatenate([w, np.zeros((-CO % _PAD_BLOCK, *w.shape[1:]), w.dtype)])
            blocked = self._conv(node, x, padded)
            if blocked is None:
                return None
            self.block[id(blocked[0])] = blocked[1]
            return _op.strided_slice(self.nchw(blocked[0]), [0], [CO], axes=[1]), None
        if g > 1 and not _worth_blocking(cog):
            merged = _merged_groups(w, g)
            if merged is None:
                return None
            # a few channels a group (ResNeXt's 32 groups of 4): groups side by side in one block-diagonal
            # weight, zeros between them; twice the multiply-adds of 4-channel groups, in whole vectors (7.7 ms
            # in NCHW -> well under 1 for ResNeXt-50's first 3x3 on a Zen 3)
            return self._conv(Call(node.op, node.args, {**node.attrs, "groups": g // merged[1]}), x, merged[0])
        if not _worth_blocking(cog):
            return None
        winograd = _winograd_tile(node, w) if have is not None and cig % have == 0 else None
        if winograd is not None:
            ob = _block_for(CO)
            call = _op.make_call("nn.conv2d_winograd_nchwc", [x, Constant(winograd_weight(w, winograd, ob))],
                                 padding=common["padding"], tile=winograd, data_layout=f"NCHW{have}c",
                                 out_layout=f"NCHW{ob}c")
            return call, ob
        if have is not None and cig % have == 0:
            ib = have
        elif have is None and (cig < 8 or not _worth_blocking(cig)):  # read NCHW as it is (the stem)
            ib = 1
        else:
            ib = _block_for(cig)
        ob = _block_for(cog)
        src = x if (ib == 1 and have is None) else self.in_layout(x, ib)
        call = _op.make_call("nn.conv2d_nchwc", [src, Constant(pack_conv_weight(w, ib, ob))], groups=g,
                             data_layout="NCHW" if src is x and have is None else f"NCHW{ib}c",
                             kernel_layout=f"OIHW{ib}i{ob}o", out_layout=f"NCHW{ob}c", **common)
        return call, ob

    def _nn_dense(self, node: Call) -> tuple[Expr, None] | None:
        data, weight = node.args
        if node.attrs.get("out_dtype"):
            return self._integer_dense(node) if _bytes_to_int32(node) else None
        if not isinstance(weight, Constant) or len(data.checked_type.shape) < 2:
            return None
        if id(weight) not in self.packed_dense:  # one packed copy of a weight that several layers share
            self.packed_dense[id(weight)] = _packed_dense_weight(weight.data)  # (an unrolled LSTM's steps)
        packed, units = self.packed_dense[id(weight)]
        return _op.make_call("nn.dense_pack", [self.nchw(self.new[id(data)]), packed], units=units), None

    def _integer_dense(self, node: Call) -> tuple[Expr, None] | None:
        """A dense of 8-bit operands summed in int32: on targets with VNNI (uint8 data, a constant int8 weight)
        ``nn.dense_vnni``, the weight packed for vpdpbusd; elsewhere, with a constant weight, a float32 dense
        when every partial sum is an integer below 2^24 (then exact, in the packed float kernels), else
        ``nn.dense_i16`` (pmaddwd on int16 pairs, the weight packed [units/x, in/2, x, 2]), else an int32 dense
        of the operands cast."""
        data, weight = node.args
        dt, wt = data.checked_type.dtype, weight.checked_type.dtype
        units, depth = weight.checked_type.shape
        x = self.nchw(self.new[id(data)])
        if (Target.current().cpu.dot_u8s8 and (dt, wt) == ("uint8", "int8") and isinstance(weight, Constant)
                and units % VNNI_LANES == 0 and depth % 4 == 0 and len(data.checked_type.shape) >= 2):
            w = weight.data.reshape(units // VNNI_LANES, VNNI_LANES, depth // 4, 4).transpose(0, 2, 1, 3)
            return _op.make_call("nn.dense_vnni", [x, Constant(np.ascontiguousarray(w))]), None
        data_magnitude = max(-np.iinfo(dt).min, np.iinfo(dt).max)
        dtype = exact_sum_dtype(data_magnitude * float(np.abs(weight.data.astype(np.int64)).sum(axis=1).max())) \
            if isinstance(weight, Constant) else "int32"
        block = next((b for b in (VNNI_LANES, 8) if units % b == 0), None)
        if (dtype == "int32" and _int16_products() and isinstance(weight, Constant) and block and depth % 2 == 0
                and len(data.checked_type.shape) >= 2):
            # in int16 pairs only where float32 is not exact: where it is, the float GEMM measured as fast
            # alone and faster inside a model (int8 BERT-base on a Zen 3: 237 ms with nn.dense_i16, 177 without)
            w = weight.data.astype(np.int16).reshape(units // block, block, depth // 2, 2).transpose(0, 2, 1, 3)
            return _op.make_call("nn.dense_i16", [_op.cast(x, "int16"), Constant(np.ascontiguousarray(w))]), None
        x = _op.cast(x, dtype)
        if isinstance(weight, Constant) and len(data.checked_type.shape) >= 2:
            packed, units = _packed_dense_weight(weight.data.astype(dtype))
            out = _op.make_call("nn.dense_pack", [x, packed], units=units)
        else:
            w = Constant(weight.data.astype(dtype)) if isinstance(weight, Constant) else \
                _op.cast(self.nchw(self.new[id(weight)]), dtype)
            out = _op.make_call("nn.dense", [x, w], units=node.attrs.get("units"))
        return (out if dtype == "int32" else _op.cast(out, "int32")), None

    def _nn_batch_matmul(self, node: Call) -> tuple[Expr, None] | None:
        """A transposed operand (TVM's default ``transpose_b=True``: y as [batch, N, K]) gets a transposed copy
        (a constant's at build time), so the register block reads rows of x and vectors of y's columns."""
        if not (node.attrs["transpose_a"] or node.attrs["transpose_b"]):
            return None
        rank = len(node.checked_type.shape)
        depth = int(node.args[0].checked_type.shape[-1])
        if _schedules.few_rows_against_rows(node.attrs, int(node.checked_type.shape[-2]), depth,
                                            node.checked_type.dtype):
            return None  # dot products of contiguous rows (schedules.batch_matmul): a copy would cost more
        x, y = (self._arg_nchw(a) for a in node.args)
        x = _swap_last_axes(x, rank) if node.attrs["transpose_a"] else x
        y = _swap_last_axes(y, rank) if node.attrs["transpose_b"] else y
        return _op.make_call("nn.batch_matmul", [x, y], transpose_a=False, transpose_b=False), None

    def _unary(self, node: Call) -> tuple[Expr, int | None]:
        x = self.new[id(node.args[0])]
        return Call(node.op, [x], node.attrs), self.block.get(id(x))

    def _binary(self, node: Call) -> tuple[Expr, int | None] | None:
        a, b = (self.new[id(x)] for x in node.args)
        ba, bb = self.block.get(id(a)), self.block.get(id(b))
        if ba is None and bb is None:
            return None
        t = node.checked_type
        if not isinstance(t, TensorType) or len(t.shape) != 4:
            return None
        block = ba if ba is not None else bb
        args = []
        for old, new in zip(node.args, (a, b)):
            if isinstance(new, Constant):
                c = to_blocked_const(new.data, t.shape[1], block)
                if c is None:
                    return None
                args.append(Constant(c))
            elif isinstance(old.checked_type, TensorType) and old.checked_type.shape == t.shape:
                args.append(self.in_layout(new, block))
            else:
                return None
        return Call(node.op, args, node.attrs), block

    def _nn_bias_add(self, node: Call) -> tuple[Expr, int | None] | None:
        x, bias = (self.new[id(a)] for a in node.args)
        block = self.block.get(id(x))
        t = node.checked_type
        if block is None or not isinstance(bias, Constant) or node.attrs["axis"] % 4 != 1:
            return None
        c = to_blocked_const(bias.data.reshape(-1, 1, 1), t.shape[1], block)
        return _op.make_call("add", [x, Constant(c)]), block

    def _pool(self, node: Call) -> tuple[Expr, int] | None:
        x = self.new[id(node.args[0])]
        block = self.block.get(id(x))
        if block is None or tuple(node.attrs.get("dilation", (1, 1))) != (1, 1):
            return None
        return Call(node.op, [x], {**node.attrs, "layout": f"NCHW{block}c"}), block

    _nn_max_pool2d = _pool
    _nn_avg_pool2d = _pool
    _nn_global_avg_pool2d = _pool

    def _concatenate(self, node: Call) -> tuple[Expr, int] | None:
        (tup,) = node.args
        fields = self.new[id(tup)].fields if isinstance(self.new[id(tup)], Tuple) else None
        t = node.checked_type
        if fields is None or not isinstance(t, TensorType) or len(t.shape) != 4 or node.attrs["axis"] % 4 != 1:
            return None
        blocks = [self.block.get(id(f)) for f in fields if self.block.get(id(f)) is not None]
        if not blocks:
            return None
        block = max(set(blocks), key=blocks.count)
        if any(f.checked_type.shape[1] % block for f in tup.fields):
            return None
        return Call(node.op, [Tuple([self.in_layout(f, block) for f in fields])], node.attrs), block


def _swap_last_axes(e: Expr, rank: int) -> Expr:
    """``e`` (of ``rank`` axes) with its last two axes swapped: a constant's data now, else a transpose."""
    if isinstance(e, Constant):
        return Constant(np.ascontiguousarray(np.swapaxes(e.data, -1, -2)))
    return _op.transpose(e, [*range(rank - 2), rank - 1, rank - 2])


def alter_op_layout(func: Function) -> Function:
    """``func`` rewritten into blocked layouts (see the module docstring); its outputs stay NCHW."""
    infer_type(func)
    alter = _Alter()
    for node in post_order(func.body):
        if id(node) not in alter.new:
            alter.visit(node)
    body = alter.new[id(func.body)]
    body = Tuple([alter.nchw(f) for f in body.fields]) if isinstance(body, Tuple) else alter.nchw(body)
    out = Function(func.params, body, None, func.attrs)
    infer_type(out)
    return out


def AlterOpLayout() -> Any:  # noqa: N802 - TVM's name
    """Rewrite convolutions, pooling and dense layers into blocked layouts with packed weights (opt_level 3)."""
    def run(mod: Any) -> Any:
        if Target.current().kind != "llvm":  # the blocked kernels have CPU schedules
            return mod
        return _map_functions(mod, alter_op_layout)

    return Pass("AlterOpLayout", 3, run)


__all__ = ["AlterOpLayout", "alter_op_layout", "pack_conv_weight", "to_blocked_const"]
