"""CPU schedules of the built-in workloads, written with the public primitives only: each is at once the
expert (default) schedule and the template (target kind ``llvm``).

Each is ``fn(cfg, sch, tensors, **params)`` and leaves its steps in ``sch.trace``. Every choice an expert
makes (a register block's size, the split of the reduction, where the parallel loop ends, what is unrolled,
whether B is packed or the padding inlined) is a knob declared on ``cfg`` with the expert's choice for this
target and shape as its ``default`` (:mod:`autosched.workloads.knobs`). Registered here with
``@cpu_schedule``, each runs with every knob at its default as the workload's expert schedule;
:mod:`autosched.space.cpu_templates` registers the same functions as the templates, their knobs free. The
loop nests (``dense_nest``, ``conv2d_nest``, ...) take ``cfg`` too (default: the defaults), so relay's fused
kernels share them.

The common pattern (as in TVM's x86 schedules): a register block of the output is accumulated in a
``cache_write`` stage computed at the block's loop, its innermost axis vectorized and the next one unrolled,
the reduction outside that block, and the outermost loops fused and run in parallel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autosched.workloads.knobs import DefaultConfig
from autosched.workloads.registry import register_schedule
from autosched.workloads.tile_sizes import (
    TRANSPOSE_RUN,
    channel_block,
    conv_tile,
    cpu,
    matmul_tile,
    nchw_conv_layout,
    nchw_conv_tile,
)
from autosched.workloads.tile_sizes import divisor as _divisor
from autosched.workloads.tile_sizes import lanes as _lanes

#: workload name -> its schedule ``fn(cfg, sch, tensors, **params)``: the expert schedule with ``cfg`` a
#: DefaultConfig, the template (autosched.space.cpu_templates) with ``cfg`` the space's ConfigSpace
SCHEDULES: dict[str, Callable[..., None]] = {}


def cpu_schedule(workload: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``fn(cfg, sch, tensors, **params)`` as ``workload``'s expert schedule on ``llvm`` (every knob
    at its default) and list it in :data:`SCHEDULES`, where the template registry finds it."""

    def do(fn: Callable[..., None]) -> Callable[..., None]:
        def expert(sch: Any, tensors: list, **params: Any) -> None:
            fn(DefaultConfig(), sch, tensors, **params)

        expert.__name__ = expert.__qualname__ = f"{fn.__name__}_default"
        expert.__doc__ = fn.__doc__
        SCHEDULES[workload] = fn
        register_schedule(workload)(expert)
        return fn

    return do


def _cfg(cfg: Any) -> Any:
    return DefaultConfig() if cfg is None else cfg


def _producer(tensor, name_contains: str):
    for t in tensor.op.input_tensors:
        if name_contains in t.op.name:
            return t
    return None


def _root_elementwise(sch, t, lanes: int) -> None:
    """Parallel over the outer axes, vectorized innermost: for pads and other root elementwise stages. A
    channel block shorter than a vector (NCHW1c) is fused with the pixels before it first (contiguous: whole
    vectors); a plain NCHW row shorter than a vector stays one short vector (rows fused would read the
    unpadded input of a pad by gathers)."""
    axes = sch[t].op.axis
    if len(axes) == 5 and int(sch[t].op.shape[-1]) < lanes:
        sch[t].parallel(sch[t].fuse(*axes[:-2]))
        inner = sch[t].fuse(axes[-2], axes[-1])
        _, vi = sch[t].split(inner, factor=lanes)
        sch[t].vectorize(vi)
        return
    if len(axes) >= 3:
        outer = sch[t].fuse(*axes[:-1])
        sch[t].parallel(outer)
    elif len(axes) == 2:
        sch[t].parallel(axes[0])
    inner = sch[t].op.axis[-1]
    if int(sch[t].op.shape[-1]) >= lanes:
        _, vi = sch[t].split(inner, factor=lanes)
        sch[t].vectorize(vi)
    else:
        sch[t].vectorize(inner)


@cpu_schedule("matmul")
def matmul_cpu(cfg, sch, tensors, M, N, K, dtype, **_):
    """A register tile of C sized for the target (4 x 4 vectors on AVX-512, 4 x 2 on AVX2) accumulated over k
    (unrolled by 4); B packed per column panel so the k loop streams it. With fewer column panels than
    cores, panels and row tiles share the parallel loop (and B, by default, is read in place)."""
    A, B, C = tensors
    mr, nr = matmul_tile(M, N, dtype)
    kr = _divisor(K, 4)
    cfg.define_split("tile_i", M, num_outputs=2, max_factor=16, default=(-(-M // mr), mr))
    cfg.define_split("tile_j", N, num_outputs=2, max_factor=64, default=(-(-N // nr), nr))
    cfg.define_split("tile_k", K, num_outputs=2, max_factor=16, default=(K // kr, kr))
    panels_per_core = N // cfg["tile_j"].size[-1] >= cpu().cores
    cfg.define_knob("pack_b", [True, False], default=panels_per_core)
    cfg.define_knob("unroll_k", [True, False], default=True)
    CL = sch.cache_write(C, "local")
    BP = sch.cache_read(B, "global", [CL]) if cfg["pack_b"].val else None
    i, j = sch[C].op.axis
    jo, ji = cfg["tile_j"].apply(sch, C, j)
    io, ii = cfg["tile_i"].apply(sch, C, i)
    sch[C].reorder(jo, io, ii, ji)
    tile = io if panels_per_core else sch[C].fuse(jo, io)
    sch[C].parallel(jo if panels_per_core else tile)
    sch[C].vectorize(ji)
    if BP is not None:
        sch[BP].compute_at(sch[C], jo if panels_per_core else tile)
        sch[BP].vectorize(sch[BP].op.axis[1])
    sch[CL].compute_at(sch[C], tile)
    ci, cj = sch[CL].op.axis
    (k,) = sch[CL].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(sch, CL, k)
    sch[CL].reorder(ko, ki, ci, cj)
    if cfg["unroll_k"].val:
        sch[CL].unroll(ki)
    sch[CL].unroll(ci)
    sch[CL].vectorize(cj)


@cpu_schedule("batch_matmul")
def batch_matmul_cpu(cfg, sch, tensors, B, M, N, K, dtype, **_):
    """Per batch, the matmul register block; batches and row blocks run in parallel; by default the reduction
    is not split."""
    X, Y, C = tensors
    mr, nr = _divisor(M, 4), _divisor(N, 2 * _lanes(dtype))
    cfg.define_split("tile_i", M, num_outputs=2, max_factor=16, default=(M // mr, mr))
    cfg.define_split("tile_j", N, num_outputs=2, max_factor=64, default=(N // nr, nr))
    cfg.define_split("tile_k", K, num_outputs=2, max_factor=16, default=(K,))
    cfg.define_knob("parallel", ["b", "b_io"], default="b_io")
    cfg.define_knob("unroll_k", [True, False], default=False)
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
    *ko, ki = cfg["tile_k"].apply(sch, CL, k)
    sch[CL].reorder(*ko, ki, ci, cj)
    if cfg["unroll_k"].val:
        sch[CL].unroll(ki)
    sch[CL].unroll(ci)
    sch[CL].vectorize(cj)


@cpu_schedule("dense")
def dense_cpu(cfg, sch, tensors, N, CI, CO, bias, relu, dtype, **_):
    """Output features in vector lanes (weights gathered along k), epilogues fused into the output loop: see
    :func:`dense_nest`."""
    out = tensors[-1]
    stage = out
    chain = []
    while stage.op.name in ("relu", "bias_add"):
        chain.append(stage)
        stage = next(t for t in stage.op.input_tensors if t.op.name in ("bias_add", "dense"))
    dense_t = stage
    for t in chain[1:]:
        sch[t].compute_inline()
    dense_nest(sch, out, sch.cache_write(out, "local") if out is dense_t else dense_t, cfg)


def dense_nest(sch, out, DL, cfg=None) -> None:
    """The loop nest of a dense layer (2-D) whose accumulator stage is ``DL`` (computed at the output's tile
    loop): by default two vectors of output columns per tile and one row, rows x column tiles in parallel, the
    reduction split by 4 and unrolled. A block of rows (``tile_i``) is accumulated inside the reduction."""
    cfg = _cfg(cfg)
    N, CO = (int(d) for d in out.shape)
    (k,) = sch[DL].op.reduce_axis
    K = int(k.dom.extent.value)
    jb, kb = min(CO, 2 * _lanes(out.dtype)), _divisor(K, 4)
    cfg.define_split("tile_i", N, num_outputs=2, max_factor=8, default=(N,))
    cfg.define_split("tile_j", CO, num_outputs=2, max_factor=64, default=(-(-CO // jb), jb))
    cfg.define_split("tile_k", K, num_outputs=2, max_factor=16, default=(K // kb, kb))
    cfg.define_knob("unroll_k", [True, False], default=True)
    i, j = sch[out].op.axis
    io, *ii = cfg["tile_i"].apply(sch, out, i)
    jo, ji = cfg["tile_j"].apply(sch, out, j)
    if ii:
        sch[out].reorder(io, jo, *ii, ji)
    ij = sch[out].fuse(io, jo)
    sch[out].parallel(ij)
    sch[out].vectorize(ji)
    sch[DL].compute_at(sch[out], ij)
    ci, cj = sch[DL].op.axis
    ko, ki = cfg["tile_k"].apply(sch, DL, k)
    sch[DL].reorder(*((ko, ki, ci) if ii else (ci, ko, ki)), cj)
    if cfg["unroll_k"].val:
        sch[DL].unroll(ki)
    if ii:
        sch[DL].unroll(ci)
    sch[DL].vectorize(cj)


#: where a convolution's padding goes: copied at the root, or inlined into the convolution
PAD_PLACES = ["root", "inline"]
#: FMAs in a blocked convolution's unrolled step (register tile x unrolled input channels) beyond which its
#: channels are not unrolled: AVX-512's 2 x 14 and 2 x 7 tiles (28 and 14 FMAs) ran 1.02-1.34x faster not
#: unrolled, AVX2's 8-12 FMA tiles up to 1.24x faster unrolled by 4 (docs/measured_choices.md)
UNROLLED_FMAS = 48


def _pad_knob(cfg, sch, out, lanes: int, default: str = "root") -> None:
    """The padding of a convolution computed at the root (parallel, vectorized) or inlined into it."""
    pad = _producer(out, "pad")
    cfg.define_knob("pad", PAD_PLACES, default=default)
    if pad is None:
        return
    if cfg["pad"].val == "inline":
        sch[pad].compute_inline()
    else:
        _root_elementwise(sch, pad, lanes)


@cpu_schedule("conv2d")
def conv2d_cpu(cfg, sch, tensors, N, H, W, CI, CO, KH, KW, stride, padding, layout, dtype, **_):
    """NCHW: computed in blocked layouts (:func:`conv2d_packed`) or directly (the padding copied at the root,
    then :func:`conv2d_nest`), whichever the target's default says (a knob); NHWC: directly."""
    data, weight, out = tensors
    if layout == "NCHW":  # both forms' knobs are declared whichever runs (a template declares them all)
        cfg.define_knob("layout", ["direct", "packed"], default=nchw_conv_layout(stride))
        OH, OW = (int(d) for d in out.shape[2:])
        ob = channel_block(CO, dtype)
        blocked_conv_knobs(cfg, OH, OW, CO, ob, channel_block(CI, dtype), weight, data, dtype)
        if cfg["layout"].val == "packed":
            # the padding read in place (no work on it: 1.02-1.16x on 3x3 layers 7 to 112 wide, both ISAs), but
            # copied once for a strided convolution, as place_padding does (docs/measured_choices.md)
            cfg.define_knob("pad", PAD_PLACES, default="root" if stride > 1 else "inline")
            _conv2d_nest_knobs(cfg, True, CO, OH, OW, CI, KW, dtype)
            conv2d_packed(cfg, sch, data, weight, out)
            return
    _pad_knob(cfg, sch, out, _lanes(dtype))
    conv2d_nest(sch, out, sch.cache_write(out, "local"), layout, cfg)


def blocked_conv_knobs(cfg, OH: int, OW: int, CO: int, ob: int, ib: int, weight, data, dtype: str) -> None:
    """The knobs of a blocked convolution's nest (:func:`conv2d_nchwc_cpu`, :func:`conv2d_packed`), with this
    target's defaults: the register tile (the tiles of one row that fit the registers), rows or channel blocks
    outermost in the parallel loop, the channels of an input block unrolled by (4, unless the tile's step is
    big enough already: :data:`UNROLLED_FMAS`)."""
    regs, per_block = cpu().vector_registers, -(-ob // _lanes(dtype))
    tiles = [[b, 1, p] for b in _divisors(CO // ob) if b <= 4 for p in range(1, min(OW, 32) + 1)
             if b * per_block * (p + 1) + 1 <= regs]
    tile = conv_tile(OH, OW, CO // ob, ob, dtype)
    cfg.define_knob("register_tile", tiles or [[1, 1, 1]], default=list(tile))
    cfg.define_knob("rows_outer", [True, False], default=not weights_outweigh_input(weight, data))
    unroll = _divisor(ib, 4)
    fmas = tile[0] * per_block * tile[1] * tile[2] * unroll
    cfg.define_knob("unroll_ib", sorted({1, unroll, min(ib, 16)}), default=unroll if fmas <= UNROLLED_FMAS else 1)


def conv2d_packed(cfg, sch, data, weight, out) -> None:
    """An NCHW convolution computed as a blocked one (NCHW[x]c, as :func:`conv2d_nchwc_cpu`), all in the
    schedule: the padded input stored with a block of input channels innermost and the weights copied to
    OI[x]iHW[y]o (``transform_layout``; a block's channels and window are one run, as in the source), the
    output computed into a cache laid out NCHW[y]c by its loops, a band of rows at a time, and copied back to
    NCHW; the copies are transposes in registers (codegen's transposed stores). The register tile, the parallel
    order and the unrolled input channels are knobs as for the blocked kernel; so is the padding (``pad``:
    copied with the input, or ``inline``, the default for stride 1: the input copied unpadded and read in place,
    its guards partitioned away, so no work is done on the padding)."""
    dt = out.dtype
    _, CO, OH, OW = (int(d) for d in out.shape)
    ib, ob = channel_block(int(data.shape[1]), dt), channel_block(CO, dt)
    pad = _producer(out, "pad")
    # the output, computed into a cache laid out NCHW[ob]c by its loops, then copied back
    n, f, y, x = sch[out].op.axis
    fo, fi = sch[out].split(f, factor=ob)
    sch[out].reorder(n, fo, y, x, fi)
    blocked = sch.cache_write(out, "global")
    # the weights copied to OI[ib]iHW[ob]o, the (padded) input stored NCHW[ib]c
    wc = sch.cache_read(weight, "global", [blocked])
    wo, wio, wi, wh, ww, woi = sch[wc].transform_layout(lambda o, i, h, w: [o // ob, i // ib, i % ib, h, w, o % ob])
    sch[wc].parallel(wo)
    # a block's (i, h, w) is one contiguous run of the source and of the copy: runs of it read as vectors,
    # transposed in registers into the output channels' vectors
    run = sch[wc].fuse(wi, wh, ww)
    runs = ib * int(weight.shape[2]) * int(weight.shape[3])
    lanes = min(TRANSPOSE_RUN, runs & -runs)  # whole power-of-two vectors along the run
    if ib > 1:
        rno, rni = sch[wc].split(run, factor=lanes)
        sch[wc].reorder(wo, wio, rno, woi, rni)
        sch[wc].unroll(woi)
        sch[wc].vectorize(rni)
    else:
        sch[wc].vectorize(woi)
    if pad is None:
        src = sch.cache_read(data, "global", [blocked])
    elif cfg["pad"].val == "inline":  # the input copied unpadded, read in place: guards partitioned away
        src = sch.cache_read(data, "global", [pad])
        sch[pad].compute_inline()
    else:
        src = pad
    if ib > 1:  # rows of ib channels read as vectors, transposed in registers into pixels of ib channels
        width = int(sch[src].op.output(0).shape[3])  # a run that divides it: a partial one would be scattered
        pn, pc, py, px, pi = sch[src].transform_layout(lambda n_, c, h, w: [n_, c // ib, h, w, c % ib])
        sch[src].parallel(sch[src].fuse(pn, pc, py))
        pxo, pxi = sch[src].split(px, factor=_divisor(width, TRANSPOSE_RUN))
        sch[src].reorder(pxo, pi, pxi)
        sch[src].unroll(pi)
        sch[src].vectorize(pxi)
    else:
        _root_elementwise(sch, src, _lanes(dt))
    # the blocked kernel: reduction over input-channel blocks, the window, the channels of a block
    acc = sch.cache_write(blocked, "local")
    rc, rh, rw = sch[acc].op.reduce_axis
    rco, rci = sch[acc].split(rc, factor=ib)
    blocks, rows, pixels = cfg["register_tile"].val
    # the output's loops: a band of rows x channel blocks per parallel step, its blocked result computed there
    # (a few KiB, in the core's cache) and copied back to NCHW at once: a run of pixels of a block's channels
    # read as vectors and transposed in registers into a run of each channel's row
    n, f, y, x = sch[out].op.axis
    fo, fi = sch[out].split(f, factor=ob * blocks)
    fb, fl = sch[out].split(fi, factor=ob)
    yo, yi = sch[out].split(y, factor=rows)
    xo, xi = sch[out].split(x, factor=_divisor(OW, TRANSPOSE_RUN))
    outer = (n, yo, fo) if cfg["rows_outer"].val else (n, fo, yo)
    sch[out].reorder(*outer, fb, yi, xo, xi, fl)
    par = sch[out].fuse(*outer)
    sch[out].parallel(par)
    sch[out].unroll(xi)
    sch[out].vectorize(fl)
    sch[blocked].compute_at(sch[out], par)
    _, bb, by, bx, bo = sch[blocked].op.axis
    bxo, bxi = sch[blocked].split(bx, factor=pixels)
    sch[blocked].reorder(by, bxo, bb, bxi, bo)
    sch[blocked].vectorize(bo)
    sch[acc].compute_at(sch[blocked], bxo)
    blocked_accumulate(sch, acc, [rco, rh, rw, rci], cfg["unroll_ib"].val, window_inside=True,
                       channels_innermost=ib == 1)


def _conv2d_nest_knobs(cfg, nchw: bool, CO: int, OH: int, OW: int, CI: int, KW: int, dtype: str) -> None:
    """The knobs of :func:`conv2d_nest`, with this target's defaults."""
    lanes = _lanes(dtype)
    if nchw:
        fb, yb, xb = nchw_conv_tile(CO, OH, OW, dtype)
    else:
        fb, yb, xb = _divisor(CO, 2 * lanes), 1, _divisor(OW, 7)
    cfg.define_split("tile_f", CO, num_outputs=2, max_factor=16 if nchw else 64, default=(CO // fb, fb))
    cfg.define_split("tile_y", OH, num_outputs=2, max_factor=4, default=(OH // yb, yb) if yb > 1 else (OH,))
    cfg.define_split("tile_x", OW, num_outputs=2, max_factor=64 if nchw else 8, default=(OW // xb, xb))
    cfg.define_split("tile_rc", CI, num_outputs=2, max_factor=16, default=(CI,))
    cfg.define_knob("reduce_order", ["rc_outer", "rc_inner"], default="rc_outer" if nchw else "rc_inner")
    cfg.define_annotate("ann_reduce", [None, None], policy="try_unroll",
                        default=("none", "unroll" if nchw and KW <= 7 else "none"))
    cfg.define_knob("parallel", ["n_fo_yo", "n_fo"] if nchw else ["n_yo_xo", "n_yo"],
                    default="n_yo_fo" if nchw else "n_yo_xo")


def conv2d_nest(sch, out, OL, layout: str = "NCHW", cfg=None) -> None:
    """The loop nest of a conv2d (NCHW or NHWC) whose accumulator stage is ``OL`` (computed at the output's
    innermost tile loop). NCHW, by default: a block of output channels x one or two rows x one vector of
    output columns (a divisor of the width: no tails) sized for the target's registers
    (:func:`nchw_conv_tile`), the reduction outside the block with the window's columns unrolled (up to 7),
    rows outermost in the parallel loop (each thread then reads its own band of the
    padded input: half the cache traffic). NHWC: output channels in vector lanes (two vectors), a few output
    columns unrolled, the input channels innermost in the reduction. Knobs: the blocks of output channels,
    rows and columns, a split of the input channels and where it goes, the window unrolled or not, and how
    much of the outer loops runs in parallel."""
    cfg = _cfg(cfg)
    nchw = layout == "NCHW"
    if nchw:
        n, f, y, x = sch[out].op.axis
        _, CO, OH, OW = (int(d) for d in out.shape)
        rc, rh, rw = sch[OL].op.reduce_axis
    else:
        n, y, x, f = sch[out].op.axis
        _, OH, OW, CO = (int(d) for d in out.shape)
        rh, rw, rc = sch[OL].op.reduce_axis
    _conv2d_nest_knobs(cfg, nchw, CO, OH, OW, int(rc.dom.extent.value), int(rw.dom.extent.value), out.dtype)
    fo, fi = cfg["tile_f"].apply(sch, out, f)
    yo, *yi = cfg["tile_y"].apply(sch, out, y)
    xo, xi = cfg["tile_x"].apply(sch, out, x)
    par = cfg["parallel"].val
    if nchw:  # output columns in lanes, the register block at the column tile
        outer = [n, yo, fo, xo] if par == "n_yo_fo" else [n, fo, yo, xo]
        inner, at = [*yi, fi, xi], xo
        fused = {"n_yo_fo": (n, yo, fo), "n_fo_yo": (n, fo, yo), "n_fo": (n, fo)}[par]
    else:  # output channels in lanes, the register block at the channel tile
        outer, inner, at = [n, yo, xo, fo], [*yi, xi, fi], fo
        fused = {"n_yo_xo": (n, yo, xo), "n_yo": (n, yo)}[par]
    sch[out].reorder(*outer, *inner)
    sch[out].parallel(sch[out].fuse(*fused))
    sch[out].vectorize(inner[-1])
    sch[OL].compute_at(sch[out], at)
    _, a1, a2, a3 = sch[OL].op.axis
    cf, cy, cx = (a1, a2, a3) if nchw else (a3, a1, a2)
    block = ([cy] if yi else []) + ([cf, cx] if nchw else [cx, cf])
    rcs = cfg["tile_rc"].apply(sch, OL, rc)
    red = [rcs[0], rh, rw, *rcs[1:]] if cfg["reduce_order"].val == "rc_outer" else [rh, rw, *rcs]
    sch[OL].reorder(*red, *block)
    cfg["ann_reduce"].apply(sch, OL, red[-2:])
    for ax in block[:-1]:
        sch[OL].unroll(ax)
    sch[OL].vectorize(block[-1])


@cpu_schedule("depthwise_conv2d")
def depthwise_conv2d_cpu(cfg, sch, tensors, N, C, H, W, KH, KW, stride, padding, dtype, **_):
    """The padding copied at the root, then :func:`depthwise_nchw_nest`."""
    data, weight, out = tensors
    _pad_knob(cfg, sch, out, _lanes(dtype))
    depthwise_nchw_nest(sch, out, sch.cache_write(out, "local"), cfg)


def depthwise_nchw_nest(sch, out, OL, cfg=None) -> None:
    """The loop nest of an NCHW depthwise conv2d whose accumulator stage is ``OL``: channels in parallel, by
    default 4 output rows accumulated in registers with the output row in lanes, the window outside them and
    its columns unrolled. ``OL``'s reduction is the window (kh, kw), or (c, kh, kw) for a grouped conv2d with
    one channel a group. Knobs: the block of rows and of columns, whether row blocks share the parallel
    loop, what of the window is unrolled."""
    cfg = _cfg(cfg)
    n, c, y, x = sch[out].op.axis
    OH, OW = int(out.shape[2]), int(out.shape[3])
    yb = _divisor(OH, 4)
    cfg.define_split("tile_y", OH, num_outputs=2, max_factor=8, default=(OH // yb, yb))
    cfg.define_split("tile_x", OW, num_outputs=2, max_factor=64, default=(OW,))
    cfg.define_knob("parallel", ["n_c", "n_c_yo"])
    cfg.define_annotate("ann_window", [None, None], policy="try_unroll", default=("none", "unroll"))
    yo, yi = cfg["tile_y"].apply(sch, out, y)
    *xo, xi = cfg["tile_x"].apply(sch, out, x)
    sch[out].reorder(n, c, yo, *xo, yi, xi)
    outer = sch[out].fuse(n, c, yo) if cfg["parallel"].val == "n_c_yo" else sch[out].fuse(n, c)
    sch[out].parallel(outer)
    sch[out].vectorize(xi)
    sch[OL].compute_at(sch[out], xo[0] if xo else yo)
    _, _, cy, cx = sch[OL].op.axis
    red = sch[OL].op.reduce_axis
    sch[OL].reorder(*red, cy, cx)
    cfg["ann_window"].apply(sch, OL, red[-2:])
    sch[OL].unroll(cy)
    sch[OL].vectorize(cx)


@cpu_schedule("pool2d")
def pool2d_cpu(cfg, sch, tensors, N, C, H, W, KH, KW, stride, padding, pool_type, dtype, **_):
    """Channels in parallel, output columns in lanes (by default the whole row), the window inside; padding
    read in place (masked). An average's sum is computed per output row (or column tile)."""
    data, out = tensors
    OW = int(out.shape[3])
    red = out if pool_type == "max" else _producer(out, "pool_sum")
    pad = _producer(red, "pad")
    cfg.define_split("tile_x", OW, num_outputs=2, max_factor=64, default=(OW,))
    cfg.define_knob("parallel", ["n_c", "n_c_y"])
    cfg.define_annotate("ann_window", [None, None], policy="try_unroll")
    if pad is not None:
        sch[pad].compute_inline()
    n, c, y, x = sch[out].op.axis
    *xo, xi = cfg["tile_x"].apply(sch, out, x)
    rows_fused = cfg["parallel"].val == "n_c_y"
    outer = sch[out].fuse(n, c, y) if rows_fused else sch[out].fuse(n, c)
    sch[out].parallel(outer)
    if red is out:
        rh, rw = sch[out].op.reduce_axis
        if xo:
            sch[out].reorder(xo[0], rh, rw, xi)
        cfg["ann_window"].apply(sch, out, [rh, rw])
    else:
        sch[red].compute_at(sch[out], xo[0] if xo else outer if rows_fused else y)
        _, _, _, rx = sch[red].op.axis
        rh, rw = sch[red].op.reduce_axis
        sch[red].reorder(rh, rw, rx)
        cfg["ann_window"].apply(sch, red, [rh, rw])
        sch[red].vectorize(rx)
    sch[out].vectorize(xi)


@cpu_schedule("softmax")
def softmax_cpu(cfg, sch, tensors, M, N, dtype, **_):
    """One row per iteration of a parallel loop: max, exp, sum and the division all on that row, every pass
    vectorized (the max and the sum keep partial results in vector lanes). Knobs: exp computed once into a
    row buffer or inlined into its two readers, the vectorized loops split."""
    X, out = tensors
    ex = _producer(out, "exp")
    sm = _producer(out, "row_sum")
    mx = _producer(ex, "row_max")
    cfg.define_split("tile_j", N, num_outputs=2, max_factor=64, default=(N,))
    cfg.define_knob("exp", ["row", "inline"])
    i, j = sch[out].op.axis
    if M > 1:
        sch[out].parallel(i)
    row = cfg["exp"].val == "row"
    if not row:
        sch[ex].compute_inline()
    for t in (mx, ex, sm) if row else (mx, sm):
        sch[t].compute_at(sch[out], i)
    sch[mx].vectorize(sch[mx].op.reduce_axis[0])
    sch[sm].vectorize(sch[sm].op.reduce_axis[0])
    if row:
        *_, ei = cfg["tile_j"].apply(sch, ex, sch[ex].op.axis[1])
        sch[ex].vectorize(ei)
    *_, ji = cfg["tile_j"].apply(sch, out, j)
    sch[out].vectorize(ji)


@cpu_schedule("elementwise")
def elementwise_cpu(cfg, sch, tensors, N, C, H, W, op, dtype, **_):
    """All axes fused, chunks of four vectors (or, as a knob: parallel chunks, unrolled vectors, lanes), chunks
    in parallel."""
    out = tensors[-1]
    total, chunk = N * C * H * W, 4 * _lanes(dtype)
    cfg.define_split("tile", total, num_outputs=3, max_factor=64, default=(-(-total // chunk), chunk))
    cfg.define_knob("unroll", [False, True])
    fused = sch[out].fuse(*sch[out].op.axis)
    outer, *mid, inner = cfg["tile"].apply(sch, out, fused)
    sch[out].parallel(outer)
    if cfg["unroll"].val and mid:
        sch[out].unroll(mid[0])
    sch[out].vectorize(inner)


def blocked_conv_nest(sch, out, OL, *, blocks: int, pixels: int, rows_outer: bool, rows: int = 1,
                      unroll_kw: bool = False, unroll_ib: int = 1) -> None:
    """The register-tiled loop nest of a blocked (NCHW[x]c) convolution whose accumulator stage is ``OL``
    (computed at the output's pixel-tile loop): ``blocks`` output-channel blocks x ``rows`` x ``pixels``
    output pixels in registers, their channels in vector lanes; the reduction over input-channel blocks, the
    window and the channels of a block outside the tile, so each step loads one weight vector per block and
    broadcasts one input value per pixel into ``blocks`` FMAs (pixels outside, blocks inside: a broadcast is
    used at once). Row tiles and channel blocks run in parallel, rows outermost when ``rows_outer`` (each
    thread then reads a band of the input; better when the input outweighs the weights)."""
    n, ob, y, x, o = sch[out].op.axis
    yo, yi = sch[out].split(y, factor=rows)
    xo, xi = sch[out].split(x, factor=pixels)
    obo, obi = sch[out].split(ob, factor=blocks)
    if rows_outer:
        sch[out].reorder(n, yo, obo, xo, obi, yi, xi, o)
        sch[out].parallel(sch[out].fuse(n, yo, obo))
    else:
        sch[out].reorder(n, obo, yo, xo, obi, yi, xi, o)
        sch[out].parallel(sch[out].fuse(n, obo, yo))
    for ax in (obi, yi, xi):  # the epilogue over the tile unrolled: constant indices keep the accumulators in
        sch[out].unroll(ax)  # registers (LLVM left a long requantizing epilogue rolled, and the tile in memory)
    sch[out].vectorize(o)
    sch[OL].compute_at(sch[out], xo)
    red = list(sch[OL].op.reduce_axis)
    blocked_accumulate(sch, OL, red, unroll_ib, unroll_kw, channels_innermost=int(red[-1].dom.extent.value) == 1)


def blocked_accumulate(sch, OL, red: list, unroll_ib: int = 1, unroll_kw: bool = False,
                       window_inside: bool = False, channels_innermost: bool = False) -> None:
    """The register tile of a blocked convolution's accumulator stage ``OL`` (axes n, blocks, rows, pixels,
    channels): the reduction loops ``red`` (input-channel blocks, window rows, window columns, the channels of
    a block) outside, the last split by ``unroll_ib`` and unrolled, the tile unrolled, its channels in lanes.
    ``window_inside``: the window's loops go inside the unrolled channels' outer loop, so weights laid out
    [i, h, w, o] within a block are read in order. ``channels_innermost`` (blocks of one input channel: a
    stem's 3 channels read as NCHW): the input channels run inside the window. With the window's columns
    innermost, LLVM unrolled them and kept the inputs that adjacent pixels' windows share in registers, and a
    2 x 6 tile spilled (7x7/2 stem built for AVX2: 154 -> 202 GFLOPS, docs/measured_choices.md)."""
    _, cb, cy, cx, co = sch[OL].op.axis
    columns = red[2] if len(red) >= 3 else None  # the window's columns
    if channels_innermost:
        red = [*red[1:3], red[0], *red[3:]]
    if unroll_ib > 1:
        red[-1:] = sch[OL].split(red[-1], factor=unroll_ib)
        if window_inside:
            red = [red[0], red[-2], *red[1:-2], red[-1]]
    sch[OL].reorder(*red, cy, cx, cb, co)
    if unroll_ib > 1:
        sch[OL].unroll(red[-1])
    if unroll_kw and columns is not None:
        sch[OL].unroll(columns)
    for ax in (cy, cx, cb):
        sch[OL].unroll(ax)
    sch[OL].vectorize(co)


def weights_outweigh_input(weight, data) -> bool:
    """Whether the weights of a layer are bigger than its input (deep layers: parallel over channel blocks
    first, so each thread reads half the weights)."""
    size = lambda t: _prod(int(d) for d in t.shape)  # noqa: E731
    return size(weight) > size(data)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def place_padding(sch, pad, stride: int, dtype: str) -> None:
    """The padded input of a blocked convolution: read in place (its guards partitioned away: the interior of
    the image runs guard-free, the edge tiles with their guards folded), or for a strided convolution copied
    once at the root, where reading in place measured slower (docs/measured_choices.md). Bytes and int16 (the
    data of a packed dot product: VNNI's, pmaddwd's) are always copied: each step reads its word as one load."""
    if pad is None:
        return
    if stride > 1 or pad.dtype in ("uint8", "int8", "int16"):
        _root_elementwise(sch, pad, _lanes(dtype))
    else:
        sch[pad].compute_inline()


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@cpu_schedule("conv2d_nchwc")
def conv2d_nchwc_cpu(cfg, sch, tensors, N, CI, H, W, CO, KH, KW, stride, padding, groups, ic_block, oc_block,
                     dtype, **_):
    """Blocked convolution: a (channel blocks x rows x pixels) register tile sized for the target's registers
    (by default 2 x 1 x 14 vectors on AVX-512, 1 x 1 x 14 on AVX2; as knobs: the tiles of one row that fit),
    rows or channel blocks outermost in the parallel loop, the input-channel block unrolled or not, the kernel
    width unrolled or not, the padding placed by :func:`place_padding` (or, as a knob, either way)."""
    data, weight, out = tensors
    OW = (W + 2 * padding - KW) // stride + 1
    OH = (H + 2 * padding - KH) // stride + 1
    blocked_conv_knobs(cfg, OH, OW, CO, oc_block, ic_block, weight, data, dtype)
    cfg.define_knob("unroll_kw", [False, True])
    _pad_knob(cfg, sch, out, _lanes(dtype), default="root" if stride > 1 else "inline")
    blocks, rows, pixels = cfg["register_tile"].val
    OL = sch.cache_write(out, "local")
    blocked_conv_nest(sch, out, OL, blocks=blocks, rows=rows, pixels=pixels, rows_outer=cfg["rows_outer"].val,
                      unroll_kw=cfg["unroll_kw"].val, unroll_ib=cfg["unroll_ib"].val)


def depthwise_pixels(out_width: int, block: int, dtype: str) -> int:
    """Output pixels of a depthwise register run: their accumulators and the input vectors they share across
    the window (about as many again) fill the registers: 14 on AVX-512, 7 on AVX2."""
    per_pixel = -(-block // _lanes(dtype))
    return _divisor(out_width, max(1, cpu().vector_registers // (2 * per_pixel) - 1))


@cpu_schedule("depthwise_conv2d_nchwc")
def depthwise_conv2d_nchwc_cpu(cfg, sch, tensors, N, C, H, W, KH, KW, stride, padding, block, dtype, **_):
    """Blocked depthwise convolution: channels in lanes, a run of output pixels accumulated in registers with
    the window outside it (each weight vector loaded once per run), channel blocks and rows in parallel. The
    padding is read in place (its guards partitioned away): a padded copy would double the memory traffic
    of this memory-bound kernel (docs/measured_choices.md). Knobs: the run's length (up to the target's
    registers), the kernel width unrolled or not, the padding read in place or copied at the root."""
    data, weight, out = tensors
    OW = (W + 2 * padding - KW) // stride + 1
    per_pixel = -(-block // _lanes(dtype))
    cfg.define_knob("pixels", [p for p in _divisors(OW) if 2 * p * per_pixel < cpu().vector_registers] or [1],
                    default=depthwise_pixels(OW, block, dtype))
    cfg.define_knob("unroll_kw", [True, False])
    _pad_knob(cfg, sch, out, _lanes(dtype), default="inline")
    _window_nest(sch, out, sch.cache_write(out, "local"), cfg["pixels"].val, unroll_kw=cfg["unroll_kw"].val)


def _window_nest(sch, out, OL, pixels: int, unroll_kw: bool = True) -> None:
    """A pooling or depthwise nest over NCHW[x]c: channel blocks and rows in parallel, a run of ``pixels``
    output pixels accumulated in ``OL`` (computed at the run) with the window outside the run (its columns
    unrolled unless ``unroll_kw`` is False), channels in lanes."""
    n, cb, y, x, c = sch[out].op.axis
    xo, xi = sch[out].split(x, factor=pixels)
    sch[out].reorder(n, cb, y, xo, xi, c)
    sch[out].parallel(sch[out].fuse(n, cb, y))
    sch[out].vectorize(c)
    sch[OL].compute_at(sch[out], xo)
    _, _, _, cx, cc = sch[OL].op.axis
    kh, kw = sch[OL].op.reduce_axis
    sch[OL].reorder(kh, kw, cx, cc)
    if unroll_kw:
        sch[OL].unroll(kw)
    sch[OL].unroll(cx)
    sch[OL].vectorize(cc)


@register_schedule("pool2d_nchwc")
def pool2d_nchwc_cpu(sch, tensors, N, C, H, W, KH, KW, stride, padding, pool_type, block, dtype, **_):
    """Blocked pooling: the depthwise nest (a run of output pixels in registers, the window outside it),
    padding read in place; an average divides in the output loop."""
    data, out = tensors
    red = out if pool_type == "max" else _producer(out, "_sum")
    pad = _producer(red, "pad")
    if pad is not None:
        sch[pad].compute_inline()
    pixels = depthwise_pixels((W + 2 * padding - KW) // stride + 1, block, dtype)
    if red is out:
        _window_nest(sch, out, sch.cache_write(out, "local"), pixels)
    else:
        _window_nest(sch, out, red, pixels)


def dense_tile(N: int, CO: int, block: int, dtype: str) -> tuple[int, int]:
    """``(rows, blocks)`` of a packed dense layer's register tile: the most output blocks (one or more native
    vectors each) that fit beside a broadcast, up to 8 independent accumulator chains per row, which is what
    keeps a memory-bound GEMV's loads in flight."""
    per_block = -(-block // _lanes(dtype))
    regs = cpu().vector_registers
    rows = _divisor(N, 4)
    blocks = _divisor(CO // block, max(1, min(8 // per_block, (regs - 2) // (per_block * rows))))
    return rows, blocks


@register_schedule("dense_pack")
def dense_pack_cpu(sch, tensors, N, CI, CO, block, bias, dtype, **_):
    """Packed dense layer: a tile of output blocks (independent accumulator chains) over a few rows,
    accumulated over k (unrolled by 4) with one broadcast of the input per row, tiles in parallel; the bias
    added in the output loop."""
    out = tensors[-1]
    dense_t = out if not bias else _producer(out, "dense_pack")
    dense_pack_nest(sch, out, sch.cache_write(out, "local") if out is dense_t else dense_t, block)


def dense_pack_nest(sch, out, DL, block: int) -> None:
    """The loop nest of a packed dense layer whose accumulator stage is ``DL`` (computed at the output's tile
    loop): a tile of :func:`dense_tile` output blocks of ``block`` columns over a few rows, accumulated over k
    (unrolled by 4) with one broadcast of the input per row, tiles in parallel."""
    N, CO = (int(d) for d in out.shape)
    rows, blocks = dense_tile(N, CO, block, out.dtype)
    i, j = sch[out].op.axis
    jo, ji = sch[out].split(j, factor=block * blocks)
    io, ii = sch[out].split(i, factor=rows)
    sch[out].reorder(jo, io, ii, ji)
    par = sch[out].fuse(jo, io)
    sch[out].parallel(par)
    sch[out].unroll(ii)  # the epilogue over the tile unrolled, as blocked_conv_nest's
    sch[out].vectorize(ji)
    sch[DL].compute_at(sch[out], par)
    ci, cj = sch[DL].op.axis
    (k,) = sch[DL].op.reduce_axis
    cjb, cjl = sch[DL].split(cj, factor=block)
    ko, ki = sch[DL].split(k, factor=_divisor(int(k.dom.extent.value), 4))
    sch[DL].reorder(ko, ki, ci, cjb, cjl)
    sch[DL].unroll(ki)
    sch[DL].unroll(ci)
    sch[DL].unroll(cjb)
    sch[DL].vectorize(cjl)


def winograd_nest(sch, out, *, tile: int, blocks: int, pixels: int, unroll_ic: int = 4) -> None:
    """The loop nests of a Winograd convolution (``conv2d_winograd_nchwc``, and any epilogue inlined into
    ``out``): input tiles transformed per tile and channel block (the transform loops unrolled, channels in
    lanes), the per-element products as a register-tiled GEMM (``blocks`` output-channel blocks x ``pixels``
    tiles, one broadcast per tile and input channel, parallel over tile elements and block groups), output
    tiles transformed back in the output's loops (parallel over rows of tiles)."""
    stages = {t.op.name: t for t in _walk(out)}
    in1, V, M, m_a = (stages[n] for n in ("winograd_in1", "winograd_in", "winograd_gemm", "winograd_out1"))
    # input transform
    xi, nu, p, ic = sch[V].op.axis
    ico, ici = sch[V].split(ic, factor=_block_of(V))
    sch[V].reorder(p, ico, xi, nu, ici)
    par = sch[V].fuse(p, ico)
    sch[V].parallel(par)
    sch[V].unroll(xi)
    sch[V].unroll(nu)
    sch[V].vectorize(ici)
    sch[in1].compute_at(sch[V], par)
    a1, b1, _, c1 = sch[in1].op.axis
    sch[in1].unroll(a1)
    sch[in1].unroll(b1)
    sch[in1].vectorize(c1)
    # the products, summed over the input channels
    ML = sch.cache_write(M, "local")
    xi, nu, ob, p, o = sch[M].op.axis
    po, pi = sch[M].split(p, factor=pixels)
    obo, obi = sch[M].split(ob, factor=blocks)
    sch[M].reorder(xi, nu, obo, po, obi, pi, o)
    sch[M].parallel(sch[M].fuse(xi, nu, obo))
    sch[M].vectorize(o)
    sch[ML].compute_at(sch[M], po)
    _, _, cb, cp, co = sch[ML].op.axis
    (k,) = sch[ML].op.reduce_axis
    ko, ki = sch[ML].split(k, factor=_divisor(int(k.dom.extent.value), unroll_ic))
    sch[ML].reorder(ko, ki, cp, cb, co)
    sch[ML].unroll(ki)
    sch[ML].unroll(cp)
    sch[ML].unroll(cb)
    sch[ML].vectorize(co)
    # output transform (and epilogue)
    n, ob, y, x, o = sch[out].op.axis
    yo, yi = sch[out].split(y, factor=tile)
    xo, xi_ = sch[out].split(x, factor=tile)
    sch[out].reorder(n, ob, yo, xo, yi, xi_, o)
    sch[out].parallel(sch[out].fuse(n, ob, yo))
    sch[out].unroll(yi)
    sch[out].unroll(xi_)
    sch[out].vectorize(o)
    sch[m_a].compute_at(sch[out], xo)
    mx, _, _, mj, mo = sch[m_a].op.axis
    sch[m_a].unroll(mx)
    sch[m_a].unroll(mj)
    sch[m_a].vectorize(mo)


def _walk(t):
    """Every compute tensor ``t`` reads, directly or not, and ``t``."""
    seen, stack, out = set(), [t], []
    while stack:
        x = stack.pop()
        if id(x.op) in seen or not hasattr(x.op, "body"):
            continue
        seen.add(id(x.op))
        out.append(x)
        stack.extend(x.op.input_tensors)
    return out


def _block_of(V) -> int:
    """The channel block of the data a Winograd input transform reads (its vector lanes)."""
    for t in _walk(V):
        for src in t.op.input_tensors:
            if not hasattr(src.op, "body") and len(src.shape) == 5:
                return int(src.shape[-1])
    return 1


def winograd_tile(OH: int, OW: int) -> int:
    """F(4, 3) (a quarter of the multiplications) where an image has at least 8 x 8 outputs, else F(2, 3)."""
    return 4 if min(OH, OW) >= 8 else 2


@register_schedule("conv2d_winograd_nchwc")
def conv2d_winograd_nchwc_cpu(sch, tensors, N, CI, H, W, CO, padding, tile, ic_block, oc_block, dtype, **_):
    """Winograd convolution: see :func:`winograd_nest`; the GEMM's register tile sized as a convolution's
    over the tiles."""
    out = tensors[-1]
    OH, OW = H + 2 * padding - 2, W + 2 * padding - 2
    P = N * -(-OH // tile) * -(-OW // tile)
    blocks, _, pixels = conv_tile(1, P, CO // oc_block, oc_block, dtype)
    winograd_nest(sch, out, tile=tile, blocks=blocks, pixels=pixels)
