"""A model's kernels generated and compiled in chunks, on every core: what ``build_many`` runs.

Each kernel is a compile unit of its own (:class:`Unit`: its LLVM IR, its workspace destructor, what the code
does not honour). A chunk of kernels is generated, linked, optimised and compiled to one object
(:func:`compile_chunk`). Both halves are Python and LLVM work that one process does on one core (llvmlite
serialises its calls), so when a model's kernels are many, :func:`compile_chunks` hands the chunks, largest
first, to worker processes (:mod:`autosched.process`, serving :class:`UnitService`), one per core
(``AUTOSCHED_BUILD_JOBS``), each taking the next chunk as it finishes one. A chunk a worker could not do
(it could not start, died, or the chunk failed there) is done in the build's own process, where a real
error is raised with its own type and message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import pickle
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from autosched.codegen.llvm import CodeGenLLVM, warn_unhonoured
from autosched.codegen.objcompile import Machine, compile_units
from autosched.process import WorkerProcess
from autosched.target import has_dot_u8s8, init_llvm
from autosched.tir import stmt as S

log = logging.getLogger("autosched.codegen")

#: kernels whose pickled loop IR is smaller than this are generated and compiled in the build's own process
#: (about 256 KiB of LLVM IR: starting workers would cost more than they save)
PARALLEL_MIN_BYTES = 16 * 1024
#: chunks per worker (smaller chunks balance the workers' load; each costs a message and an object)
CHUNKS_PER_JOB = 3

SERVICE = "autosched.codegen.units:UnitService"


@dataclasses.dataclass
class Unit:
    """One kernel's compile unit: its LLVM IR, its workspace destructor's name (None: it keeps none), the
    loop annotations its code does not honour (flag -> what happened) and whether it has parallel loops."""

    name: str
    text: str
    destructor: str | None
    unhonoured: dict[str, str]
    parallel: bool


@dataclasses.dataclass
class Chunk:
    """Kernels compiled together: their units, the object code and its optimised IR."""

    units: list[Unit]
    object: bytes
    opt_ir: str


def generate_unit(func: S.PrimFunc, num_threads: int, vector_bytes: int, dot_u8s8: bool = False) -> Unit:
    cg = CodeGenLLVM(func.name, num_threads, vector_bytes, unit=True, dot_u8s8=dot_u8s8)
    cg.add_function(func)
    return Unit(func.name, str(cg.finish()), cg.workspace_destructor, dict(cg.unhonoured), cg.uses_parallel)


def compile_chunk(funcs: Sequence[S.PrimFunc], num_threads: int, vector_bytes: int, machine: Machine,
                  lock: Any = None) -> Chunk:
    """Generate each kernel's unit, then link, optimise and compile them to one object (LLVM's part holding
    ``lock``, when given: llvmlite's calls are not thread-safe)."""
    dot = vector_bytes >= 64 and has_dot_u8s8(machine.cpu, machine.features)
    units = [generate_unit(f, num_threads, vector_bytes, dot) for f in funcs]
    with lock if lock is not None else contextlib.nullcontext():
        obj, opt_ir = compile_units([u.text for u in units], machine)
    return Chunk(units, obj, opt_ir)


class UnitService:
    """What a build worker serves: :func:`compile_chunk` of pickled PrimFuncs."""

    def __init__(self) -> None:
        init_llvm()

    def compile_chunk(self, funcs: list[bytes], num_threads: int, vector_bytes: int, machine: dict) -> Chunk:
        return compile_chunk([pickle.loads(f) for f in funcs], num_threads, vector_bytes, Machine(**machine))


def chunks_of(sizes: Sequence[int], count: int) -> list[list[int]]:
    """Indices of ``sizes`` in about ``count`` chunks of about equal total size, the largest kernels first
    (the last chunks a worker takes are then small, and the workers finish together)."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    target = sum(sizes) / max(1, count)
    out: list[list[int]] = [[]]
    filled = 0
    for i in order:
        if out[-1] and filled + sizes[i] > target:
            out.append([])
            filled = 0
        out[-1].append(i)
        filled += sizes[i]
    return out


def compile_chunks(funcs: Sequence[S.PrimFunc], num_threads: int, vector_bytes: int, machine: Machine,
                   jobs: int, lock: Any) -> tuple[list[Chunk], int]:
    """The kernels compiled in chunks: in up to ``jobs`` worker processes when they are many enough, else
    (and for any chunk a worker did not do) here, LLVM's part holding ``lock``.
    Returns the chunks, each kernel in exactly one, and how many processes compiled them."""
    try:  # (what travels to a worker: a kernel that does not pickle is compiled here, with the rest)
        pickled = [pickle.dumps(f) for f in funcs] if jobs > 1 and len(funcs) > 1 else []
    except Exception as e:  # noqa: BLE001 - pickling raises what the object's parts raise
        log.debug("build_many: the kernels do not pickle (%s): compiling in this process", e)
        pickled = []
    if sum(map(len, pickled)) < PARALLEL_MIN_BYTES:
        return [compile_chunk(funcs, num_threads, vector_bytes, machine, lock)], 1
    groups = chunks_of([len(p) for p in pickled], jobs * CHUNKS_PER_JOB)
    done: list[Chunk | None] = [None] * len(groups)
    taken = iter(range(len(groups)))
    pick = threading.Lock()
    problems: list[str] = []
    stop = threading.Event()  # the build was interrupted (Ctrl-C): no more chunks, and the workers go
    workers: list[WorkerProcess] = []

    def serve() -> bool:
        """One worker's life: chunk after chunk until none is left; False if it never compiled one."""
        try:
            worker = WorkerProcess(SERVICE, name="autosched-build")
        except OSError as e:
            problems.append(f"cannot start a build worker with {sys.executable} ({e})")
            return False
        workers.append(worker)
        served = False
        try:
            if not _wait_ready(worker, problems):
                return False
            while True:
                with pick:
                    k = None if stop.is_set() else next(taken, None)
                if k is None:
                    return served
                request = [pickled[i] for i in groups[k]]
                try:
                    worker.conn.send(("compile_chunk", (request, num_threads, vector_bytes,
                                                        dataclasses.asdict(machine))))
                    kind, value = worker.conn.recv()
                except (EOFError, OSError):
                    problems.append(f"a build worker stopped ({worker.exit_description()})")
                    return served
                if kind != "done":  # done here below, where the error is raised as what it is
                    problems.append(f"a chunk failed in a build worker ({str(value)[:300]})")
                    continue
                done[k] = value
                served = True
        finally:
            worker.close()

    with ThreadPoolExecutor(min(jobs, len(groups)), thread_name_prefix="autosched-build") as pool:
        futures = [pool.submit(serve) for _ in range(min(jobs, len(groups)))]
        try:
            used = sum(f.result() for f in futures)
        except BaseException:
            stop.set()
            for w in list(workers):
                w.kill()
            raise
    left = [k for k, c in enumerate(done) if c is None]
    if left:
        log.warning("build_many: %s; compiling %d of %d chunks in this process instead",
                    problems[0] if problems else "the build workers stopped", len(left), len(groups))
        for k in left:
            done[k] = compile_chunk([funcs[i] for i in groups[k]], num_threads, vector_bytes, machine, lock)
    for c in done:  # the workers' fallbacks, said here once per process as a build of this process says them
        for unit in c.units:  # type: ignore[union-attr]
            warn_unhonoured(unit.unhonoured)
    return [c for c in done if c is not None], max(1, used + bool(left))


def _wait_ready(worker: WorkerProcess, problems: list[str]) -> bool:
    try:
        if worker.conn.poll(120.0):
            kind, _ = worker.conn.recv()
            if kind == "ready":
                return True
    except (EOFError, OSError):
        pass
    problems.append(f"a build worker did not start with {sys.executable} ({worker.exit_description()})")
    return False


__all__ = ["CHUNKS_PER_JOB", "PARALLEL_MIN_BYTES", "Chunk", "Unit", "UnitService", "chunks_of", "compile_chunk",
           "compile_chunks", "generate_unit"]
