"""Default GPU schedules (target kind ``cuda``) of fused kernels: what ``relay.build(mod, target="cuda")`` uses
for a kernel without a tuning record.

Every one binds threadIdx.x to the output's innermost axis (a thread's consecutive columns, if any, stored as
one vector), so the threads of a warp store consecutive addresses; the epilogue (bias, residual add, relu,
GELU) is computed on the anchor's register tile in the output's loops.

- conv2d (NCHW, groups 1): the GEMM it is (output channels x pixels, reduced over input channels and the
  window): a block computes a few rows of output pixels for a group of channels, threadIdx.x along the row,
  threadIdx.y over channels, each thread a register tile of channels x rows; per step of the reduction the
  block's input window (the padding filled in as it is copied) and the matching weights are staged in shared
  memory by all its threads; the tile sized so that a batch-1 layer still fills the GPU with threads;
- dense / matmul / batch_matmul: the classic shared-memory GEMM: a block tile of rows x columns, both
  operands' k tiles staged in shared memory cooperatively (a transposed operand's rows padded against bank
  conflicts), each thread a register tile of up to 4 rows x 4 consecutive columns, the k tile unrolled; one
  row of output (a batch-1 classifier) a cross-thread reduction per column instead;
- softmax, log_softmax, layer_norm (over the innermost axes): one block per row, each row statistic (max
  and sum of exponentials; the sums of x and x^2) reduced by the block's threads together into shared memory
  (a cross-thread reduction, :mod:`autosched.tir.xthread`), once per row; then the threads write the row;
- global average pooling and sum / mean / max / min over the innermost axes: a warp (more for long rows)
  per output value, several values per block;
- grid_sample: one thread per output element, its pixel's sampling position, tap indices and weights computed
  in the thread first;
- nll_loss summed or averaged: one block whose threads sum the losses (and the weights) together;
- det: one thread per matrix, its whole elimination (each step's submatrix, each pivot search) in the thread;
- anything else (injective kernels, windowed pooling, reductions over outer axes): one thread per output
  element, blocks of 256 threads, a reduction accumulated in a register.
"""

from __future__ import annotations

from typing import Any

from autosched import te
from autosched.relay.op.schedules import _block_stage, compute_stages, inline_injective, is_reduction, shape_of
from autosched.workloads.tile_sizes import divisor

THREADS = 256  # threads per block of the one-thread-per-element default


def _bind_flat(sch: Any, out: te.Tensor) -> tuple[Any, Any]:
    """The output's axes fused and split over blocks of up to :data:`THREADS` threads, threadIdx.x innermost:
    ``(blockIdx.x loop, threadIdx.x loop)``."""
    axes = sch[out].op.axis
    fused = sch[out].fuse(*axes) if len(axes) > 1 else axes[0]
    total = 1
    for d in out.shape:
        total *= int(d)
    bx, tx = sch[out].split(fused, factor=max(1, min(THREADS, total)))
    sch[out].bind(bx, "blockIdx.x")
    sch[out].bind(tx, "threadIdx.x")
    return bx, tx


def generic(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """One thread per output element: injective stages inlined, each reduction computed in the thread
    (its accumulator in a register)."""
    inline_injective(sch, out)
    stages = [t for t in compute_stages(out) if t is not out]  # consumers first
    local = sch.cache_write(out, "local") if is_reduction(out) else None
    _, tx = _bind_flat(sch, out)
    if local is not None:
        sch[local].compute_at(sch[out], tx)
    for t in stages:
        if is_reduction(t):  # a private buffer of the thread
            sch[t].compute_at(sch[out], tx)


# ------------------------------------------------------------------ tiled GEMM-like kernels
#: (threads along N, threads along M, registers along N, registers along M), largest first: the first whose grid
#: has at least MIN_BLOCKS blocks is used (batch-1 layers are small: a big tile would leave SMs idle)
GEMM_TILES = ((16, 16, 4, 4), (16, 8, 4, 4), (16, 8, 4, 2), (16, 8, 2, 2), (16, 4, 2, 2), (16, 4, 2, 1),
              (16, 4, 1, 1), (8, 4, 1, 1))
MIN_BLOCKS = 256  # about two blocks per SM of an H100 (132 SMs): fewer leave SMs idle in a partial second wave
MIN_THREADS = 65536  # threads a conv2d's grid should have before its threads get larger register tiles
K_TILE = 16  # reduction elements per shared tile of dense / batch_matmul
UNROLL_LIMIT = 256  # copies of a register tile's update that unrolling a reduction step may make
SHARED_LIMIT = 40 * 1024  # bytes of shared tiles a default kernel may use (of the 48 KiB)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _gemm_tile(M: int, N: int, batch: int, tiles: Any = GEMM_TILES,
               ok: Any = None) -> tuple[int, int, int, int] | None:
    """The first of ``tiles`` (largest first) whose grid has :data:`MIN_BLOCKS` blocks (else the one with the
    most blocks) among those whose thread loops fill the block (M >= rows of a block's threads, N >= its
    columns), whose split tails fall inside the register tile (a register axis of one element needs a thread
    count that divides the extent: its tail guard would otherwise hold a barrier) and whose block width ``ok``
    accepts; None when none fits."""
    best = None
    for tx, ty, rn, rm in tiles:
        if N < tx * rn or M < ty * rm:
            continue
        if (rn == 1 and N % tx) or (rm == 1 and M % ty) or (ok is not None and not ok(tx * rn)):
            continue
        best = (tx, ty, rn, rm)
        if batch * _ceil(M, ty * rm) * _ceil(N, tx * rn) >= MIN_BLOCKS:
            break
    return best


#: conv2d's (threads along output channels, registers along channels): the largest first
CONV_CHANNEL_TILES = ((16, 4), (8, 4), (16, 2), (8, 2), (4, 4), (4, 2), (16, 1), (8, 1), (4, 1))
CONV_ROWS = (8, 4, 2, 1)  # output rows of a thread's register tile


def _conv_tile(CO: int, OH: int, OW: int, N: int) -> tuple[int, int, int, int] | None:
    """conv2d's tile ``(threads along a row, threads along channels, rows per thread, channels per thread)``: the
    threads of a row a divisor of the output width (at most 16, at least 8 or the whole row: coalesced stores;
    a divisor, so that no split tail holds a barrier), the best by (threads in the grid, up to
    :data:`MIN_THREADS`: a batch-1 layer has few outputs, and a GPU hides its latencies with many warps; at
    least two warps a block; at most a quarter of the rows or channels idle; the larger register tile, the
    more balanced; the more threads a block)."""
    tx = divisor(OW, 16)
    if tx < min(8, OW):
        return None
    best, best_key = None, None
    for rn in CONV_ROWS:
        for ty, rm in CONV_CHANNEL_TILES:
            if rn > OH or CO < (ty * rm if rm > 1 else ty) or (rm == 1 and CO % ty):
                continue
            bm = ty * rm
            blocks = N * _ceil(CO, bm) * _ceil(OH, rn) * (OW // tx)
            eff = OH / (_ceil(OH, rn) * rn) * CO / (_ceil(CO, bm) * bm)
            key = (min(blocks * tx * ty, MIN_THREADS), tx * ty >= 64, eff >= 0.75, rn * rm, -(rn + rm), tx * ty)
            if best_key is None or key > best_key:
                best, best_key = (tx, ty, rn, rm), key
    return best


def _coop_fetch(sch: Any, t: Any, tx: int, ty: int) -> None:
    """A shared copy loaded by the block's threads together: its axes fused, consecutive threadIdx.x on
    consecutive elements (the copy's innermost axis is the operand's contiguous one)."""
    axes = list(sch[t].op.axis)
    f = sch[t].fuse(*axes) if len(axes) > 1 else axes[0]
    _, fi = sch[t].split(f, factor=tx * ty)
    fy, fx = sch[t].split(fi, factor=tx)
    sch[t].bind(fy, "threadIdx.y")
    sch[t].bind(fx, "threadIdx.x")


def _tiled(sch: Any, out: te.Tensor, anchor: te.Tensor, batch: list, m_axis: Any, n_axes: list, operands: list,
           k_tile: int, pad_rows: tuple = (), tile: tuple | None = None) -> None:
    """The classic shared-memory GEMM: a block computes a BM x BN tile of the output (rows ``m_axis``, columns
    ``n_axes`` fused: threadIdx.x along them); each thread a register tile of RM rows x RN consecutive columns
    (stored as one vector: consecutive threads store consecutive vectors); the reduction in tiles whose
    operands (``operands``: the anchor's inputs, or stages inlined into their shared copies) are staged in
    shared memory by the block's threads together, the tile's inner loops unrolled over the registers; the
    epilogue computed on the register tile."""
    OL = _block_stage(sch, out, anchor)
    shapes = {iv: int(iv.dom.extent.value) for iv in sch[out].op.axis}
    M = shapes[m_axis]
    N = 1
    for a in n_axes:
        N *= shapes[a]
    B = 1
    for a in batch:
        B *= shapes[a]
    tx, ty, rn, rm = tile or _gemm_tile(M, N, B)  # type: ignore[misc]  # (the callers checked that one fits)
    n = sch[out].fuse(*n_axes) if len(n_axes) > 1 else n_axes[0]
    bm, mi = sch[out].split(m_axis, factor=ty * rm)
    tm, im = sch[out].split(mi, factor=rm)
    bn, ni = sch[out].split(n, factor=tx * rn)
    tn, jn = sch[out].split(ni, factor=rn)
    sch[out].reorder(*batch, bm, bn, tm, tn, im, jn)
    if batch:
        sch[out].bind(sch[out].fuse(*batch) if len(batch) > 1 else batch[0], "blockIdx.z")
    sch[out].bind(bm, "blockIdx.y")
    sch[out].bind(bn, "blockIdx.x")
    sch[out].bind(tm, "threadIdx.y")
    sch[out].bind(tn, "threadIdx.x")
    sch[out].unroll(im)
    if rn > 1:
        sch[out].vectorize(jn)  # a thread's columns: one 64/128-bit store where aligned
    sch[OL].compute_at(sch[out], tn)
    caches = [sch.cache_read(t, "shared", [OL]) for t in operands]
    for t in operands:
        if isinstance(t.op, te.ComputeOp):  # a padding stage: computed as its shared copy is filled
            sch[t].compute_inline()
    oaxes = list(sch[OL].op.axis)
    red = list(sch[OL].op.reduce_axis)
    ko, ki = sch[OL].split(red[0], factor=k_tile)
    sch[OL].reorder(ko, *red[1:], ki, *oaxes)
    for a in oaxes:
        sch[OL].unroll(a)
    if k_tile * rm * rn <= UNROLL_LIMIT:
        sch[OL].unroll(ki)
    for t, c in zip(operands, caches):
        sch[c].compute_at(sch[OL], ko)
        if t in pad_rows:  # read down a column by consecutive threads: rows padded by one bank
            sch[c].storage_align(sch[c].op.axis[-2], 16, 1)
        _coop_fetch(sch, c, tx, ty)


def dense(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """dense (data [..., K] by weight [N, K]) / matmul: the tiled GEMM (:func:`_tiled`) over the last two axes
    (earlier ones on blockIdx.z), the weight tile's rows padded against bank conflicts; one row of output (a
    batch-1 classifier: a matrix-vector product) is a cross-thread reduction per output column instead, the
    weight read along its rows (coalesced)."""
    if len(out.shape) < 2 or shape_of(out) != shape_of(anchor):
        return generic(sch, out)
    rows = 1
    for d in shape_of(out)[:-1]:
        rows *= d
    inline_injective(sch, out, (anchor,))
    if rows == 1 or _gemm_tile(shape_of(out)[-2], shape_of(out)[-1], 1) is None:
        return _gemv(sch, out, anchor)
    axes = list(sch[out].op.axis)
    data, weight = anchor.op.input_tensors[:2]
    op = attrs.get("op", "nn.dense")
    tb = op == "nn.dense" or bool(attrs.get("transpose_b"))
    _tiled(sch, out, anchor, axes[:-2], axes[-2], [axes[-1]], [data, weight], K_TILE,
           pad_rows=(weight,) if tb else ())


def _gemv(sch: Any, out: te.Tensor, anchor: te.Tensor) -> None:
    red = sch.cache_write(anchor, "shared")
    if out is not anchor and out.op is not anchor.op:
        sch[anchor].compute_inline()
    k = 1
    for ax in sch[red].op.reduce_axis:
        k *= int(ax.dom.extent.value)
    _rows_per_block(sch, out, [red], _row_threads(k))


def batch_matmul(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """batch_matmul (attention's scores and weighted values, any batch axes): the tiled GEMM per batch, the batch
    axes on blockIdx.z; a transposed operand read down its rows gets its shared rows padded."""
    shape = shape_of(out)
    if len(shape) < 3 or shape != shape_of(anchor) or _gemm_tile(shape[-2], shape[-1], 1) is None:
        return generic(sch, out)
    inline_injective(sch, out, (anchor,))
    axes = list(sch[out].op.axis)
    x, y = anchor.op.input_tensors[:2]
    pad = ((y,) if attrs.get("transpose_b", True) else ()) + ((x,) if attrs.get("transpose_a") else ())
    _tiled(sch, out, anchor, axes[:-2], axes[-2], [axes[-1]], [x, y], K_TILE, pad_rows=pad)


def conv2d(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """conv2d NCHW (groups 1) as the GEMM it is (output channels x pixels, reduced over input channels and the
    kernel window; a 1x1 convolution is exactly a matmul of the weights by the image): a block computes
    ``ty * rm`` output channels of ``rn`` rows of ``tx`` pixels; threadIdx.x along the row (coalesced stores),
    threadIdx.y over channel groups; a thread a register tile of ``rm`` channels x ``rn`` rows; per step of
    the reduction, ``ct`` input channels of the block's input window (the padding filled in as the window is
    copied) and the matching weights (their rows padded against bank conflicts) staged in shared memory by the
    block's threads together, the step's kernel window and channels unrolled over the registers. Grouped
    convolutions, other layouts and rows no divisor of at most 16 threads covers take :func:`generic`."""
    if (len(out.shape) != 4 or shape_of(out) != shape_of(anchor) or int(attrs.get("groups", 1)) != 1
            or str(attrs.get("data_layout", "NCHW")) != "NCHW" or int(out.shape[3]) == 1):
        return generic(sch, out)  # (a one-pixel-wide output: its rows run along the channels)
    N, CO, OH, OW = shape_of(out)
    tile = _conv_tile(CO, OH, OW, N)
    if tile is None:
        return generic(sch, out)
    tx, ty, rn, rm = tile
    data, weight = anchor.op.input_tensors[:2]
    keep = (anchor,) + ((data,) if isinstance(data.op, te.ComputeOp) and data.op.name == "pad" else ())
    inline_injective(sch, out, keep)
    _, CI, KH, KW = shape_of(weight)
    sh, sw = (list(attrs.get("strides", (1, 1))) * 2)[:2]
    dh, dw = (list(attrs.get("dilation", (1, 1))) * 2)[:2]
    window = ((rn - 1) * int(sh) + (KH - 1) * int(dh) + 1) * ((tx - 1) * int(sw) + (KW - 1) * int(dw) + 1)
    ct = divisor(CI, max(1, min(2 * K_TILE, 72 // (KH * KW))))  # 32 channels a step (1x1), 8 (3x3), 1 (7x7)
    while ct > 1 and 4 * (ct * window + ty * rm * (ct * KH * KW + 16)) > SHARED_LIMIT:  # (+16: a row's padding)
        ct = divisor(CI, ct - 1)

    OL = _block_stage(sch, out, anchor)
    n, co, y, x = sch[out].op.axis
    bm, mi = sch[out].split(co, factor=ty * rm)
    tm, im = sch[out].split(mi, factor=rm)
    by, jr = sch[out].split(y, factor=rn)
    bx, tn = sch[out].split(x, factor=tx)
    sch[out].reorder(n, bm, by, bx, tm, tn, im, jr)
    sch[out].bind(n, "blockIdx.z")
    sch[out].bind(bm, "blockIdx.y")
    sch[out].bind(sch[out].fuse(by, bx), "blockIdx.x")
    sch[out].bind(tm, "threadIdx.y")
    sch[out].bind(tn, "threadIdx.x")
    sch[out].unroll(im)
    sch[out].unroll(jr)
    sch[OL].compute_at(sch[out], tn)
    caches = [sch.cache_read(t, "shared", [OL]) for t in (data, weight)]
    if isinstance(data.op, te.ComputeOp):  # the padding: computed as its shared copy is filled
        sch[data].compute_inline()
    oaxes = list(sch[OL].op.axis)
    rc, rh, rw = sch[OL].op.reduce_axis
    ko, ki = sch[OL].split(rc, factor=ct)
    sch[OL].reorder(ko, ki, rh, rw, *oaxes)
    copies = rn * rm
    for a in oaxes:  # the register tile: indices constant, so its accumulators stay in registers
        sch[OL].unroll(a)
    for a, n in ((rw, KW), (rh, KH), (ki, ct)):  # the step's inner loops, while the copies stay few
        if copies * n > UNROLL_LIMIT:
            break
        copies *= n
        sch[OL].unroll(a)
    for c in caches:
        sch[c].compute_at(sch[OL], ko)
        _coop_fetch(sch, c, tx, ty)
    if ty > 1:  # a warp's channel groups read weight rows rm apart, in one bank unless rows are padded
        sch[caches[1]].storage_align(sch[caches[1]].op.axis[0], 16, 1)


# ------------------------------------------------------------------ row reductions
ROW_THREADS = 256  # most threads along one row (and per block of a row reduction)
ROW_MIN_THREADS = 32  # fewest: a warp


def _row_threads(length: int) -> int:
    """Threads that reduce a row of ``length`` together: a power of two near a quarter of the row (each thread
    reduces a few elements a block's width apart: coalesced), between a warp and :data:`ROW_THREADS`."""
    t = ROW_MIN_THREADS
    while t < ROW_THREADS and 4 * t < length:
        t *= 2
    return t


def _trailing_reduction(out: te.Tensor, attrs: dict) -> bool:
    """Whether the kernel's op reduces the innermost axes of its input (rows contiguous in memory)."""
    op = attrs.get("op", "")
    if op in ("nn.softmax", "nn.log_softmax"):
        return int(attrs.get("axis", -1)) % len(out.shape) == len(out.shape) - 1
    if op == "nn.layer_norm":
        return True
    if op == "nn.nll_loss":  # summed (and the weights summed) to one value; "none" is elementwise
        return attrs.get("reduction", "mean") != "none"
    if op == "nn.global_avg_pool2d":
        return str(attrs.get("layout", "NCHW")) == "NCHW" and len(out.shape) == 4
    if op in ("sum", "mean", "max", "min"):
        axis = attrs.get("axis")
        if axis is None:
            return True
        nd = len(out.shape) if attrs.get("keepdims") else len(out.shape) + len(axis)
        axes = sorted({int(a) % nd for a in axis})
        return axes == list(range(nd - len(axes), nd))
    return False


def _cross_thread(sch: Any, r: te.Tensor, parent: te.Tensor, at: Any, nthreads: int, rows: Any = None) -> None:
    """Reduction stage ``r`` computed at ``parent``'s loop ``at`` into shared memory, its (fused) reduction
    loop split by ``nthreads`` with the inner part bound to threadIdx.x and run outermost: thread t reduces
    elements t, t + nthreads, ... of the row (coalesced), then the block combines the partial results (a
    cross-thread reduction, :mod:`autosched.tir.xthread`); ``rows``: bind its fused spatial axes to threadIdx.y
    (several rows per block)."""
    sch[r].set_scope("shared")
    sch[r].compute_at(sch[parent], at)
    red = list(sch[r].op.reduce_axis)
    k = sch[r].fuse(*red) if len(red) > 1 else red[0]
    ko, ki = sch[r].split(k, factor=nthreads)
    spatial = list(sch[r].op.axis)
    if rows is not None and spatial:
        sp = sch[r].fuse(*spatial) if len(spatial) > 1 else spatial[0]
        sch[r].reorder(sp, ki, ko)
        sch[r].bind(sp, "threadIdx.y")
    else:
        sch[r].reorder(*spatial, ki, ko)
    sch[r].bind(ki, "threadIdx.x")


def row_reduction(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """Softmax, log_softmax, layer_norm, global average pooling and sum / mean / max / min over the innermost
    axes: block-wide reductions, each row's statistics computed once by the threads of a block together.

    - a normalisation (softmax, layer_norm: an output as large as its input): one block per row; each reduction
      (max and sum of exponentials; the sums of x and x^2) is reduced by the block's threads together into
      shared memory, then the threads write the normalised row, threadIdx.x along it (coalesced);
    - a reduction to one value per row (pooling, sum, mean): a warp (or more, for long rows) per row, several
      rows per block on threadIdx.y, the block's results stored by consecutive threads.

    Reductions over other axes, and kernels of another shape, take :func:`generic` (one thread per output
    element, which is coalesced there: the reduced axis is not the innermost)."""
    attrs = attrs or {}
    if not _trailing_reduction(out, attrs):
        return generic(sch, out)
    inline_injective(sch, out)
    reds = [t for t in compute_stages(out) if is_reduction(t) and t is not out]
    oshape = shape_of(out)
    if is_reduction(out) and not reds:  # sum / max / min: the kernel is the reduction
        reds = [sch.cache_write(out, "shared")]
    elif is_reduction(out):
        return generic(sch, out)
    if not reds:
        return generic(sch, out)
    rshapes = {shape_of(r) for r in reds}
    if len(rshapes) != 1:
        return generic(sch, out)
    (rshape,) = rshapes
    length = 1
    for r in reds:
        n = 1
        for ax in r.op.reduce_axis:
            n *= int(ax.dom.extent.value)
        length = max(length, n)
    nt = _row_threads(length)
    a = len(rshape)
    if rshape == oshape:  # one value per row
        return _rows_per_block(sch, out, reds, nt)
    if 0 < a < len(oshape) and oshape[:a] == rshape:  # a normalisation: one block per row
        axes = list(sch[out].op.axis)
        row = sch[out].fuse(*axes[:a]) if a > 1 else axes[0]
        inner = sch[out].fuse(*axes[a:]) if len(axes) - a > 1 else axes[a]
        jo, jx = sch[out].split(inner, factor=nt)
        sch[out].bind(row, "blockIdx.x")
        sch[out].bind(jx, "threadIdx.x")
        for r in reds:
            _cross_thread(sch, r, out, row, nt)
        return None
    return generic(sch, out)


def _rows_per_block(sch: Any, out: te.Tensor, reds: list, nt: int) -> None:
    """One value per row: the output's innermost axis longer than 1 split into blocks of up to
    ``ROW_THREADS // nt`` rows (a divisor: every thread of a block reaches its barriers; the whole axis where it
    is no longer than a warp, so the stores are one run); the block's rows on
    threadIdx.y while they are reduced, on threadIdx.x when the results are stored."""
    shape = shape_of(out)
    axes = list(sch[out].op.axis)
    if not axes:  # a reduction to one value: one block of threads, on a unit loop
        block = sch[out].fuse()
        sch[out].bind(block, "blockIdx.x")
        for r in reds:
            _cross_thread(sch, r, out, block, nt)
        return
    c = max((d for d, n in enumerate(shape) if n > 1), default=len(shape) - 1)
    ry = shape[c] if shape[c] <= min(nt, 1024 // nt) else divisor(shape[c], max(1, min(nt, ROW_THREADS // nt)))
    co, ci = sch[out].split(axes[c], factor=ry)
    others = axes[:c] + [co] + axes[c + 1:]
    sch[out].reorder(*others, ci)
    block = sch[out].fuse(*others) if len(others) > 1 else others[0]
    sch[out].bind(block, "blockIdx.x")
    sch[out].bind(ci, "threadIdx.x")
    for r in reds:
        _cross_thread(sch, r, out, block, nt, rows=ry if ry > 1 else None)


#: the schedule of a kernel by its anchor op (others: :func:`generic`)
def grid_sample(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """One thread per output element, the sampling position, tap indices and weights of its pixel computed in the
    thread once (inlined, each tap would repeat their arithmetic: a kernel ptxas took seconds over)."""
    kept = tuple(t for t in compute_stages(out) if t.op.name.startswith("grid_sample_"))  # consumers first
    inline_injective(sch, out, keep=kept)
    _, tx = _bind_flat(sch, out)
    for t in kept:
        sch[t].compute_at(sch[out], tx)


def det(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """One thread per matrix: its elimination (the matrix's copy, each step's submatrix and pivot search) computed
    in the thread (inlined, each step would recompute every step before it); one matrix on one thread."""
    kept = tuple(t for t in compute_stages(out) if t.op.name.startswith("det_"))  # consumers first
    inline_injective(sch, out, keep=kept)
    if sch[out].op.axis:
        _, tx = _bind_flat(sch, out)
    else:
        tx = sch[out].fuse()
        sch[out].bind(tx, "blockIdx.x")
    for t in kept:
        sch[t].compute_at(sch[out], tx)


BY_OP = {"nn.conv2d": conv2d, "nn.dense": dense, "nn.matmul": dense, "nn.batch_matmul": batch_matmul,
         "image.grid_sample": grid_sample, "det": det,
         **{op: row_reduction for op in ("nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.global_avg_pool2d",
                                         "sum", "mean", "max", "min", "nn.nll_loss")}}
