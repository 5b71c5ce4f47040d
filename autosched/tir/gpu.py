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
from autosched.tir.arith import skey
from autosched.tir.pipeline import pipeline_double_buffers
from autosched.tir.stmt import dim_to_json

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
    body = pipeline_double_buffers(_insert_barriers(func.body))
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
def _written_shared(s: S.Stmt) -> set[int]:
    return {id(x.buffer) for x in S.walk_stmts(s) if isinstance(x, S.BufferStore) and x.buffer.scope == "shared"}


def _read_shared(s: S.Stmt) -> set[int]:
    out = set()
    for x in S.walk_stmts(s):
        for e in S.stmt_exprs(x):
            for y in E.walk(e):
                if isinstance(y, S.BufferLoad) and y.buffer.scope == "shared":
                    out.add(id(y.buffer))
    return out


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
    if isinstance(s, S.For):
        return S.For(s.var, s.extent, s.kind, _insert_barriers(s.body), s.thread_tag)
    if isinstance(s, S.Allocate):
        return S.Allocate(s.buffer, _insert_barriers(s.body))
    if isinstance(s, S.IfThenElse):
        return S.IfThenElse(s.cond, _insert_barriers(s.then_case),
                            _insert_barriers(s.else_case) if s.else_case is not None else None)
    if isinstance(s, S.LetStmt):
        return S.LetStmt(s.var, s.value, _insert_barriers(s.body))
    return s


def _check_barriers(body: S.Stmt, name: str, extents: dict[str, int]) -> None:
    """A barrier that some threads of a block skip hangs the block: refuse one under a condition on a thread
    index (a split tail inside the block) or inside a thread loop shorter than the block (only some threads
    run its body)."""

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
        if isinstance(s, S.IfThenElse) and cond is None and E.free_vars(s.cond) & thread_vars:
            for c in S.stmt_children(s):
                visit(c, thread_vars, s.cond)
            return
        for c in S.stmt_children(s):
            visit(c, thread_vars, cond)

    visit(body, set(), None)


def serialize_bindings(func: S.PrimFunc) -> S.PrimFunc:
    """The kernel with every bound loop run as a serial loop and the barriers dropped: what the grid computes,
    as one CPU thread would compute it (each block and thread in turn). The region of a shared copy covers
    every thread of its block, so running it once per thread is redundant but exact: this lets the CPU
    check what the GPU lowering produces where no GPU is present. A local array allocated outside thread loops
    and used inside them (a pipelined copy's registers) is one per thread: it gets a dimension per thread
    index, so that one thread's values survive the others' turns."""

    def go(s: S.Stmt) -> S.Stmt:
        if isinstance(s, S.For):
            kind = "serial" if s.kind == "thread_binding" else s.kind
            return S.For(s.var, s.extent, kind, go(s.body))
        if isinstance(s, S.SeqStmt):
            return S.seq([go(x) for x in s.seq if not isinstance(x, S.Barrier)])
        if isinstance(s, S.Allocate):
            if s.buffer.scope == "local":
                s = _per_thread(s)
            return S.Allocate(s.buffer, go(s.body))
        if isinstance(s, S.IfThenElse):
            return S.IfThenElse(s.cond, go(s.then_case), go(s.else_case) if s.else_case is not None else None)
        if isinstance(s, S.LetStmt):
            return S.LetStmt(s.var, s.value, go(s.body))
        return s

    return S.PrimFunc(func.name, func.params, func.scalar_params, go(func.body))


def _per_thread(alloc: S.Allocate) -> S.Allocate:
    """``alloc`` with a leading dimension per thread index of the thread loops inside it that use its buffer,
    each use indexed by its loop's variable (unchanged where no thread loop inside it uses the buffer)."""
    buf = alloc.buffer
    tags: dict[str, int] = {}
    kinds: set[frozenset] = set()  # the thread indices around each use

    def scan(s: S.Stmt, loops: tuple) -> None:
        if isinstance(s, S.For) and s.kind == "thread_binding" and s.thread_tag.startswith("threadIdx"):
            loops = (*loops, s)
        uses = (isinstance(s, S.BufferStore) and s.buffer is buf) or any(
            isinstance(y, S.BufferLoad) and y.buffer is buf for e in S.stmt_exprs(s) for y in E.walk(e))
        if uses:
            kinds.add(frozenset(f.thread_tag for f in loops))
            for f in loops:
                tags[f.thread_tag] = max(tags.get(f.thread_tag, 0), int(f.extent.value))
        for c in S.stmt_children(s):
            scan(c, loops)

    scan(alloc.body, ())
    if not tags or len(kinds) > 1:  # none inside thread loops, or some outside them: left as it is
        return alloc
    order = sorted(tags)
    wide = S.Buffer(buf.name, [IntImm(tags[t]) for t in order] + list(buf.shape), buf.dtype, buf.scope)

    def index(loops: dict) -> list[E.Expr]:
        return [loops[t] for t in order]

    def rewrite(s: S.Stmt, loops: dict) -> S.Stmt:
        if isinstance(s, S.For):
            if s.kind == "thread_binding" and s.thread_tag.startswith("threadIdx"):
                loops = {**loops, s.thread_tag: s.var}
            return S.For(s.var, s.extent, s.kind, rewrite(s.body, loops), s.thread_tag)

        def load(e: E.Expr) -> E.Expr | None:
            if isinstance(e, S.BufferLoad) and e.buffer is buf:
                return S.BufferLoad(wide, index(loops) + list(e.indices))
            return None

        def ex(e: E.Expr) -> E.Expr:
            return E.transform(e, load)

        if isinstance(s, S.BufferStore):
            idx = [ex(i) for i in s.indices]
            if s.buffer is buf:
                return S.BufferStore(wide, ex(s.value), index(loops) + idx)
            return S.BufferStore(s.buffer, ex(s.value), idx)
        if isinstance(s, S.SeqStmt):
            return S.SeqStmt([rewrite(x, loops) for x in s.seq])
        if isinstance(s, S.Allocate):
            return S.Allocate(s.buffer, rewrite(s.body, loops))
        if isinstance(s, S.IfThenElse):
            return S.IfThenElse(ex(s.cond), rewrite(s.then_case, loops),
                                rewrite(s.else_case, loops) if s.else_case is not None else None)
        if isinstance(s, S.LetStmt):
            return S.LetStmt(s.var, ex(s.value), rewrite(s.body, loops))
        if isinstance(s, S.Evaluate):
            return S.Evaluate(ex(s.value))
        return s

    return S.Allocate(wide, rewrite(alloc.body, {}))


__all__ = ["LAUNCH_LIMITS", "Launch", "MAX_SHARED_BYTES", "MAX_THREADS_PER_BLOCK", "prepare_kernel",
           "serialize_bindings"]
