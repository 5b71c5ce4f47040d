"""The Builder interface: turn candidates into loadable shared libraries, in parallel.

A Builder takes a batch of :class:`MeasureInput` and returns one
:class:`BuildResult` per input, in order. It never raises for a bad candidate:
an invalid trace, a lowering or compile error, or a build that runs past
``timeout`` become results with an :class:`ErrorKind`. Implementations:
:class:`~autosched.measure.local.LocalBuilder` (a process pool) and
:class:`~autosched.measure.ray_backend.RayBuilder` (Ray actors), both driven by
:mod:`autosched.measure.engine`.
"""

from __future__ import annotations

import abc
import math
import os
import time
from collections.abc import Hashable, Sequence

from autosched.measure.result import BuildResult, MeasureInput
from autosched.result import ErrorKind

RECYCLE_ENV = "AUTOSCHED_RECYCLE_BUILDS"


def builds_per_worker() -> int:
    """How many candidates a build worker compiles before it is replaced by a fresh one
    (``$AUTOSCHED_RECYCLE_BUILDS``, default 64; 0 never). LLVM, as llvmlite runs it, keeps memory per compiled
    module that nothing in the process can free, so a worker that never restarted would grow without bound
    over a long run (docs/measure.md, "Memory of long runs")."""
    return max(0, int(os.environ.get(RECYCLE_ENV, "64")))


class BuildCutoff:
    """How long one build of a task may take, read again while a batch builds: ``factor`` x the median of the
    task's successful builds so far, the batch in flight's included, at least ``floor`` s; no limit (but the
    builder's timeout) before ``min_builds`` of them. So a pathological candidate of a task's first batch is
    stopped once the batch's quick builds are in, instead of holding the whole batch."""

    def __init__(self, factor: float, floor: float, min_builds: int):
        self.factor, self.floor, self.min_builds = float(factor), float(floor), int(min_builds)
        self._times: dict[Hashable, list[float]] = {}
        self.added = 0  # builds reported, all tasks together

    @staticmethod
    def key(inp: MeasureInput) -> tuple:
        """Which task's builds ``inp`` is judged against."""
        return (inp.task.workload_key, str(inp.task.target))

    def add(self, key: Hashable, seconds: float) -> None:
        """A successful (not cached) build of task ``key`` took ``seconds``."""
        self._times.setdefault(key, []).append(float(seconds))
        self.added += 1

    def limit(self, key: Hashable) -> float | None:
        """Seconds a build of task ``key`` may take now (None: no cut-off yet, or the cut-off is off)."""
        times = self._times.get(key, ())
        if not self.factor or len(times) < self.min_builds:
            return None
        return max(self.floor, self.factor * sorted(times)[len(times) // 2])


class BuildClock:
    """One build's deadline for the engine's dispatch loop: the builder's ``timeout``, or sooner once the
    task's :class:`BuildCutoff` says so; and the result of a build stopped at it."""

    def __init__(self, inp: MeasureInput, timeout: float, cutoff: BuildCutoff | None):
        self.key, self.timeout, self.cutoff = BuildCutoff.key(inp), float(timeout), cutoff
        self.started = time.monotonic()

    def start(self) -> None:
        self.started = time.monotonic()

    def elapsed(self) -> float:
        """Seconds since the build started."""
        return time.monotonic() - self.started

    def _limit(self) -> float | None:
        limit = self.cutoff.limit(self.key) if self.cutoff is not None else None
        return limit if limit is not None and limit < self.timeout else None

    def cut_at(self) -> float:
        """When (``time.monotonic``) the cut-off stops this build; inf while only the timeout applies."""
        limit = self._limit()
        return math.inf if limit is None else self.started + limit

    def finished(self, result: BuildResult) -> BuildResult:
        """Report a build that came back (its time teaches the cut-off when it compiled something)."""
        if self.cutoff is not None and result.ok and not result.cached:
            self.cutoff.add(self.key, result.build_seconds)
        return result

    def stopped(self) -> BuildResult:
        """The result of a build stopped at its deadline: cut off (slow, not broken) or timed out."""
        seconds = self.elapsed()
        limit = self._limit()
        if limit is not None and seconds < self.timeout:
            assert self.cutoff is not None
            return BuildResult(error_kind=ErrorKind.BUILD_CUT_OFF, build_seconds=seconds, error_msg=(
                f"building took more than {limit:.3g} s ({self.cutoff.factor:g}x the median build of this "
                "task) and was stopped"))
        return BuildResult(error_kind=ErrorKind.BUILD_TIMEOUT, build_seconds=seconds,
                           error_msg=f"building took more than {self.timeout:g} s and was stopped")


class Builder(abc.ABC):
    """Builds candidates into shared libraries. Use as a context manager, or call :meth:`close`."""

    #: how many candidates it builds at once (the measurer sizes its pipeline by it)
    parallelism: int = 1
    #: seconds one candidate may take to build before it is stopped
    timeout: float = 30.0
    #: its workers are on several machines (a Ray cluster): the measurer then never builds while it times
    cluster: bool = False
    #: set by the measurer: a builder that reads it stops a build past ``cutoff.limit(key)`` as a
    #: ``build_cut_off`` and reports each successful build to ``cutoff.add`` as it finishes
    cutoff: BuildCutoff | None = None

    @abc.abstractmethod
    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """One result per input, in order; errors are results, not exceptions."""

    def remove(self, result: BuildResult) -> None:
        """Forget a library that is no longer needed (the measurer frees candidates once measured)."""
        import os

        if result.artifact_path:
            try:
                os.remove(result.artifact_path)
            except OSError:
                pass

    def close(self) -> None:  # noqa: B027 - a builder without workers has nothing to stop
        """Stop the workers and remove the libraries built (idempotent)."""

    def __enter__(self) -> Builder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["BuildClock", "BuildCutoff", "Builder"]
