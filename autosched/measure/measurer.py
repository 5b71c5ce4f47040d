"""The measurer: what a tuning loop calls, batch by batch, to turn candidates into results.

:class:`Measurer` owns a Builder and a Runner and adds what a long run needs:

* **adaptive timeouts**: once a task has a best time, one run of a later
  candidate may take at most ``timeout_factor`` times it (never more than
  ``RunConfig.timeout``); slower ones are cut off as ``run_timeout``;
  likewise, once a task has ``BUILD_CUTOFF_MIN_BUILDS`` builds (those of the batch
  in flight count as they finish), a build may take at most ``build_cutoff_factor``
  times their median (at least ``BUILD_CUTOFF_FLOOR`` s, never more than the
  builder's timeout); slower ones are stopped as ``build_cut_off`` (on conv2d,
  every candidate that took 5-30 s to build ran at under 40% of the speed of the
  fastest kernels, and one of them held its whole batch);
* **pipelining**: when this machine has cores to spare for it, the next chunk
  is built while the current one is timed (never on a cluster, whose builders
  are on the nodes that time too); and the caller's own work can run while a
  batch builds (``measure(inputs, during_build=...)``: the tuning loop proposes
  its next batch there), never while a candidate is timed;
* **the best few, re-measured**: it keeps each task's ``top_k`` candidates and
  :meth:`Measurer.remeasure_top` times them again, longer, before one is
  declared the best; the spread of each measurement stays in its result;
* **failing loudly**: a batch in which every candidate fails logs the most
  common error kinds with an example message each, and after
  ``max_consecutive_failures`` failures in a row :class:`TooManyFailures`
  stops the run with that summary.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from autosched.errors import AutoschedError
from autosched.measure.builder import BuildCutoff, Builder
from autosched.measure.result import BuildResult, MeasureInput, MeasureResult, summarize_errors
from autosched.measure.runner import RunConfig, Runner
from autosched.result import ErrorKind, ResultFlag

#: a candidate whose run takes this many times the best so far is cut off (the default of ``timeout_factor``)
TIMEOUT_FACTOR = 10.0

log = logging.getLogger("autosched.measure")

BACKEND_ENV = "AUTOSCHED_MEASURE_BACKEND"
BUILD_CUTOFF_MIN_BUILDS = 3  # successful builds of a task (this batch's included) before its builds are cut off
BUILD_CUTOFF_FLOOR = 2.0  # seconds a build is always allowed


class TooManyFailures(AutoschedError):
    """The last candidates all failed: ``summary`` says how; ``results`` are the last batch's results."""

    def __init__(self, message: str, summary: str, results: list[MeasureResult]):
        super().__init__(message)
        self.summary = summary
        self.results = results


def default_backend() -> str:
    """``$AUTOSCHED_MEASURE_BACKEND`` if set, else ``ray`` when Ray is installed, else ``local``."""
    env = os.environ.get(BACKEND_ENV)
    if env:
        return env
    try:
        import importlib.util

        return "ray" if importlib.util.find_spec("ray") is not None else "local"
    except (ImportError, ValueError):
        return "local"


def make_builder_runner(backend: str | None = None, *, config: RunConfig | None = None,
                        n_builders: int | None = None, build_timeout: float = 30.0, seed: int = 0,
                        address: str | None = None) -> tuple[Builder, Runner]:
    """A Builder and a Runner of one backend: ``"ray"`` (default when installed) or ``"local"``."""
    backend = backend or default_backend()
    if backend == "ray":
        try:
            from autosched.measure.ray_backend import RayBuilder, RayRunner
        except ImportError as e:
            raise ImportError(f"the ray backend needs Ray ({e}): pip install ray, or use backend='local'") \
                from e
        builder = RayBuilder(n_parallel=n_builders, timeout=build_timeout, address=address)
        try:
            runner = RayRunner(config, seed=seed, address=address)
        except BaseException:
            builder.close()
            raise
        return builder, runner
    if backend == "local":
        from autosched.measure.local import LocalBuilder, LocalRunner

        builder = LocalBuilder(n_parallel=n_builders, timeout=build_timeout)
        return builder, LocalRunner(config, seed=seed)
    raise ValueError(f"unknown measurement backend {backend!r}; use 'ray' or 'local'")


@dataclass
class MeasureStats:
    """Where a measurer's time went (wall seconds in this process; worker seconds summed over workers)."""

    candidates: int = 0
    measured: int = 0
    batches: int = 0
    wall_seconds: float = 0.0
    build_wall_seconds: float = 0.0  # waiting for the builder (not overlapped with runs)
    run_wall_seconds: float = 0.0  # waiting for the runner
    build_seconds: float = 0.0  # inside builders, summed
    run_seconds: float = 0.0  # inside runners, per candidate from dispatch to result, summed
    builds_cached: int = 0
    builds_cut_off: int = 0  # stopped at build_cutoff_factor x the task's median build
    #: in the caller's ``during_build`` work while the batch built (not in wall_seconds: the caller's time;
    #: build_wall_seconds counts only the wait for builds that outlasted it)
    during_build_seconds: float = 0.0

    @property
    def candidates_per_second(self) -> float:
        return self.candidates / self.wall_seconds if self.wall_seconds > 0 else 0.0


@dataclass
class _Entry:
    cost: float
    seq: int
    inp: MeasureInput
    result: MeasureResult
    build: BuildResult


class Measurer:
    """Builds and measures batches of candidates; see the module docstring for what it adds.

    >>> with Measurer(backend="local") as m:                    # doctest: +SKIP
    ...     results = m.measure([MeasureInput(task, trace) for trace in traces])
    ...     ranking = m.remeasure_top()
    """

    def __init__(self, builder: Builder | None = None, runner: Runner | None = None, *,
                 backend: str | None = None, config: RunConfig | None = None, n_builders: int | None = None,
                 build_timeout: float = 30.0, timeout_factor: float = TIMEOUT_FACTOR, build_cutoff_factor: float = 10.0,
                 top_k: int = 3,
                 max_consecutive_failures: int = 128, remeasure_config: RunConfig | None = None,
                 overlap: bool | None = None, keep_artifacts: bool = False, seed: int = 0,
                 address: str | None = None):
        if (builder is None) != (runner is None):
            raise ValueError("give both a builder and a runner, or neither (then backend= picks them)")
        if builder is None:
            builder, runner = make_builder_runner(backend, config=config, n_builders=n_builders,
                                                  build_timeout=build_timeout, seed=seed, address=address)
            self._own = True
        else:
            self._own = False
            if config is not None:
                runner.config = config
        assert runner is not None
        self.builder: Builder = builder
        self.runner: Runner = runner
        if timeout_factor <= 1:
            raise ValueError(f"timeout_factor must be > 1, got {timeout_factor}")
        self.timeout_factor = float(timeout_factor)
        if build_cutoff_factor and build_cutoff_factor <= 1:
            raise ValueError(f"build_cutoff_factor must be > 1 (or 0: no cut-off), got {build_cutoff_factor}")
        self.build_cutoff_factor = float(build_cutoff_factor)
        self.cutoff = BuildCutoff(self.build_cutoff_factor, BUILD_CUTOFF_FLOOR, BUILD_CUTOFF_MIN_BUILDS)
        self.builder.cutoff = self.cutoff
        self.top_k = int(top_k)
        self.max_consecutive_failures = int(max_consecutive_failures)
        base = self.runner.config
        # longer repeats; a cold-cache time stays one run after each flush (more repeats instead), or the
        # re-measure would time warm runs and rank them with the run's cold ones
        self.remeasure_config = remeasure_config or (
            base.replace(repeat=max(3 * base.repeat, 10)) if base.flush_cache and base.number == 1
            and base.min_repeat_ms == 0 else
            base.replace(repeat=max(2 * base.repeat, 5), min_repeat_ms=max(4 * base.min_repeat_ms, 40.0)))
        self.overlap = overlap
        self.keep_artifacts = keep_artifacts
        self.stats = MeasureStats()
        self.consecutive_failures = 0
        self._recent_failures: deque[MeasureResult] = deque(maxlen=max(1, self.max_consecutive_failures))
        self._top: dict[tuple, list[_Entry]] = {}
        self._seq = 0
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    # -- the adaptive limit and the record of the best --

    @staticmethod
    def _key(task: Any) -> tuple:
        return (task.workload_key, str(task.target))

    def best_cost(self, task: Any) -> float | None:
        """The best seconds per run measured so far for ``task`` (None before the first success)."""
        top = self._top.get(self._key(task))
        return top[0].cost if top else None

    def best(self, task: Any) -> tuple[MeasureInput, MeasureResult] | None:
        """The best candidate of ``task`` so far and its result."""
        top = self._top.get(self._key(task))
        return (top[0].inp, top[0].result) if top else None

    def top(self, task: Any) -> list[tuple[MeasureInput, MeasureResult]]:
        """The ``top_k`` best candidates of ``task`` so far, best first."""
        return [(e.inp, e.result) for e in self._top.get(self._key(task), [])]

    def _limit(self, inp: MeasureInput) -> float | None:
        best = self.best_cost(inp.task)
        return None if best is None else self.timeout_factor * best

    def build_limit(self, inputs: Sequence[MeasureInput]) -> float | None:
        """Seconds a build of these candidates may take now before it is cut off (the largest over their
        tasks; see :class:`~autosched.measure.builder.BuildCutoff`); None while a task has too few builds for
        a median, or when the cut-off is off."""
        limits = [self.cutoff.limit(BuildCutoff.key(inp)) for inp in inputs]
        return None if not limits or None in limits else max(x for x in limits if x is not None)

    def _build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """The builder's results; a builder that does not report its builds to the cut-off as they finish
        has them reported here, once the batch is built."""
        added = self.cutoff.added
        builds = self.builder.build(inputs)
        if self.cutoff.added == added:
            for inp, b in zip(inputs, builds):
                if b.ok and not b.cached:
                    self.cutoff.add(BuildCutoff.key(inp), b.build_seconds)
        self.stats.builds_cut_off += sum(b.error_kind == ErrorKind.BUILD_CUT_OFF for b in builds)
        return builds

    def _record(self, inp: MeasureInput, res: MeasureResult, build: BuildResult) -> None:
        self.stats.candidates += 1
        if res.ok:
            self.stats.measured += 1
            self.consecutive_failures = 0
            self._recent_failures.clear()
            if self.top_k > 0:
                self._seq += 1
                top = self._top.setdefault(self._key(inp.task), [])
                top.append(_Entry(res.cost, self._seq, inp, res, build))
                top.sort(key=lambda e: (e.cost, e.seq))
                del top[self.top_k:]
        else:
            self.consecutive_failures += 1
            self._recent_failures.append(res)

    # -- measuring --

    def _should_overlap(self, inputs: Sequence[MeasureInput]) -> bool:
        if self.overlap is not None:
            return self.overlap
        if self.builder.cluster:
            # builders are on every node and timings on the nodes of the target's CPU: the next chunk would
            # build beside a timing, and this machine's cores say nothing of the nodes'
            return False
        if len(inputs) <= self.builder.parallelism:
            return False
        threads = self.runner.config.num_threads or max(inp.task.target.num_cores for inp in inputs)
        return self.builder.parallelism + threads <= (os.cpu_count() or 1)

    @property
    def accepts_during_build(self) -> bool:
        """True when the caller's work beside a batch's builds costs the builds nothing, so the tuning loop
        should pass ``during_build``: the builders are on a cluster, or fewer than this machine's cores. Not
        when they use every core (the local default): on 2 cores with 2 builders, 3 s of search in this
        process made 15 conv2d builds take 6.4-7.0 s instead of 2.8 s, more than the search took alone."""
        return bool(self.builder.cluster) or self.builder.parallelism < (os.cpu_count() or 1)

    def measure(self, inputs: Iterable[MeasureInput],
                during_build: Callable[[], None] | None = None) -> list[MeasureResult]:
        """Build and time a batch; one result per input, in order.

        ``during_build``: the caller's own work, called in this thread once the batch (its first chunk, when
        chunks are pipelined) is handed to the builders, and before any candidate is timed: the builders'
        worker processes compile meanwhile, and no timing waits on it or runs beside it (timing starts once
        it returns and the builds are done). Called even when ``inputs`` is empty; an exception it raises
        propagates once the builds it overlapped are done, before anything is timed.

        Raises :class:`TooManyFailures` (after the batch, with its results
        attached) once ``max_consecutive_failures`` candidates in a row failed.
        """
        if self._closed:
            raise RuntimeError("this Measurer is closed")
        inputs = list(inputs)
        if not inputs:
            if during_build is not None:
                during_build()
            return []
        t0 = time.perf_counter()
        caller = 0.0  # seconds in during_build: the caller's, not this measurer's

        def build_meanwhile(fut: Any) -> list[BuildResult]:
            """The builds of ``fut``, with ``during_build`` run while they compile."""
            nonlocal caller
            tc = time.perf_counter()
            try:
                during_build()  # type: ignore[misc]
            finally:
                caller = time.perf_counter() - tc
                self.stats.during_build_seconds += caller
                chunk_builds = fut.result()  # the builds finish (or fail) before an error of the caller's goes up
            return chunk_builds
        results: list[Any] = [None] * len(inputs)
        builds: list[Any] = [None] * len(inputs)

        def run_chunk(offset: int, chunk: Sequence[MeasureInput], chunk_builds: list[BuildResult]) -> None:
            builds[offset:offset + len(chunk)] = chunk_builds

            def on_result(i: int, res: MeasureResult) -> None:
                results[offset + i] = res
                self._record(chunk[i], res, chunk_builds[i])

            t1 = time.perf_counter()
            self.runner.run(chunk, chunk_builds, limits=self._limit, on_result=on_result)
            self.stats.run_wall_seconds += time.perf_counter() - t1

        if self._should_overlap(inputs):
            size = max(2 * self.builder.parallelism, 4)
            chunks = [(i, inputs[i:i + size]) for i in range(0, len(inputs), size)]
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="autosched-build")
            tb = time.perf_counter()
            fut = self._executor.submit(self._build, chunks[0][1])
            for n, (offset, chunk) in enumerate(chunks):
                tw = time.perf_counter()
                chunk_builds = build_meanwhile(fut) if n == 0 and during_build is not None else fut.result()
                self.stats.build_wall_seconds += time.perf_counter() - (tb + caller if n == 0 else tw)
                if n + 1 < len(chunks):
                    fut = self._executor.submit(self._build, chunks[n + 1][1])
                run_chunk(offset, chunk, chunk_builds)
        elif during_build is not None:  # the builds in a thread (waiting on the builders), the caller's work here
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="autosched-build")
            tb = time.perf_counter()
            all_builds = build_meanwhile(self._executor.submit(self._build, inputs))
            self.stats.build_wall_seconds += time.perf_counter() - tb - caller
            run_chunk(0, inputs, all_builds)
        else:
            tb = time.perf_counter()
            all_builds = self._build(inputs)
            self.stats.build_wall_seconds += time.perf_counter() - tb
            run_chunk(0, inputs, all_builds)

        for i, res in enumerate(results):  # a runner that skipped on_result for some input
            if res is None:
                raise RuntimeError(f"{type(self.runner).__name__} returned no result for input {i}")
        self.stats.batches += 1
        self.stats.wall_seconds += time.perf_counter() - t0 - caller
        self.stats.build_seconds += sum(b.build_seconds for b in builds if not b.cached)
        self.stats.builds_cached += sum(1 for b in builds if b.cached)
        self.stats.run_seconds += sum(r.run_seconds for r in results)
        self._free(builds)
        if not any(r.ok for r in results):
            if all(r.error_kind in ErrorKind.NOT_FAULTS for r in results):  # measured: all far too slow
                log.info("every candidate of this batch was cut off: far slower than the best")
            else:
                log.warning("no candidate of this batch could be measured: %s", summarize_errors(results))
        if self.max_consecutive_failures > 0 and self.consecutive_failures >= self.max_consecutive_failures:
            summary = summarize_errors(self._recent_failures)
            raise TooManyFailures(
                f"measurement stopped: the last {self.consecutive_failures} candidates all failed "
                f"(max_consecutive_failures={self.max_consecutive_failures}). {summary}", summary, results)
        return results

    def _free(self, builds: Sequence[BuildResult]) -> None:
        """Remove the libraries of this batch that are not among the best (the best are re-measured)."""
        if self.keep_artifacts:
            return
        keep = {e.build.artifact_path for top in self._top.values() for e in top}
        seen: set[str] = set()
        for b in builds:
            if b.ok and b.artifact_path not in keep and b.artifact_path not in seen:
                seen.add(b.artifact_path)  # type: ignore[arg-type]
                self.builder.remove(b)

    def remeasure_top(self, k: int | None = None) -> list[tuple[MeasureInput, MeasureResult]]:
        """Time each task's ``k`` (default ``top_k``) best candidates again with ``remeasure_config``.

        The new results replace the old ones (a candidate that now fails is
        dropped, with a warning) and the ranking is updated; returns every
        task's re-measured candidates, best first within each task. The dropped
        ones are in ``unconfirmed``: their first result, flagged noisy (a time
        that could not be had again is not one to trust).
        """
        k = self.top_k if k is None else k
        entries = [e for top in self._top.values() for e in top[:k]]
        self.unconfirmed: list[tuple[MeasureInput, MeasureResult]] = []
        if not entries:
            return []
        inputs = [e.inp for e in entries]
        saved = self.runner.config
        self.runner.config = self.remeasure_config
        try:
            builds = self.builder.build(inputs)
            results = self.runner.run(inputs, builds)
        finally:
            self.runner.config = saved
        out: list[tuple[MeasureInput, MeasureResult]] = []
        for e, b, r in zip(entries, builds, results):
            top = self._top[self._key(e.inp.task)]
            if r.ok:
                e.cost, e.result, e.build = r.cost, r, b
            else:
                log.info("a top candidate of %s failed when re-measured (%s: %s); dropping it",
                         e.inp.task, r.error_kind, r.error_msg)
                top.remove(e)
                flags = [*e.result.flags, *([ResultFlag.NOISY] if ResultFlag.NOISY not in e.result.flags else [])]
                self.unconfirmed.append((e.inp, replace(e.result, flags=flags)))
        for top in self._top.values():
            top.sort(key=lambda e: (e.cost, e.seq))
            out.extend((e.inp, e.result) for e in top[:k])
        return out

    def close(self) -> None:
        """Stop the workers this measurer started (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if self.builder.cutoff is self.cutoff:  # a builder that outlives this measurer cuts nothing of its own
            self.builder.cutoff = None
        if self._own:
            self.builder.close()
            self.runner.close()

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def measure(inputs: Iterable[MeasureInput], *, backend: str | None = None,
            **kwargs: Any) -> list[MeasureResult]:
    """Measure one batch with a fresh :class:`Measurer` (started and stopped here): for scripts and tests."""
    with Measurer(backend=backend, **kwargs) as m:
        return m.measure(inputs)


__all__ = ["MeasureStats", "Measurer", "TooManyFailures", "default_backend", "make_builder_runner", "measure"]
