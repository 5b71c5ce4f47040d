"""The Runner interface: time built candidates on the target and check their output.

A Runner takes the inputs and their :class:`BuildResult` and returns one
:class:`MeasureResult` per input, in order: seconds per run for each repeat,
or an error kind. A candidate that failed to build passes its build error
through. A kernel that crashes or hangs kills only the worker running it; the
result says ``runtime_crash`` or ``run_timeout``, the worker is replaced, and
the batch goes on. Implementations:
:class:`~autosched.measure.local.LocalRunner` (worker processes) and
:class:`~autosched.measure.ray_backend.RayRunner` (Ray actors), both driven by
:mod:`autosched.measure.engine`.

Each task's inputs are seeded random arrays and its output is checked against
a reference computed once per task (:mod:`autosched.measure.data`).
"""

from __future__ import annotations

import abc
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from autosched.measure.data import TaskData, prepare_task_data
from autosched.measure.result import BuildResult, MeasureInput, MeasureResult

log = logging.getLogger("autosched.measure")

MAX_TASKS = 32  # tasks whose inputs and reference a runner keeps (a model has a few dozen)

#: ``limits(input) -> seconds or None``: the longest one run of this candidate may take
LimitFn = Callable[[MeasureInput], "float | None"]
#: ``on_result(index, result)``: called as each candidate finishes (progress bars, adaptive limits)
ResultCallback = Callable[[int, MeasureResult], None]


@dataclass(frozen=True)
class RunConfig:
    """How candidates are timed.

    Each candidate runs ``warmup`` times (the first run is checked against the
    reference), then ``repeat`` times ``number`` runs, with ``number`` raised
    until one repeat lasts ``min_repeat_ms``; ``costs`` are seconds per run for
    each repeat. ``flush_cache`` evicts the kernel's arguments from the CPU
    caches before each repeat (use with ``number=1, min_repeat_ms=0`` to time
    cold-cache runs). ``timeout`` caps one run in seconds; the measurer lowers
    it to a multiple of the best time so far. ``num_threads`` (default: the
    target's ``num_cores``) is how many threads parallel loops use.
    ``reference_timeout`` bounds computing a reference by running the untransformed
    schedule (workloads without a numpy reference); default ``10 + 3 * timeout``.
    """

    number: int = 1
    repeat: int = 5
    min_repeat_ms: float = 10.0
    warmup: int = 1
    flush_cache: bool = False
    timeout: float = 10.0
    check: bool = True
    rtol: float | None = None
    atol: float | None = None
    num_threads: int | None = None
    reference_timeout: float | None = None

    def __post_init__(self) -> None:
        if self.number < 1 or self.repeat < 1 or self.warmup < 1:
            raise ValueError(f"RunConfig: number, repeat and warmup must be >= 1, got {self}")
        if self.timeout <= 0 or self.min_repeat_ms < 0:
            raise ValueError(f"RunConfig: timeout must be > 0 and min_repeat_ms >= 0, got {self}")

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def deadline_after_warmup(self, warm: float) -> float:
        """Seconds the timing loop may take once one run is known to take ``warm`` seconds (generous)."""
        per_repeat = max(self.number * warm, self.min_repeat_ms / 1e3) + warm
        return 5.0 + 4.0 * self.repeat * per_repeat + (0.5 * self.repeat if self.flush_cache else 0.0)


LOAD_TIMEOUT = 60.0  # seconds to receive a task's data and load a library
TURN_TIMEOUT = 600.0  # seconds a worker waits for another process's measurements on its machine


class Runner(abc.ABC):
    """Times built candidates and checks their outputs. Use as a context manager, or call :meth:`close`."""

    def __init__(self, config: RunConfig | None = None, seed: int = 0):
        self.config = config or RunConfig()
        self.seed = seed
        self._task_data: OrderedDict[tuple, TaskData] = OrderedDict()
        self.turn_waits = 0  # candidates that waited for another process's measurements on their machine
        self.turn_wait_seconds = 0.0
        self._said_waiting = False

    def waiting(self, who: str) -> None:
        """A worker waits for another process's measurement turn: say so once per runner."""
        if not self._said_waiting:
            self._said_waiting = True
            log.warning("another autosched process is timing kernels on this machine (%s): measurements take "
                        "turns, so this run waits for them (builds go on)", who or "holder unknown")

    def waited(self, seconds: float, who: str = "") -> None:
        self.turn_waits += 1
        self.turn_wait_seconds += float(seconds)

    @abc.abstractmethod
    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult], *,
            limits: LimitFn | None = None, on_result: ResultCallback | None = None) -> list[MeasureResult]:
        """One result per input, in order. ``limits`` may lower the per-run time limit of a candidate below
        ``config.timeout`` (adaptive timeouts); ``on_result`` hears of each result as soon as it exists."""

    def _split_built(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult],
                     on_result: ResultCallback | None) -> tuple[list[Any], list[tuple[int, MeasureInput, BuildResult]]]:
        """``(results, to_time)``: a result for each candidate that failed to build (told to ``on_result`` at
        once) and ``(index, input, build)`` of the built ones, which the runner times."""
        if len(inputs) != len(build_results):
            raise ValueError(f"run: {len(inputs)} inputs but {len(build_results)} build results")
        results: list[Any] = [None] * len(inputs)
        to_time = []
        for i, (inp, br) in enumerate(zip(inputs, build_results)):
            if br.ok:
                to_time.append((i, inp, br))
                continue
            results[i] = br.as_measure_result()
            if on_result is not None:
                on_result(i, results[i])
        return results, to_time

    def task_data(self, task: Any) -> TaskData:
        """Seeded inputs and reference output of ``task``, computed once per runner."""
        cfg = self.config
        key = (task.workload_key, str(task.target), self.seed, cfg.check, cfg.rtol, cfg.atol, cfg.num_threads)
        data = self._task_data.get(key)
        if data is None:
            ref_timeout = cfg.reference_timeout
            if ref_timeout is None:
                ref_timeout = 10.0 + 3.0 * cfg.timeout
            data = prepare_task_data(task, seed=self.seed, check=cfg.check, num_threads=cfg.num_threads,
                                     rtol=cfg.rtol, atol=cfg.atol, reference_timeout=ref_timeout)
            self._task_data[key] = data
            while len(self._task_data) > MAX_TASKS:
                self._task_data.popitem(last=False)
        self._task_data.move_to_end(key)
        return data

    def limit_for(self, inp: MeasureInput, limits: LimitFn | None) -> float:
        lim = limits(inp) if limits is not None else None
        return self.config.timeout if lim is None else max(1e-6, min(self.config.timeout, lim))

    def close(self) -> None:  # noqa: B027 - a runner without workers has nothing to stop
        """Stop the workers (idempotent)."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["LimitFn", "ResultCallback", "RunConfig", "Runner"]
