"""The GPU rules of a lowered kernel, and the pass that makes it a CUDA kernel.

A ``cuda`` kernel is one loop nest whose loops bound with ``bind`` become the
block and thread indices of the launch. :func:`prepare_kernel` checks what a
GPU needs (every loop nest bound, launch dimensions within the hardware's
limits, no CPU-only annotations, shared memory within a block's budget),
inserts ``__syncthreads()`` around every write of a shared buffer that other
statements read, software-pipelines loops of double-buffered copies
(:mod:`autosched.tir.pipeline`), and returns the launch dimensions. Each rule it breaks is a
:class:`~autosched.errors.ScheduleError` that names the loop and the limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autosched.errors import ScheduleError
from autosched.target import GPUDescription
from autosched.te import expr as E
from autosched.te.expr import DTYPE_BYTES, IntImm
from autosched.tir import stmt as S
from autosched.tir import wmma
from autosched.tir.arith import linear, simplify, skey
from autosched.tir.pipeline import pipeline_double_buffers
from autosched.tir.stmt import dim_to_json
from autosched.tir.transform import map_exprs, substitute_stmt

#: the largest extent of each launch dimension (CUDA's limits since sm_30)
LAUNCH_LIMITS = {"blockIdx.x": 2**31 - 1, "blockIdx.y": 65535, "blockIdx.z": 65535,
                 "threadIdx.x": 1024, "threadIdx.y": 1024, "threadIdx.z": 64}
_ANY_GPU = GPUDescription("sm_50")  # the limits every architecture since sm_50 shares
MAX_THREADS_PER_BLOCK = _ANY_GPU.max_threads_per_block
MAX_SHARED_BYTES = _ANY_GPU.shared_bytes_per_block  # static shared memory per block


@dataclass
class Launch:
    """Launch dimensions of a kernel: ``grid`` = blocks (x, y, z), ``block`` = threads per block (x, y, z).

    A block extent is an int, or an expression of the kernel's shape variables (``(n + 63) // 64``) that the
    host wrapper evaluates on each call; thread extents are always ints (the block is fixed at build)."""

    grid: tuple[int | E.Expr, int | E.Expr, int | E.Expr] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    shared_bytes: int = 0
    extents: dict[str, int | E.Expr] = field(default_factory=dict)

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def to_json(self, scalars: list[E.Var] | None = None) -> dict:
        """The launch as JSON; a symbolic block extent is serialised over ``scalars`` (the kernel's shape
        variables, in parameter order) as ``runtime.module`` evaluates shapes."""
        grid = [g if isinstance(g, int) else dim_to_json(g, scalars or []) for g in self.grid]
        return {"grid": grid, "block": list(self.block), "shared_bytes": self.shared_bytes}


def prepare_kernel(func: S.PrimFunc, gpu: GPUDescription | None = None) -> tuple[S.PrimFunc, Launch]:
    """Check ``func`` against the GPU rules (the limits of ``gpu``, a target's ``.gpu``; by default those
    every GPU since sm_50 has), insert barriers, pipeline double-buffered copies; returns the kernel and its
    launch dimensions."""
    gpu = gpu or _ANY_GPU
    _check_structure(func)
    extents = _bound_extents(func)
    block = tuple(int(extents.get(f"threadIdx.{a}", 1)) for a in "xyz")
    grid = tuple(extents.get(f"blockIdx.{a}", 1) for a in "xyz")
    nthreads = block[0] * block[1] * block[2]
    if nthreads > gpu.max_threads_per_block:
        raise ScheduleError(
            f"kernel {func.name}: {nthreads} threads per block (threadIdx x, y, z = {block[0]}, {block[1]}, "
            f"{block[2]}); a block has at most {gpu.max_threads_per_block}: split the thread-bound loops smaller")
    shared = _shared_bytes(func, gpu.shared_bytes_per_block)
    _check_warp_ops(func, block, gpu.warp_size)
    body = pipeline_double_buffers(_insert_barriers(_widen_thread_loops(func.body, extents)))
    _check_barriers(body, func.name, extents)
    out = S.PrimFunc(func.name, func.params, func.scalar_params, body, dict(func.attrs))
    launch = Launch(grid, block, shared, extents)  # type: ignore[arg-type]
    out.attrs["launch"] = launch
    return out, launch


# ------------------------------------------------------------------ checks
def _check_structure(func: S.PrimFunc) -> None:
    """Every store runs under a bound loop; no CPU-only loops; same-tag nesting only for cooperative copies."""

    def visit(s: S.Stmt, tags: dict[str, S.For], bound: bool) -> None:
        if isinstance(s, S.For):
            if s.kind == "parallel":
                raise ScheduleError(
                    f"kernel {func.name}: loop '{s.var.name}' is parallel; inside a GPU kernel parallelism comes "
                    f"from bind(): bind it to blockIdx/threadIdx instead of parallel()")
            if s.kind == "thread_binding":
                outer = tags.get(s.thread_tag)
                if outer is not None:
                    bad = [x.buffer.name for x in S.walk_stmts(s.body)
                           if isinstance(x, S.BufferStore) and x.buffer.scope != "shared"]
                    if bad:
                        raise ScheduleError(
                            f"kernel {func.name}: loop '{s.var.name}' is bound to {s.thread_tag} inside loop "
                            f"'{outer.var.name}', which is bound to {s.thread_tag} too; one thread would compute "
                            f"only part of '{bad[0]}' (a tag may repeat only in a cooperative copy into shared "
                            f"memory): bind the inner loop to another index")
                tags = {**tags, s.thread_tag: s}
                bound = True
            visit(s.body, tags, bound)
            return
        if isinstance(s, S.BufferStore):
            if not bound:
                raise ScheduleError(
                    f"kernel {func.name}: the store to '{s.buffer.name}' is not inside any loop bound to a GPU "
                    f"block or thread, so every thread would run it: bind its stage's outer loops with "
                    f"bind(axis, te.thread_axis('blockIdx.x')) / 'threadIdx.x', or compute_at/inline it into "
                    f"a bound stage")
            return
        if isinstance(s, S.Allocate):
            b = s.buffer
            if not bound and not (b.scope == "shared" and one_block):  # one block: the root is the block
                raise ScheduleError(
                    f"kernel {func.name}: intermediate '{b.name}' is computed at the root, for the whole grid, "
                    f"which one kernel cannot do before its readers (blocks do not wait for each other): inline it "
                    f"(compute_inline), or compute it at a bound loop of its reader (compute_at), in 'local' or "
                    f"'shared' scope")
            if b.scope != "shared":  # private to each thread: a thread loop filling it would fill part of it
                for x in S.walk_stmts(s.body):
                    if (isinstance(x, S.For) and x.kind == "thread_binding" and x.thread_tag.startswith("threadIdx")
                            and any(isinstance(y, S.BufferStore) and y.buffer is b for y in S.walk_stmts(x.body))):
                        raise ScheduleError(
                            f"kernel {func.name}: loop '{x.var.name}' bound to {x.thread_tag} fills '{b.name}', "
                            f"which each thread holds privately ({b.scope}); only a 'shared' buffer can be filled "
                            f"by the threads of a block together: cache it in 'shared' scope or do not bind the loop")
            if b.const_size() is None:
                raise ScheduleError(
                    f"kernel {func.name}: {b.scope} buffer '{b.name}' has shape "
                    f"[{', '.join(str(d) for d in b.shape)}], which is not constant; GPU buffers are sized at "
                    f"build time: make the tile sizes constant")
        for c in S.stmt_children(s):
            visit(c, tags, bound)

    one_block = not any(isinstance(x, S.For) and x.kind == "thread_binding" and x.thread_tag.startswith("blockIdx")
                        for x in S.walk_stmts(func.body))
    visit(func.body, {}, False)


def _bound_extents(func: S.PrimFunc) -> dict[str, int | E.Expr]:
    """Launch extent of each tag: the largest extent of the loops bound to it. A thread extent must be a
    constant; a block extent may be an expression of the shape variables (the host evaluates it per call)."""
    out: dict[str, int | E.Expr] = {}
    for s in S.walk_stmts(func.body):
        if isinstance(s, S.For) and s.kind == "thread_binding":
            if s.thread_tag not in LAUNCH_LIMITS:
                raise ScheduleError(
                    f"kernel {func.name}: loop '{s.var.name}' is bound to {s.thread_tag}, which the cuda target "
                    f"does not launch; bind it to one of {', '.join(LAUNCH_LIMITS)}")
            if not isinstance(s.extent, IntImm):
                if s.thread_tag.startswith("threadIdx"):
                    raise ScheduleError(
                        f"kernel {func.name}: loop '{s.var.name}' bound to {s.thread_tag} has extent {s.extent}, "
                        f"which is not a constant; the threads of a block are fixed when the kernel is built: "
                        f"split the loop by a constant factor and bind the inner part to {s.thread_tag}")
                if E.free_vars(s.extent) - set(func.scalar_params):
                    raise ScheduleError(
                        f"kernel {func.name}: loop '{s.var.name}' bound to {s.thread_tag} has extent {s.extent}, "
                        f"which depends on another loop; a launch dimension may depend only on the shape "
                        f"variables ({', '.join(v.name for v in func.scalar_params) or 'none'})")
                prev = out.get(s.thread_tag)
                if prev is None or skey(prev) == skey(s.extent):
                    out[s.thread_tag] = s.extent
                else:
                    out[s.thread_tag] = E.Max(_as_expr(prev), s.extent)
                continue
            n = s.extent.value
            limit = LAUNCH_LIMITS[s.thread_tag]
            if n > limit:
                raise ScheduleError(
                    f"kernel {func.name}: loop '{s.var.name}' bound to {s.thread_tag} has extent {n}, over the "
                    f"limit of {limit}: split it and bind a smaller part")
            prev = out.get(s.thread_tag, 1)
            out[s.thread_tag] = max(prev, n) if isinstance(prev, int) else E.Max(prev, s.extent)
    if not out:
        raise ScheduleError(f"kernel {func.name}: no loop is bound to a block or thread index; a cuda target needs "
                            f"bind(axis, te.thread_axis('blockIdx.x')) and 'threadIdx.x' on the outer loops")
    return out


def _as_expr(v: int | E.Expr) -> E.Expr:
    return E.const(v, "int64") if isinstance(v, int) else v


def _check_warp_ops(func: S.PrimFunc, block: tuple[int, int, int], warp: int) -> None:
    """A warp matrix operation is done by the 32 threads of a warp together, on the same tiles: the block's
    x extent must be whole warps (so a warp's threads share their y and z), and neither the operation nor a
    loop or condition around it may depend on ``threadIdx.x``."""
    if not wmma.has_warp_ops(func.body):
        return
    frags = wmma.fragments(func.body)  # shapes, layouts and types checked before any code is generated
    memory = {id(b.data): b for b in func.params}
    memory.update({id(x.buffer.data): x.buffer for x in S.walk_stmts(func.body) if isinstance(x, S.Allocate)})
    for _, w in wmma.warp_ops(func.body):
        if w.memory is None:
            continue
        buf = memory.get(id(w.memory[0]))
        frag = frags[id(w.frags[0][0])]
        if buf is None or buf.dtype != frag.buffer.dtype:
            raise ScheduleError(f"kernel {func.name}: {w.name} moves {frag.buffer.dtype} fragment "
                                f"'{frag.buffer.name}' from or to "
                                f"{'an unknown buffer' if buf is None else f'{buf.dtype} buffer {buf.name!r}'}; "
                                f"the tile must be a buffer of the kernel of the fragment's type")
        size = DTYPE_BYTES[buf.dtype]
        for what, e, need in (("starts at element", w.memory[1], 32 // size), ("has a row stride of", w.stride,
                                                                               16 // size)):
            lin = linear(simplify(e))
            if lin.const % need or any(c % need for c, _ in lin.terms.values()):
                raise ScheduleError(
                    f"kernel {func.name}: {w.name} on '{buf.name}': the tile {what} {e}, which is not always a "
                    f"multiple of {need} {buf.dtype} elements; tensor cores need tiles at 32-byte addresses with "
                    f"rows a multiple of 16 bytes apart: pad rows (storage_align) and start tiles at multiples of "
                    f"16 elements")
    if block[0] % warp:
        raise ScheduleError(
            f"kernel {func.name}: tensor-core operations need whole warps along threadIdx.x, but the block has "
            f"{block[0]} threads there: bind a loop of a multiple of {warp} to threadIdx.x (a cooperative copy) or "
            f"none")

    def visit(s: S.Stmt, xs: set, around: list[E.Expr]) -> None:
        if isinstance(s, S.For) and s.thread_tag == "threadIdx.x":
            xs = xs | {s.var}
        if isinstance(s, S.LetStmt) and E.free_vars(s.value) & xs:
            xs = xs | {s.var}
        if isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.name in wmma.OPS:
            for e in [s.value, *around]:
                if E.free_vars(e) & xs:
                    what = "its tile" if e is s.value else f"a loop or condition ({e})"
                    raise ScheduleError(
                        f"kernel {func.name}: {s.value.name} on '{s.value.args[0]}': {what} depends on threadIdx.x, "
                        f"so the threads of a warp would disagree; the warp's 32 threads must do it together: do "
                        f"not bind the loops of the tensorized stages to threadIdx.x")
        extra = [s.extent] if isinstance(s, S.For) else [s.cond] if isinstance(s, S.IfThenElse) else []
        for c in S.stmt_children(s):
            visit(c, xs, around + extra)

    visit(func.body, set(), [])


def _shared_bytes(func: S.PrimFunc, limit: int) -> int:
    bufs = {id(s.buffer): s.buffer for s in S.walk_stmts(func.body)
            if isinstance(s, S.Allocate) and s.buffer.scope == "shared"}
    total = sum(b.const_size() * DTYPE_BYTES[b.dtype] for b in bufs.values())
    if total > limit:
        sizes = ", ".join(f"{b.name} {b.const_size() * DTYPE_BYTES[b.dtype]} B" for b in bufs.values())
        raise ScheduleError(f"kernel {func.name}: {total} bytes of shared memory ({sizes}); a block has "
                            f"{limit}: use smaller tiles for the shared copies")
    return total


# ------------------------------------------------------------------ barriers
def _widen_thread_loops(s: S.Stmt, extents: dict) -> S.Stmt:
    """A loop bound to a thread index but shorter than the block (a split tail: 2 warps' tiles in a block of
    4) that holds shared copies runs for every thread of the block, its bound kept as a guard on everything
    but the copies: the threads past it help fill the shared tiles and reach every barrier, and compute
    nothing (TVM places such guards at the stores the same way)."""
    if isinstance(s, S.For) and s.kind == "thread_binding" and s.thread_tag.startswith("threadIdx"):
        full = extents.get(s.thread_tag)
        if isinstance(s.extent, IntImm) and isinstance(full, int) and s.extent.value < full and _fills_shared(
                s.body) and not _only_copies(s.body):
            body = _guard_all_but_copies(_widen_thread_loops(s.body, extents), E.LT(s.var, s.extent))
            return S.For(s.var, IntImm(full, s.extent.dtype), s.kind, body, s.thread_tag)
    return S.map_children(s, lambda c: _widen_thread_loops(c, extents))


def _fills_shared(s: S.Stmt) -> bool:
    return any(isinstance(x, S.BufferStore) and x.buffer.scope == "shared" for x in S.walk_stmts(s))


def _only_copies(s: S.Stmt) -> bool:
    """Whether every store in ``s`` is into shared memory: a cooperative copy, whose thread loops may be
    shorter than the block (the threads past them idle; no barrier is inside)."""
    return not any((isinstance(x, S.BufferStore) and x.buffer.scope != "shared") or (
        isinstance(x, S.Evaluate) and isinstance(x.value, E.Call) and x.value.name in wmma.OPS)
        for x in S.walk_stmts(s))


def _guard_all_but_copies(s: S.Stmt, cond: E.Expr) -> S.Stmt:
    """``s`` with ``cond`` guarding every statement except the stores into shared memory (and the loops,
    allocations and conditions around them)."""
    if not _fills_shared(s):
        return S.IfThenElse(cond, s)
    if isinstance(s, S.BufferStore):
        return s
    if isinstance(s, S.For) and E.free_vars(s.extent) & E.free_vars(cond):
        raise ScheduleError(f"a shared copy inside loop '{s.var.name}', whose extent {s.extent} depends on a "
                            f"thread index past its loop's end ({cond}): every thread of the block must run it")
    return S.map_children(s, lambda c: _guard_all_but_copies(c, cond))


def _memory(buf: S.Buffer) -> int:
    """A key for the memory a buffer (or a view of it) stands for: its data variable's."""
    return id((buf.base or buf).data)


def _written_shared(s: S.Stmt) -> set[int]:
    """The shared memory that ``s`` writes (its stores, and the tiles its warp matrix operations store;
    keys of :func:`_memory`, a store through a global pointer counting as one that may be shared)."""
    out = {_memory(x.buffer) for x in S.walk_stmts(s) if isinstance(x, S.BufferStore) and x.buffer.scope == "shared"}
    return out | wmma.memory_accesses(s)[1]


def _read_shared(s: S.Stmt) -> set[int]:
    out = set()
    for x in S.walk_stmts(s):
        for e in S.stmt_exprs(x):
            for y in E.walk(e):
                if isinstance(y, S.BufferLoad) and y.buffer.scope == "shared":
                    out.add(_memory(y.buffer))
    return out | wmma.memory_accesses(s)[0]


def _insert_barriers(s: S.Stmt) -> S.Stmt:
    """A barrier before and after each statement that writes a shared buffer that a sibling statement reads:
    after, so the readers see every thread's writes; before, so no thread overwrites what another still reads
    (the copy sits in a loop). Placed at the innermost sequence that holds both, so the barrier runs once per
    iteration of the loop around the copy. Consecutive copies that read none of each other's buffers share
    their barriers (one before the first, one after the last)."""
    if isinstance(s, S.SeqStmt):
        kids = [_insert_barriers(x) for x in s.seq]
        reads = [_read_shared(k) for k in kids]
        out: list[S.Stmt] = []
        group_writes: set[int] = set()  # the buffers of the copies since the last "before" barrier
        group_reads: set[int] = set()
        for k, x in enumerate(kids):
            written = _written_shared(x)
            others = set().union(*(r for j, r in enumerate(reads) if j != k)) if written else set()
            if written & others:
                joins = (out and isinstance(out[-1], S.Barrier) and group_writes
                         and not (reads[k] & group_writes) and not (written & (group_reads | group_writes)))
                if joins:
                    out.pop()  # the group's closing barrier moves after this copy
                elif not out or not isinstance(out[-1], S.Barrier):
                    out.append(S.Barrier())
                if not joins:
                    group_writes, group_reads = set(), set()
                group_writes |= written
                group_reads |= reads[k]
                out.extend([x, S.Barrier()])
            else:
                group_writes, group_reads = set(), set()
                out.append(x)
        return S.SeqStmt(out)
    return S.map_children(s, _insert_barriers)


def _check_barriers(body: S.Stmt, name: str, extents: dict[str, int]) -> None:
    """A barrier that some threads of a block skip hangs the block: refuse one under a condition on a thread
    index (a split tail inside the block), inside a thread loop shorter than the block (only some threads
    run its body) or inside a loop whose trip count depends on the thread."""

    def visit(s: S.Stmt, thread_vars: set, cond: E.Expr | None) -> None:
        if isinstance(s, S.Barrier) and cond is not None:
            raise ScheduleError(
                f"kernel {name}: a __syncthreads() for a shared copy would run under the condition {cond}, which "
                f"differs between the threads of a block (a split that does not divide its loop, or thread loops "
                f"of different extents bound to one index): choose tile sizes that divide the extents")
        if isinstance(s, S.For) and s.kind == "thread_binding" and s.thread_tag.startswith("threadIdx"):
            thread_vars = thread_vars | {s.var}
            if cond is None and s.extent.value < extents[s.thread_tag]:
                cond = E.LT(s.var, s.extent)
        elif isinstance(s, S.For) and cond is None and E.free_vars(s.extent) & thread_vars:
            cond = E.LT(s.var, s.extent)
        if isinstance(s, S.LetStmt) and E.free_vars(s.value) & thread_vars:
            thread_vars = thread_vars | {s.var}
        if isinstance(s, S.IfThenElse) and cond is None and E.free_vars(s.cond) & thread_vars:
            for c in S.stmt_children(s):
                visit(c, thread_vars, s.cond)
            return
        for c in S.stmt_children(s):
            visit(c, thread_vars, cond)

    visit(body, set(), None)


def serialize_bindings(func: S.PrimFunc) -> S.PrimFunc:
    """What the grid of a prepared kernel computes, as one CPU thread computes it, honest about barriers:
    each block in turn, and in a block its threads in lockstep, every stretch of code between two barriers
    run for all the block's threads (one after another) before the next stretch starts. A missing barrier is
    then a wrong result on the CPU, as it is a race on the GPU: a thread reads shared memory that a later
    thread has not written yet in this stretch, or that an earlier one has already overwritten. A loop bound
    to a thread index is that index, guarded where the loop is shorter than the block (as the GPU code
    generator emits it); ``local`` arrays that live across barriers get one copy per thread."""
    if "launch" not in func.attrs:
        raise ScheduleError(f"serialize_bindings of kernel {func.name}: it has no barriers yet; pass what "
                            f"prepare_kernel returns (the kernel with its barriers), not the lowered function")
    func = wmma.emulate(func)  # each thread does its warp's matrix operations on whole tiles of its own
    extents = _bound_extents(func)
    threads = [(tag, int(extents.get(tag, 1))) for tag in ("threadIdx.z", "threadIdx.y", "threadIdx.x")]
    ids = {tag: E.Var(tag.replace("threadIdx.", "t"), "int64") for tag, _ in threads}
    return S.PrimFunc(func.name, func.params, func.scalar_params, _Lockstep(threads, ids).blocks(func.body),
                      dict(func.attrs))


class _Lockstep:
    """:func:`serialize_bindings`' rewriting: block loops become serial loops; inside a block, the code is cut
    at its barriers into stretches, each wrapped in serial loops over the block's threads."""

    def __init__(self, threads: list[tuple[str, int]], ids: dict[str, E.Var]):
        self.threads = threads  # (tag, extent), outermost first
        self.ids = ids  # tag -> the variable that stands for this thread's index inside a stretch

    def blocks(self, s: S.Stmt) -> S.Stmt:
        if not any(isinstance(x, S.For) and x.thread_tag.startswith("blockIdx") for x in S.walk_stmts(s)):
            return S.seq(self.stretches(s, []))
        if isinstance(s, S.For):
            return S.For(s.var, s.extent, "serial" if s.kind == "thread_binding" else s.kind, self.blocks(s.body))
        if isinstance(s, S.SeqStmt):
            return S.seq([self.blocks(x) for x in s.seq if not isinstance(x, S.Barrier)])
        return S.map_children(s, self.blocks)

    def stretches(self, s: S.Stmt, lets: list[S.LetStmt]) -> list[S.Stmt]:
        """``s`` (inside a block) as a list of statements: stretches between barriers, each run by all the
        threads, and the uniform loops and conditions around barriers. ``lets`` are the bindings in scope that
        each stretch must evaluate again for its thread."""
        if not _has_barrier(s):
            return [self.all_threads(self.per_thread(s), lets)]
        if isinstance(s, S.Barrier):
            return []
        if isinstance(s, S.SeqStmt):
            out: list[S.Stmt] = []
            run: list[S.Stmt] = []
            for x in s.seq:
                if _has_barrier(x):
                    if run:
                        out.append(self.all_threads(self.per_thread(S.seq(run)), lets))
                        run = []
                    out.extend(self.stretches(x, lets))
                else:
                    run.append(x)
            if run:
                out.append(self.all_threads(self.per_thread(S.seq(run)), lets))
            return out
        if isinstance(s, S.For) and s.thread_tag.startswith("threadIdx"):
            # barriers inside: the loop covers the whole block (_check_barriers), so it is just the index
            return self.stretches(substitute_stmt(s.body, {s.var: self.index(s)}), lets)
        if isinstance(s, S.For):
            self.uniform(s.extent, s)
            return [S.For(s.var, s.extent, s.kind, S.seq(self.stretches(s.body, lets)))]
        if isinstance(s, S.IfThenElse):
            self.uniform(s.cond, s)
            return [S.IfThenElse(s.cond, S.seq(self.stretches(s.then_case, lets)),
                                 S.seq(self.stretches(s.else_case, lets)) if s.else_case is not None else None)]
        if isinstance(s, S.LetStmt):
            if E.free_vars(s.value) & set(self.ids.values()) or any(
                    E.free_vars(let.value) & set(self.ids.values()) and let.var in E.free_vars(s.value)
                    for let in lets):
                return self.stretches(s.body, [*lets, s])  # a thread's own value: bound again in each stretch
            return [S.LetStmt(s.var, s.value, S.seq(self.stretches(s.body, lets)))]
        if isinstance(s, S.Allocate):
            if s.buffer.scope == "local" or wmma.is_fragment_scope(s.buffer.scope):  # one copy per thread
                wide, body = self.one_per_thread(s.buffer, s.body)
                return [S.Allocate(wide, S.seq(self.stretches(body, lets)))]
            return [S.Allocate(s.buffer, S.seq(self.stretches(s.body, lets)))]
        raise ScheduleError(f"a barrier inside a {type(s).__name__} cannot be run in lockstep")

    def index(self, loop: S.For) -> E.Expr:
        """This thread's index, standing for a loop bound to it."""
        t = self.ids[loop.thread_tag]
        return t if t.dtype == loop.var.dtype else E.cast(loop.var.dtype, t)

    def uniform(self, e: E.Expr, where: S.Stmt) -> None:
        if E.free_vars(e) & set(self.ids.values()):
            raise ScheduleError(f"a barrier under {e}, which differs between the threads of a block")

    def per_thread(self, s: S.Stmt) -> S.Stmt:
        """A stretch as one thread runs it: each loop bound to a thread index is that index, guarded where the
        loop is shorter than the block."""
        if isinstance(s, S.For) and s.thread_tag.startswith("threadIdx"):
            t = self.index(s)
            body = self.per_thread(substitute_stmt(s.body, {s.var: t}))
            full = dict(self.threads)[s.thread_tag]
            return body if s.extent.value >= full else S.IfThenElse(E.LT(t, s.extent), body)
        return S.map_children(s, self.per_thread)

    def all_threads(self, s: S.Stmt, lets: list[S.LetStmt]) -> S.Stmt:
        """``s`` run by every thread of the block in turn. (In order: the reverse order, which would catch the
        races of the other half of the pairs of threads, made LLVM 20's vectorizers emit invalid IR for a
        16-thread stretch that reads a per-thread array at ``15 - t``.)"""
        for let in reversed(lets):
            s = S.LetStmt(let.var, let.value, s)
        for tag, n in reversed(self.threads):
            if n == 1:
                s = substitute_stmt(s, {self.ids[tag]: IntImm(0, "int64")})
                continue
            i = E.Var(f"{self.ids[tag].name}.serial", "int64")
            s = S.For(i, IntImm(n, "int64"), "serial", substitute_stmt(s, {self.ids[tag]: i}))
        return s

    def one_per_thread(self, buf: S.Buffer, body: S.Stmt) -> tuple[S.Buffer, S.Stmt]:
        """``buf`` with a leading dimension per thread index of the block, each use indexed by its thread's."""
        dims = [(tag, n) for tag, n in self.threads if n > 1]
        wide = S.Buffer(buf.name, [IntImm(n) for _, n in dims] + list(buf.shape), buf.dtype, buf.scope)
        lead = [self.ids[tag] for tag, _ in dims]

        def load(e: E.Expr) -> E.Expr | None:
            return S.BufferLoad(wide, lead + list(e.indices)) if isinstance(e, S.BufferLoad) and e.buffer is buf \
                else None

        def store(s: S.Stmt) -> S.Stmt:
            if isinstance(s, S.BufferStore) and s.buffer is buf:
                return S.BufferStore(wide, s.value, lead + list(s.indices))
            return S.map_children(s, store)

        return wide, map_exprs(store(body), lambda e: E.transform(e, load))


def _has_barrier(s: S.Stmt) -> bool:
    return any(isinstance(x, S.Barrier) for x in S.walk_stmts(s))


__all__ = ["LAUNCH_LIMITS", "Launch", "MAX_SHARED_BYTES", "MAX_THREADS_PER_BLOCK", "prepare_kernel",
           "serialize_bindings"]
