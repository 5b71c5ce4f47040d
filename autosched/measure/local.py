"""Measurement without Ray: builder and runner worker processes on this machine.

The engine (:mod:`autosched.measure.engine`) drives them; each worker is a fresh
Python process (:mod:`autosched.measure.process`) reached over a socket. A
worker that misses a deadline is killed and a fresh one started, and a worker
that dies (a segfaulting kernel, a crashing compiler) is noticed at once through
its socket and replaced. So a batch always completes, with the bad candidates
recorded as errors.

Workers ignore Ctrl-C (the parent stops them) and exit by themselves when the
parent disappears, so no process outlives the run.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from autosched.measure.builder import builds_per_worker
from autosched.measure.engine import EngineBuilder, EngineRunner, Slot, Transport
from autosched.measure.process import ProcessTransport
from autosched.measure.runner import RunConfig


def default_builders() -> int:
    """Every core: builds never run beside a timing (the machine's measurement turn waits for the builds in
    flight, and holds new ones back), so the runner's cores are free while the batch builds."""
    return max(1, os.cpu_count() or 1)


class LocalBuilder(EngineBuilder):
    """Builds candidates in ``n_parallel`` worker processes (default: every core, see :func:`default_builders`).

    Libraries go to ``cache_dir`` (default: a fresh temporary directory,
    removed by :meth:`close`), named by a hash of their LLVM IR and target, so
    identical candidates are compiled once.
    """

    def __init__(self, n_parallel: int | None = None, timeout: float = 30.0, cache_dir: str | None = None):
        n = int(n_parallel or default_builders())
        if n < 1:
            raise ValueError(f"LocalBuilder needs at least one worker, got n_parallel={n_parallel}")
        super().__init__(lambda cache_dir: ProcessTransport("build", {"cache_dir": cache_dir}, "autosched-builder", n,
                                                            "builders", max_jobs=builds_per_worker()),
                         n, timeout, cache_dir)

    @property
    def _procs(self) -> list[Slot]:
        return self._pool.slots


class LocalRunner(EngineRunner):
    """Times candidates in worker processes, one candidate at a time per worker (default one worker).

    A candidate that crashes or exceeds its time limit takes only its worker
    with it; a fresh worker is started and the batch goes on.
    """

    def __init__(self, config: RunConfig | None = None, n_parallel: int = 1, seed: int = 0, **config_kw: Any):
        if config_kw:
            config = (config or RunConfig()).replace(**config_kw)
        super().__init__(config, seed)
        if n_parallel < 1:
            raise ValueError(f"LocalRunner needs at least one worker, got n_parallel={n_parallel}")
        pool = self._pools[""] = ProcessTransport("run", {}, "autosched-runner", n_parallel, "runners")
        weakref.finalize(self, pool.close)  # at exit too (Ctrl-C, a forgotten close)

    def pool_for(self, target: Any) -> Transport:
        return self._pools[""]


__all__ = ["LocalBuilder", "LocalRunner", "default_builders"]
