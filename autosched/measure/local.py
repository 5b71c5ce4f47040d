"""Measurement without Ray: builder and runner worker processes on this machine.

Each worker is a fresh Python process (:mod:`autosched.measure.process`),
speaking small messages over a socket. The parent gives
every step a deadline: a worker that misses it is killed and a fresh one
started, and a worker that dies (a segfaulting kernel, a crashing compiler)
is noticed at once through its pipe and replaced. So a batch always
completes, with the bad candidates recorded as errors.

Workers ignore Ctrl-C (the parent stops them) and exit by themselves when the
parent disappears, so no process outlives the run.
"""

from __future__ import annotations

import math
import multiprocessing.connection
import os
import tempfile
import time
import weakref
from collections import deque
from collections.abc import Sequence
from typing import Any

from autosched.measure.builder import BuildClock, Builder, builds_per_worker
from autosched.measure.process import WorkerProcess, close_all
from autosched.measure.result import BuildResult, ErrorKind, MeasureInput, MeasureResult
from autosched.measure.runner import (
    LOAD_TIMEOUT,
    TURN_TIMEOUT,
    LimitFn,
    ResultCallback,
    RunConfig,
    RunJobOutcome,
    Runner,
)
from autosched.measure.worker import task_state, workload_shipment

STARTUP_TIMEOUT = 120.0  # seconds a fresh worker may take to import numpy/llvmlite and say it is ready


def default_builders() -> int:
    """Every core: builds never run beside a timing (the machine's measurement turn waits for the builds in
    flight, and holds new ones back), so the runner's cores are free while the batch builds."""
    return max(1, os.cpu_count() or 1)


# ---------------------------------------------------------------------------
# worker processes
# ---------------------------------------------------------------------------


class _Job:
    """One candidate's conversation with a worker; subclasses say what to send and how to read replies."""

    index: int
    timeout: float  # seconds allowed before the first reply

    def message(self) -> tuple:
        raise NotImplementedError

    def handle(self, tag: str, value: Any, proc: WorkerProcess) -> float | None:
        """Read one reply; returns the seconds allowed for the next one, or None when finished."""
        raise NotImplementedError

    def timed_out(self) -> None:
        raise NotImplementedError

    def died(self, how: str) -> None:
        raise NotImplementedError

    def cut_at(self) -> float:
        """A deadline sooner than the reply's, which may move while the job runs (a build's cut-off)."""
        return math.inf

    def ready(self) -> None:
        """Its worker started up and took the job: the job's own clock starts now."""


def _dispatch(procs: list[WorkerProcess], jobs: Sequence[_Job]) -> None:
    """Feed jobs to idle workers; enforce deadlines; replace workers that die or miss one."""
    pending = deque(jobs)
    active: dict[WorkerProcess, list] = {}  # proc -> [job, deadline]
    while pending or active:
        for proc in procs:
            if proc not in active and pending:
                job = pending.popleft()
                try:
                    proc.conn.send(job.message())
                except (OSError, BrokenPipeError):
                    proc.restart()
                    proc.conn.send(job.message())
                slack = 0.0 if proc.ready else STARTUP_TIMEOUT
                active[proc] = [job, time.monotonic() + job.timeout + slack]
        if not active:
            break
        now = time.monotonic()
        wait = max(0.0, min(min(d, j.cut_at()) for j, d in active.values()) - now)
        ready = multiprocessing.connection.wait([p.conn for p in active], timeout=min(wait, 1.0))
        now = time.monotonic()
        for proc in list(active):
            job, deadline = active[proc]
            deadline = min(deadline, job.cut_at())
            if proc.conn in ready:
                try:
                    tag, value = proc.conn.recv()
                except (EOFError, OSError):
                    job.died(proc.exit_description())
                    del active[proc]
                    proc.restart()
                    continue
                if tag == "ready":
                    proc.ready = True
                    active[proc][1] = time.monotonic() + job.timeout
                    job.ready()
                    continue
                nxt = job.handle(tag, value, proc)
                if nxt is None:
                    del active[proc]
                    proc.job_done()
                else:
                    active[proc][1] = time.monotonic() + nxt
            elif now >= deadline:
                job.timed_out()
                del active[proc]
                proc.restart()


# ---------------------------------------------------------------------------
# the builder
# ---------------------------------------------------------------------------


def _candidate_key(inp: MeasureInput) -> tuple:
    return (inp.task.workload_key, str(inp.task.target), inp.trace.dumps())


class _BuildJob(_Job):
    def __init__(self, index: int, inp: MeasureInput, timeout: float, results: list, cutoff: Any):
        self.index, self.timeout, self.results = index, timeout, results
        self.msg = ("build", (workload_shipment(inp.task), task_state(inp.task), inp.trace.to_json()))
        self.clock = BuildClock(inp, timeout, cutoff)

    def message(self) -> tuple:
        self.clock.start()
        return self.msg

    def ready(self) -> None:
        self.clock.start()

    def cut_at(self) -> float:
        return self.clock.cut_at()

    def handle(self, tag: str, value: Any, proc: WorkerProcess) -> float | None:
        if tag == "done":
            self.results[self.index] = self.clock.finished(value)
        else:
            self.results[self.index] = BuildResult(error_kind=ErrorKind.UNKNOWN, error_msg=str(value),
                                                   build_seconds=self.clock.elapsed())
        return None

    def timed_out(self) -> None:
        self.results[self.index] = self.clock.stopped()

    def died(self, how: str) -> None:
        self.results[self.index] = BuildResult(
            error_kind=ErrorKind.COMPILE_ERROR, error_msg=f"the compiler crashed its worker ({how})",
            build_seconds=self.clock.elapsed())


def _close_builder(procs: list[WorkerProcess], cache_dir: str | None) -> None:
    close_all(procs)
    if cache_dir:
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)


class LocalBuilder(Builder):
    """Builds candidates in ``n_parallel`` worker processes (default: every core, see :func:`default_builders`).

    Libraries go to ``cache_dir`` (default: a fresh temporary directory,
    removed by :meth:`close`), named by a hash of their LLVM IR and target, so
    identical candidates are compiled once.
    """

    def __init__(self, n_parallel: int | None = None, timeout: float = 30.0, cache_dir: str | None = None):
        self.parallelism = int(n_parallel or default_builders())
        if self.parallelism < 1:
            raise ValueError(f"LocalBuilder needs at least one worker, got n_parallel={n_parallel}")
        self.timeout = float(timeout)
        self._own_dir = cache_dir is None
        self.cache_dir = cache_dir or tempfile.mkdtemp(prefix="autosched-build-")
        init = {"cache_dir": self.cache_dir}
        self._procs = [WorkerProcess("build", init, f"autosched-builder-{i}", max_jobs=builds_per_worker())
                       for i in range(self.parallelism)]
        # also at interpreter exit (Ctrl-C, a forgotten close): stop the workers, remove our libraries
        self._finalizer = weakref.finalize(self, _close_builder, self._procs,
                                           self.cache_dir if self._own_dir else None)

    @property
    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._procs if p.pid is not None]

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        if self._finalizer is None or not self._finalizer.alive:
            raise RuntimeError("this LocalBuilder is closed")
        results: list[Any] = [None] * len(inputs)
        first: dict[tuple, int] = {}
        jobs = []
        for i, inp in enumerate(inputs):
            k = _candidate_key(inp)
            if k in first:
                continue
            first[k] = i
            jobs.append(_BuildJob(i, inp, self.timeout, results, self.cutoff))
        _dispatch(self._procs, jobs)
        for i, inp in enumerate(inputs):
            if results[i] is None:
                results[i] = results[first[_candidate_key(inp)]]
        return results

    def close(self) -> None:
        if self._finalizer.alive:
            self._finalizer()


# ---------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------


class _RunJob(RunJobOutcome, _Job):
    def __init__(self, index: int, inp: MeasureInput, br: BuildResult, runner: LocalRunner, limit: float,
                 results: list, on_result: ResultCallback | None):
        self.index, self.br, self.limit, self.results, self.on_result = index, br, limit, results, on_result
        self.runner = runner
        self.data = runner.task_data(inp.task)
        self.cfg = runner.config
        self.timeout = LOAD_TIMEOUT
        self.phase = "loading"
        self.t0 = time.perf_counter()

    def message(self) -> tuple:
        self.t0 = time.perf_counter()
        return ("run", {"key": self.data.key, "path": self.br.artifact_path, "artifact": self.br.artifact,
                        "config": self.cfg, "limit": self.limit})


    def handle(self, tag: str, value: Any, proc: WorkerProcess) -> float | None:
        if tag == "need_data":
            proc.conn.send(("data", self.data))
            return LOAD_TIMEOUT
        if tag == "loaded":
            if value is not None:
                self.finish(kind=value[0], msg=value[1])
                return None
            self.phase = "warming up"
            return self.warm_deadline()
        if tag == "waiting":
            self.phase = "waiting for the machine"
            self.runner.waiting(value)
            return TURN_TIMEOUT + 30.0
        if tag == "turn":
            self.runner.waited(*value)
            self.phase = "warming up"
            return self.warm_deadline()
        if tag == "warm":
            if isinstance(value, tuple):
                self.finish(kind=value[0], msg=value[1])
                return None
            self.phase = "timing"
            return self.cfg.deadline_after_warmup(value)
        if tag == "done":
            costs, inside, flags, machine = value
            if costs:
                self.finish(costs=costs, inside=inside, flags=flags, machine=machine)
            else:
                self.finish(kind=ErrorKind.UNKNOWN, msg="the worker returned no timings")
            return None
        self.finish(kind=ErrorKind.UNKNOWN, msg=f"runner worker error: {value}")
        return None


    def died(self, how: str) -> None:
        self.finish(kind=ErrorKind.RUNTIME_CRASH,
                    msg=f"the kernel crashed its worker ({how}) while {self.phase}")


class LocalRunner(Runner):
    """Times candidates in worker processes, one candidate at a time per worker (default one worker).

    A candidate that crashes or exceeds its time limit takes only its worker
    with it; a fresh worker is started and the batch goes on.
    """

    def __init__(self, config: RunConfig | None = None, n_parallel: int = 1, seed: int = 0,
                 **config_kw: Any):
        if config_kw:
            config = (config or RunConfig()).replace(**config_kw)
        super().__init__(config, seed)
        if n_parallel < 1:
            raise ValueError(f"LocalRunner needs at least one worker, got n_parallel={n_parallel}")
        self._procs = [WorkerProcess("run", {}, f"autosched-runner-{i}") for i in range(n_parallel)]
        self._finalizer = weakref.finalize(self, close_all, self._procs)

    @property
    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._procs if p.pid is not None]

    @property
    def restarts(self) -> int:
        """How many times a worker was replaced (crashes and timeouts)."""
        return sum(p.restarts for p in self._procs)

    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult], *,
            limits: LimitFn | None = None, on_result: ResultCallback | None = None) -> list[MeasureResult]:
        if not self._finalizer.alive:
            raise RuntimeError("this LocalRunner is closed")
        results, to_time = self._split_built(inputs, build_results, on_result)
        jobs: list[_Job] = [_LazyRunJob(i, inp, br, self, limits, results, on_result) for i, inp, br in to_time]
        _dispatch(self._procs, jobs)
        return results

    def close(self) -> None:
        if self._finalizer.alive:
            self._finalizer()


class _LazyRunJob(_RunJob):
    """A run job whose time limit is computed when it starts, so limits see the best time up to then."""

    def __init__(self, index: int, inp: MeasureInput, br: BuildResult, runner: LocalRunner,
                 limits: LimitFn | None, results: list, on_result: ResultCallback | None):
        self.inp, self.limits = inp, limits
        super().__init__(index, inp, br, runner, runner.config.timeout, results, on_result)

    def message(self) -> tuple:
        self.limit = self.runner.limit_for(self.inp, self.limits)
        return super().message()


__all__ = ["LocalBuilder", "LocalRunner", "default_builders"]
