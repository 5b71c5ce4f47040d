"""Shared-memory bank conflicts of a lowered GPU kernel, counted without a GPU.

Shared memory is split into banks (32 of 4 bytes on every NVIDIA GPU since
Kepler's 4-byte mode). One request of a warp is served in as many passes
("wavefronts") as the most distinct words any one bank must deliver; threads
reading the same word share it (a broadcast). A 64-bit access is served half
a warp at a time, a 128-bit one a quarter at a time. A padded row
(``storage_align``) moves rows that would share a bank onto different ones.

:func:`bank_conflicts` evaluates each shared load and store of a kernel for the
threads of its first warp, at a few seeded values of the other loops, and
reports the passes it takes against the fewest its words could take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autosched.target import GPUDescription
from autosched.te import expr as E
from autosched.te.expr import DTYPE_BYTES, Expr, IntImm
from autosched.tir import stmt as S
from autosched.tir.arith import simplify

SAMPLES = 4  # values drawn for the loops that are not thread indices


@dataclass(frozen=True)
class BankAccess:
    """One shared access of a kernel: ``wavefronts`` passes per request of a warp (the worst over the sampled
    iterations), ``ideal`` the fewest its words allow; ``lanes`` elements per thread (a vector access)."""

    buffer: str
    write: bool
    lanes: int
    wavefronts: int
    ideal: int
    executions: int = 1  # requests per thread: the extents of the loops around it (one per vector)

    @property
    def conflict(self) -> float:
        """How many times slower than conflict-free (1.0: none)."""
        return self.wavefronts / self.ideal

    @property
    def passes(self) -> int:
        """Passes over the whole kernel, per warp: what compares layouts (a vector access with conflicts can
        still beat the scalar ones that a padding which breaks its alignment forces)."""
        return self.wavefronts * self.executions


def shared_passes(func: S.PrimFunc, gpu: GPUDescription | None = None,
                  strides: dict[str, Sequence[Expr]] | None = None) -> dict[str, tuple[int, int]]:
    """Per shared buffer of a kernel: (passes its accesses take, passes they would take without conflicts)."""
    out: dict[str, tuple[int, int]] = {}
    for a in bank_conflicts(func, gpu, strides=strides):
        got, best = out.get(a.buffer, (0, 0))
        out[a.buffer] = (got + a.passes, best + a.ideal * a.executions)
    return out


def bank_conflicts(func: S.PrimFunc, gpu: GPUDescription | None = None, seed: int = 0,
                   strides: dict[str, Sequence[Expr]] | None = None) -> list[BankAccess]:
    """Every shared-memory load and store of ``func`` (a kernel from :func:`autosched.lower` with a cuda
    target), in program order, with the passes one request of its first warp takes. ``strides`` lays some
    buffers (by name) out otherwise: what a padding would do, without lowering again."""
    gpu = gpu or GPUDescription("sm_80")
    strides = strides or {}
    dims = _block_dims(func.body)
    out: list[BankAccess] = []
    rng = np.random.default_rng(seed)

    def visit(s: S.Stmt, loops: tuple) -> None:
        if isinstance(s, S.For):
            loops = (*loops, s)
        if isinstance(s, S.BufferStore) and s.buffer.scope == "shared":
            out.append(_measure(s.buffer, s.indices, True, loops, dims, gpu, rng, strides.get(s.buffer.name)))
        for e in S.stmt_exprs(s):
            for y in E.walk(e):
                if isinstance(y, S.BufferLoad) and y.buffer.scope == "shared":
                    out.append(_measure(y.buffer, y.indices, False, loops, dims, gpu, rng,
                                        strides.get(y.buffer.name)))
        for c in S.stmt_children(s):
            visit(c, loops)

    visit(func.body, ())
    return out


def _block_dims(body: S.Stmt) -> dict[str, int]:
    dims: dict[str, int] = {}
    for s in S.walk_stmts(body):
        if isinstance(s, S.For) and s.thread_tag.startswith("threadIdx") and isinstance(s.extent, IntImm):
            dims[s.thread_tag] = max(dims.get(s.thread_tag, 1), s.extent.value)
    return dims


def _flat(buf: S.Buffer, indices, strides=None) -> E.Expr:
    strides = strides or buf.strides
    if strides is None:
        strides, step = [], IntImm(1)
        for d in reversed(buf.shape):
            strides.insert(0, step)
            step = step * d
    out: E.Expr = IntImm(0)
    for i, st in zip(indices, strides):
        out = out + i * st
    return out


def _vector(addr: E.Expr, used, loops: tuple, elem: int) -> tuple[S.For | None, int]:
    """The loop whose consecutive iterations make one vector access (a vectorized loop, or an unrolled one that
    LLVM merges: consecutive elements, 2, 4 or (16-bit ones) 8 of them within 128 bits), and its lanes."""
    for f in reversed(loops):
        if f.var not in used or f.kind not in ("vectorized", "unrolled") or not isinstance(f.extent, IntImm):
            continue
        step = simplify(E.substitute(addr, {f.var: IntImm(1)}) - E.substitute(addr, {f.var: IntImm(0)}))
        if not (isinstance(step, IntImm) and step.value == 1):
            continue
        lanes = next((w for w in (8, 4, 2) if f.extent.value % w == 0 and w * elem <= 16), 1)  # halves: 8
        return (f, lanes) if lanes > 1 else (None, 1)
    return None, 1


def _measure(buf: S.Buffer, indices, write: bool, loops: tuple, dims: dict[str, int], gpu: GPUDescription,
             rng: np.random.Generator, strides=None, vector: bool = True) -> BankAccess:
    addr = _flat(buf, indices, strides)
    used = E.free_var_set(addr)
    elem = DTYPE_BYTES[buf.dtype]
    vec, lanes = _vector(addr, used, loops, elem) if vector else (None, 1)
    bx, by = dims.get("threadIdx.x", 1), dims.get("threadIdx.y", 1)
    n = min(gpu.warp_size, bx * by * dims.get("threadIdx.z", 1))
    t = np.arange(n)
    tid = {"threadIdx.x": t % bx, "threadIdx.y": t // bx % by, "threadIdx.z": t // (bx * by)}  # x fastest
    shape = (SAMPLES, n)
    env: dict = {}
    active = np.ones(shape, bool)
    for f in loops:
        if f.thread_tag.startswith("threadIdx"):
            env[f.var] = np.broadcast_to(tid[f.thread_tag], shape)
            if isinstance(f.extent, IntImm):
                active &= env[f.var] < f.extent.value  # a thread past a shorter thread loop takes no part
        elif f is vec:
            env[f.var] = np.zeros(shape, np.int64)
        elif f.var in used:
            hi = f.extent.value if isinstance(f.extent, IntImm) else 1
            env[f.var] = np.broadcast_to(rng.integers(0, hi, size=(SAMPLES, 1)), shape)
    runs = 1
    for f in loops:
        if f is not vec and not f.thread_tag and isinstance(f.extent, IntImm):
            runs *= f.extent.value
    first = _evaluate(addr, env)
    if first is None:
        return BankAccess(buf.name, write, lanes, 1, 1, runs)  # an address the model cannot evaluate
    first = np.broadcast_to(first, shape)
    if lanes > 1 and np.any(first[active] % lanes):
        return _measure(buf, indices, write, loops, dims, gpu, rng, strides, vector=False)  # LLVM cannot merge
    word = gpu.bank_bytes
    span = max(1, lanes * elem // word)
    per_request = max(1, gpu.warp_size * word // (lanes * elem))  # threads served together: a word each
    worst = (1, 1)
    for k in range(SAMPLES):
        passes = fewest = 0
        for g in range(0, n, per_request):
            starts = first[k, g:g + per_request][active[k, g:g + per_request]] * elem // word
            if not starts.size:
                continue
            words = np.unique((starts[:, None] + np.arange(span)).ravel())
            passes += int(np.bincount(words % gpu.shared_banks).max())
            fewest += -(-words.size // gpu.shared_banks)
        if fewest and passes * worst[1] > worst[0] * fewest:
            worst = (passes, fewest)
    return BankAccess(buf.name, write, lanes, *worst, runs)


_OPS = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.FloorDiv: np.floor_divide,
        E.FloorMod: np.mod, E.Min: np.minimum, E.Max: np.maximum}


def _evaluate(e: E.Expr, env: dict):
    """An integer index expression over arrays of loop values; None for a node it does not know."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env.get(e, 0)
    op = _OPS.get(type(e))
    if op is not None:
        a, b = _evaluate(e.a, env), _evaluate(e.b, env)
        return None if a is None or b is None else op(a, b)
    if isinstance(e, E.Cast):
        return _evaluate(e.value, env)
    return None


__all__ = ["BankAccess", "bank_conflicts", "shared_passes"]
