"""The Builder interface: turn candidates into loadable shared libraries, in parallel.

A Builder takes a batch of :class:`MeasureInput` and returns one
:class:`BuildResult` per input, in order. It never raises for a bad candidate:
an invalid trace, a lowering or compile error, or a build that runs past
``timeout`` become results with an :class:`ErrorKind`. Implementations:
:class:`~autosched.measure.local.LocalBuilder` (a process pool) and
:class:`~autosched.measure.ray_backend.RayBuilder` (Ray actors).
"""

from __future__ import annotations

import abc
import os
from collections.abc import Sequence

from autosched.measure.result import BuildResult, MeasureInput

RECYCLE_ENV = "AUTOSCHED_RECYCLE_BUILDS"


def builds_per_worker() -> int:
    """How many candidates a build worker compiles before it is replaced by a fresh one
    (``$AUTOSCHED_RECYCLE_BUILDS``, default 64; 0 never). LLVM's optimisation pipeline, as llvmlite runs
    it, keeps about 0.7 MB per compiled module that nothing in the process can free (measured on conv2d
    candidates, 1-2 MB in a Ray actor), so a worker that never restarted grew by gigabytes over a long
    tuning run; a restart costs 1-3 s, about a tenth of 64 builds."""
    return max(0, int(os.environ.get(RECYCLE_ENV, "64")))


class Builder(abc.ABC):
    """Builds candidates into shared libraries. Use as a context manager, or call :meth:`close`."""

    #: how many candidates it builds at once (the measurer sizes its pipeline by it)
    parallelism: int = 1
    #: seconds one candidate may take to build before it is stopped
    timeout: float = 30.0
    #: its workers are on several machines (a Ray cluster): the measurer then never builds while it times
    cluster: bool = False

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


__all__ = ["Builder"]
