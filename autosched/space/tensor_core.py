"""Tensor cores in the cuda spaces: a mixed-precision matmul (float16 operands, products summed in float32 or
float16) scheduled as a WMMA kernel, by the ``matmul_mixed`` template and, for any te computation of that
form, by the generated space's ``gpu_tensor_core`` rule.

The kernel: C tiled over blocks (blockIdx.y, blockIdx.x) and, in a block, over a grid of warps (threadIdx.z,
threadIdx.y); each warp accumulates ``frags_i x frags_j`` 16x16 tiles of C in fragments
(``wmma.accumulator``); per step of k, A's and B's tiles are copied to shared memory by all the block's
threads (128-bit loads, rows maybe padded by 8 halves against bank conflicts), each warp loads its A and B
fragments from there (``wmma.load``) and multiplies them (``wmma.mma.sync``); the accumulators are stored to
C (``wmma.store``). threadIdx.x is the warp's 32 lanes, bound only in the copies. The shared tiles may be
double-buffered: the next step's global loads then run under this step's multiplications.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autosched.space.base import CandidateError
from autosched.space.config import factorizations
from autosched.space.sketch import SketchRule
from autosched.te import expr as E
from autosched.te.schedule import Stage
from autosched.te.tensor import ComputeOp, Tensor
from autosched.te.tensor_core import wmma_load, wmma_mma, wmma_store

TILE = 16  # the m16n16k16 shape
MAX_WARPS = 4  # warps along one axis of a block
MAX_FRAGS = 4  # accumulator tiles of one warp along one axis
MAX_CHUNK = 4  # 16-deep k steps per shared tile
PADS = (8, 0)  # halves added to a shared row: 16 bytes keep the tiles at 32-byte addresses


@dataclass
class MixedMatmul:
    """What :func:`match` found: the operands, and whether B is read transposed (``B[j, k]``: col_major)."""
    a: Tensor
    b: Tensor
    b_transposed: bool


def _loads(e: E.Expr) -> E.TensorLoad | None:
    return e.value if isinstance(e, E.Cast) and isinstance(e.value, E.TensorLoad) else None


def match(st: Stage) -> MixedMatmul | None:
    """The operands when ``st`` computes ``C[i, j] = sum_k cast(A[i, k]) * cast(B[k, j])`` (or ``B[j, k]``) with
    float16 A and B, a float32 or float16 C, and the extents of i, j and k multiples of 16; or the batched
    form ``C[b, i, j]``, each operand indexed by ``b`` first or shared by the batch."""
    op = st.op
    body = op.bodies[0] if isinstance(op, ComputeOp) else None
    if not (isinstance(body, E.Reduce) and len(op.axis) in (2, 3) and len(op.reduce_axis) == 1
            and body.combiner.name == "sum" and body.condition is None and body.dtype in ("float32", "float16")):
        return None
    if not isinstance(body.source, E.Mul):
        return None
    la, lb = _loads(body.source.a), _loads(body.source.b)
    if la is None or lb is None or la.dtype != "float16" or lb.dtype != "float16":
        return None
    *batch, i, j = (ax.var for ax in op.axis)
    k = op.reduce_axis[0].var

    def rows(load: E.TensorLoad) -> tuple | None:
        """The load's last two indices, once its batch index (if any) is the stage's own."""
        idx = list(load.indices)
        if len(idx) == 3 and batch and idx[0] is batch[0]:
            idx = idx[1:]
        return tuple(idx) if len(idx) == 2 else None

    ra, rb = rows(la), rows(lb)
    if ra is None or rb is None or ra[0] is not i or ra[1] is not k:
        return None
    if rb[0] is k and rb[1] is j:
        transposed = False
    elif rb[0] is j and rb[1] is k:
        transposed = True
    else:
        return None
    extents = [ax.dom.extent for ax in (*op.axis[-2:], *op.reduce_axis)]
    if not all(isinstance(n, E.IntImm) and n.value % TILE == 0 for n in extents):
        return None
    return MixedMatmul(la.tensor, lb.tensor, transposed)


def supported(target: Any) -> bool:
    """Whether the target's GPU has tensor cores (sm_70 and newer)."""
    arch = getattr(target, "arch", "") or ""
    digits = arch.removeprefix("sm_").rstrip("a")
    return target.kind == "cuda" and digits.isdigit() and int(digits) >= 70


def spatial_tiles(n: int) -> list[tuple[int, int, int, int]]:
    """(blocks, warps, fragments per warp, 16) splits of an extent."""
    return [c for c in factorizations(n, 4) if c[3] == TILE and c[1] <= MAX_WARPS and c[2] <= MAX_FRAGS]


def k_tiles(n: int) -> list[tuple[int, int, int]]:
    """(steps, 16-deep tiles per step, 16) splits of the reduction."""
    return [c for c in factorizations(n, 3) if c[2] == TILE and c[1] <= MAX_CHUNK]


def schedule(sch: Any, out: Tensor, mm: MixedMatmul, tile_i: tuple, tile_j: tuple, tile_k: tuple,
             pad: int, double_buffer: bool = False) -> list[Stage]:
    """Schedule ``out`` as the WMMA kernel of the module docstring; returns the stages it made.
    ``double_buffer``: two copies of each shared tile, the next step's global loads issued before this
    step's multiplications (tir/pipeline.py), where k takes more than one step."""
    acc = out.dtype
    before = set(map(id, sch.stages))
    CF = sch.cache_write(out, "wmma.accumulator")
    AS = sch.cache_read(mm.a, "shared", [CF])
    BS = sch.cache_read(mm.b, "shared", [CF])
    AF = sch.cache_read(AS, "wmma.matrix_a", [CF])
    BF = sch.cache_read(BS, "wmma.matrix_b", [CF])
    made = [s for s in sch.stages if id(s) not in before]
    *batch, i, j = sch[out].op.axis
    bi, wi, fi, ii = _split(sch[out], i, tile_i)
    bj, wj, fj, jj = _split(sch[out], j, tile_j)
    sch[out].reorder(*batch, bi, bj, wi, wj, fi, fj, ii, jj)
    if batch:
        sch[out].bind(batch[0], "blockIdx.z")
    sch[out].bind(bi, "blockIdx.y")
    sch[out].bind(bj, "blockIdx.x")
    sch[out].bind(wi, "threadIdx.z")
    sch[out].bind(wj, "threadIdx.y")
    sch[out].tensorize(ii, wmma_store(acc=acc))
    sch[CF].compute_at(sch[out], wj)
    *cb, ci, cj = sch[CF].op.axis  # (a batch loop of one iteration here)
    (k,) = sch[CF].op.reduce_axis
    ko, kc, ki = _split(sch[CF], k, tile_k)
    cfi, cii = sch[CF].split(ci, factor=TILE)
    cfj, cjj = sch[CF].split(cj, factor=TILE)
    sch[CF].reorder(*cb, ko, kc, cfi, cfj, cii, cjj, ki)
    for loop in (kc, cfi, cfj):  # constant fragment numbers: the fragments stay in registers
        sch[CF].unroll(loop)
    sch[out].unroll(fi)
    sch[out].unroll(fj)
    layout = "col_major" if mm.b_transposed else "row_major"
    sch[CF].tensorize(cii, wmma_mma(acc=acc, b_layout=layout))
    for frag, role in ((AF, "a"), (BF, "b")):
        sch[frag].compute_at(sch[CF], kc)
        r, c = sch[frag].op.axis[-2:]
        if role == "a" or mm.b_transposed:  # rows of 16 x a 16-wide slice of k
            outer, ri = sch[frag].split(r, factor=TILE)
            sch[frag].tensorize(ri, wmma_load(role, layout if role == "b" else "row_major"))
        else:  # B[k, j]: 16 rows of k x columns in 16s
            outer, ci_ = sch[frag].split(c, factor=TILE)
            sch[frag].reorder(outer, r, ci_)
            sch[frag].tensorize(r, wmma_load("b"))
        sch[frag].unroll(outer)
    for cache in (AS, BS):
        sch[cache].compute_at(sch[CF], ko)
        *lead, x, y = sch[cache].op.axis
        if pad:  # rows (multiples of 16 halves) pad halves longer
            sch[cache].storage_align(x, TILE, pad)
        y, vec = sch[cache].split(y, factor=8)  # 8 halves: one 128-bit load
        rest, tx = sch[cache].split(sch[cache].fuse(*lead, x, y), factor=32)
        rest, ty = sch[cache].split(rest, factor=tile_j[1])
        _, tz = sch[cache].split(rest, factor=tile_i[1])
        sch[cache].bind(tx, "threadIdx.x")
        sch[cache].bind(ty, "threadIdx.y")
        sch[cache].bind(tz, "threadIdx.z")
        sch[cache].vectorize(vec)
        if double_buffer and tile_k[0] > 1:
            sch[cache].double_buffer()
    return made


def _split(stage: Stage, axis: Any, sizes: tuple) -> list:
    """``axis`` split into ``len(sizes)`` loops of those extents (the first: what is left)."""
    loops = []
    for size in reversed(sizes[1:]):
        axis, inner = stage.split(axis, factor=size)
        loops.append(inner)
    return [axis, *reversed(loops)]


class GPUTensorCore(SketchRule):
    """A mixed-precision matmul (:func:`match`) on a GPU with tensor cores: maybe (a decision, tensor cores
    three times as likely) the whole WMMA kernel of :func:`schedule`, its tiles and padding decisions; its
    stages are then claimed (``ctx.info(st)["claimed"]``), so that no other rule schedules them."""

    name = "gpu_tensor_core"
    phase = "prepare"

    def condition(self, ctx, st):
        return (st.is_output and "claimed" not in ctx.info(st) and supported(ctx.target)
                and match(st) is not None)

    def apply(self, ctx, st):
        key = ctx.key(st)
        if not ctx.decide(f"tensor_core/{key}", (True, False), kind="structure", weights=(3.0, 1.0)):
            return
        mm = match(st)
        m, n = (int(ax.dom.extent.value) for ax in st.op.axis[-2:])
        kk = int(st.op.reduce_axis[0].dom.extent.value)
        tiles = [ctx.decide(f"tensor_core/{key}/{name}", tuple(cands), kind="tile")
                 for name, cands in (("i", spatial_tiles(m)), ("j", spatial_tiles(n)), ("k", k_tiles(kk)))]
        if tiles[0][1] * tiles[1][1] * 32 > ctx.target.gpu.max_threads_per_block:
            raise CandidateError(f"{tiles[0][1] * tiles[1][1]} warps per block")
        pad = ctx.decide(f"tensor_core/{key}/pad", PADS, kind="structure")
        double = tiles[2][0] > 1 and ctx.decide(f"tensor_core/{key}/double_buffer", (False, True), kind="structure")
        for made in [st, *schedule(ctx.sch, st.op.output(0), mm, *tiles, pad, double)]:  # type: ignore[arg-type]
            ctx.info(made)["claimed"] = self.name


__all__ = ["GPUTensorCore", "MixedMatmul", "match", "schedule", "spatial_tiles", "supported", "k_tiles"]
