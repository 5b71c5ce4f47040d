"""LLVM's optimisation pipeline and object code for compile units, in this process or in worker processes.

LLVM spends most of a model build in its -O3 pipeline and instruction selection, and llvmlite serialises
every call into LLVM behind one lock, so threads cannot share that work. ``compile_in_workers`` runs this
file as a script in one process per group of units (it imports only llvmlite: a worker starts in about
0.2 s), and ``relay.build`` compiles a model's kernels on every core.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm

#: the environment variable that caps the worker processes of a build (1: compile in this process)
JOBS_ENV = "AUTOSCHED_BUILD_JOBS"


@dataclasses.dataclass(frozen=True)
class Machine:
    """What a worker needs to rebuild the target machine: the triple, the CPU, its features, LLVM's -O level."""

    triple: str
    cpu: str
    features: str
    opt_level: int = 3


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine, level: int = 3) -> None:
    """LLVM's -O``level`` pipeline over a parsed module, for the CPU and the GPU alike (-O3, loop and SLP
    vectorizers on, unless a target's ``-opt-level`` asks for less)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = level >= 2
    pto.slp_vectorization = level >= 2
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)


def object_machine(m: Machine) -> llvm.TargetMachine:
    """A target machine that emits position-independent objects (loadable by the JIT and linkable into a
    shared library alike)."""
    target = llvm.Target.from_triple(m.triple)
    return target.create_target_machine(cpu=m.cpu, features=m.features, opt=3, reloc="pic", codemodel="default")


def compile_units(units: Sequence[str], machine: Machine) -> tuple[bytes, str]:
    """Link the IR texts ``units`` into one module, optimise it and emit its object code: ``(object, optimised
    IR)``. The module lives in an LLVM context of its own, freed at the end (LLVM keeps a context's types
    and constants until the context goes)."""
    ctx = llvm.create_context()
    try:
        mod = llvm.parse_assembly(units[0], context=ctx)
        for text in units[1:]:
            mod.link_in(llvm.parse_assembly(text, context=ctx))
        mod.verify()
        tm = object_machine(machine)
        mod.triple = machine.triple
        mod.data_layout = str(tm.target_data)
        optimize(mod, tm, machine.opt_level)
        opt_ir = str(mod)
        obj = tm.emit_object(mod)
        mod.close()
        return obj, opt_ir
    finally:
        ctx.close()


def build_jobs() -> int:
    """How many worker processes a build may use: ``AUTOSCHED_BUILD_JOBS``, else the cores this process may
    run on."""
    env = os.environ.get(JOBS_ENV, "").strip()
    if env:
        try:
            jobs = int(env)
        except ValueError:
            raise ValueError(f"{JOBS_ENV}={env!r} is not a number of worker processes (1 compiles in this "
                             f"process)") from None
        if jobs < 1:
            raise ValueError(f"{JOBS_ENV}={env!r}: give at least 1 (1 compiles in this process)")
        return jobs
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def balance(sizes: Sequence[int], groups: int) -> list[list[int]]:
    """Indices of ``sizes`` in ``groups`` groups of nearly equal total size (largest first, each to the
    lightest group), each group in the original order; no group is empty."""
    groups = max(1, min(groups, len(sizes)))
    load = [0] * groups
    out: list[list[int]] = [[] for _ in range(groups)]
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        g = min(range(groups), key=load.__getitem__)
        out[g].append(i)
        load[g] += sizes[i]
    return [sorted(g) for g in out]


_RUNNER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


class WorkerUnavailable(RuntimeError):
    """A worker process did not run to the end (it could not start, crashed or answered garbage): the build
    compiles in its own process instead. LLVM's own errors are plain RuntimeErrors."""


def _in_worker(units: Sequence[str], machine: Machine) -> tuple[bytes, str]:
    """``compile_units`` in a fresh Python process that runs this file (not the package: no autosched import)."""
    if not sys.executable or getattr(sys, "frozen", False):
        raise WorkerUnavailable("this interpreter cannot start another (sys.executable is not Python)")
    request = pickle.dumps((list(units), dataclasses.asdict(machine)))  # plain data: the worker has no autosched
    try:
        proc = subprocess.run([sys.executable, "-c", _RUNNER, os.path.abspath(__file__)],
                              input=request, capture_output=True, check=False)
    except OSError as e:
        raise WorkerUnavailable(f"cannot start {sys.executable}: {e}") from e
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip()[-800:]
        raise WorkerUnavailable(f"the LLVM compile worker exited with status {proc.returncode}"
                                + (f": {tail}" if tail else ""))
    try:
        status, payload = pickle.loads(proc.stdout)
    except Exception as e:  # noqa: BLE001  (a worker that printed something else)
        raise WorkerUnavailable(f"the LLVM compile worker's answer is not readable ({e})") from e
    if status != "ok":
        raise RuntimeError(f"the LLVM compile worker failed: {payload}")
    return payload


def compile_in_workers(groups: Sequence[Sequence[str]], machine: Machine) -> list[tuple[bytes, str]]:
    """``compile_units`` of each group, each in a worker process, all at once: ``[(object, optimised IR)]``
    in the order of ``groups``."""
    with ThreadPoolExecutor(len(groups), thread_name_prefix="autosched-llvm") as pool:
        return list(pool.map(lambda g: _in_worker(g, machine), groups))


def _main() -> None:
    """The worker: a pickled ``(units, machine fields)`` on stdin, a pickled ``("ok", (object, IR))`` or
    ``("error", message)`` on stdout."""
    units, fields = pickle.loads(sys.stdin.buffer.read())
    machine = Machine(**fields)
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    try:
        result: tuple = ("ok", compile_units(units, machine))
    except Exception as e:  # noqa: BLE001  (LLVM's parse and verify errors go back to the build)
        result = ("error", f"{type(e).__name__}: {e}")
    sys.stdout.buffer.write(pickle.dumps(result))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _main()
