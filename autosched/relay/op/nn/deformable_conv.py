"""``nn.deformable_conv2d`` (TVM's ``relay.nn.deformable_conv2d``; ONNX DeformConv, DCNv1 and, with a mask, DCNv2):
each kernel tap reads the data at its place in the window moved by a learned (y, x) offset, bilinearly interpolated
(a corner outside the image reads zero: ONNX's and torchvision's rule, where TVM's compute zeroes every position
above or left of the image), optionally scaled by a modulation mask, and the taps' samples are summed against the
weight as a (grouped) convolution would sum them.

The compute samples once per (batch, channel, tap, output pixel), not once per output channel. Per deformable
group, tap and pixel: the top-left corner (int32) in a channels-last copy of the data padded by one pixel of zeros
(a corner past the edge reads a zero, with no test) and the four corner weights (the mask folded in; all zero for a
position off the image). Then the sampled "columns" [N, pixels, KH, KW, C], a deformable group's channels in vector
lanes (each lane's corners at the same place: four contiguous loads a vector); then a GEMM of pixels x output
channels in register tiles against the weight in blocks of output channels, ``OHWI{b}o`` = [O / b, KH, KW, I, b]
(each block's panel contiguous: an OIHW or HWIO weight's panel spans the whole weight, a TLB miss a row); and the
transposing reshape to [N, O, OH, OW], in whose loops the bias and activation fuse. The relay call and the ONNX
importer block a constant weight once (numpy); an OIHW weight computed at run time is blocked in the kernel.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from autosched import te
from autosched.relay.ir.expr import Constant, Expr, RelayError, TensorType, const
from autosched.relay.op import schedules
from autosched.relay.op.common import _c, _ishape, _pair, _tensor, pad4
from autosched.relay.op.nn._nn import _canon_conv2d
from autosched.relay.op.op import OUT_ELEMWISE_FUSABLE, OpDef, make_call, register_op
from autosched.workloads.cpu import _root_elementwise
from autosched.workloads.tile_sizes import cpu, divisor, lanes

OP = "nn.deformable_conv2d"
STAGE = "deformable_conv2d_"  # the prefix of the stages the schedule places (pad, corners, weights, columns, gemm)


#: the output channels of a weight block (``OHWI16o``): one AVX-512 vector, two AVX2 ones (a group's channels that 16
#: does not divide take their largest divisor below it)
WEIGHT_BLOCK = 16


def weight_block(group_channels: int) -> int:
    """The block of output channels a group of ``group_channels`` is packed in (a divisor: no block crosses
    groups)."""
    return divisor(group_channels, WEIGHT_BLOCK)


def _kernel(wshape: tuple, layout: str) -> tuple[int, int, int, int, int | None]:
    """``(O, I, KH, KW, block)`` of a weight in ``layout``: OIHW (block None) or OHWI{b}o ([O / b, KH, KW, I, b])."""
    m = re.fullmatch(r"OHWI(\d+)o", layout)
    if layout == "OIHW" and len(wshape) == 4:
        return int(wshape[0]), int(wshape[1]), int(wshape[2]), int(wshape[3]), None
    if m and len(wshape) == 5 and int(wshape[4]) == int(m.group(1)):
        return int(wshape[0]) * int(wshape[4]), int(wshape[3]), int(wshape[1]), int(wshape[2]), int(wshape[4])
    raise RelayError(f"{OP}: a weight of shape {tuple(wshape)} is not in kernel_layout {layout!r} (OIHW: 4-D "
                     "[O, I, KH, KW]; OHWI{b}o: 5-D [O / b, KH, KW, I, b])")


def pack_weight(w: np.ndarray, groups: int) -> tuple[np.ndarray, str]:
    """An OIHW weight in blocks of output channels, and the layout's name: [O / b, KH, KW, I, b], ``OHWI{b}o``."""
    o, i, kh, kw = w.shape
    b = weight_block(o // groups)
    return np.ascontiguousarray(w.reshape(o // b, b, i, kh, kw).transpose(0, 3, 4, 2, 1)), f"OHWI{b}o"


def _geometry(dshape: tuple, wshape: tuple, attrs: dict) -> tuple:
    """``(strides, dilation, (top, left, bottom, right), (OH, OW))`` of a deformable convolution, as conv2d's."""
    sh, sw = _pair(attrs["strides"], OP, "strides")
    dh, dw = _pair(attrs["dilation"], OP, "dilation")
    pt, pl, pb, pr = pad4(attrs["padding"], OP)
    _, _, kh, kw, _ = _kernel(wshape, attrs["kernel_layout"])
    oh = (dshape[2] + pt + pb - ((kh - 1) * dh + 1)) // sh + 1 if sh > 0 and dh > 0 else 0
    ow = (dshape[3] + pl + pr - ((kw - 1) * dw + 1)) // sw + 1 if sw > 0 and dw > 0 else 0
    return (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow)


def _deformable_conv2d_rel(types: list, attrs: dict) -> TensorType:
    if len(types) not in (3, 4):
        raise RelayError(f"{OP} takes 3 arguments (data, offset, weight) or 4 (and a mask), got {len(types)}")
    d, off, w = (_tensor(types, k, OP, what) for k, what in enumerate(("data", "offset", "weight")))
    mask = _tensor(types, 3, OP, "mask") if len(types) == 4 else None
    if attrs["data_layout"] != "NCHW" or attrs["out_layout"] not in ("", "NCHW"):
        raise RelayError(f"{OP}: layouts {attrs['data_layout']}/{attrs['kernel_layout']}/{attrs['out_layout']!r} are "
                         "not supported (NCHW data with an OIHW weight are)")
    if len(d.shape) != 4 or len(off.shape) != 4:
        raise RelayError(f"{OP}: data {d.shape} and offset {off.shape} must be 4-D (NCHW, [N, 2 * deformable_groups "
                         "* KH * KW, OH, OW])")
    n, c = d.shape[:2]
    o, i, kh, kw, block = _kernel(w.shape, attrs["kernel_layout"])
    groups, dgroups = int(attrs["groups"]), int(attrs["deformable_groups"])
    if groups < 1 or c != i * groups or o % groups or (block is not None and (o // groups) % block):
        raise RelayError(f"{OP}: the data has {c} channels but the weight {w.shape} expects {i} x groups={groups} (and "
                         f"its {o} output channels must divide by groups{', in whole blocks' if block else ''})")
    if dgroups < 1 or c % dgroups:
        raise RelayError(f"{OP}: deformable_groups={dgroups} must divide the data's {c} channels")
    if attrs.get("channels") is not None and int(attrs["channels"]) != o:
        raise RelayError(f"{OP}: channels={attrs['channels']} but the weight {w.shape} has {o} output channels")
    if attrs.get("kernel_size") is not None and tuple(_pair(attrs["kernel_size"], OP, "kernel_size")) != (kh, kw):
        raise RelayError(f"{OP}: kernel_size={attrs['kernel_size']} but the weight {w.shape} is {kh}x{kw}")
    strides, dilation, pads, (oh, ow) = _geometry(d.shape, w.shape, attrs)
    if min(*strides, *dilation) < 1 or min(pads) < 0 or oh < 1 or ow < 1:
        raise RelayError(f"{OP}: data {d.shape} with weight {w.shape}, strides {strides}, padding {pads} and "
                         f"dilation {dilation} gives no output (strides and dilation >= 1, padding >= 0)")
    want = (n, 2 * dgroups * kh * kw, oh, ow)
    if off.shape != want:
        raise RelayError(f"{OP}: the offset must be {want} ([N, 2 * deformable_groups * KH * KW, OH, OW] with "
                         f"deformable_groups={dgroups}), got {off.shape}")
    if mask is not None and mask.shape != (n, dgroups * kh * kw, oh, ow):
        raise RelayError(f"{OP}: the mask must be {(n, dgroups * kh * kw, oh, ow)} ([N, deformable_groups * KH * KW, "
                         f"OH, OW]), got {mask.shape}")
    dtypes = {t.dtype for t in (d, off, w) + ((mask,) if mask is not None else ())}
    if len(dtypes) != 1 or d.dtype not in ("float16", "float32", "float64"):
        raise RelayError(f"{OP}: data, offset, weight and mask must share one floating-point dtype, got "
                         f"{', '.join(sorted(dtypes))}")
    out = attrs.get("out_dtype") or d.dtype
    if out not in ("float16", "float32", "float64"):
        raise RelayError(f"{OP}: out_dtype={out!r} is not a floating-point dtype")
    return TensorType((n, o, oh, ow), out)


def _deformable_conv2d_compute(inputs: list, attrs: dict, out_type: TensorType) -> te.Tensor:
    """The padded channels-last data, the per-(deformable group, tap, pixel) corners and weights, the columns, the
    packed weight, the GEMM and the transposing reshape (see the module docstring)."""
    data, offset, weight = inputs[:3]
    mask = inputs[3] if len(inputs) == 4 else None
    n_, c_, h_, w_ = _ishape(data)
    o_, i_, kh_, kw_, block = _kernel(_ishape(weight), attrs["kernel_layout"])
    (sh, sw), (dh, dw), (pt, pl, _, _), (oh_, ow_) = _geometry(_ishape(data), _ishape(weight), attrs)
    groups, dgroups = int(attrs["groups"]), int(attrs["deformable_groups"])
    pixels, per_dgroup, og_ = oh_ * ow_, c_ // dgroups, o_ // groups
    dt = data.dtype
    zero, one = _c(0.0, dt), _c(1.0, dt)

    pad = te.compute((n_, h_ + 2, w_ + 2, c_), lambda n, y, x, c: te.if_then_else(
        te.all(y >= 1, y <= h_, x >= 1, x <= w_), data[n, c, y - 1, x - 1], zero), name=f"{STAGE}pad")

    def position(n, g, kh, kw, y, x):
        """The tap's (y, x) in the data and whether it is on the image (a NaN offset is not: it reads zero)."""
        ch = ((g * kh_ + kh) * kw_ + kw) * 2
        py = te.cast(dt, y * sh + kh * dh - pt) + offset[n, ch, y, x]
        px = te.cast(dt, x * sw + kw * dw - pl) + offset[n, ch + 1, y, x]
        return py, px, te.all(py > -one, py < _c(h_, dt), px > -one, px < _c(w_, dt))

    def corner(n, g, kh, kw, a, y, x):  # the top-left corner's row (a = 0) or column (a = 1) in the padded data
        py, px, on = position(n, g, kh, kw, y, x)
        first = te.cast("int32", te.floor(te.if_then_else(a == 0, py, px))) + 1
        return te.if_then_else(on, first, 0)

    shape = (n_, dgroups, kh_, kw_)
    corners = te.compute(shape + (2, oh_, ow_), corner, name=f"{STAGE}corner")

    def corner_weight(n, g, kh, kw, k, y, x):  # corner k: (top, left), (top, right), (bottom, left), (bottom, right)
        py, px, on = position(n, g, kh, kw, y, x)
        fy, fx = py - te.floor(py), px - te.floor(px)
        wy = te.if_then_else(k >= 2, fy, one - fy)
        wx = te.if_then_else(k % 2 == 1, fx, one - fx)
        scale = wy * wx
        if mask is not None:
            scale = scale * mask[n, (g * kh_ + kh) * kw_ + kw, y, x]
        return te.if_then_else(on, scale, zero)

    weights = te.compute(shape + (4, oh_, ow_), corner_weight, name=f"{STAGE}weight")

    def column(n, p, kh, kw, c):
        g = c // per_dgroup if dgroups > 1 else 0
        at = (n, g, kh, kw)
        oy, ox = p // ow_, p % ow_
        y, x = corners[at + (0, oy, ox)], corners[at + (1, oy, ox)]
        total = None
        for k in range(4):
            term = weights[at + (k, oy, ox)] * pad[n, y + k // 2, x + k % 2, c]
            total = term if total is None else total + term
        return total

    cols = te.compute((n_, pixels, kh_, kw_, c_), column, name=f"{STAGE}columns")
    if block is None:  # blocked here, per call (the relay call and the ONNX importer block a constant weight once)
        block = weight_block(og_)
        packed = te.compute((o_ // block, kh_, kw_, i_, block),
                            lambda j, kh, kw, c, b: weight[j * block + b, c, kh, kw], name=f"{STAGE}packed_weight")
    else:
        packed = weight
    out_dtype = out_type.dtype
    wide = (lambda v: v.astype(out_dtype)) if out_dtype != dt else (lambda v: v)
    rh = te.reduce_axis((0, kh_), name="rh")
    rw = te.reduce_axis((0, kw_), name="rw")
    rc = te.reduce_axis((0, i_), name="rc")

    def product(n, j, p, b):  # output channel j * block + b, of group j * block // og_
        c = rc if groups == 1 else (j * block // og_) * i_ + rc
        return te.sum(wide(cols[n, p, rh, rw, c]) * wide(packed[j, rh, rw, rc, b]), axis=[rh, rw, rc])

    gemm = te.compute((n_, o_ // block, pixels, block), product, name=f"{STAGE}gemm")
    return te.compute((n_, o_, oh_, ow_), lambda n, o, y, x: gemm[n, o // block, y * ow_ + x, o % block],
                      name="deformable_conv2d", tag="deformable_conv2d")


def gemm_nest(sch: Any, gemm: te.Tensor) -> None:
    """The GEMM [N, O / b, pixels, b] in register tiles of a few pixels x a few blocks of output channels
    (``schedules.gemm_tile``), accumulated over the whole reduction (a broadcast of a column per pixel, a load of
    the blocked weight per vector); tiles in parallel, the blocks' weight panels (contiguous) read by every pixel
    tile in turn (they stay in cache)."""
    v = lanes(gemm.dtype)
    n, j, p, b = sch[gemm].op.axis
    batch, blocks, pixels, block = (int(d) for d in gemm.shape)
    depth = 1
    for r in gemm.op.reduce_axis:
        depth *= int(r.dom.extent.value)
    rows, per_tile = schedules.gemm_tile(pixels, blocks, block, depth, gemm.dtype)
    acc = sch.cache_write(gemm, "local")
    jo, ji = sch[gemm].split(j, factor=per_tile)
    po, pi = sch[gemm].split(p, factor=rows)
    sch[gemm].reorder(n, jo, po, pi, ji, b)
    # pixels that no tile divides (7 x 7 = 49): with channel tiles enough for every core, only those run in
    # parallel, so the last pixel tile's guard stays on the pixel loop and loop partitioning lifts it out of the
    # whole tiles (inside one, it would guard every accumulator)
    uneven = pixels % rows and batch * (blocks // per_tile) >= cpu().cores
    tile = sch[gemm].fuse(n, jo) if uneven else sch[gemm].fuse(n, jo, po)
    sch[gemm].parallel(tile)
    bv, bl = sch[gemm].split(b, factor=min(v, block))
    sch[gemm].unroll(pi)
    sch[gemm].unroll(ji)
    sch[gemm].unroll(bv)
    sch[gemm].vectorize(bl)
    sch[acc].compute_at(sch[gemm], po if uneven else tile)
    _, aj, ap, ab = sch[acc].op.axis
    rh, rw, rc = sch[acc].op.reduce_axis
    abv, abl = sch[acc].split(ab, factor=min(v, block))
    rco, rci = sch[acc].split(rc, factor=divisor(int(rc.dom.extent.value), 4))
    sch[acc].reorder(rh, rw, rco, rci, ap, aj, abv, abl)
    sch[acc].unroll(rci)
    sch[acc].unroll(ap)
    sch[acc].unroll(aj)
    sch[acc].unroll(abv)
    sch[acc].vectorize(abl)


def _vector_inner(sch: Any, t: te.Tensor, axis: Any, extent: int, v: int) -> None:
    """``axis`` (the innermost, ``extent`` long) vectorized, in native vectors when longer than one."""
    if extent > v:
        _, axis = sch[t].split(axis, factor=v)
    sch[t].vectorize(axis)


def sample_stages(sch: Any, pad: te.Tensor, corners: te.Tensor, weights: te.Tensor, cols: te.Tensor,
                  packed: te.Tensor | None, dgroups: int) -> None:
    """The padded data, the corners, their weights, the columns and the packed weight (if any) at root, each in
    parallel over its outer axes; the corners and weights vectorized over the pixels, the columns over a deformable
    group's channels (each lane reads its corners from the same place: four contiguous loads a vector)."""
    v = lanes(cols.dtype)
    _root_elementwise(sch, pad, v)
    for t in (corners, weights):
        axes = sch[t].op.axis
        sch[t].parallel(sch[t].fuse(*axes[:-1]))
        _vector_inner(sch, t, axes[-1], int(t.shape[-1]), v)
    n, p, kh, kw, c = sch[cols].op.axis
    sch[cols].parallel(sch[cols].fuse(n, p))
    per_dgroup = int(cols.shape[-1]) // dgroups
    if dgroups > 1:
        _, c = sch[cols].split(c, factor=per_dgroup)
    _vector_inner(sch, cols, c, per_dgroup, v)
    if packed is None:
        return
    axes = sch[packed].op.axis
    sch[packed].parallel(sch[packed].fuse(*axes[:-1]))
    _vector_inner(sch, packed, axes[-1], int(packed.shape[-1]), v)


def _deformable_conv2d_schedule(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """The sampling stages at root (:func:`sample_stages`: each computed once, not once per output channel), the
    GEMM's register tiles (:func:`gemm_nest`), then the reshape and the epilogue parallel over channels."""
    stages = {t.op.name: t for t in schedules.compute_stages(out)}
    gemm = stages.get(f"{STAGE}gemm")
    if gemm is None or attrs is None:
        return schedules.reduction(sch, out)
    kept = tuple(stages[f"{STAGE}{name}"] for name in ("pad", "corner", "weight", "columns"))
    packed = stages.get(f"{STAGE}packed_weight")  # (a blocked weight is read in place)
    schedules.inline_injective(sch, out, keep=kept + ((packed,) if packed is not None else ()))
    sample_stages(sch, *kept, packed, int(attrs["deformable_groups"]))
    gemm_nest(sch, gemm)
    if len(out.shape) != 4 or schedules.shape_of(out) != schedules.shape_of(anchor):
        return schedules.flat_parallel_vector(sch, out)
    on, oc, oy, ox = sch[out].op.axis
    sch[out].parallel(sch[out].fuse(on, oc))
    _vector_inner(sch, out, ox, int(out.shape[3]), lanes(out.dtype))


register_op(OpDef(
    OP, _deformable_conv2d_rel, _deformable_conv2d_compute, OUT_ELEMWISE_FUSABLE,
    attrs={"strides": (1, 1), "padding": (0, 0), "dilation": (1, 1), "deformable_groups": 1, "groups": 1,
           "channels": None, "kernel_size": None, "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "",
           "out_dtype": ""},
    schedule=_deformable_conv2d_schedule, canonical_attrs=_canon_conv2d,
    doc="deformable 2-D convolution (NCHW data, an OIHW or OHWI{b}o weight): each tap read at its window place "
        "moved by an offset, bilinearly (zero off the image), times an optional mask (DCNv2)"))


def deformable_conv2d(data: Expr, offset: Expr, weight: Expr, strides: Any = (1, 1), padding: Any = (0, 0),
                      dilation: Any = (1, 1), deformable_groups: int = 1, groups: int = 1,
                      channels: int | None = None, kernel_size: Any = None, data_layout: str = "NCHW",
                      kernel_layout: str = "OIHW", out_layout: str = "", out_dtype: str = "",
                      mask: Expr | None = None) -> Expr:
    """TVM's deformable convolution: ``offset`` [N, 2 * deformable_groups * KH * KW, OH, OW] holds (y, x) per tap
    and deformable group; ``mask`` (beyond TVM: ONNX's DCNv2) [N, deformable_groups * KH * KW, OH, OW] scales each
    sample; padding 1, 2 or 4 ints (top, left, bottom, right). A constant OIHW weight is given to the op in blocks
    of output channels (:func:`pack_weight`, once, here), the layout its kernel reads."""
    def norm(v: Any) -> Any:
        return v if isinstance(v, int) else tuple(int(a) for a in v)

    if kernel_layout == "OIHW" and isinstance(weight, Constant) and weight.data.ndim == 4 and groups >= 1 and \
            weight.data.shape[0] % groups == 0:
        packed, kernel_layout = pack_weight(weight.data, int(groups))
        weight = const(packed)
    args = [data, offset, weight] + ([mask] if mask is not None else [])
    return make_call(OP, args, strides=norm(strides), padding=norm(padding), dilation=norm(dilation),
                     deformable_groups=int(deformable_groups), groups=int(groups),
                     channels=None if channels is None else int(channels),
                     kernel_size=None if kernel_size is None else norm(kernel_size), data_layout=str(data_layout),
                     kernel_layout=str(kernel_layout), out_layout=str(out_layout), out_dtype=str(out_dtype or ""))


__all__ = ["deformable_conv2d", "pack_weight", "weight_block"]
