"""CPU templates (target kind ``llvm``) for the built-in workloads.

Each is the expert schedule of :mod:`autosched.workloads.cpu` with its fixed
choices turned into knobs: register-block sizes, the split of the reduction,
where the parallel loop ends, what is unrolled, whether B is packed or the
padding inlined. Block sizes are factors of the extents (no tails), and the
vectorized block is at most 64 lanes.
"""

from __future__ import annotations

from autosched.space.config import divisors
from autosched.space.template import register_template
from autosched.workloads.cpu import _lanes, _producer, _root_elementwise, blocked_conv_nest
from autosched.workloads.tile_sizes import cpu
from autosched.workloads.tile_sizes import divisor as _divisor


@register_template("matmul", "llvm")
def matmul_llvm(cfg, sch, tensors, M, N, K, dtype, **_):
    """C in (mr x nr) register blocks accumulated over k; B optionally packed per column panel."""
    A, B, C = tensors
    cfg.define_split("tile_i", M, num_outputs=2, max_factor=16)
    cfg.define_split("tile_j", N, num_outputs=2, max_factor=64)
    cfg.define_split("tile_k", K, num_outputs=2, max_factor=16)
    cfg.define_knob("pack_b", [True, False])
    cfg.define_knob("unroll_k", [True, False])
    CL = sch.cache_write(C, "local")
    BP = sch.cache_read(B, "global", [CL]) if cfg["pack_b"].val else None
    i, j = sch[C].op.axis
    jo, ji = cfg["tile_j"].apply(sch, C, j)
    io, ii = cfg["tile_i"].apply(sch, C, i)
    sch[C].reorder(jo, io, ii, ji)
    sch[C].parallel(jo)
    sch[C].vectorize(ji)
    if BP is not None:
        sch[BP].compute_at(sch[C], jo)
        sch[BP].vectorize(sch[BP].op.axis[1])
    sch[CL].compute_at(sch[C], io)
    ci, cj = sch[CL].op.axis
    (k,) = sch[CL].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(sch, CL, k)
    sch[CL].reorder(ko, ki, ci, cj)
    if cfg["unroll_k"].val:
        sch[CL].unroll(ki)
    sch[CL].unroll(ci)
    sch[CL].vectorize(cj)


@register_template("batch_matmul", "llvm")
def batch_matmul_llvm(cfg, sch, tensors, B, M, N, K, dtype, **_):
    """Per batch the matmul register block; batch and row blocks fused into the parallel loop."""
    X, Y, C = tensors
    cfg.define_split("tile_i", M, num_outputs=2, max_factor=16)
    cfg.define_split("tile_j", N, num_outputs=2, max_factor=64)
    cfg.define_split("tile_k", K, num_outputs=2, max_factor=16)
    cfg.define_knob("parallel", ["b", "b_io"])
    cfg.define_knob("unroll_k", [True, False])
    CL = sch.cache_write(C, "local")
    b, i, j = sch[C].op.axis
    io, ii = cfg["tile_i"].apply(sch, C, i)
    jo, ji = cfg["tile_j"].apply(sch, C, j)
    sch[C].reorder(b, io, jo, ii, ji)
    outer = sch[C].fuse(b, io) if cfg["parallel"].val == "b_io" else b
    sch[C].parallel(outer)
    sch[C].vectorize(ji)
    sch[CL].compute_at(sch[C], jo)
    _, ci, cj = sch[CL].op.axis
    (k,) = sch[CL].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(sch, CL, k)
    sch[CL].reorder(ko, ki, ci, cj)
    if cfg["unroll_k"].val:
        sch[CL].unroll(ki)
    sch[CL].unroll(ci)
    sch[CL].vectorize(cj)


@register_template("dense", "llvm")
def dense_llvm(cfg, sch, tensors, N, CI, CO, bias, relu, dtype, **_):
    """Output features in vector lanes, a block of rows, k split and unrolled; epilogues fused."""
    out = tensors[-1]
    chain, stage = [], out
    while stage.op.name in ("relu", "bias_add"):
        chain.append(stage)
        stage = next(t for t in stage.op.input_tensors if t.op.name in ("bias_add", "dense"))
    dense_t = stage
    cfg.define_split("tile_i", N, num_outputs=2, max_factor=8)
    cfg.define_split("tile_j", CO, num_outputs=2, max_factor=64)
    cfg.define_split("tile_k", CI, num_outputs=2, max_factor=16)
    cfg.define_knob("unroll_k", [True, False])
    for t in chain[1:]:
        sch[t].compute_inline()
    DL = sch.cache_write(out, "local") if out is dense_t else dense_t
    i, j = sch[out].op.axis
    io, ii = cfg["tile_i"].apply(sch, out, i)
    jo, ji = cfg["tile_j"].apply(sch, out, j)
    sch[out].reorder(io, jo, ii, ji)
    ij = sch[out].fuse(io, jo)
    sch[out].parallel(ij)
    sch[out].vectorize(ji)
    sch[DL].compute_at(sch[out], ij)
    ci, cj = sch[DL].op.axis
    (k,) = sch[DL].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(sch, DL, k)
    sch[DL].reorder(ko, ki, ci, cj)
    if cfg["unroll_k"].val:
        sch[DL].unroll(ki)
    sch[DL].unroll(ci)
    sch[DL].vectorize(cj)


def _pad_knob(cfg, sch, out, lanes):
    """Padding computed at the root (parallel, vectorized) or inlined into the convolution."""
    pad = _producer(out, "pad")
    cfg.define_knob("pad", ["root", "inline"])
    if pad is None:
        return
    if cfg["pad"].val == "inline":
        sch[pad].compute_inline()
    else:
        _root_elementwise(sch, pad, lanes)


@register_template("conv2d", "llvm")
def conv2d_llvm(cfg, sch, tensors, N, H, W, CI, CO, KH, KW, stride, padding, layout, dtype, **_):
    """A register block of output channels x rows x columns, the input-channel loop split."""
    data, weight, out = tensors
    OH = (H + 2 * padding - KH) // stride + 1
    OW = (W + 2 * padding - KW) // stride + 1
    lanes = _lanes(dtype)
    nchw = layout == "NCHW"
    # NCHW: columns in the vector lanes; NHWC: output channels
    cfg.define_split("tile_f", CO, num_outputs=2, max_factor=16 if nchw else 64)
    cfg.define_split("tile_y", OH, num_outputs=2, max_factor=4)
    cfg.define_split("tile_x", OW, num_outputs=2, max_factor=64 if nchw else 8)
    cfg.define_split("tile_rc", CI, num_outputs=2, max_factor=16)
    cfg.define_knob("reduce_order", ["rc_outer", "rc_inner"])
    cfg.define_annotate("ann_reduce", [None, None], policy="try_unroll")
    cfg.define_knob("parallel", ["n_fo_yo", "n_fo"] if nchw else ["n_yo_xo", "n_yo"])
    _pad_knob(cfg, sch, out, lanes)
    OL = sch.cache_write(out, "local")
    if nchw:
        n, f, y, x = sch[out].op.axis
        fo, fi = cfg["tile_f"].apply(sch, out, f)
        yo, yi = cfg["tile_y"].apply(sch, out, y)
        xo, xi = cfg["tile_x"].apply(sch, out, x)
        sch[out].reorder(n, fo, yo, xo, yi, fi, xi)
        par = sch[out].fuse(n, fo, yo) if cfg["parallel"].val == "n_fo_yo" else sch[out].fuse(n, fo)
        sch[out].parallel(par)
        sch[out].vectorize(xi)
        sch[OL].compute_at(sch[out], xo)
        _, cf, cy, cx = sch[OL].op.axis
        rc, rh, rw = sch[OL].op.reduce_axis
        block = [cy, cf, cx]
    else:
        n, y, x, f = sch[out].op.axis
        yo, yi = cfg["tile_y"].apply(sch, out, y)
        xo, xi = cfg["tile_x"].apply(sch, out, x)
        fo, fi = cfg["tile_f"].apply(sch, out, f)
        sch[out].reorder(n, yo, xo, fo, yi, xi, fi)
        par = sch[out].fuse(n, yo, xo) if cfg["parallel"].val == "n_yo_xo" else sch[out].fuse(n, yo)
        sch[out].parallel(par)
        sch[out].vectorize(fi)
        sch[OL].compute_at(sch[out], fo)
        _, cy, cx, cf = sch[OL].op.axis
        rh, rw, rc = sch[OL].op.reduce_axis
        block = [cy, cx, cf]
    rco, rci = cfg["tile_rc"].apply(sch, OL, rc)
    if cfg["reduce_order"].val == "rc_outer":
        sch[OL].reorder(rco, rh, rw, rci, *block)
        inner_red = [rw, rci]
    else:
        sch[OL].reorder(rh, rw, rco, rci, *block)
        inner_red = [rco, rci]
    cfg["ann_reduce"].apply(sch, OL, inner_red)
    sch[OL].unroll(block[0])
    sch[OL].unroll(block[1])
    sch[OL].vectorize(block[2])


@register_template("depthwise_conv2d", "llvm")
def depthwise_conv2d_llvm(cfg, sch, tensors, N, C, H, W, KH, KW, stride, padding, dtype, **_):
    """Channels in parallel; a block of output rows x columns accumulated in registers."""
    data, weight, out = tensors
    OH = (H + 2 * padding - KH) // stride + 1
    OW = (W + 2 * padding - KW) // stride + 1
    cfg.define_split("tile_y", OH, num_outputs=2, max_factor=8)
    cfg.define_split("tile_x", OW, num_outputs=2, max_factor=64)
    cfg.define_knob("parallel", ["n_c", "n_c_yo"])
    cfg.define_annotate("ann_window", [None, None], policy="try_unroll")
    _pad_knob(cfg, sch, out, _lanes(dtype))
    OL = sch.cache_write(out, "local")
    n, c, y, x = sch[out].op.axis
    yo, yi = cfg["tile_y"].apply(sch, out, y)
    xo, xi = cfg["tile_x"].apply(sch, out, x)
    sch[out].reorder(n, c, yo, xo, yi, xi)
    par = sch[out].fuse(n, c, yo) if cfg["parallel"].val == "n_c_yo" else sch[out].fuse(n, c)
    sch[out].parallel(par)
    sch[out].vectorize(xi)
    sch[OL].compute_at(sch[out], xo)
    _, _, cy, cx = sch[OL].op.axis
    rh, rw = sch[OL].op.reduce_axis
    sch[OL].reorder(rh, rw, cy, cx)
    cfg["ann_window"].apply(sch, OL, [rh, rw])
    sch[OL].unroll(cy)
    sch[OL].vectorize(cx)


@register_template("pool2d", "llvm")
def pool2d_llvm(cfg, sch, tensors, N, C, H, W, KH, KW, stride, padding, pool_type, dtype, **_):
    """Channels (and rows) in parallel, a vector of output columns, the window loops inside."""
    data, out = tensors
    OW = (W + 2 * padding - KW) // stride + 1
    red = out if pool_type == "max" else _producer(out, "pool_sum")
    pad = _producer(red, "pad")
    cfg.define_split("tile_x", OW, num_outputs=2, max_factor=64)
    cfg.define_knob("parallel", ["n_c", "n_c_y"])
    cfg.define_annotate("ann_window", [None, None], policy="try_unroll")
    if pad is not None:
        sch[pad].compute_inline()
    n, c, y, x = sch[out].op.axis
    xo, xi = cfg["tile_x"].apply(sch, out, x)
    par = sch[out].fuse(n, c, y) if cfg["parallel"].val == "n_c_y" else sch[out].fuse(n, c)
    sch[out].parallel(par)
    if red is out:
        rh, rw = sch[out].op.reduce_axis
        sch[out].reorder(xo, rh, rw, xi)
        cfg["ann_window"].apply(sch, out, [rh, rw])
        sch[out].vectorize(xi)
    else:
        sch[out].vectorize(xi)
        sch[red].compute_at(sch[out], xo)
        _, _, _, rx = sch[red].op.axis
        rh, rw = sch[red].op.reduce_axis
        sch[red].reorder(rh, rw, rx)
        cfg["ann_window"].apply(sch, red, [rh, rw])
        sch[red].vectorize(rx)


@register_template("softmax", "llvm")
def softmax_llvm(cfg, sch, tensors, M, N, dtype, **_):
    """One row per parallel iteration; exp computed once into a row buffer or inlined twice."""
    X, out = tensors
    ex = _producer(out, "exp")
    sm = _producer(out, "row_sum")
    mx = _producer(ex, "row_max")
    cfg.define_split("tile_j", N, num_outputs=2, max_factor=64)
    cfg.define_knob("exp", ["row", "inline"])
    i, j = sch[out].op.axis
    sch[out].parallel(i)
    if cfg["exp"].val == "inline":
        sch[ex].compute_inline()
        stages = (mx, sm)
    else:
        stages = (mx, ex, sm)
    for t in stages:
        sch[t].compute_at(sch[out], i)
    if cfg["exp"].val == "row":
        eo, ei = cfg["tile_j"].apply(sch, ex, sch[ex].op.axis[1])
        sch[ex].vectorize(ei)
    jo, ji = cfg["tile_j"].apply(sch, out, j)
    sch[out].vectorize(ji)


@register_template("elementwise", "llvm")
def elementwise_llvm(cfg, sch, tensors, N, C, H, W, op, dtype, **_):
    """All axes fused, then (parallel chunks, unrolled vectors, vector lanes)."""
    out = tensors[-1]
    cfg.define_split("tile", N * C * H * W, num_outputs=3, max_factor=64)
    cfg.define_knob("unroll", [False, True])
    fused = sch[out].fuse(*sch[out].op.axis)
    outer, mid, inner = cfg["tile"].apply(sch, out, fused)
    sch[out].parallel(outer)
    if cfg["unroll"].val:
        sch[out].unroll(mid)
    sch[out].vectorize(inner)


@register_template("conv2d_nchwc", "llvm")
def conv2d_nchwc_llvm(cfg, sch, tensors, N, CI, H, W, CO, KH, KW, stride, padding, groups, ic_block, oc_block,
                      dtype, **_):
    """Blocked convolution: the register tile (output-channel blocks x output pixels) among those that fit the
    target's registers, rows or channel blocks outermost in the parallel loop, the input-channel block
    unrolled or not, the kernel width unrolled or not, the padding copied at the root or read in place."""
    data, weight, out = tensors
    OW = (W + 2 * padding - KW) // stride + 1
    regs, per_block = cpu().vector_registers, -(-oc_block // _lanes(dtype))
    tiles = [[b, p] for b in divisors(CO // oc_block) if b <= 4 for p in divisors(OW)
             if p <= 32 and b * per_block * (p + 1) + 1 <= regs]
    cfg.define_knob("register_tile", tiles or [[1, 1]])
    cfg.define_knob("rows_outer", [True, False])
    cfg.define_knob("unroll_ib", sorted({1, _divisor(ic_block, 4), min(ic_block, 16)}))
    cfg.define_knob("unroll_kw", [False, True])
    pad = _producer(out, "pad")
    cfg.define_knob("pad", ["root", "inline"])
    if pad is not None:
        if cfg["pad"].val == "root":
            _root_elementwise(sch, pad, _lanes(dtype))
        else:
            sch[pad].compute_inline()
    blocks, pixels = cfg["register_tile"].val
    OL = sch.cache_write(out, "local")
    blocked_conv_nest(sch, out, OL, blocks=blocks, pixels=pixels, rows_outer=cfg["rows_outer"].val,
                      unroll_kw=cfg["unroll_kw"].val, unroll_ib=cfg["unroll_ib"].val)


@register_template("depthwise_conv2d_nchwc", "llvm")
def depthwise_conv2d_nchwc_llvm(cfg, sch, tensors, N, C, H, W, KH, KW, stride, padding, block, dtype, **_):
    """Blocked depthwise convolution: the run of output pixels in registers (up to the target's registers),
    the kernel width unrolled or not, the padding read in place or copied at the root."""
    data, weight, out = tensors
    OW = (W + 2 * padding - KW) // stride + 1
    per_pixel = -(-block // _lanes(dtype))
    cfg.define_knob("pixels", [p for p in divisors(OW) if 2 * p * per_pixel < cpu().vector_registers] or [1])
    cfg.define_knob("unroll_kw", [True, False])
    cfg.define_knob("pad", ["inline", "root"])
    pad = _producer(out, "pad")
    if pad is not None:
        if cfg["pad"].val == "root":
            _root_elementwise(sch, pad, _lanes(dtype))
        else:
            sch[pad].compute_inline()
    OL = sch.cache_write(out, "local")
    n, cb, y, x, c = sch[out].op.axis
    xo, xi = sch[out].split(x, factor=cfg["pixels"].val)
    sch[out].reorder(n, cb, y, xo, xi, c)
    sch[out].parallel(sch[out].fuse(n, cb, y))
    sch[out].vectorize(c)
    sch[OL].compute_at(sch[out], xo)
    _, _, _, cx, cc = sch[OL].op.axis
    kh, kw = sch[OL].op.reduce_axis
    sch[OL].reorder(kh, kw, cx, cc)
    if cfg["unroll_kw"].val:
        sch[OL].unroll(kw)
    sch[OL].unroll(cx)
    sch[OL].vectorize(cc)
