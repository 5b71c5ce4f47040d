"""GPU templates (target kind ``cuda``): blocks and threads with ``bind``, a 2-D register tile per thread.

They follow TVM's classic CUDA schedules: the output split into (block,
thread, inner) tiles bound to ``blockIdx``/``threadIdx``, a ``local``
accumulator computed at the thread loop, the reduction split, and (matmul)
``shared`` copies of the operands fetched cooperatively by the block's
threads. They lower with :func:`autosched.lower`; compiling bound loops is the
GPU code generator's job (building them for ``llvm`` is refused with a clear
error).

Stores are coalesced: threadIdx.x runs along the output's innermost axis,
which is split into (block, thread) only, so the threads of a warp write
consecutive addresses; a thread's register tile spans the other axes.
"""

from __future__ import annotations

from autosched.errors import ScheduleError
from autosched.space import tensor_core
from autosched.space.config import factorizations
from autosched.space.gpu_rules import COALESCED_RUN, K_STEPS, VECTOR_WIDTHS
from autosched.space.template import register_template


def _coalesced_threads(n: int, max_factor: int):
    """A define_split filter for the innermost output axis (blocks, threads): at least 8 threads along it (a
    warp stores whole 32-byte sectors), or all of it when it is shorter; None where no factor allows it."""
    need = min(COALESCED_RUN, n)
    if not any(c[1] >= need for c in factorizations(n, 2, max_factor)):
        return None
    return lambda e: e.size[1] >= need


def _vector_columns(n: int, max_factor: int):
    """A define_split filter for the innermost output axis split (blocks, threads, columns per thread): a
    thread's 1, 2 or 4 consecutive columns stored as one vector, and at least 8 threads along the axis where
    it is that long, so that a warp's stores stay coalesced."""
    def coalesced(size) -> bool:
        return size[2] in VECTOR_WIDTHS and size[1] >= min(COALESCED_RUN, n // size[2])

    if any(coalesced(c) for c in factorizations(n, 3, max_factor)):
        return lambda e: coalesced(e.size)
    return lambda e: e.size[2] in VECTOR_WIDTHS


def _cooperative_fetch(sch, cache, nthreads_x: int, nthreads_y: int = 1, vector: int = 1) -> None:
    """A shared copy filled by all the block's threads: its innermost axis in vectors of ``vector`` elements
    (one 64/128-bit global load each where aligned), the rest fused and spread over threadIdx.x, then
    threadIdx.y, so consecutive threads fetch consecutive vectors."""
    axes = list(sch[cache].op.axis)
    vec = None
    if vector > 1:
        axes[-1], vec = sch[cache].split(axes[-1], factor=vector)
    fused = sch[cache].fuse(*axes) if len(axes) > 1 else axes[0]
    rest, tx = sch[cache].split(fused, factor=nthreads_x)
    sch[cache].bind(tx, "threadIdx.x")
    if nthreads_y > 1:
        _, ty = sch[cache].split(rest, factor=nthreads_y)
        sch[cache].bind(ty, "threadIdx.y")
    if vec is not None:
        sch[cache].vectorize(vec)


@register_template("matmul", "cuda")
def matmul_cuda(cfg, sch, tensors, M, N, K, dtype, **_):
    """Block tiles of C over (blockIdx.y, blockIdx.x); in a block, a register tile of rows x columns per
    thread (its columns consecutive, stored as one vector); the k loop tiled, A's and B's tiles for one step
    of it copied to shared memory by all the block's threads with vector loads, the inner k loop unrolled;
    maybe double-buffered (two copies of each tile: the next one is loaded while this one is computed)."""
    A, B, C = tensors
    cfg.define_split("tile_i", M, num_outputs=3, max_factor=32)
    cfg.define_split("tile_j", N, num_outputs=3, max_factor=64, filter=_vector_columns(N, 64))
    cfg.define_split("tile_k", K, num_outputs=2, max_factor=32)
    cfg.define_knob("shared", [True, False])
    cfg.define_knob("vector_fetch", [4, 2, 1])
    cfg.define_knob("unroll_k", [True, False])
    cfg.define_knob("double_buffer", [False, True])  # the next k tile's global loads run under this one's FMAs
    CL = sch.cache_write(C, "local")
    shared = cfg["shared"].val
    AS = sch.cache_read(A, "shared", [CL]) if shared else None
    BS = sch.cache_read(B, "shared", [CL]) if shared else None
    i, j = sch[C].op.axis
    by, ty, ii = cfg["tile_i"].apply(sch, C, i)
    bx, tx, ji = cfg["tile_j"].apply(sch, C, j)
    sch[C].reorder(by, bx, ty, tx, ii, ji)
    sch[C].bind(by, "blockIdx.y")
    sch[C].bind(bx, "blockIdx.x")
    sch[C].bind(ty, "threadIdx.y")
    sch[C].bind(tx, "threadIdx.x")
    sch[C].unroll(ii)
    if cfg["tile_j"].size[2] > 1:
        sch[C].vectorize(ji)
    sch[CL].compute_at(sch[C], tx)
    ci, cj = sch[CL].op.axis
    (k,) = sch[CL].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(sch, CL, k)
    steps = []  # k taken 4 steps at a time (unrolled): 4 consecutive floats of an A row read as one vector
    if cfg["tile_k"].size[1] % K_STEPS == 0 and cfg["tile_k"].size[1] > K_STEPS:
        ki, kv = sch[CL].split(ki, factor=K_STEPS)
        steps = [kv]
    sch[CL].reorder(ko, ki, *steps, ci, cj)
    for iv in (*steps, ci, cj):
        sch[CL].unroll(iv)
    if cfg["unroll_k"].val:
        sch[CL].unroll(ki)
    if shared:
        for cache in (AS, BS):
            sch[cache].compute_at(sch[CL], ko)
            _cooperative_fetch(sch, cache, cfg["tile_j"].size[1], cfg["tile_i"].size[1], cfg["vector_fetch"].val)
            if cfg["double_buffer"].val and cfg["tile_k"].size[0] > 1:
                sch[cache].double_buffer()


@register_template("conv2d", "cuda")
def conv2d_cuda(cfg, sch, tensors, N, H, W, CI, CO, KH, KW, stride, padding, layout, dtype, **_):
    """Output tiles over blocks and threads: threadIdx.x along the innermost axis of the layout (x in NCHW,
    the channels in NHWC; split in two: blocks, threads), threadIdx.y along the rows, threadIdx.z along the
    other axis; a thread's register tile over the rows and that axis."""
    data, weight, out = tensors
    OH = (H + 2 * padding - KH) // stride + 1
    OW = (W + 2 * padding - KW) // stride + 1
    nchw = layout == "NCHW"
    cfg.define_split("tile_f", CO, num_outputs=3 if nchw else 2, max_factor=32,
                     filter=None if nchw else _coalesced_threads(CO, 32))
    cfg.define_split("tile_y", OH, num_outputs=3, max_factor=16)
    cfg.define_split("tile_x", OW, num_outputs=2 if nchw else 3, max_factor=16,
                     filter=_coalesced_threads(OW, 16) if nchw else None)
    cfg.define_split("tile_rc", CI, num_outputs=2, max_factor=32)
    cfg.define_knob("shared_weight", [True, False])
    pad = next((t for t in out.op.input_tensors if "pad" in t.op.name), None)
    if pad is not None:
        sch[pad].compute_inline()
    OL = sch.cache_write(out, "local")
    WS = sch.cache_read(weight, "shared", [OL]) if cfg["shared_weight"].val else None
    if nchw:
        n, f, y, x = sch[out].op.axis
    else:
        n, y, x, f = sch[out].op.axis
    fs = cfg["tile_f"].apply(sch, out, f)
    by, ty, yi = cfg["tile_y"].apply(sch, out, y)
    xs = cfg["tile_x"].apply(sch, out, x)
    (bo, to, oi), (bi, ti) = (fs, xs) if nchw else (xs, fs)  # the other axis, the innermost axis
    sch[out].reorder(n, bo, by, bi, to, ty, ti, oi, yi)
    bz = sch[out].fuse(n, bo)
    sch[out].bind(bz, "blockIdx.z")
    sch[out].bind(by, "blockIdx.y")
    sch[out].bind(bi, "blockIdx.x")
    sch[out].bind(to, "threadIdx.z")
    sch[out].bind(ty, "threadIdx.y")
    sch[out].bind(ti, "threadIdx.x")
    sch[OL].compute_at(sch[out], ti)
    if nchw:
        _, cf, cy, cx = sch[OL].op.axis
        rc, rh, rw = sch[OL].op.reduce_axis
    else:
        _, cy, cx, cf = sch[OL].op.axis
        rh, rw, rc = sch[OL].op.reduce_axis
    rco, rci = cfg["tile_rc"].apply(sch, OL, rc)
    sch[OL].reorder(rco, rh, rw, rci, cf, cy, cx)
    if WS is not None:
        sch[WS].compute_at(sch[OL], rco)
        _cooperative_fetch(sch, WS, cfg["tile_x" if nchw else "tile_f"].size[1])


@register_template("elementwise", "cuda")
def elementwise_cuda(cfg, sch, tensors, N, C, H, W, op, dtype, **_):
    """The axes fused and split into (block, per-thread, thread) parts: each thread computes ``per_thread``
    elements a block's width apart (unrolled), so consecutive threads always touch consecutive elements."""
    out = tensors[-1]
    cfg.define_knob("threads", [64, 128, 256, 512, 1024])
    cfg.define_knob("per_thread", [1, 2, 4])
    fused = sch[out].fuse(*sch[out].op.axis)
    rest, tx = sch[out].split(fused, factor=cfg["threads"].val)
    bx, inner = sch[out].split(rest, factor=cfg["per_thread"].val)
    sch[out].reorder(bx, inner, tx)
    sch[out].bind(bx, "blockIdx.x")
    sch[out].bind(tx, "threadIdx.x")
    sch[out].unroll(inner)


@register_template("matmul_mixed", "cuda")
def matmul_mixed_cuda(cfg, sch, tensors, M, N, K, dtype, out_dtype, **_):
    """Tensor cores (WMMA, 16x16x16 float16 tiles; :mod:`autosched.space.tensor_core`): a block's warps on a
    grid of warp tiles of C, each accumulating fragments x fragments 16x16 tiles in registers; A's and B's
    tiles for a step of k in shared memory (128-bit loads, rows maybe padded), multiplied by
    ``wmma.mma.sync``, maybe double-buffered; the accumulators stored straight to C."""
    A, B, C = tensors
    mm = tensor_core.match(sch[C])
    if mm is None:
        raise ScheduleError(f"the tensor-core template takes float16 inputs, a float32 or float16 result and "
                            f"M, N, K multiples of 16; got {dtype} -> {out_dtype}, M={M}, N={N}, K={K}")
    cfg.define_split("tile_i", M, num_outputs=4, policy="candidate",
                     candidate=tensor_core.spatial_tiles(M))
    cfg.define_split("tile_j", N, num_outputs=4, policy="candidate",
                     candidate=tensor_core.spatial_tiles(N))
    cfg.define_split("tile_k", K, num_outputs=3, policy="candidate", candidate=tensor_core.k_tiles(K))
    cfg.define_knob("pad_shared", list(tensor_core.PADS))
    cfg.define_knob("double_buffer", [False, True])  # the next k step's loads under this one's wmma.mma
    tensor_core.schedule(sch, C, mm, tuple(cfg["tile_i"].size), tuple(cfg["tile_j"].size),
                         tuple(cfg["tile_k"].size), cfg["pad_shared"].val, cfg["double_buffer"].val)
