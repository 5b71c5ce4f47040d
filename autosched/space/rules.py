"""The built-in CPU sketch rules (Ansor's, adapted to autosched's primitives).

prepare:
  ``inline``              inline elementwise non-output stages (or leave them for ``default`` to place)
  ``multi_level_tiling``  plan SSRSRS tiling of reductions with data reuse: fuse an elementwise consumer,
                          else maybe add a ``cache_write`` stage and fuse into the copy
schedule (consumers first; first match wins):
  ``fuse_consumer``       the consumer of a tiled stage follows its tiles; parallel outer loops, vector inner,
                          the tiled stage computed at level 1 or 2
  ``tile``                the tiled stage itself: S0 S1 R0 S2 R1 S3 (the levels it still owns), vectorized
                          innermost, unrolled inner loops
  ``default``             everything else: root (fused parallel outer loops, vectorized innermost split,
                          reductions outside the vector loop, unrolled) or at a consumer's loop
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache

from autosched.space.analysis import const_int, consumes, leaf_extents, within
from autosched.space.base import CandidateError, split_hint
from autosched.space.config import divisors, factorizations
from autosched.space.sketch import SketchContext, SketchRule
from autosched.te import expr as E
from autosched.te.schedule import Stage
from autosched.te.trace import Split
from autosched.workloads.tile_sizes import MIN_ACCUMULATORS

MAX_INNERMOST = 64  # Ansor's max_innermost_split_factor
UNROLL_STEPS = (0, 16, 64, 512)  # Ansor's auto_unroll_max_step candidates on CPU
# drawn unevenly: 16 and 64 gave the fastest kernels; 512 built much slower, for kernels slower in the median;
# 0 left the register block in memory (docs/measured_choices.md)
UNROLL_WEIGHTS = (1.0, 2.0, 2.0, 0.5)
SSRSRS = ("S0", "S1", "R0", "S2", "R1", "S3")
MAX_LOCATIONS = 16


# ------------------------------------------------------------------ helpers
@lru_cache(maxsize=2048)
def tile_candidates(n: int, levels: int, vector: bool, lanes: int, registers: int = 16,
                    block: int | None = None) -> tuple[tuple, tuple]:
    """Perfect tilings of ``n`` into ``levels`` (innermost <= 64) and sampling weights.

    The weights are a prior on the innermost tile (the register block), shared out evenly among the tilings
    that have it: otherwise a tile with many outer factorizations (1 has the most) would be drawn for its count,
    not its merit. The innermost level of the vectorized axis prefers lanes well filled: a full vector
    (``lanes``), half of one, or several vectors at least three-quarters full; a tile under a quarter of a vector
    is nearly scalar code (a fraction of the best kernels' speed: docs/measured_choices.md) and is drawn
    rarely. Elsewhere small innermost tiles (register blocks) are preferred: up to a quarter of the target's
    vector ``registers``, but not 1; on the vectorized axis, a block of fewer than ``MIN_ACCUMULATORS`` vectors
    is sampled less.
    ``block``, for a spatial axis, is the product of the innermost tiles of the axes before it, already decided:
    together they are the register block of accumulators, which must fit the registers beside two operands
    (a block that spills keeps every accumulator in memory: such kernels run far slower and take far longer
    to compile). None: no such limit (a reduction axis).
    """
    cands = tuple(c for c in factorizations(n, levels) if c[-1] <= MAX_INNERMOST)
    if block is not None:
        room = max(1, registers - 2)
        fits = tuple(c for c in cands if block * (-(-c[-1] // lanes) if vector else c[-1]) <= room)
        cands = fits or tuple(c for c in cands if c[-1] == 1) or cands
    share = Counter(c[-1] for c in cands)  # tilings per innermost tile: the tile's weight is split among them
    weights = []
    for c in cands:
        t = c[-1]
        if vector:
            w = lane_weight(t, lanes)
            if block is not None:  # too few accumulators leave the FMA units waiting on each other's latency
                w *= min(1.0, block * -(-t // lanes) / MIN_ACCUMULATORS) ** 0.5
        else:
            w = 2.0 if 1 < t <= registers // 4 else 1.0
        weights.append(w / share[t])
    return cands, tuple(weights)


def lane_weight(t: int, lanes: int) -> float:
    """Prior weight of ``t`` elements on a vectorized axis of ``lanes``-wide vectors, by how full its vectors are:
    a full vector or half of one first, then several vectors at least three-quarters full, then the rest; under
    a quarter of a vector least of all."""
    if t == lanes:
        return 8.0
    if t == lanes // 2:
        return 6.0
    if 4 * t < lanes:
        return 0.2
    fill = t / (-(-t // lanes) * lanes)
    return 4.0 if fill >= 0.75 else 1.0


@lru_cache(maxsize=2048)
def vector_candidates(n: int, lanes: int) -> tuple[tuple, tuple]:
    """Vector lengths for a loop of extent ``n``: its divisors up to 64, a full vector preferred."""
    cands = tuple(d for d in divisors(n) if d <= MAX_INNERMOST)
    best = max((d for d in cands if d <= lanes), default=1)
    weights = tuple(8.0 if d == best else 3.0 if 1 < d <= lanes else 0.5 if d == 1 else 1.0 for d in cands)
    return cands, weights


def static_extents(axes) -> list[int] | None:
    out = []
    for ax in axes:
        n = const_int(ax.dom.extent) if ax.dom is not None else None
        if n is None:
            return None
        out.append(n)
    return out


def bounds_read(stage: Stage, axis) -> bool:
    """Whether a reduction loop's bounds read spatial ``axis`` (a pooling window sized per output point): the
    reduction may not then move inside ``axis``'s loops."""
    var = axis.var
    return any(var is x for ax in stage.op.reduce_axis for b in (ax.dom.min, ax.dom.extent) for x in E.walk(b))


def split_levels(stage: Stage, axis, sizes, first: int):
    """Split ``axis`` into the loops of levels ``first..len(sizes)-1`` (sizes outermost first)."""
    loops, rest = [], axis
    for lv in range(first, len(sizes) - 1):
        outer, rest = stage.split(rest, factor=math.prod(sizes[lv + 1:]))
        loops.append(outer)
    loops.append(rest)
    return loops


def parallel_efficiency(iterations: int, cores: int) -> float:
    """The share of ``cores`` a parallel loop of ``iterations`` equal chunks keeps busy."""
    return iterations / (-(-iterations // cores) * cores)


def fuse_parallel(ctx: SketchContext, stage: Stage, outer: list, name: str, extents: list | None = None,
                  tiled_from: list[int] | None = None):
    """Fuse the first k of ``outer`` (k decided: the parallel granularity) and mark the loop parallel.

    With the loops' ``extents`` known, only the k whose fused loop keeps at least three-quarters of the
    target's cores busy are candidates (when some k does): fusing just a batch axis of 1, say, ran a third of
    the samples of conv2d on one core. ``tiled_from``: the full extents of the axes whose outer tiles
    ``outer`` are; when they could have kept the cores busy but these tiles cannot, the point is refused
    (:class:`CandidateError`) and another is drawn."""
    if not outer:
        return None, 0
    ks = tuple(range(1, len(outer) + 1))
    if extents is not None and None not in extents:
        cores = ctx.cores()
        busy = tuple(k for k in ks if parallel_efficiency(math.prod(extents[:k]), cores) >= 0.75)
        if not busy and tiled_from is not None and math.prod(tiled_from) >= cores:
            raise CandidateError(f"the outer tiles of {stage.op.name} leave the parallel loop too few iterations "
                                 f"({math.prod(extents)}) for {cores} cores")
        ks = busy or ks
    k = ctx.decide(name, ks, kind="parallel")
    loop = stage.fuse(*outer[:k]) if k > 1 else outer[0]
    stage.parallel(loop)
    return loop, k


def unroll_inner(ctx: SketchContext, stage: Stage, extents: dict, name: str, only=None) -> None:
    """Unroll the innermost loops while their extents multiply to at most the decided step (Ansor's
    auto_unroll_max_step; a vector loop counts as its number of native vectors, and is not unrolled);
    ``only`` restricts which loops may be unrolled."""
    step = ctx.decide(name, UNROLL_STEPS, kind="unroll", weights=UNROLL_WEIGHTS)
    if step == 0:
        return
    prod = 1
    lanes = ctx.vector_lanes(stage.op.dtype)
    for iv in reversed(stage.leaf_iter_vars):
        ann = stage.iter_attrs.get(iv)
        n = extents.get(iv)
        if ann == "vectorize":  # counts as its number of native vectors
            prod *= -(-n // lanes) if n is not None else 1
            continue
        if ann is not None or n is None:
            break
        prod *= n
        if prod > step:
            break
        if n > 1 and (only is None or iv in only):
            stage.unroll(iv)


# -------------------------------------------------------------------- prepare
class InlineElementwise(SketchRule):
    """Inline an elementwise, non-output stage into its readers (padding, bias, exp), or keep it
    (the ``default`` rule then computes it at the root or at a consumer's loop).

    Inlining is drawn three times in four, except for a guarded stage (a ``select``, as padding is) read by a
    reduction with data reuse (one that is tiled): inlined, its guard lands in the reduction's innermost loops,
    so it is kept three times in four (inlined there, it gave slower kernels that took longer to build). A
    stage read as a packed dot product's operand (an int8 convolution's padded bytes) stays: the product loads
    a word of it."""

    name = "inline"
    phase = "prepare"

    def condition(self, ctx, st):
        return not st.is_output and not st.is_reduction and st.attach_type == "root" and bool(
            ctx.sch.readers(st)) and not ctx.info(st) and not ctx.flow.read_as_dot_operand(st)

    def apply(self, ctx, st):
        guarded = any(isinstance(e, E.Select) for e in E.walk(ctx.flow.body(st)))
        hot = guarded and any(r.is_reduction and ctx.flow.has_reuse(r) for r in ctx.flow.readers(st))
        if ctx.decide(f"inline/{ctx.key(st)}", (True, False), kind="location",
                      weights=(1.0, 3.0) if hot else (3.0, 1.0)):
            st.compute_inline()


class MultiLevelTilingPlan(SketchRule):
    """Plan SSRSRS tiling of a reduction with data reuse; fuse its elementwise consumer, else maybe
    add a local ``cache_write`` stage (Ansor's "add cache write stage") and fuse into the copy."""

    name = "multi_level_tiling"
    phase = "prepare"

    def condition(self, ctx, st):
        info = ctx.info(st)
        return (st.is_reduction and "tile" not in info and "follow" not in info
                and static_extents(list(st.op.axis) + list(st.op.reduce_axis)) is not None
                and ctx.flow.has_reuse(st))

    def apply(self, ctx, st):
        flow = ctx.flow
        readers = flow.readers(st)
        if len(readers) == 1:
            c = readers[0]
            cinfo = ctx.info(c)
            if "follow" not in cinfo and "tile" not in cinfo and flow.identity_reader(st, c):
                ctx.info(st)["tile"] = {"consumer": c}
                cinfo["follow"] = st
                return
        if ctx.decide(f"cache_write/{ctx.key(st)}", (True, False), kind="structure", weights=(4.0, 1.0)):
            cache = ctx.cache_write(st, "local")
            ctx.info(cache)["tile"] = {"consumer": st}
            ctx.info(st)["follow"] = cache
        else:
            ctx.info(st)["tile"] = {"consumer": None}


# ------------------------------------------------------------------- schedule
def spatial_tile(ctx: SketchContext, p: Stage, i: int) -> tuple:
    """The four tile sizes of spatial axis ``i`` of the tiled stage ``p`` (decided once per run)."""
    n = static_extents(p.op.axis)[i]
    last = i == len(p.op.axis) - 1
    # the register block of the axes before it is decided first (same names: the same values within a run)
    block = math.prod(spatial_tile(ctx, p, j)[-1] for j in range(i))
    cands, w = tile_candidates(n, 4, last, ctx.vector_lanes(p.op.dtype), ctx.vector_registers(), block)
    return ctx.decide(f"tile/{ctx.origin(p)}/s{i}", cands, kind="tile", weights=w, hint=split_hint(0))


def _factor_hint(upcoming, cands):
    if upcoming and isinstance(upcoming[0], Split) and upcoming[0].factor in cands:
        return cands.index(upcoming[0].factor)
    return None


class FuseConsumer(SketchRule):
    """The consumer of a tiled stage splits its axes by the producer's four tile levels, runs its
    outer loops in parallel, vectorizes the innermost, and computes the producer at level 1 or 2."""

    name = "fuse_consumer"

    def condition(self, ctx, st):
        return "follow" in ctx.info(st)

    def apply(self, ctx, st):
        p = ctx.info(st)["follow"]
        levels: list[list] = [[], [], [], []]
        tiles = []
        for i, ax in enumerate(st.op.axis):
            tiles.append(spatial_tile(ctx, p, i))
            for lv, loop in enumerate(split_levels(st, ax, tiles[-1], 0)):
                levels[lv].append(loop)
        st.reorder(*[a for lv in levels for a in lv])
        n = len(levels[0])
        par, k = fuse_parallel(ctx, st, levels[0], f"parallel/{ctx.key(st)}", [t[0] for t in tiles],
                              static_extents(p.op.axis))
        if tiles[-1][3] > 1:
            st.vectorize(levels[3][-1])
        level = ctx.decide(f"fuse_level/{ctx.origin(p)}", (1, 2), kind="location")
        at = par if (level == 1 and k == n) else levels[level - 1][-1]
        p.compute_at(st, at)
        ctx.info(p)["level"] = level


class MultiLevelTiling(SketchRule):
    """SSRSRS on a planned stage: each spatial axis in 4 levels, each reduction axis in 2, ordered
    S0 S1 R0 S2 R1 S3 (a stage computed inside its consumer at level L keeps the levels from L on)."""

    name = "tile"

    def condition(self, ctx, st):
        return "tile" in ctx.info(st)

    def apply(self, ctx, st):
        info = ctx.info(st)
        first = info.get("level", 0)
        org = ctx.origin(st)
        ext: dict = {}
        levels: dict[str, list] = {tok: [] for tok in SSRSRS}
        tiles = []
        for i, ax in enumerate(st.op.axis):
            tiles.append(spatial_tile(ctx, st, i))
            for lv, loop in zip(range(first, 4), split_levels(st, ax, tiles[-1], first)):
                levels[f"S{lv}"].append(loop)
                ext[loop] = tiles[-1][lv]
        for j, (ax, n) in enumerate(zip(st.op.reduce_axis, static_extents(st.op.reduce_axis))):
            cands, _ = tile_candidates(n, 2, False, 16)
            t = ctx.decide(f"tile/{org}/r{j}", cands, kind="tile", hint=split_hint(0))
            r0, r1 = st.split(ax, factor=t[1])
            levels["R0"].append(r0)
            levels["R1"].append(r1)
            ext[r0], ext[r1] = t
        st.reorder(*[a for tok in SSRSRS for a in levels[tok]])
        if first == 0:
            fuse_parallel(ctx, st, levels["S0"], f"parallel/{ctx.key(st)}", [ext[a] for a in levels["S0"]],
                          static_extents(st.op.axis))
        if tiles[-1][3] > 1:
            st.vectorize(levels["S3"][-1])
        unroll_inner(ctx, st, ext, f"unroll/{org}")


class DefaultLoops(SketchRule):
    """Any other stage: at the root with fused parallel outer loops and a vectorized innermost split
    (reduction loops moved outside it), or computed at a consumer's loop; small reductions unrolled."""

    name = "default"

    def apply(self, ctx, st):
        key = ctx.key(st)
        loc = "root"
        if not st.is_output and "follow" not in ctx.info(st):
            loc = ctx.decide(f"loc/{key}", location_candidates(ctx, st), kind="location")
        if loc != "root":
            _, tkey, pos = loc.split(":")
            target = ctx.stage(tkey)
            st.compute_at(target, target.leaf_iter_vars[int(pos)])
            self.attached(ctx, st)
        else:
            self.root(ctx, st)

    def root(self, ctx, st):
        key = ctx.key(st)
        sp, rd = list(st.op.axis), list(st.op.reduce_axis)
        if not sp:
            unroll_inner(ctx, st, leaf_extents(st), f"unroll/{key}")
            return
        n_last = const_int(sp[-1].dom.extent)
        outer, vec = sp, None
        if n_last is not None and not bounds_read(st, sp[-1]):
            cands, w = vector_candidates(n_last, ctx.vector_lanes(st.op.dtype))
            v = ctx.decide(f"vec/{key}", cands, kind="vectorize", weights=w, hint=_factor_hint)
            if v > 1:
                lo, vec = st.split(sp[-1], factor=v)
                outer = sp[:-1] + [lo]
                if rd:
                    st.reorder(*outer, *rd, vec)
        ext = leaf_extents(st)
        fuse_parallel(ctx, st, outer, f"parallel/{key}", [ext.get(a) for a in outer])
        if vec is not None:
            st.vectorize(vec)
        if rd:
            ext = leaf_extents(st)
            unroll_inner(ctx, st, ext, f"unroll/{key}", only=set(st.leaf_iter_vars) - set(outer))

    def attached(self, ctx, st):
        key = ctx.key(st)
        sp, rd = list(st.op.axis), list(st.op.reduce_axis)
        if sp and not bounds_read(st, sp[-1]) and ctx.decide(f"vec_at/{key}", (True, False), kind="vectorize",
                                                             weights=(3.0, 1.0)):
            if rd:
                st.reorder(*sp[:-1], *rd, sp[-1])
            st.vectorize(sp[-1])
        if rd:
            ext = {iv: const_int(iv.dom.extent) for iv in rd}
            unroll_inner(ctx, st, ext, f"unroll/{key}", only=set(rd))


def location_candidates(ctx: SketchContext, st: Stage) -> tuple[str, ...]:
    """``root`` and every loop of an already scheduled stage inside which all readers of ``st`` run:
    spatial loops before the first reduction loop, outside any vectorized loop (Ansor's compute-at
    candidates)."""
    readers = ctx.flow.readers(st)
    out = ["root"]
    if not readers:
        return tuple(out)
    for t in ctx.scheduled:
        if t is st or t.attach_type == "inline" or not consumes(ctx.sch, t, st):
            continue
        for pos, iv in enumerate(t.leaf_iter_vars):
            if iv.kind != "spatial" or t.iter_attrs.get(iv) == "vectorize":
                break
            if all(within(r, t, pos) for r in readers):
                out.append(f"at:{ctx.key(t)}:{pos}")
            if len(out) > MAX_LOCATIONS:
                return tuple(out)
    return tuple(out)


BUILTIN_RULES: list[SketchRule] = [
    InlineElementwise(),
    MultiLevelTilingPlan(),
    FuseConsumer(),
    MultiLevelTiling(),
    DefaultLoops(),
]
