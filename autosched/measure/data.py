"""Per-task measurement data: seeded inputs and the reference output every candidate is checked against.

Inputs are seeded from the runner's seed and the task's workload key, so two
runs (or two machines) measure the same numbers. Float inputs are random
multiples of 1/8 in [-1, 1]: their products are multiples of 1/64, and any
sum of up to ~2^17 of them is exact in float32, so a correct matmul or
convolution equals the float64 reference *whatever its summation order*, and
a wrong one cannot hide behind the tolerance. Zero and both signs occur, so a
relu or a max that is skipped shows up too.

The reference comes from :mod:`autosched.workloads.reference` (numpy, in
float64) when the workload has one, and otherwise from the workload's own
untransformed schedule compiled by autosched, run in a separate process so a
workload that crashes cannot take the tuner with it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from autosched.isa import target_features
from autosched.process import WorkerProcess, describe_exit
from autosched.shipment import task_state, workload_shipment
from autosched.workloads import get_workload
from autosched.workloads.reference import get_reference

log = logging.getLogger("autosched.measure")

# (rtol, atol) by dtype kind and size; integers and booleans must match exactly
_TOLERANCES = {
    "float16": (1e-2, 1e-3),
    "float32": (1e-4, 1e-5),
    "float64": (1e-7, 1e-9),
}


def tolerance(dtype: Any) -> tuple[float, float]:
    """The default ``(rtol, atol)`` of the correctness check for outputs of ``dtype``."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return _TOLERANCES.get(dt.name, (1e-4, 1e-5))
    return (0.0, 0.0)


def task_seed(task: Any, seed: int = 0) -> np.random.SeedSequence:
    """A seed sequence from the user's seed and the task's identity (workload key and target)."""
    h = hashlib.sha256(f"{task.workload_key}|{task.target}".encode()).digest()
    return np.random.SeedSequence([int(seed), int.from_bytes(h[:8], "little")])


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return (rng.integers(-8, 9, size=shape) / 8.0).astype(dtype)
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -4
        return rng.integers(lo, 5, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    raise TypeError(f"cannot make random inputs of dtype {dtype}")


def _shape_of(t: Any) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in t.shape)
    except (TypeError, ValueError):
        raise ValueError(f"tensor {t.name} has the symbolic shape {t.shape}: tasks need concrete ones") \
            from None


def make_inputs(task: Any, seed: int = 0) -> list[np.ndarray]:
    """One array per argument of the task's kernel (inputs first, output last); the output is zeros."""
    rng = np.random.default_rng(task_seed(task, seed))
    tensors = task.tensors()
    arrays = [_random_array(rng, _shape_of(t), np.dtype(t.dtype)) for t in tensors[:-1]]
    out = tensors[-1]
    arrays.append(np.zeros(_shape_of(out), dtype=out.dtype))
    valid = get_workload(task.name).valid_inputs
    if valid is not None:  # inputs the loops depend on (a sparse structure) made valid
        valid(arrays, rng, **task.args)
    return arrays


def numpy_reference(task: Any, inputs: list[np.ndarray]) -> np.ndarray | None:
    """The workload's registered numpy reference applied to ``inputs`` (without the output), or None."""
    fn = get_reference(task.name)
    if fn is None:
        return None
    out_t = task.tensors()[-1]
    wide = [a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.int64) if a.dtype.kind in "iu" else a
            for a in inputs]
    out = np.asarray(fn(wide, **task.args))
    want = _shape_of(out_t)
    if out.shape != want:
        raise ValueError(f"the reference of {task.name} returned shape {out.shape}, the output is {want}")
    return np.ascontiguousarray(out.astype(out_t.dtype))


def reference_outputs(task: Any, inputs: list[np.ndarray], isolate: bool = True,
                      timeout: float = 300.0) -> np.ndarray:
    """The output a correct kernel of ``task`` writes for ``inputs`` (the input arrays, without the output).

    Uses the workload's numpy reference when it has one; otherwise compiles the
    workload's untransformed schedule with autosched (for this CPU when the task
    is a GPU's) and runs it, in a separate
    process when ``isolate`` (the default), so a workload that segfaults raises
    :class:`NoReferenceError` here instead of killing the caller.
    """
    ref = numpy_reference(task, inputs)
    if ref is not None:
        return ref
    if not isolate:
        return _naive_outputs(task, inputs)
    return _naive_outputs_isolated(task, inputs, timeout)


class NoReferenceError(RuntimeError):
    """No reference output could be computed for a task (its untransformed schedule failed)."""


def _naive_outputs(task: Any, inputs: list[np.ndarray]) -> np.ndarray:
    from autosched.codegen.build import build  # llvmlite: only where a reference is computed

    sch, args = task.schedule()
    # on this CPU for a GPU task: untransformed, a GPU computation is no kernel (nothing bound to its grid)
    target = task.target if task.target.kind == "llvm" else "llvm"
    mod = build(sch, args, target=target, name="reference")
    arrays = [np.array(a, copy=True) for a in inputs]
    out_t = task.tensors()[-1]
    out = np.zeros(_shape_of(out_t), dtype=out_t.dtype)
    mod(*arrays, out)
    return out


def _naive_outputs_isolated(task: Any, inputs: list[np.ndarray], timeout: float) -> np.ndarray:
    what = f"the untransformed schedule of {task.name}"
    w = WorkerProcess("autosched.measure.worker:ReferenceService", name="autosched-reference")
    try:
        w.conn.send(("reference", (workload_shipment(task), task_state(task), list(inputs))))
        deadline = time.monotonic() + timeout
        while True:
            if not w.conn.poll(max(0.0, deadline - time.monotonic())):
                raise NoReferenceError(f"{what} ran for more than {timeout:.0f} s")
            try:
                tag, value = w.conn.recv()
            except (EOFError, OSError):
                raise NoReferenceError(f"{what} crashed ({w.exit_description()})") from None
            if tag == "done":
                return value
            if tag != "ready":
                raise NoReferenceError(f"{what} failed: {value}")
    finally:
        w.close()


@dataclass
class TaskData:
    """What a runner worker needs to run and check one task's candidates; sent once per worker."""

    key: str  # identity: workload key, target and seed
    arrays: list[np.ndarray]  # one per kernel argument; the last is the output
    reference: np.ndarray | None  # None: the output is not checked
    rtol: float
    atol: float
    num_threads: int
    cpu: str = ""  #: the CPU the candidates are built for (llvm targets)
    features: tuple[str, ...] = ()  #: instruction-set extensions code built for it uses (a runner must have them)

    @property
    def nbytes(self) -> int:
        ref = self.reference.nbytes if self.reference is not None else 0
        return sum(a.nbytes for a in self.arrays) + ref


def prepare_task_data(task: Any, seed: int = 0, check: bool = True, num_threads: int | None = None,
                      rtol: float | None = None, atol: float | None = None,
                      reference_timeout: float = 300.0) -> TaskData:
    """Seeded inputs and (when ``check``) the reference output of ``task``, computed once per task."""
    arrays = make_inputs(task, seed)
    ref = None
    if check:
        try:
            ref = reference_outputs(task, arrays[:-1], timeout=reference_timeout)
        except NoReferenceError as e:
            log.warning("results of %s are not checked for correctness (their records are flagged 'unchecked'): "
                        "%s; register a numpy reference for the workload "
                        "(autosched.workloads.reference.register_reference) to check them", task, e)
    out_dtype = arrays[-1].dtype
    d_rtol, d_atol = tolerance(out_dtype)
    key = hashlib.sha256(f"{task.workload_key}|{task.target}|{seed}|{check}".encode()).hexdigest()[:24]
    return TaskData(
        key=key,
        arrays=arrays,
        reference=ref,
        rtol=d_rtol if rtol is None else rtol,
        atol=d_atol if atol is None else atol,
        num_threads=int(num_threads or task.target.num_cores or os.cpu_count() or 1),
        cpu=task.target.mcpu if task.target.kind == "llvm" else "",
        features=tuple(sorted(target_features(task.target))) if task.target.kind == "llvm" else (),
    )


__all__ = [
    "NoReferenceError",
    "TaskData",
    "describe_exit",
    "make_inputs",
    "numpy_reference",
    "prepare_task_data",
    "reference_outputs",
    "tolerance",
]
