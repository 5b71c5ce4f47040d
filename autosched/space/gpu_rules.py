"""The built-in GPU sketch rules (target kind ``cuda``): Ansor's GPU sketches, adapted to autosched.

prepare:
  ``gpu_inline``              inline every elementwise, non-output stage (a kernel keeps no intermediate
                              in global memory)
  ``gpu_tensor_core``         a mixed-precision matmul (float16 operands) on sm_70 or newer: maybe the whole
                              WMMA kernel (space/tensor_core.py); the stages it makes are claimed, no other
                              rule touches them
  ``gpu_multi_level_tiling``  a reduction with data reuse gets a ``local`` cache_write stage: its
                              accumulators live in registers; an elementwise consumer (a fused kernel's
                              epilogue) reads them directly and is tiled in its place
schedule (consumers first; first match wins):
  ``gpu_tile``                the output of a tiled reduction (or its elementwise epilogue): each
                              spatial axis split into block, thread and per-thread levels (the innermost
                              axis longer than 1 into block and thread only, so consecutive threads store
                              consecutive addresses); the block levels fused and bound to ``blockIdx.x``,
                              the thread levels to ``threadIdx.x``; the local stage computed at the thread
                              loop, its reduction split in two, and each input it reads directly maybe
                              staged in ``shared`` memory (fetched by all the block's threads, at the outer
                              reduction loop), the copies maybe double-buffered (the next tiles' loads in
                              flight while this one is computed); inner loops unrolled
  ``gpu_default``             everything else: at the root, its spatial axes fused and split over blocks,
                              a few elements per thread and threads (innermost: coalesced); a non-output
                              stage computed at its consumer's thread loop instead (a private copy per
                              thread)
finish:
  ``gpu_pad_shared_rows``     a shared copy whose accesses conflict on memory banks (a static model of the
                              lowered kernel) gets the row padding that takes the fewest passes

Threads per block and the coalesced run come from the target's GPU description (``Target.gpu``: warp,
threads, shared memory and registers per block of its arch). Every point passes the GPU rules (threads per
block, shared memory) or is redrawn: generated spaces for
``cuda`` lower and check each candidate (:func:`autosched.tir.gpu.prepare_kernel`).
"""

from __future__ import annotations

import math
from functools import lru_cache

from autosched.space.analysis import const_int, within
from autosched.space.base import CandidateError, split_hint
from autosched.space.config import factorizations
from autosched.space.rules import MultiLevelTilingPlan, static_extents, unroll_inner
from autosched.space.sketch import SketchContext, SketchRule
from autosched.space.tensor_core import GPUTensorCore
from autosched.te.expr import DTYPE_BYTES
from autosched.te.schedule import Stage
from autosched.tir import stmt as S
from autosched.tir.banks import shared_passes
from autosched.tir.lower import aligned_strides, lower

MAX_THREAD_TILE = 64  # threads along one axis
MAX_INNER_TILE = 8  # elements one thread computes along one axis (its register tile)
MAX_REDUCE_INNER = 32  # reduction steps per shared-memory tile
K_STEPS = 4  # reduction steps unrolled together: 4 consecutive floats of a shared row become one ld.shared.v4
THREADS = (32, 64, 128, 256, 512)  # threads per block of the default rule
PER_THREAD = (1, 2, 4)
COALESCED_RUN = 8  # threads storing consecutive floats: one 32-byte memory sector
VECTOR_WIDTHS = (1, 2, 4)  # float32 elements of one 32-, 64- or 128-bit access (ld/st.v2, .v4)


@lru_cache(maxsize=2048)
def gpu_tile_candidates(n: int) -> tuple[tuple, tuple]:
    """(block, thread, per-thread) tilings of an axis of extent ``n``, and sampling weights (a warp's worth of
    threads, and a few elements per thread, preferred)."""
    cands = tuple(c for c in factorizations(n, 3) if c[1] <= MAX_THREAD_TILE and c[2] <= MAX_INNER_TILE)
    weights = tuple((2.0 if 4 <= c[1] <= 32 else 1.0) * (2.0 if 2 <= c[2] <= 4 else 1.0) for c in cands)
    return cands, weights


def coalescing(cands: tuple, weights: tuple, n: int, run: int = COALESCED_RUN) -> tuple[tuple, tuple]:
    """The tilings of an output's innermost axis (extent ``n``) under which a warp's stores are coalesced: a
    per-thread tile of 1, 2 or 4 consecutive elements stored as one vector (consecutive threads, consecutive
    vectors), and at least 8 threads along it (a 32-byte sector of floats) where ``n`` has such a factor.
    A tile of 4 (a 128-bit store, and a register tile a column wider) is preferred."""
    keep = [(c, w * (2.0 if c[2] == 4 else 1.0)) for c, w in zip(cands, weights) if c[2] in VECTOR_WIDTHS]
    wide = [(c, w) for c, w in keep if c[1] >= min(run, n // c[2])]
    cs, ws = zip(*(wide or keep))
    return cs, ws


class GPUInline(SketchRule):
    """Inline every elementwise non-output stage into its readers (padding, bias, exp)."""

    name = "gpu_inline"
    phase = "prepare"

    def condition(self, ctx, st):
        return not st.is_output and not st.is_reduction and st.attach_type == "root" and bool(ctx.sch.readers(st))

    def apply(self, ctx, st):
        st.compute_inline()


class GPUMultiLevelTilingPlan(MultiLevelTilingPlan):
    """A reduction with data reuse (matmul, conv2d, dense) always gets a local cache_write stage to tile (its
    accumulators in registers), where the CPU rule may fuse into an elementwise consumer instead."""

    name = "gpu_multi_level_tiling"

    def condition(self, ctx, st):
        return "claimed" not in ctx.info(st) and super().condition(ctx, st)

    def apply(self, ctx, st):
        cache = ctx.cache_write(st, "local")
        readers = ctx.flow.readers(st)
        if not st.is_output and len(readers) == 1 and "follow" not in ctx.info(readers[0]) and (
                _elementwise_reader(ctx, st, readers[0])):
            # an elementwise epilogue (bias, relu of a fused kernel): it is tiled instead, reading the
            # accumulators in registers; the copy out of them is inlined into it
            st.compute_inline()
            st = readers[0]
        ctx.info(cache)["tile"] = {"consumer": st}
        ctx.info(st)["follow"] = cache


def _elementwise_reader(ctx: SketchContext, producer: Stage, consumer: Stage) -> bool:
    """Whether ``consumer`` reads ``producer`` element for element (at its own axes; an axis of extent 1,
    a batch of one, may be read at 0)."""
    if consumer.is_reduction or len(consumer.op.axis) != len(producer.op.axis):
        return False
    ext = static_extents(consumer.op.axis)
    if ext is None or ext != static_extents(producer.op.axis):
        return False
    loads = ctx.flow.loads(consumer, producer)
    own = [ax.var for ax in consumer.op.axis]
    return bool(loads) and all(
        len(idx) == len(own) and all(i is v or (n == 1 and const_int(i) == 0) for i, v, n in zip(idx, own, ext))
        for idx in loads)


class GPUTile(SketchRule):
    """Block / thread / per-thread tiles of the output, the local stage at the thread loop, shared staging."""

    name = "gpu_tile"

    def condition(self, ctx, st):
        return "follow" in ctx.info(st)

    def apply(self, ctx, st):
        local = ctx.info(st)["follow"]
        org = ctx.origin(local)
        gpu = ctx.target.gpu
        tiles = []
        extents = static_extents(st.op.axis)
        row = max((i for i, n in enumerate(extents) if n > 1), default=len(extents) - 1)  # where rows run
        for i, n in enumerate(extents):
            cands, w = gpu_tile_candidates(n)
            if i == row:
                cands, w = coalescing(cands, w, n, gpu.coalesced_run())
            tiles.append(ctx.decide(f"tile/{org}/s{i}", cands, kind="tile", weights=w, hint=split_hint(0)))
        threads = math.prod(t[1] for t in tiles)
        if threads > gpu.max_threads_per_block:
            raise CandidateError(f"{threads} threads per block")
        levels: list[list] = [[], [], []]
        for ax, t in zip(st.op.axis, tiles):
            rest, inner = st.split(ax, factor=t[2])
            blk, thr = st.split(rest, factor=t[1])
            levels[0].append(blk)
            levels[1].append(thr)
            levels[2].append(inner)
        st.reorder(*levels[0], *levels[1], *levels[2])
        bx = st.fuse(*levels[0]) if len(levels[0]) > 1 else levels[0][0]
        tx = st.fuse(*levels[1]) if len(levels[1]) > 1 else levels[1][0]
        st.bind(bx, "blockIdx.x")
        st.bind(tx, "threadIdx.x")
        for k, loop in enumerate(levels[2]):
            if k == row and tiles[k][2] > 1:
                st.vectorize(loop)  # a thread's consecutive outputs: one 64/128-bit store
            else:
                st.unroll(loop)
        local.compute_at(st, tx)
        # the local stage: outer reduction loops, inner reduction loops, then its register tile
        ext: dict = {}
        outer_r, inner_r = [], []
        for j, (ax, n) in enumerate(zip(local.op.reduce_axis, static_extents(local.op.reduce_axis))):
            cands = tuple(c for c in factorizations(n, 2) if c[1] <= MAX_REDUCE_INNER)
            t = ctx.decide(f"tile/{org}/r{j}", cands, kind="tile", hint=split_hint(0))
            ro, ri = local.split(ax, factor=t[1])
            ext[ro], ext[ri] = t
            outer_r.append(ro)
            inner_r.append(ri)
        steps = []  # the last reduction's steps taken 4 at a time: a row of a shared tile read as one vector
        if inner_r and ext[inner_r[-1]] % K_STEPS == 0 and ext[inner_r[-1]] > K_STEPS:
            rio, steps = local.split(inner_r[-1], factor=K_STEPS)
            ext[rio], ext[steps] = ext[inner_r[-1]] // K_STEPS, K_STEPS
            inner_r[-1], steps = rio, [steps]
        local.reorder(*outer_r, *inner_r, *steps, *local.op.axis)
        for ax, t in zip(local.op.axis, tiles):  # at the thread loop, one thread's tile of each axis
            ext[ax] = t[2]
        unroll_inner(ctx, local, ext, f"unroll/{org}", only=set(inner_r) | set(steps) | set(local.op.axis))
        for iv in (*steps, *local.op.axis):  # the register tile (and its k steps) always: registers, not memory
            if ext[iv] > 1 and iv not in local.iter_attrs:
                local.unroll(iv)
        if outer_r:
            self.stage_inputs(ctx, local, outer_r[-1], ext[outer_r[-1]], threads, org)

    def stage_inputs(self, ctx: SketchContext, local: Stage, at, outer_extent: int, threads: int,
                     org: str) -> None:
        """Maybe copy each tensor the local stage reads into shared memory, at loop ``at`` (of
        ``outer_extent`` iterations); an inlined input (padding) is computed by the copy (the copy reads the
        padded tile, guards and all, once per block); maybe double-buffer the copies."""
        direct = []
        for t in local.op.input_tensors:
            src = ctx.sch.stage_map.get(t.op)
            if src is not None and all(t is not d for d in direct):
                direct.append(t)
        caches = []
        for k, t in enumerate(direct):
            if not ctx.decide(f"shared/{org}/{k}", (True, False), kind="structure", weights=(3.0, 1.0)):
                continue
            before = set(map(id, ctx.sch.stages))
            ctx.sch.cache_read(t, "shared", [local.op.output(0)])
            cache = next(s for s in ctx.sch.stages if id(s) not in before)
            cache.compute_at(local, at)
            cooperative_fetch(ctx, cache, threads, f"vector/{org}/{k}")
            caches.append(cache)
        if caches and outer_extent > 1 and ctx.decide(f"double_buffer/{org}", (False, True), kind="structure"):
            for cache in caches:  # the next tiles' global loads run under this tile's FMAs (tir.pipeline)
                cache.double_buffer()


def cooperative_fetch(ctx: SketchContext, cache: Stage, threads: int, name: str) -> None:
    """A shared copy filled by all the block's threads: its innermost axis in vectors of the decided width
    (64/128-bit global loads where the tile's rows allow), the rest fused and spread over threadIdx.x, so
    consecutive threads fetch consecutive vectors."""
    n = const_int(cache.op.axis[-1].dom.extent)
    widths = tuple(w for w in VECTOR_WIDTHS if n is not None and n % w == 0) or (1,)
    width = ctx.decide(name, widths, kind="vectorize", weights=(1.0, 1.0, 2.0)[:len(widths)])
    axes = list(cache.op.axis)
    vec = None
    if width > 1:
        axes[-1], vec = cache.split(axes[-1], factor=width)
    fused = cache.fuse(*axes) if len(axes) > 1 else axes[0]
    _, tx = cache.split(fused, factor=threads)
    cache.bind(tx, "threadIdx.x")
    if vec is not None:
        cache.vectorize(vec)


class GPUDefault(SketchRule):
    """Any other stage: fused spatial axes over blocks and threads at the root, or at a consumer's thread
    loop (a private copy per thread) when it is not an output."""

    name = "gpu_default"

    def condition(self, ctx, st):
        return "claimed" not in ctx.info(st)

    def apply(self, ctx, st):
        key = ctx.key(st)
        if not st.is_output:
            at = self.thread_loop(ctx, st)
            if at is not None:
                target, pos = at
                st.compute_at(target, target.leaf_iter_vars[pos])
                rd = list(st.op.reduce_axis)
                if rd:
                    ext = {iv: const_int(iv.dom.extent) for iv in rd}
                    unroll_inner(ctx, st, ext, f"unroll/{key}", only=set(rd))
                return
        sp = list(st.op.axis)
        if not sp:
            raise CandidateError(f"stage '{st.name}' has no spatial axis to spread over GPU threads")
        fused = st.fuse(*sp) if len(sp) > 1 else sp[0]
        total = const_int(fused.dom.extent) if fused.dom is not None else None
        per = ctx.decide(f"per_thread/{key}", PER_THREAD, kind="tile")
        nthreads = ctx.decide(f"threads/{key}", tuple(t for t in THREADS if t <= ctx.target.gpu.max_threads_per_block),
                              kind="tile")
        if total is not None:  # no block of idle threads for a small stage
            nthreads = min(nthreads, max(1, -(-total // per)))
        rest, tx = st.split(fused, factor=nthreads)  # a thread's elements a block's width apart: coalesced
        bx, inner = st.split(rest, factor=per)
        st.reorder(bx, inner, tx)
        st.bind(bx, "blockIdx.x")
        st.bind(tx, "threadIdx.x")
        if per > 1:
            st.unroll(inner)

    @staticmethod
    def thread_loop(ctx: SketchContext, st: Stage) -> tuple[Stage, int] | None:
        """The threadIdx loop of a scheduled consumer inside which every reader of ``st`` runs."""
        readers = ctx.flow.readers(st)
        for t in ctx.scheduled:
            for pos, iv in enumerate(t.leaf_iter_vars):
                if t.iter_attrs.get(iv, "").startswith("thread:threadIdx") and all(
                        within(r, t, pos) for r in readers):
                    return t, pos
        return None


#: row paddings tried, as storage_align's (factor, offset): a row stride of 4, 2 or 1 times an odd number of
#: elements (the first two keep 128- and 64-bit accesses along a row aligned)
ROW_PADDINGS = ((8, 4), (4, 2), (2, 1))


class GPUPadSharedRows(SketchRule):
    """A shared copy whose accesses conflict on memory banks (counted on the lowered kernel by
    :func:`autosched.tir.banks.shared_passes`, for the first warp) gets the row padding that takes the fewest
    passes, if one takes fewer than none. Not a decision: the model decides, so the search spends no
    measurements on paddings that cannot help. It costs one lowering per candidate."""

    name = "gpu_pad_shared_rows"
    phase = "finish"

    def condition(self, ctx, st):
        return (st.scope == "shared" and st.attach_type == "scope" and len(st.op.axis) > 1 and not st.aligned
                and "claimed" not in ctx.info(st))

    def apply(self, ctx, st):
        choices = ctx.memo.get(self.name)
        if choices is None:
            choices = ctx.memo[self.name] = self.choose(ctx)
        pad = choices.get(ctx.sch.stages.index(st))
        if pad is not None:
            st.storage_align(st.op.axis[-2], *pad)

    def choose(self, ctx: SketchContext) -> dict[int, tuple[int, int]]:
        """The padding of each conflicting copy (by stage index) that takes the fewest passes, within the
        block's shared memory. One lowering: a padding only changes a buffer's strides, which the model
        takes as given."""
        func = lower(ctx.sch, ctx.task.tensors(), partition=False)
        ctx.run.lowered = (len(ctx.sch.trace), func)  # the space's check of the GPU's limits reuses it if unpadded
        gpu = ctx.target.gpu
        buffers = {s.buffer.name: s.buffer for s in S.walk_stmts(func.body)
                   if isinstance(s, S.Allocate) and s.buffer.scope == "shared"}
        base = shared_passes(func, gpu)
        stages = {st.name: k for k, st in enumerate(ctx.sch.stages) if self.condition(ctx, st)}
        fewest = {name: got for name, (got, best) in base.items() if name in stages and got > best}
        best: dict[str, tuple[tuple[int, int], int]] = {}  # name -> (padding, bytes it adds)
        for pad in ROW_PADDINGS if fewest else ():
            laid = {name: aligned_strides(buffers[name].shape, {len(buffers[name].shape) - 2: pad})
                    for name in fewest}
            got = shared_passes(func, gpu, laid)
            for name, strides in laid.items():
                if got[name][0] < fewest[name]:
                    padded = S.Buffer(name, buffers[name].shape, buffers[name].dtype, "shared", strides)
                    fewest[name], best[name] = got[name][0], (pad, _bytes(padded) - _bytes(buffers[name]))
        spare = gpu.shared_bytes_per_block - sum(_bytes(b) for b in buffers.values())
        choice: dict[int, tuple[int, int]] = {}
        for name, (pad, grow) in best.items():
            if grow <= spare:  # a padding never pushes a block over its shared memory
                choice[stages[name]], spare = pad, spare - grow
        return choice


def _bytes(buf: S.Buffer) -> int:
    return (buf.const_size() or 0) * DTYPE_BYTES[buf.dtype]


GPU_RULES: list[SketchRule] = [GPUInline(), GPUTensorCore(), GPUMultiLevelTilingPlan(), GPUTile(), GPUDefault(),
                               GPUPadSharedRows()]
