"""LLVM's optimisation pipeline and object code for compile units (llvmlite only).

What :mod:`autosched.codegen.units` runs for each chunk of a model's kernels, in the build's process or in
its worker processes; and the number of those workers (``AUTOSCHED_BUILD_JOBS``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

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
