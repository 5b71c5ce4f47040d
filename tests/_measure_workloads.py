"""Workloads and traces for the measurement tests: good, crashing, hanging, wrong, slow-to-build candidates.

Registered at import; measurement workers receive them by value (cloudpickle), as they would a researcher's.
"""

from __future__ import annotations

import autosched
from autosched import te
from autosched.measure import MeasureInput
from autosched.te import Trace
from autosched.workloads.reference import register_reference


@autosched.register_workload("measure_oob", override=True)
def measure_oob(n: int = 16):
    """Reads 2**38 bytes past the start of A for i > 0: a segfault, not a wrong number."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i * (1 << 36)] + 1.0, name="B")
    return [A, B]


@autosched.register_workload("measure_hang", override=True)
def measure_hang(n: int = 16):
    """A reduction over 2**40 elements: hours of work, i.e. a hang."""
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, 1 << 40), name="k")
    C = te.compute((n,), lambda i: te.sum(A[(i + k) % n], axis=k), name="C")
    return [A, C]


@register_reference("measure_hang", override=True)
def _measure_hang_ref(inputs, n):  # never right, never reached: saves running the untransformed hang
    return inputs[0]


@autosched.register_workload("measure_wrong", override=True)
def measure_wrong(n: int = 64):
    """B = 2 A, checked against a deliberately wrong reference (2 A + 1): every candidate is wrong."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return [A, B]


@register_reference("measure_wrong", override=True)
def _measure_wrong_ref(inputs, n):
    return inputs[0] * 2 + 1


@autosched.register_workload("measure_noref", override=True)
def measure_noref(n: int = 32, m: int = 24):
    """A workload without a numpy reference: checked against its untransformed schedule."""
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="B")
    return [A, B]


def small_conv() -> autosched.Task:
    return autosched.Task("conv2d", args={"H": 8, "W": 8, "CI": 8, "CO": 8})


def small_matmul(n: int = 64) -> autosched.Task:
    return autosched.Task("matmul", args={"M": n, "N": n, "K": n})


def tiled_matmul_trace(task: autosched.Task, bn: int = 16, vec: bool = True) -> Trace:
    """A legal, fast schedule of a matmul task: tile i and j, k outside the inner tile, vectorise."""
    sch, (A, B, C) = task.schedule()
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = sch[C].tile(i, j, 4, bn)
    sch[C].reorder(io, jo, k, ii, ji)
    if vec:
        sch[C].vectorize(ji)
    return sch.trace


def split_trace(task: autosched.Task, factor: int) -> Trace:
    """Split the output's innermost axis by ``factor``: a distinct, legal candidate for any task."""
    sch, args = task.schedule()
    out = args[-1]
    sch[out].split(out.op.axis[-1], factor=factor)
    return sch.trace


@autosched.register_workload("measure_unroll_chain", override=True)
def measure_unroll_chain(stages: int = 96, n: int = 256):
    """A chain of elementwise stages, each a loop of its own (or unrolled, as a schedule says)."""
    A = te.placeholder((n,), name="A")
    t = A
    for s in range(stages):
        prev = t
        t = te.compute((n,), lambda i, prev=prev: prev[i] * 1.5 + 1.0, name=f"s{s}")
    return [A, t]


def slow_build() -> MeasureInput:
    """A chain of 400 loops in one function: ~3 s of LLVM optimisation (its loop passes grow faster than
    linearly in the loops), i.e. a build that a 1.5 s limit must stop. (Unrolling cannot make one any more:
    codegen bounds what a function's unrolled nests expand into.)"""
    return MeasureInput(autosched.Task("measure_unroll_chain", {"stages": 400, "n": 64}), Trace())


INVALID = Trace.from_json([["split", 0, 99, 4, None]])  # stage 0 is an input: no loops to split


def mixed_batch() -> tuple[list[MeasureInput], list[str | None]]:
    """Good, crashing, hanging, invalid and wrong candidates, interleaved; and the error kind of each."""
    conv, mm = small_conv(), small_matmul()
    batch = [
        (MeasureInput(conv, Trace()), None),
        (MeasureInput(autosched.Task("measure_oob"), Trace()), "runtime_crash"),
        (MeasureInput(mm, tiled_matmul_trace(mm)), None),
        (MeasureInput(autosched.Task("measure_hang"), Trace()), "run_timeout"),
        (MeasureInput(conv, INVALID), "invalid_schedule"),
        (MeasureInput(autosched.Task("measure_wrong"), Trace()), "wrong_result"),
        (MeasureInput(mm, Trace()), None),
        (MeasureInput(autosched.Task("measure_noref"), Trace()), None),
    ]
    return [b[0] for b in batch], [b[1] for b in batch]
