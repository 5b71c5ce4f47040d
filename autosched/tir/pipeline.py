"""Software pipelining of double-buffered shared copies on the GPU (``Stage.double_buffer``).

The lowering gives a double-buffered stage two copies, chosen by the parity of
the loop it is computed at (``S[ko % 2, ...]``). On a GPU that alone hides
nothing: each iteration still waits for its global loads before it computes.
:func:`pipeline_double_buffers` rewrites such a loop the way vendor GEMM
kernels are written::

    S[0] = G(0)                          # prologue: the first tile
    __syncthreads()
    for ko in 0..n:
        if ko + 1 < n: R = G(ko + 1)     # the next tile's global loads, into registers
        compute on S[ko % 2]             # ... run while those loads are in flight
        if ko + 1 < n: S[(ko+1) % 2] = R
        __syncthreads()                  # one barrier per iteration, not two

``R`` is a ``local`` array per copy, as many elements as a thread fetches
(its loops unrolled, so the array lives in registers).
"""

from __future__ import annotations

from math import prod

from autosched.te import expr as E
from autosched.te.expr import IntImm
from autosched.tir import stmt as S
from autosched.tir.arith import simplify
from autosched.tir.transform import map_exprs, substitute_stmt


def pipeline_double_buffers(s: S.Stmt) -> S.Stmt:
    """Pipeline every serial loop (innermost first) whose iterations fill double-buffered shared copies and then
    read them; other statements are rebuilt unchanged. Runs after barrier insertion: it places its own."""
    s = S.map_children(s, pipeline_double_buffers)
    return (_pipeline(s) or s) if isinstance(s, S.For) else s


def _pipeline(loop: S.For) -> S.Stmt | None:
    """The pipelined form of ``loop``, or None where it is not a loop of double-buffered copies then reads."""
    if loop.kind != "serial" or (isinstance(loop.extent, IntImm) and loop.extent.value < 2):
        return None
    allocs: list[S.Buffer] = []
    body = loop.body
    while isinstance(body, S.Allocate):
        allocs.append(body.buffer)
        body = body.body
    if not isinstance(body, S.SeqStmt):
        return None
    two = isinstance(loop.extent, IntImm) and loop.extent.value == 2  # its parity is the loop variable itself
    halves = {id(b) for b in allocs if b.scope == "shared" and _alternates(b, loop.var, body, two)}
    if not halves:
        return None
    producers: list[S.Stmt] = []
    consumers: list[S.Stmt] = []
    for x in body.seq:
        if isinstance(x, S.Barrier):
            continue
        writes = _written(x)
        if not consumers and writes and writes <= halves and not _reads_shared(x):
            producers.append(x)
        elif _writes_shared(x):
            return None  # a copy after its readers, reading shared memory, or not doubled: left alternating
        else:
            consumers.append(x)
    if not producers or not consumers:
        return None
    staged = [_stage(p) for p in producers]
    if any(x is None for x in staged):
        return None
    ko, n = loop.var, loop.extent
    more = E.LT(ko + 1, n)
    nxt = {ko: ko + 1}
    first = {ko: IntImm(0, ko.dtype)}
    steady = S.SeqStmt([
        S.IfThenElse(more, substitute_stmt(S.seq([load for _, load, _ in staged]), nxt)),
        *consumers,
        S.IfThenElse(more, substitute_stmt(S.seq([store for _, _, store in staged]), nxt)),
        S.Barrier(),
    ])
    prologue = [map_exprs(p, lambda e: simplify(E.substitute(e, first))) for p in producers]
    out: S.Stmt = S.SeqStmt([S.Barrier(), *prologue, S.Barrier(), S.For(ko, n, "serial", steady)])
    for reg, _, _ in reversed(staged):
        out = S.Allocate(reg, out)
    for b in reversed(allocs):
        out = S.Allocate(b, out)
    return out


def _alternates(buf: S.Buffer, var: E.Var, body: S.Stmt, two: bool = False) -> bool:
    """Whether every store to ``buf`` in ``body`` picks its copy by ``var % 2`` (what ``double_buffer`` makes;
    by ``var`` where the loop runs twice: lowering simplifies the parity away)."""
    stores = [x for x in S.walk_stmts(body) if isinstance(x, S.BufferStore) and x.buffer is buf]
    lead = buf.shape[0] if buf.shape else None
    return bool(stores) and len(buf.shape) > 1 and isinstance(lead, IntImm) and lead.value == 2 and all(
        (isinstance(i, E.FloorMod) and i.a is var and isinstance(i.b, IntImm) and i.b.value == 2) or (two and i is var)
        for i in (x.indices[0] for x in stores))


def _written(s: S.Stmt) -> set[int]:
    return {id(x.buffer) for x in S.walk_stmts(s) if isinstance(x, S.BufferStore)}


def _writes_shared(s: S.Stmt) -> bool:
    return any(isinstance(x, S.BufferStore) and x.buffer.scope == "shared" for x in S.walk_stmts(s))


def _reads_shared(s: S.Stmt) -> bool:
    return any(isinstance(y, S.BufferLoad) and y.buffer.scope == "shared"
               for x in S.walk_stmts(s) for e in S.stmt_exprs(x) for y in E.walk(e))


def _stage(copy: S.Stmt) -> tuple[S.Buffer, S.Stmt, S.Stmt] | None:
    """``copy`` (a loop nest around one store) split in two through a register array: its global loads into
    the array, and the array into shared memory; None for a nest of another shape. The loops a thread runs
    itself (not bound to a thread index) index the array, and are unrolled so that it stays in registers."""
    stores = [x for x in S.walk_stmts(copy) if isinstance(x, S.BufferStore)]
    if len(stores) != 1:
        return None
    own: list[S.For] = []

    def path(s: S.Stmt) -> bool:
        if isinstance(s, S.BufferStore):
            return True
        if isinstance(s, S.For):
            if s.kind != "thread_binding":
                if not isinstance(s.extent, IntImm):
                    return False
                own.append(s)
            return path(s.body)
        if isinstance(s, (S.LetStmt, S.Allocate)):
            return path(s.body)
        if isinstance(s, S.IfThenElse) and s.else_case is None:
            return path(s.then_case)
        return False

    if not path(copy):
        return None
    store = stores[0]
    shape = [IntImm(int(f.extent.value)) for f in own] or [IntImm(1)]
    if prod(int(d.value) for d in shape) > 256:
        return None
    reg = S.Buffer(f"{store.buffer.name}.next", shape, store.buffer.dtype, "local")
    at = [f.var for f in own] or [IntImm(0)]

    def rebuild(s: S.Stmt, load: bool) -> S.Stmt:
        if isinstance(s, S.BufferStore):
            return (S.BufferStore(reg, s.value, at) if load
                    else S.BufferStore(s.buffer, S.BufferLoad(reg, at), s.indices))
        if isinstance(s, S.For):
            kind = s.kind if s.kind in ("thread_binding", "vectorized") else "unrolled"
            return S.For(s.var, s.extent, kind, rebuild(s.body, load), s.thread_tag)
        return S.map_children(s, lambda c: rebuild(c, load))

    return reg, rebuild(copy, True), rebuild(copy, False)


__all__ = ["pipeline_double_buffers"]
