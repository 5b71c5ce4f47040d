"""autosched: a search-based tensor-program tuner.

Write a computation in :mod:`autosched.te`, schedule it, look at its loops with
:func:`lower`, and compile it with :func:`build`. Importing autosched does not
import llvmlite: only building does, so exported libraries load without it.
"""

from __future__ import annotations

import sys as _sys

from autosched import container, contrib, errors, instrument, ir, runtime, target, te, testing, tir, transform
from autosched import errors as error  # TVM's name for the module of error classes
from autosched import task as _task
from autosched import workloads as _workloads
from autosched.errors import AutoschedError, CodegenError, LoweringError, ScheduleError, TVMError
from autosched.runtime import ndarray as nd
from autosched.runtime.ndarray import Device, NDArray, cpu, cuda, device, gpu
from autosched.runtime.registry import get_global_func, register_func
from autosched.target import Target as _Target
from autosched.task import Task
from autosched.tir import arith  # TVM's tvm.arith: the Analyzer over the integer simplifier (loaded by tir)
from autosched.tir.gpu import prepare_kernel as _prepare_kernel
from autosched.tir.lower import lower as _lower
from autosched.version import __version__
from autosched.workloads import register_workload

# Expressions nest as deep as users write them (a 3000-term Python sum() in a te.compute is 3000 levels), and
# the compiler's walkers recurse about three frames a level; 10000 frames stays within an 8 MiB C stack on
# Python 3.10 (the others use less) and within what pickle can nest
_sys.setrecursionlimit(max(_sys.getrecursionlimit(), 10000))


def __getattr__(name: str):
    # PEP 562: the database (SQLAlchemy), the search and the graph level load on first use, so that
    # `import autosched` stays light and a deployed model needs none of them
    if name == "apply_history_best":  # the database (SQLAlchemy) is imported only when used
        from autosched.database.apply import apply_history_best

        return apply_history_best
    if name == "database":
        import autosched.database as database

        return database
    if name == "space":  # schedule spaces (templates and generated sketches)
        import autosched.space as space

        return space
    if name == "search":  # search policies and the tuning loop
        import autosched.search as search

        return search
    if name == "tune":
        from autosched.search import tune

        return tune
    if name == "relay":  # the graph level (ops, passes, relay.build)
        import autosched.relay as relay

        return relay
    if name == "IRModule":  # TVM's tvm.IRModule, which relay graphs are wrapped in
        from autosched.relay import IRModule

        return IRModule
    if name == "extract_tasks":  # the tuning tasks of a relay model, each with .weight
        from autosched.relay import extract_tasks

        return extract_tasks
    if name == "auto_scheduler":  # TVM's auto_scheduler names over the search, the database and relay
        import autosched.auto_scheduler as auto_scheduler

        return auto_scheduler
    if name == "topi":  # TVM's operator inventory: te operators over relay's computes and default schedules
        import autosched.topi as topi

        return topi
    if name == "autotvm":  # TVM's autotvm names over the template spaces and the search
        import autosched.autotvm as autotvm

        return autotvm
    if name == "tune_tasks":
        from autosched.search import tune_tasks

        return tune_tasks
    raise AttributeError(f"module 'autosched' has no attribute {name!r}")


def _apply_best(task, db_or_log=None, *, allow_other_cpus: bool = False):
    """Task.apply_best's records come from the database layer, imported on first use (SQLAlchemy stays
    unloaded until then); wired here, above both, so that tasks do not import the database."""
    from autosched.database.apply import apply_best

    return apply_best(task, db_or_log, allow_other_cpus=allow_other_cpus)


_task.set_apply_best_source(_apply_best)


def _load_relay_workloads() -> None:
    """The fused kernels of relay graphs (``relay.fused``) register when the relay package is imported: a task
    or record of one finds its workload without the registry, which sits below relay, importing it."""
    import autosched.relay.backend.fused  # noqa: F401


_workloads.register_workload_source("relay.", _load_relay_workloads)


def lower(sch, args, name: str = "main", target=None, simple_mode: bool = False, binds=None):
    """Lower a schedule to the loop IR (a PrimFunc whose ``str()`` is readable). With a ``cuda`` target the
    GPU rules are checked and barriers inserted, as the GPU build does. ``args`` are the kernel's tensors in
    calling order, and scalar ``te.var`` arguments where the call passes them. ``simple_mode`` is TVM's
    (print the loops only), which is what the printout always is here; ``binds`` maps argument tensors to
    buffers from ``tir.decl_buffer`` (TVM's; arguments are dense arrays, so their strides must be dense)."""
    func = _lower(sch, args, name=name, binds=binds)
    if target is not None and _Target(target).kind == "cuda":
        func = _prepare_kernel(func, _Target(target).gpu)[0]
    return func


def build(sch, args=None, target="llvm", name: str = "main", target_host=None, binds=None):
    """Compile a schedule (or a PrimFunc from :func:`lower`) for ``target``; returns a runtime Module whose
    functions take numpy arrays or :class:`NDArray` s, and Python numbers for scalar ``te.var`` arguments.
    ``target_host`` is TVM's (the host code of a cuda build is compiled for this machine's CPU); ``binds`` as
    in :func:`lower`."""
    from autosched.codegen.build import build as _build  # llvmlite: importing autosched does not load it

    if binds:
        sch = lower(sch, args, name=name, binds=binds)
    return _build(sch, args, target=target, name=name)


__all__ = [
    "AutoschedError",
    "CodegenError",
    "LoweringError",
    "ScheduleError",
    "TVMError",
    "Task",
    "apply_history_best",
    "database",
    "extract_tasks",
    "register_workload",
    "relay",
    "search",
    "tune",
    "tune_tasks",
    "__version__",
    "build",
    "lower",
    "runtime",
    "te",
    "tir",
    "arith",
    "transform",
    "instrument",
    "ir",
    "error",
    "errors",
    "container",
    "contrib",
    "testing",
    "target",
    "nd",
    "Device",
    "NDArray",
    "cpu",
    "cuda",
    "device",
    "gpu",
    "get_global_func",
    "register_func",
]
