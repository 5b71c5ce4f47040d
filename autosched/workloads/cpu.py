"""Expert CPU schedules for the built-in workloads, written with the public primitives only.

Each is ``fn(sch, tensors, **params)`` and leaves its steps in ``sch.trace``. The
common pattern (as in TVM's x86 schedules): a register block of the output is
accumulated in a ``cache_write`` stage computed at the block's loop, its
innermost axis vectorized and the next one unrolled, the reduction outside that
block, and the outermost loops fused and run in parallel.
"""

from __future__ import annotations

from autosched.workloads import register_schedule
from autosched.workloads.tile_sizes import conv_tile, cpu, matmul_tile
from autosched.workloads.tile_sizes import divisor as _divisor
from autosched.workloads.tile_sizes import lanes as _lanes


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


@register_schedule("matmul")
def matmul_cpu(sch, tensors, M, N, K, dtype, **_):
    """A register tile of C sized for the target (4 x 4 vectors on AVX-512, 4 x 2 on AVX2) accumulated over k
    (unrolled by 4); B packed per column panel so the k loop streams it. With fewer column panels than
    cores, panels and row tiles share the parallel loop and B is read in place."""
    A, B, C = tensors
    mr, nr = matmul_tile(M, N, dtype)
    panels_per_core = N // nr >= cpu().cores
    CL = sch.cache_write(C, "local")
    BP = sch.cache_read(B, "global", [CL]) if panels_per_core else None
    i, j = sch[C].op.axis
    jo, ji = sch[C].split(j, factor=nr)
    io, ii = sch[C].split(i, factor=mr)
    sch[C].reorder(jo, io, ii, ji)
    tile = io if panels_per_core else sch[C].fuse(jo, io)
    sch[C].parallel(jo if panels_per_core else tile)
    sch[C].vectorize(ji)
    if BP is not None:
        sch[BP].compute_at(sch[C], jo)
        sch[BP].vectorize(sch[BP].op.axis[1])
    sch[CL].compute_at(sch[C], tile)
    ci, cj = sch[CL].op.axis
    (k,) = sch[CL].op.reduce_axis
    ko, ki = sch[CL].split(k, factor=_divisor(K, 4))
    sch[CL].reorder(ko, ki, ci, cj)
    sch[CL].unroll(ki)
    sch[CL].unroll(ci)
    sch[CL].vectorize(cj)


@register_schedule("batch_matmul")
def batch_matmul_cpu(sch, tensors, B, M, N, K, dtype, **_):
    """Per batch, the matmul register block; batches and row blocks run in parallel."""
    X, Y, C = tensors
    mr, nr = _divisor(M, 4), _divisor(N, 2 * _lanes(dtype))
    CL = sch.cache_write(C, "local")
    b, i, j = sch[C].op.axis
    io, ii = sch[C].split(i, factor=mr)
    jo, ji = sch[C].split(j, factor=nr)
    sch[C].reorder(b, io, jo, ii, ji)
    bi = sch[C].fuse(b, io)
    sch[C].parallel(bi)
    sch[C].vectorize(ji)
    sch[CL].compute_at(sch[C], jo)
    _, ci, cj = sch[CL].op.axis
    (k,) = sch[CL].op.reduce_axis
    sch[CL].reorder(k, ci, cj)
    sch[CL].unroll(ci)
    sch[CL].vectorize(cj)


@register_schedule("dense")
def dense_cpu(sch, tensors, N, CI, CO, bias, relu, dtype, **_):
    """Output features in vector lanes (weights gathered along k), epilogues fused into the output loop."""
    out = tensors[-1]
    stage = out
    chain = []
    while stage.op.name in ("relu", "bias_add"):
        chain.append(stage)
        stage = next(t for t in stage.op.input_tensors if t.op.name in ("bias_add", "dense"))
    dense_t = stage
    for t in chain[1:]:
        sch[t].compute_inline()
    dense_nest(sch, out, sch.cache_write(out, "local") if out is dense_t else dense_t)


def dense_nest(sch, out, DL) -> None:
    """The loop nest of a dense layer (2-D) whose accumulator stage is ``DL`` (computed at the output's tile
    loop): two vectors of output columns per tile, rows x column tiles in parallel, the reduction split by 4
    and unrolled."""
    i, j = sch[out].op.axis
    jo, ji = sch[out].split(j, factor=min(int(out.shape[1]), 2 * _lanes(out.dtype)))
    ij = sch[out].fuse(i, jo)
    sch[out].parallel(ij)
    sch[out].vectorize(ji)
    sch[DL].compute_at(sch[out], ij)
    ci, cj = sch[DL].op.axis
    (k,) = sch[DL].op.reduce_axis
    ko, ki = sch[DL].split(k, factor=_divisor(int(k.dom.extent.value), 4))
    sch[DL].reorder(ci, ko, ki, cj)
    sch[DL].unroll(ki)
    sch[DL].vectorize(cj)


@register_schedule("conv2d")
def conv2d_cpu(sch, tensors, N, H, W, CI, CO, KH, KW, stride, padding, layout, dtype, **_):
    data, weight, out = tensors
    pad = _producer(out, "pad")
    lanes = _lanes(dtype)
    if pad is not None:
        _root_elementwise(sch, pad, lanes)
    OL = sch.cache_write(out, "local")
    if layout == "NCHW":
        conv2d_nchw_nest(sch, out, OL)
    else:
        # NHWC: output channels in vector lanes (two vectors), a few output columns unrolled
        n, y, x, f = sch[out].op.axis
        OW = (W + 2 * padding - KW) // stride + 1
        fo, fi = sch[out].split(f, factor=_divisor(CO, 2 * lanes))
        xo, xi = sch[out].split(x, factor=_divisor(OW, 7))
        sch[out].reorder(n, y, xo, fo, xi, fi)
        par = sch[out].fuse(n, y, xo)
        sch[out].parallel(par)
        sch[out].vectorize(fi)
        sch[OL].compute_at(sch[out], fo)
        _, _, cx, cf = sch[OL].op.axis
        rh, rw, rc = sch[OL].op.reduce_axis
        sch[OL].reorder(rh, rw, rc, cx, cf)
        sch[OL].unroll(cx)
        sch[OL].vectorize(cf)


@register_schedule("depthwise_conv2d")
def depthwise_conv2d_cpu(sch, tensors, N, C, H, W, KH, KW, stride, padding, dtype, **_):
    """Channels in parallel, a few output rows accumulated in registers with output columns in lanes."""
    data, weight, out = tensors
    pad = _producer(out, "pad")
    if pad is not None:
        _root_elementwise(sch, pad, _lanes(dtype))
    depthwise_nchw_nest(sch, out, sch.cache_write(out, "local"))


def conv2d_nchw_nest(sch, out, OL) -> None:
    """The loop nest of an NCHW conv2d whose accumulator stage is ``OL`` (computed at the output's column-tile
    loop): 16 output channels x one vector of output columns (a divisor of the width: no tails) per register
    block, the reduction outside the block with the window's columns unrolled (up to 7), rows outermost in
    the parallel loop (each thread then reads its own band of the padded input: half the cache traffic)."""
    n, f, y, x = sch[out].op.axis
    fo, fi = sch[out].split(f, factor=_divisor(int(out.shape[1]), 16))
    xo, xi = sch[out].split(x, factor=_divisor(int(out.shape[3]), _lanes(out.dtype)))
    sch[out].reorder(n, y, fo, xo, fi, xi)
    sch[out].parallel(sch[out].fuse(n, y, fo))
    sch[out].vectorize(xi)
    sch[OL].compute_at(sch[out], xo)
    _, cf, _, cx = sch[OL].op.axis
    rc, rh, rw = sch[OL].op.reduce_axis
    sch[OL].reorder(rc, rh, rw, cf, cx)
    if int(rw.dom.extent.value) <= 7:
        sch[OL].unroll(rw)
    sch[OL].unroll(cf)
    sch[OL].vectorize(cx)


def depthwise_nchw_nest(sch, out, OL) -> None:
    """The loop nest of an NCHW depthwise conv2d whose accumulator stage is ``OL``: channels in parallel, 4
    output rows accumulated in registers with output columns in lanes, the window outside them. ``OL``'s
    reduction is the window (kh, kw), or (c, kh, kw) for a grouped conv2d with one channel a group."""
    n, c, y, x = sch[out].op.axis
    yo, yi = sch[out].split(y, factor=_divisor(int(out.shape[2]), 4))
    sch[out].reorder(n, c, yo, yi, x)
    sch[out].parallel(sch[out].fuse(n, c))
    sch[out].vectorize(x)
    sch[OL].compute_at(sch[out], yo)
    _, _, cy, cx = sch[OL].op.axis
    red = sch[OL].op.reduce_axis
    sch[OL].reorder(*red, cy, cx)
    sch[OL].unroll(red[-1])
    sch[OL].unroll(cy)
    sch[OL].vectorize(cx)


@register_schedule("pool2d")
def pool2d_cpu(sch, tensors, N, C, H, W, KH, KW, stride, padding, pool_type, dtype, **_):
    """Channels in parallel, output columns in lanes, the window unrolled; padding read in place (masked)."""
    data, out = tensors
    red = out if pool_type == "max" else _producer(out, "pool_sum")
    pad = _producer(red, "pad")
    if pad is not None:
        sch[pad].compute_inline()
    n, c, y, x = sch[out].op.axis
    nc = sch[out].fuse(n, c)
    sch[out].parallel(nc)
    if red is not out:
        sch[red].compute_at(sch[out], y)
        _, _, _, rx = sch[red].op.axis
        rh, rw = sch[red].op.reduce_axis
        sch[red].reorder(rh, rw, rx)
        sch[red].vectorize(rx)
        sch[out].vectorize(x)
    else:
        sch[out].vectorize(x)


@register_schedule("softmax")
def softmax_cpu(sch, tensors, M, N, dtype, **_):
    """One row per iteration of a parallel loop: max, exp, sum and the division all on that row, every pass
    vectorized (the max and the sum keep partial results in vector lanes)."""
    X, out = tensors
    ex = _producer(out, "exp")
    sm = _producer(out, "row_sum")
    mx = _producer(ex, "row_max")
    i, j = sch[out].op.axis
    if M > 1:
        sch[out].parallel(i)
    for t in (mx, ex, sm):
        sch[t].compute_at(sch[out], i)
    sch[mx].vectorize(sch[mx].op.reduce_axis[0])
    sch[sm].vectorize(sch[sm].op.reduce_axis[0])
    sch[ex].vectorize(sch[ex].op.axis[1])
    sch[out].vectorize(j)


@register_schedule("elementwise")
def elementwise_cpu(sch, tensors, N, C, H, W, op, dtype, **_):
    """All axes fused, chunks of four vectors, chunks in parallel."""
    out = tensors[-1]
    fused = sch[out].fuse(*sch[out].op.axis)
    outer, inner = sch[out].split(fused, factor=4 * _lanes(dtype))
    sch[out].parallel(outer)
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
    sch[out].vectorize(o)
    sch[OL].compute_at(sch[out], xo)
    _, cb, cy, cx, co = sch[OL].op.axis
    red = list(sch[OL].op.reduce_axis)
    if unroll_ib > 1:
        ibo, ibi = sch[OL].split(red[-1], factor=unroll_ib)
        red[-1:] = [ibo, ibi]
    sch[OL].reorder(*red, cy, cx, cb, co)
    if unroll_ib > 1:
        sch[OL].unroll(red[-1])
    if unroll_kw and len(red) >= 3:
        sch[OL].unroll(red[2])
    sch[OL].unroll(cy)
    sch[OL].unroll(cx)
    sch[OL].unroll(cb)
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
    once at the root, where reading in place measured slower (docs/measured_choices.md)."""
    if pad is None:
        return
    if stride > 1:
        _root_elementwise(sch, pad, _lanes(dtype))
    else:
        sch[pad].compute_inline()


@register_schedule("conv2d_nchwc")
def conv2d_nchwc_cpu(sch, tensors, N, CI, H, W, CO, KH, KW, stride, padding, groups, ic_block, oc_block, dtype,
                     **_):
    """Blocked convolution: a (channel blocks x rows x pixels) register tile sized for the target's registers
    (2 x 1 x 14 vectors on AVX-512, 1 x 1 x 14 on AVX2), the padding placed by :func:`place_padding`."""
    data, weight, out = tensors
    place_padding(sch, _producer(out, "pad"), stride, dtype)
    OW = (W + 2 * padding - KW) // stride + 1
    OH = (H + 2 * padding - KH) // stride + 1
    blocks, rows, pixels = conv_tile(OH, OW, CO // oc_block, oc_block, dtype)
    OL = sch.cache_write(out, "local")
    blocked_conv_nest(sch, out, OL, blocks=blocks, rows=rows, pixels=pixels,
                      rows_outer=not weights_outweigh_input(weight, data), unroll_ib=_divisor(ic_block, 4))


def depthwise_pixels(out_width: int, block: int, dtype: str) -> int:
    """Output pixels of a depthwise register run: their accumulators and the input vectors they share across
    the window (about as many again) fill the registers: 14 on AVX-512, 7 on AVX2."""
    per_pixel = -(-block // _lanes(dtype))
    return _divisor(out_width, max(1, cpu().vector_registers // (2 * per_pixel) - 1))


@register_schedule("depthwise_conv2d_nchwc")
def depthwise_conv2d_nchwc_cpu(sch, tensors, N, C, H, W, KH, KW, stride, padding, block, dtype, **_):
    """Blocked depthwise convolution: channels in lanes, a run of output pixels accumulated in registers with
    the window outside it (each weight vector loaded once per run), channel blocks and rows in parallel. The
    padding is read in place (its guards partitioned away): a padded copy would double the memory traffic
    of this memory-bound kernel (docs/measured_choices.md)."""
    data, weight, out = tensors
    pad = _producer(out, "pad")
    if pad is not None:
        sch[pad].compute_inline()
    OW = (W + 2 * padding - KW) // stride + 1
    _window_nest(sch, out, sch.cache_write(out, "local"), depthwise_pixels(OW, block, dtype))


def _window_nest(sch, out, OL, pixels: int) -> None:
    """A pooling or depthwise nest over NCHW[x]c: channel blocks and rows in parallel, a run of ``pixels``
    output pixels accumulated in ``OL`` (computed at the run) with the window outside the run, channels in
    lanes."""
    n, cb, y, x, c = sch[out].op.axis
    xo, xi = sch[out].split(x, factor=pixels)
    sch[out].reorder(n, cb, y, xo, xi, c)
    sch[out].parallel(sch[out].fuse(n, cb, y))
    sch[out].vectorize(c)
    sch[OL].compute_at(sch[out], xo)
    _, _, _, cx, cc = sch[OL].op.axis
    kh, kw = sch[OL].op.reduce_axis
    sch[OL].reorder(kh, kw, cx, cc)
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
