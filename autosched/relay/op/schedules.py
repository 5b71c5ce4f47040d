"""Default CPU schedules of fused kernels: the anchor op's expert loop nest with its elementwise epilogue
computed in the same loops (conv2d + bias + relu is one nest), and a parallel, vectorized nest otherwise.

Each is ``fn(sch, out, anchor, attrs)``: ``out`` is the kernel's output tensor, ``anchor`` the tensor of its
anchor op (None for injective-only kernels), ``attrs`` the anchor op's attributes.
"""

from __future__ import annotations

import math
from typing import Any

from autosched import te
from autosched.workloads.cpu import (
    _root_elementwise,
    _window_nest,
    blocked_conv_nest,
    conv2d_nest,
    dense_nest,
    dense_pack_nest,
    depthwise_nchw_nest,
    depthwise_pixels,
    place_padding,
    weights_outweigh_input,
    winograd_nest,
)
from autosched.workloads.tile_sizes import TRANSPOSE_RUN, conv_tile, cpu, divisor, lanes, step_temporaries


def shape_of(t: te.Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def compute_stages(out: te.Tensor) -> list[te.Tensor]:
    """Every compute stage reachable from ``out`` (placeholders excluded), consumers first."""
    seen: dict[int, te.Tensor] = {}
    stack = [out]
    while stack:
        t = stack.pop()
        if id(t.op) in seen or not isinstance(t.op, te.ComputeOp):
            continue
        seen[id(t.op)] = t
        stack.extend(t.op.input_tensors)
    return list(seen.values())


def is_reduction(t: te.Tensor) -> bool:
    return bool(getattr(t.op, "reduce_axis", ()))


def inline_injective(sch: Any, out: te.Tensor, keep: tuple = ()) -> None:
    """Inline every non-reduction stage except the output, the schedule's other outputs (TOPI code schedules
    several outputs, one read by another) and those in ``keep``."""
    keep_ids = {id(t.op) for t in keep} | {id(out.op)}
    for t in compute_stages(out):
        if id(t.op) not in keep_ids and not is_reduction(t) and not sch[t].is_output:
            sch[t].compute_inline()


def _blocked_innermost(t: te.Tensor) -> bool:
    """Whether ``t``'s innermost axis is a channel block of whole vectors (NCHW[x]c): vectorized alone, its
    lanes index every operand directly (fused with the axes before it, they would need a division per lane)."""
    return len(t.shape) == 5 and int(t.shape[-1]) >= min(8, lanes(t.dtype))


#: an injective kernel of fewer elements runs on one thread: waking the others and joining them (about a
#: microsecond with libgomp) costs more than they would save (a recurrent layer's gates, per step)
PARALLEL_MIN_ELEMENTS = 4096


def flat_parallel_vector(sch: Any, t: te.Tensor) -> None:
    """All axes fused, chunks of four vectors, chunks in parallel (the default for injective kernels); in a
    blocked layout the outer axes fused in parallel and the channel block vectorized. Below
    PARALLEL_MIN_ELEMENTS, one thread; a scalar (0-d) as it is."""
    axes = sch[t].op.axis
    if not axes:
        return
    size = 1
    for d in t.shape:
        size *= int(d)
    threads = size >= PARALLEL_MIN_ELEMENTS
    if _blocked_innermost(t):
        outer = sch[t].fuse(*axes[:-2])
        if threads:
            sch[t].parallel(outer)
        sch[t].vectorize(axes[-1])
        return
    if len(axes) >= 3 and int(t.shape[-1]) * int(t.shape[-2]) >= lanes(t.dtype):
        # images: planes in parallel, each plane one vectorized run (a channel shuffle, slice or concat then
        # computes its source once per plane instead of once per lane)
        planes = sch[t].fuse(*axes[:-2])
        if threads:
            sch[t].parallel(planes)
        plane = sch[t].fuse(axes[-2], axes[-1])
        _, inner = sch[t].split(plane, factor=4 * lanes(t.dtype))
        sch[t].vectorize(inner)
        return
    fused = sch[t].fuse(*axes) if len(axes) > 1 else axes[0]
    step = 4 * lanes(t.dtype)
    if size > step:
        outer, inner = sch[t].split(fused, factor=step)
        if threads:
            sch[t].parallel(outer)
        sch[t].vectorize(inner)
    elif size > 1:
        sch[t].vectorize(fused)


def root_parallel(sch: Any, t: te.Tensor) -> None:
    """A root reduction stage: its spatial axes but the last fused and run in parallel."""
    axes = sch[t].op.axis
    if len(axes) >= 2:
        sch[t].parallel(sch[t].fuse(*axes[:-1]) if len(axes) > 2 else axes[0])
    elif len(axes) == 1 and int(t.shape[0]) > 1:
        sch[t].parallel(axes[0])


def injective(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """Elementwise / injective kernels: everything inlined into one parallel, vectorized loop."""
    inline_injective(sch, out)
    flat_parallel_vector(sch, out)


def concatenate(sch: Any, out: te.Tensor, axis: int) -> None:
    """A concatenation (and elementwise ops after it): the concatenated axis is a serial loop inside the
    parallel rows, so loop partitioning cuts it into one plain, vectorized copy per input (a flat loop would
    choose the input lane by lane)."""
    inline_injective(sch, out)
    axes = list(sch[out].op.axis)
    if axis == len(axes) - 1 or len(axes) < 2:
        return flat_parallel_vector(sch, out)
    outer, k, first, rest = axes[:axis], axes[axis], axes[axis + 1], axes[axis + 2:]
    if not rest and outer:  # along the axis before the last (a KV cache's tokens): rows copied in order, each
        # row one vector copy (the last axis moved outside k would copy it element by element, a stride apart)
        par = sch[out].fuse(*outer) if len(outer) > 1 else outer[0]
        sch[out].parallel(par)
        step = 4 * lanes(out.dtype)
        inner = first
        if int(out.shape[-1]) > step:
            _, inner = sch[out].split(first, factor=step)
        sch[out].vectorize(inner)
        return
    sch[out].reorder(*outer, first, k, *rest)
    par = sch[out].fuse(*outer, first) if outer else first
    sch[out].parallel(par)
    if rest and _blocked_innermost(out):
        sch[out].vectorize(rest[-1])
    elif rest:
        inner = sch[out].fuse(*rest) if len(rest) > 1 else rest[0]
        size = 1
        for d in out.shape[axis + 2:]:
            size *= int(d)
        step = 4 * lanes(out.dtype)
        if size > step:
            _, inner = sch[out].split(inner, factor=step)
        sch[out].vectorize(inner)


def reduction(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """Pools, softmax, batch_matmul and other reductions: injective stages inlined, each reduction at root in
    parallel over its outer axes, the output parallel and vectorized."""
    inline_injective(sch, out)
    for t in compute_stages(out):
        if is_reduction(t) and t is not out:
            root_parallel(sch, t)
    if is_reduction(out):
        root_parallel(sch, out)
    else:
        flat_parallel_vector(sch, out)


def _block_stage(sch: Any, out: te.Tensor, anchor: te.Tensor) -> Any:
    """The stage that accumulates the anchor's register block: the anchor itself when an epilogue follows it
    (it is then computed at the epilogue's loops), else a cache_write of it."""
    if out is anchor or out.op is anchor.op:
        return sch.cache_write(out, "local")
    local = sch.cache_write(anchor, "local")  # a block in registers / on the stack, read by the epilogue
    sch[anchor].compute_inline()
    return local


def conv2d_nchw(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """conv2d NCHW (and depthwise, one channel a group): the conv2d (depthwise_conv2d) workload's nest, the
    padded input at root (parallel, vectorized) as there, the epilogue in the output's loops."""
    if len(out.shape) != 4 or shape_of(out) != shape_of(anchor):
        return reduction(sch, out)
    groups = int(attrs.get("groups", 1))
    depthwise = groups > 1 and groups == int(out.shape[1]) and int(anchor.op.reduce_axis[0].dom.extent.value) == 1
    if groups != 1 and not depthwise:
        return reduction(sch, out)
    pad = next((t for t in anchor.op.input_tensors if t.op.name == "pad" and isinstance(t.op, te.ComputeOp)), None)
    keep = (anchor,) + ((pad,) if pad is not None else ())
    inline_injective(sch, out, keep)
    if pad is not None:
        _root_elementwise(sch, pad, lanes(out.dtype))
    OL = _block_stage(sch, out, anchor)
    if depthwise:
        depthwise_nchw_nest(sch, out, OL)
    else:
        conv2d_nest(sch, out, OL, "NCHW")


def dense(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """dense / matmul (2-D): the dense workload's nest (output columns in vector lanes, rows x column blocks in
    parallel, the reduction split by 4 and unrolled), the epilogue in the output's loops."""
    if len(out.shape) != 2 or shape_of(out) != shape_of(anchor):
        return reduction(sch, out)
    inline_injective(sch, out, (anchor,))
    dense_nest(sch, out, _block_stage(sch, out, anchor))


matmul = dense


# ------------------------------------------------------------------ blocked layouts (AlterOpLayout's ops)
def _named_input(t: te.Tensor, name: str) -> te.Tensor | None:
    return next((x for x in t.op.input_tensors if x.op.name == name and isinstance(x.op, te.ComputeOp)), None)


def conv2d_nchwc(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """Blocked conv2d: the register-tiled nest of the conv2d_nchwc workload (a tile of output-channel blocks x
    pixels sized for the target's registers, the padding placed as there) with the epilogue (bias,
    batch-norm shift, residual add, relu) in the output's loops."""
    if shape_of(out) != shape_of(anchor):
        return reduction(sch, out)
    pad = _named_input(anchor, "pad")
    inline_injective(sch, out, (anchor,) + ((pad,) if pad is not None else ()))
    strides = attrs["strides"]
    place_padding(sch, pad, int(strides if isinstance(strides, int) else strides[0]), out.dtype)
    OL = _block_stage(sch, out, anchor)
    data, weight = anchor.op.input_tensors[0], anchor.op.input_tensors[-1]
    _, OCB, OH, OW, ob = shape_of(out)
    blocks, rows, pixels = conv_tile(OH, OW, OCB, ob, out.dtype, step_temporaries(weight.dtype))
    blocked_conv_nest(sch, out, OL, blocks=blocks, rows=rows, pixels=pixels,
                      unroll_ib=divisor(int(weight.shape[4]), 4),
                      rows_outer=not weights_outweigh_input(weight, data))


def depthwise_conv2d_nchwc(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """Blocked depthwise conv2d: channels in lanes, a run of pixels in registers, the padding read in place,
    the epilogue in the output's loops."""
    if shape_of(out) != shape_of(anchor):
        return reduction(sch, out)
    inline_injective(sch, out, (anchor,))
    OL = _block_stage(sch, out, anchor)
    _window_nest(sch, out, OL, depthwise_pixels(int(out.shape[3]), int(out.shape[4]), out.dtype))


def pool(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """Pooling: in a blocked layout the depthwise nest (a run of pixels in registers, the window outside it,
    the padding read in place), an average dividing in the output loop; in NCHW the generic reduction."""
    if len(out.shape) != 5:
        return reduction(sch, out)
    red = anchor if is_reduction(anchor) else next(t for t in compute_stages(out) if is_reduction(t))
    inline_injective(sch, out, (red,))
    pixels = depthwise_pixels(int(out.shape[3]), int(out.shape[4]), out.dtype)
    _window_nest(sch, out, sch.cache_write(out, "local") if red is out else red, pixels)


def global_pool(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """Global average pooling: in a blocked layout each channel block's sum over the image in a vector of
    lanes (the image loops outside the lanes), blocks in parallel; in NCHW the generic reduction."""
    if len(out.shape) != 5:
        return reduction(sch, out)
    red = next(t for t in compute_stages(out) if is_reduction(t))
    inline_injective(sch, out, (red,))
    n, cb, y, x, b = sch[out].op.axis
    sch[out].parallel(sch[out].fuse(n, cb))
    sch[out].vectorize(b)
    sch[red].compute_at(sch[out], x)
    *_, rb = sch[red].op.axis
    rh, rw = sch[red].op.reduce_axis
    sch[red].reorder(rh, rw, rb)
    sch[red].vectorize(rb)


def dense_pack(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """Packed dense: a tile of output blocks (independent accumulator chains) per row tile, k unrolled by 4,
    tiles in parallel, the epilogue in the output's loops (the dense_pack workload's nest); with 8 or more rows
    (a transformer's tokens) the GEMM tile of :func:`gemm_pack_nest`."""
    if len(out.shape) < 2 or shape_of(out)[:-1] != shape_of(anchor)[:-1]:
        return reduction(sch, out)
    acc = anchor if is_reduction(anchor) else next(t for t in compute_stages(out) if is_reduction(t))
    weight = acc.op.input_tensors[-1]
    block = int(weight.shape[2])
    rows = 1
    for d in out.shape[:-1]:
        rows *= int(d)
    if shape_of(out) != shape_of(acc):  # units cut off from a padded weight
        if rows < 8:
            return reduction(sch, out)
        # the padded product a GEMM at root, the first units columns (and the epilogue) a parallel copy
        inline_injective(sch, out, (acc,))
        gemm_pack_nest(sch, acc, sch.cache_write(acc, "local"), block, int(weight.shape[1]))
        return flat_parallel_vector(sch, out)
    inline_injective(sch, out, (acc,))
    if len(out.shape) == 2 and rows < 8:
        return dense_pack_nest(sch, out, _block_stage(sch, out, acc), block)
    gemm_pack_nest(sch, out, _block_stage(sch, out, acc), block, int(weight.shape[1]))


def dense_int4(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """nn.dense_int4: the packed dense's nests, 16 columns a block (a decode step's few rows: the dense tile; a
    prompt's many: the GEMM tile, whose rows share each dequantized weight vector)."""
    if len(out.shape) < 2 or shape_of(out)[:-1] != shape_of(anchor)[:-1]:
        return reduction(sch, out)
    acc = anchor if is_reduction(anchor) else next(t for t in compute_stages(out) if is_reduction(t))
    panel = _named_input(acc, "dense_int4_weight")
    inline_injective(sch, out, (acc,) + ((panel,) if panel is not None else ()))
    if panel is not None:  # the dequantized weight: blocks of columns in parallel, 16 lanes
        nb, k, lane = sch[panel].op.axis
        _, pair = sch[panel].split(k, factor=2)  # unrolled: each k's nibble a constant choice
        sch[panel].parallel(nb)
        sch[panel].unroll(pair)
        sch[panel].vectorize(lane)
    k = int(acc.op.reduce_axis[0].dom.extent.value)
    if len(out.shape) == 2 and int(out.shape[0]) < 8:
        return dense_pack_nest(sch, out, _block_stage(sch, out, acc), 16)
    gemm_pack_nest(sch, out, _block_stage(sch, out, acc), 16, k)


def gemm_tile(rows: int, col_blocks: int, block: int, k: int, dtype: str, temporaries: int = 0) -> tuple[int, int]:
    """``(rows, blocks)`` of a packed GEMM's register tile: as many accumulators as the target's vector
    registers hold beside the broadcasts and weight loads, the fewest loads per step among those (4 x 3
    vectors: 7 loads for 12 FMAs; 12 x 1: 13, which the load ports cannot feed), and a weight panel
    (blocks x k x block) small enough to stay in L2 while every row tile passes over it. Rows that the tile
    does not divide (ViT's 197 tokens, a prime) take it anyway, the last tile partial, unless a divisor at
    least half as tall exists. ``temporaries``: registers a step needs beyond those (``pmaddwd``'s product,
    which does not accumulate in place)."""
    per_block = max(1, block // lanes(dtype))
    budget = max(4, cpu().vector_registers - 4 - temporaries)
    best, best_score = (1, 1), (0, 0)
    for nb in range(1, 5):
        if col_blocks % nb or nb * k * block * 4 > 512 * 1024 and nb > 1:
            continue
        most = max(1, min(12, budget // (nb * per_block), rows))
        r = divisor(rows, most)
        r = r if 2 * r >= most else most
        score = (r * nb * per_block, -(r + nb * per_block))
        if score > best_score:
            best, best_score = (r, nb), score
    return best


def gemm_pack_nest(sch: Any, out: te.Tensor, DL: Any, block: int, k_extent: int) -> None:
    """A packed GEMM (dense on many rows): the rows (all leading axes, fused) in tiles of a few rows, the
    columns in tiles of a few weight blocks; per tile the accumulators in registers over the whole k (one
    broadcast of the input per row, one load per weight vector), tiles in parallel, the epilogue vectorized in
    the output's loops."""
    axes = list(sch[out].op.axis)
    # row tiles split the last leading axis only: a tile of the fused leading axes would cross their boundaries
    # ([1, 14, 14, C], ConvNeXt's channels-last MLP), and the block it needs, a bounding box over every leading
    # axis, would be whole planes (measured: 74x slower); axes of 1 after it ([197, 1, 768]: tokens, then a
    # batch of 1, as torch's attention exports) do not count
    extents = shape_of(out)
    p = max((d for d, e in enumerate(extents[:-1]) if e > 1), default=len(axes) - 2)
    i, j = axes[p], axes[-1]
    outer = axes[:p] + axes[p + 1:-1]
    rows, cols = extents[p], extents[-1]
    r, nb = gemm_tile(rows, cols // block, block, k_extent, out.dtype,
                      temporaries=int(DL.op.input_tensors[-1].dtype == "int16"))
    jo, ji = sch[out].split(j, factor=block * nb)
    io, ii = sch[out].split(i, factor=r)
    sch[out].reorder(jo, *outer, io, ii, ji)
    # a partial last row tile: with column tiles enough for every core, the row tiles run in order inside one,
    # so the tail's guard stays on the row loop and loop partitioning lifts it out of the whole tiles
    uneven = rows % r and cols // (block * nb) * math.prod(extents[:-1]) // rows >= cpu().cores
    par = sch[out].fuse(jo, *outer) if uneven else sch[out].fuse(jo, *outer, io)
    sch[out].parallel(par)
    jv, jl = sch[out].split(ji, factor=lanes(out.dtype))  # the epilogue one native vector at a time
    sch[out].unroll(ii)  # over the tile unrolled: constant indices keep the accumulators in registers (LLVM
    sch[out].unroll(jv)  # left a long epilogue, a quantized layer's, rolled and the tile in memory)
    sch[out].vectorize(jl)
    sch[DL].compute_at(sch[out], io if uneven else par)
    daxes = list(sch[DL].op.axis)
    cj = daxes[-1]
    (k,) = sch[DL].op.reduce_axis
    cjb, cjl = sch[DL].split(cj, factor=block)
    ko, ki = sch[DL].split(k, factor=divisor(int(k.dom.extent.value), 4))
    sch[DL].reorder(ko, ki, *daxes[:-1], cjb, cjl)
    sch[DL].unroll(ki)
    for a in daxes[:-1]:
        sch[DL].unroll(a)
    sch[DL].unroll(cjb)
    sch[DL].vectorize(cjl)


def layout_transform(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """A layout transform without gathers or scatters: rows in parallel; a run of pixels of a block's channels
    (into NCHW[x]c: rows of x channels, read as vectors; into NCHW: pixels of a block, read as vectors) is
    transposed in registers (an unrolled loop around a vectorized one: codegen's transposed stores). A block
    wider than a vector keeps its channels unrolled innermost, so every load or every store is contiguous."""
    inline_injective(sch, out)
    if out.op.name != "layout_transform" or len(out.shape) not in (4, 5):
        return flat_parallel_vector(sch, out)
    src = out.op.input_tensors[0]
    v = lanes(out.dtype)
    width = int(out.shape[3])
    if len(out.shape) == 5:
        n, cb, y, x, b = sch[out].op.axis
        sch[out].parallel(sch[out].fuse(n, cb, y))
        if int(out.shape[4]) <= v and width > 1:
            xo, xi = sch[out].split(x, factor=divisor(width, TRANSPOSE_RUN))
            sch[out].reorder(xo, b, xi)
            sch[out].vectorize(xi)
        sch[out].unroll(b)
        return
    if len(src.shape) != 5:
        return flat_parallel_vector(sch, out)
    n, c, y, x = sch[out].op.axis
    cb, b = sch[out].split(c, factor=int(src.shape[4]))
    if int(src.shape[4]) <= v and width > 1:
        xo, xi = sch[out].split(x, factor=divisor(width, TRANSPOSE_RUN))
        sch[out].reorder(n, cb, y, xo, xi, b)
        sch[out].parallel(sch[out].fuse(n, cb, y))
        sch[out].unroll(xi)
        sch[out].vectorize(b)
        return
    sch[out].reorder(n, cb, y, x, b)
    sch[out].parallel(sch[out].fuse(n, cb, y))
    sch[out].unroll(b)


def conv2d_winograd_nchwc(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """Winograd conv2d: the nests of the conv2d_winograd_nchwc workload, the epilogue in the output
    transform's loops (the output tile is computed once, then biased, added and clipped in place)."""
    if shape_of(out) != shape_of(anchor):
        return reduction(sch, out)
    inline_injective(sch, out, tuple(t for t in compute_stages(out) if t.op.name.startswith("winograd_")))
    gemm = next(t for t in compute_stages(out) if t.op.name == "winograd_gemm")
    _, _, OCB, P, ob = shape_of(gemm)
    blocks, _, pixels = conv_tile(1, P, OCB, ob, out.dtype)
    winograd_nest(sch, out, tile=int(attrs["tile"]), blocks=blocks, pixels=pixels)


def row_statistic(sch: Any, red: te.Tensor, out: te.Tensor, row: Any, v: int) -> None:
    """A row's reduction (sum, max) computed in the output's row loop, its reduction loop vectorized when longer
    than ``v`` lanes: partial results in a few vector accumulators (a last partial vector guarded), then the
    lanes halved onto each other (codegen's vector_reduction). A scalar sweep adds one element per 4-cycle
    latency (a BERT layer_norm row of 768: 99 -> 11.5 us for 128 rows on Zen 4 in lanes; a softmax of
    12 x 128 x 128 on one Emerald Rapids core: 194 -> 132 us with the accumulators and the halving)."""
    (k, *more) = sch[red].op.reduce_axis
    if not more and int(k.dom.extent.value) > v:
        sch[red].vectorize(k)
    sch[red].compute_at(sch[out], row)


def layer_norm(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """Layer normalisation over the last axis: rows in parallel, each row's sums computed in the row's loop
    in vector lanes (the row stays in L1 between the sweep for the statistics and the normalised output,
    vectorized)."""
    reds = [t for t in compute_stages(out) if is_reduction(t)]
    if (len(out.shape) < 2 or is_reduction(out) or not reds
            or any(len(r.shape) != len(out.shape) - 1 for r in reds)):
        return reduction(sch, out)
    inline_injective(sch, out)
    axes = list(sch[out].op.axis)
    row = sch[out].fuse(*axes[:-1]) if len(axes) > 2 else axes[0]
    sch[out].parallel(row)
    v = lanes(out.dtype)
    for r in reds:
        row_statistic(sch, r, out, row, v)
    width = int(out.shape[-1])
    if width > v:
        _, inner = sch[out].split(axes[-1], factor=v)
        sch[out].vectorize(inner)
    else:
        sch[out].vectorize(axes[-1])


def batch_matmul(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """Batched matmul (attention's scores and weighted values): per batch a register block of a few rows x
    vectors of columns accumulated over k, batches and row blocks in parallel, the epilogue (scale, mask add)
    in the output's loops; a last partial tile of rows or columns is guarded (loop partitioning keeps the guards
    out of the whole tiles). A transposed operand (columns strided) gets the generic reduction schedule: on
    CPUs AlterOpLayout gives it a transposed copy first."""
    if shape_of(out) == shape_of(anchor) and few_rows_against_rows(
            attrs, shape_of(out)[-2], int(anchor.op.reduce_axis[0].dom.extent.value), anchor.dtype):
        return _dot_products(sch, out, anchor)
    if shape_of(out) != shape_of(anchor) or attrs.get("transpose_b") or attrs.get("transpose_a"):
        return reduction(sch, out)
    M, N = shape_of(out)[-2:]
    v = lanes(out.dtype)
    inline_injective(sch, out, (anchor,))
    DL = _block_stage(sch, out, anchor)
    rows = min(4, M)
    cols = v * (2 if N > v else 1)  # 4 rows x 2 vectors: 8 accumulators, one broadcast per row and k
    axes = list(sch[out].op.axis)
    batch, i, j = axes[:-2], axes[-2], axes[-1]
    io, ii = sch[out].split(i, factor=rows)
    jo, ji = sch[out].split(j, factor=cols)
    sch[out].reorder(*batch, io, jo, ii, ji)
    # rows that no tile divides (ViT's 197 tokens): with batches enough for every core, only the batches run in
    # parallel, so the row tail's guard stays on the row loop and loop partitioning lifts it out of the tiles
    nbatch = math.prod(shape_of(out)[:-2])
    par = sch[out].fuse(*batch) if M % rows and nbatch >= cpu().cores else sch[out].fuse(*batch, io)
    sch[out].parallel(par)
    sch[out].vectorize(ji)
    sch[DL].compute_at(sch[out], jo)
    daxes = list(sch[DL].op.axis)
    ci, cj = daxes[-2], daxes[-1]
    (k,) = sch[DL].op.reduce_axis
    cjb, cjl = sch[DL].split(cj, factor=v)
    ko, ki = sch[DL].split(k, factor=divisor(int(k.dom.extent.value), 4))
    sch[DL].reorder(*daxes[:-2], ko, ki, ci, cjb, cjl)
    sch[DL].unroll(ki)
    sch[DL].unroll(ci)
    sch[DL].unroll(cjb)
    sch[DL].vectorize(cjl)


#: a batch_matmul of at most this many rows against a transposed y (one query against a KV cache) runs as dot
#: products of contiguous rows: a transposed copy of y would cost more than the product
FEW_ROWS = 4


def few_rows_against_rows(attrs: dict, rows: int, depth: int, dtype: str) -> bool:
    """Whether a batch_matmul is ``x @ y^T`` (y as [.., N, K]) with at most FEW_ROWS rows of x and a K of at
    least a vector (shorter dot products are better done as the register block over a transposed copy)."""
    return (bool(attrs.get("transpose_b")) and not attrs.get("transpose_a") and rows <= FEW_ROWS
            and depth >= lanes(dtype))


def _dot_products(sch: Any, out: te.Tensor, anchor: te.Tensor) -> None:
    """``x @ y^T`` with few rows: every output a dot product of a row of x and a row of y, both contiguous,
    its reduction loop vectorized (partial sums in vector lanes, then the lanes added); batches and rows in
    parallel, the epilogue (scale, mask) in the output's loop over columns."""
    inline_injective(sch, out, (anchor,))
    axes = list(sch[out].op.axis)
    sch[out].parallel(sch[out].fuse(*axes[:-1]))
    (k,) = sch[anchor].op.reduce_axis
    if int(k.dom.extent.value) > lanes(out.dtype):
        sch[anchor].vectorize(k)
    if anchor is not out:
        sch[anchor].compute_at(sch[out], axes[-1])


def softmax(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """Softmax over the last axis: rows in parallel; per row the max, the exponentials (once, into a row
    buffer, vectorized) and their sum in the row's loop, then the vectorized product with the sum's reciprocal
    (op.nn's softmax divides once per row: a vector division costs about ten cycles). The scale and the mask
    before it are fused into the producing batch_matmul's epilogue."""
    stages = {t.op.name: t for t in compute_stages(out)}
    ex = stages.get("softmax_exp")
    axis = int(attrs.get("axis", -1)) % len(out.shape)
    if ex is None or out.op.name != "softmax" or axis != len(out.shape) - 1 or len(out.shape) < 2:
        return reduction(sch, out)
    inline_injective(sch, out, (ex,))
    axes = list(sch[out].op.axis)
    row = sch[out].fuse(*axes[:-1]) if len(axes) > 2 else axes[0]
    sch[out].parallel(row)
    v = lanes(out.dtype)
    for t in compute_stages(out):
        if is_reduction(t):
            row_statistic(sch, t, out, row, v)
    sch[ex].compute_at(sch[out], row)
    width = int(out.shape[-1])
    if width >= v:
        _, inner = sch[out].split(axes[-1], factor=v)
        sch[out].vectorize(inner)
        _, einner = sch[ex].split(sch[ex].op.axis[-1], factor=v)
        sch[ex].vectorize(einner)
