"""Tile and block sizes of CPU schedules, derived from the target's description (:attr:`Target.cpu`). (The
workloads in blocked channel layouts are :mod:`autosched.workloads.blocked_layout`.)

Every default schedule, expert schedule and template sizes its register tiles and channel blocks here, from
the current target (``with target:``; :meth:`Target.current`), so nothing assumes one ISA: an AVX-512 CPU
(32 registers of 16 floats) gets wider and bigger tiles than an AVX2 one (16 registers of 8 floats).

The register tiles follow the usual micro-kernel arithmetic (BLIS, MLAS, oneDNN): a tile of ``rows x vectors``
accumulators stays in registers beside the ``vectors`` loaded operands and one broadcast, so
``rows * vectors + vectors + 1 <= registers``, and it needs at least latency x FMA ports (about 8)
independent accumulators to keep the FMA units busy.
"""

from __future__ import annotations

from autosched.target import CPUDescription, Target

#: independent accumulators that hide the FMA latency on two FMA ports (4 cycles x 2)
MIN_ACCUMULATORS = 8
#: FMA issue slots a load costs in a register tile's step (broadcast and weight loads together): tiles issuing
#: more than ~0.7 loads per FMA ran slower than the load ports alone explain, on AVX2 and AVX-512 code alike
#: (docs/measured_choices.md)
LOAD_COST = 1.4
#: pixels per in-register transpose of a layout copy (NCHW <-> NCHW[x]c): a tile of a block's channels by
#: this many pixels (16 x 8 floats at most: a wider one is lowered by LLVM slower than scatters)
TRANSPOSE_RUN = 8


def cpu() -> CPUDescription:
    """The description of the CPU the schedule being written is for (the current target; the host outside
    any ``with target:``)."""
    t = Target.current()
    return t.cpu if t.kind == "llvm" else Target("llvm").cpu


def lanes(dtype: str = "float32") -> int:
    """Elements of ``dtype`` in one native vector of the current target."""
    return cpu().lanes(dtype)


def divisor(n: int, limit: int) -> int:
    """The largest divisor of ``n`` not above ``limit``."""
    for f in range(min(n, limit), 0, -1):
        if n % f == 0:
            return f
    return 1


def channel_block(channels: int, dtype: str = "float32") -> int:
    """The channel block of a blocked layout (NCHW[x]c): the largest power of two that divides ``channels``
    and fits one native vector (16 floats on AVX-512, 8 on AVX2; 24 channels give 8, 3 channels 1: plain
    NCHW). Power-of-two blocks keep every vector whole and unmasked."""
    block, limit = 1, lanes(dtype)
    while block * 2 <= limit and channels % (block * 2) == 0:
        block *= 2
    return block


def matmul_tile(M: int, N: int, dtype: str = "float32") -> tuple[int, int]:
    """``(rows, columns)`` of a C register tile for an (M x N) product: the most accumulators that fit the
    registers with the loaded B vectors and one broadcast of A, preferring tiles that divide M and N (tails
    cost masks), then more vectors per row (fewer broadcasts per FMA)."""
    c = cpu()
    nl = c.lanes(dtype)
    best: tuple[int, int, int] | None = None  # (accumulators, vectors, rows)
    for nv in (4, 3, 2, 1):
        if N % (nv * nl):
            continue
        rows = divisor(M, (c.vector_registers - nv - 1) // nv)
        cand = (rows * nv, nv, rows)
        if best is None or cand > best:
            best = cand
    if best is None or best[0] < MIN_ACCUMULATORS:  # nothing divides well: accept tails
        nv = max(1, min(2, -(-N // nl)))
        rows = max(1, min(M, (c.vector_registers - nv - 1) // nv))
        return rows, min(N, nv * nl)
    return best[2], best[1] * nl


def nchw_conv_layout(stride: int) -> str:
    """How the default schedule computes a plain NCHW convolution: ``"packed"`` (copied to blocked layouts by
    in-register transposes, computed as a blocked convolution, copied back) or ``"direct"`` (output columns
    in lanes, weights broadcast). Packed, except for a strided convolution where an FMA broadcasts its
    operand from memory and 32 registers hold a 16-channel tile (AVX-512): there the direct form reads its
    input rows as whole vectors, while the packed one copies stride^2 times the pixels it reads. On AVX2
    each broadcast is a load of its own and 16 registers hold 8 accumulators: the direct form is load-bound.
    (Measured by benchmarks/bench_nchw_conv.py; docs/cpu_kernels.md.)"""
    c = cpu()
    return "direct" if stride > 1 and c.vector_registers >= 32 and c.vector_bytes >= 64 else "packed"


def nchw_conv_tile(out_channels: int, out_height: int, out_width: int,
                   dtype: str = "float32") -> tuple[int, int, int]:
    """``(channels, rows, columns)`` of a plain NCHW convolution's register tile: ``columns`` output columns in
    one vector (a divisor of the width, so no tails) for each of ``rows`` output rows and ``channels`` output
    channels. Each step of the reduction loads an input vector per row and broadcasts a weight per channel
    (free inside the FMA with AVX-512's embedded broadcasts, a load of its own on AVX2), and the tile must fit
    beside the row vectors and one broadcast. Scored by the FMA rate the loads allow (two of each per cycle)
    and the accumulators (at least 8), then fewer rows, then more channels. 56-wide: 16 x 1 x 14 on
    AVX-512, 4 x 2 x 8 on AVX2 (8 x 1 would load 9 values for 8 FMAs; 16 x 1 spills)."""
    c = cpu()
    regs, embedded = c.vector_registers, c.vector_bytes >= 64
    columns = divisor(out_width, lanes(dtype))
    best: tuple | None = None
    for ch in range(1, min(16, out_channels) + 1):
        if out_channels % ch:
            continue
        for rows in (1, 2):
            if out_height % rows or ch * rows + rows + 1 > regs:
                continue
            fmas, loads = ch * rows, rows + (0 if embedded else ch)
            rate = min(1.0, fmas / loads) * min(1.0, fmas / MIN_ACCUMULATORS)
            score = (round(rate, 3), -rows, ch)
            if best is None or score > best:
                best = score
    if best is None:
        return 1, 1, columns
    return best[2], -best[1], columns


def tile_rate(vectors: int, pixels: int) -> float:
    """The share of the FMA units' peak that a register tile of ``vectors`` weight vectors by ``pixels``
    broadcast inputs keeps busy in one step of a reduction: it needs at least ``MIN_ACCUMULATORS`` independent
    accumulators (FMA latency x ports) and issues no more than ``1 / LOAD_COST`` loads per FMA."""
    acc = vectors * pixels
    return acc / max(acc, MIN_ACCUMULATORS, LOAD_COST * (vectors + pixels))


def step_temporaries(weight_dtype: str) -> int:
    """Registers one step of a blocked convolution holds beside its weights and accumulators: the broadcast
    input, and with int16 pairs (``dot2_i16``) ``pmaddwd``'s product, which does not accumulate in place."""
    return 2 if weight_dtype == "int16" else 1


def conv_tile(out_height: int, out_width: int, out_channel_blocks: int, block: int,
              dtype: str = "float32", temporaries: int = 1) -> tuple[int, int, int]:
    """``(blocks, rows, pixels)`` of a blocked convolution's register tile: ``blocks`` output-channel blocks of
    ``block`` channels (ceil(block / lanes) vectors each) times ``rows x pixels`` output pixels, the
    accumulators fitting beside the weight vectors and one broadcast. Scored by the FMA rate over the whole
    row (:func:`tile_rate`), the partial tile at the end of the row at its own, lower rate; then by more
    pixels per tile (each weight vector, streamed from L2, serves that many FMAs), then by more accumulators
    (slack for the FMA latency, as BLIS's 6x16 AVX2 and 14x32 AVX-512 kernels keep). Rows stack only when a
    tile spans the whole row and they divide the height. 56 wide: 2 x 1 x 6 on AVX2, whose
    last tile of each row is 2 pixels (4 x 2 keeps 8 accumulators but loads a weight vector for every 2
    FMAs: 0.72x as fast, docs/measured_choices.md); 2 x 1 x 14 on AVX-512 (28 of 32 registers).
    ``temporaries``: :func:`step_temporaries` (2 keeps the int16 kernels from spilling on AVX2)."""
    regs = cpu().vector_registers
    per_block = -(-block // lanes(dtype))
    best: tuple | None = None
    for b in range(1, 5):
        if out_channel_blocks % b:
            continue
        v = b * per_block
        room = (regs - v - temporaries) // v  # pixels whose accumulators fit
        for r in (1, 2, 4):
            if r > out_height or room // r < 1:
                continue
            for p in range(1, min(out_width, room // r) + 1):
                if r > 1 and (p < out_width or out_height % r):
                    continue  # rows only when a tile spans the whole width and they divide the height
                # a row in tiles of p pixels, the last one partial
                time = sum(n * cols / tile_rate(v, r * cols)
                           for cols, n in ((p, out_width // p), (out_width % p, 1)) if cols and n)
                rate = out_width / time
                score = (round(rate, 3), r * p, v, b, r, p)
                if best is None or score > best:
                    best = score
    assert best is not None
    return best[3], best[4], best[5]
