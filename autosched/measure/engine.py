"""The measurement engine: build and run jobs, the dispatch loop, deadlines, cut-offs, turn-taking and
worker recycling, written once above the transports that carry calls to workers.

A job is one candidate's conversation with a worker, one call at a time (a method of
:class:`~autosched.measure.worker.BuildService` or :class:`~autosched.measure.worker.RunService` and its
arguments), each with the seconds its reply may take. A :class:`Transport` only knows workers: it sends a
call, says when the reply came, that the worker died or that the call raised, kills and restarts a worker,
and (Ray) knows when a worker's node is gone. :mod:`autosched.measure.local` carries the calls to worker
processes over a socket, :mod:`autosched.measure.ray_backend` to Ray actors.
"""

from __future__ import annotations

import abc
import glob
import math
import os
import shutil
import tempfile
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from autosched.measure.builder import BuildClock, BuildCutoff, Builder
from autosched.measure.data import TaskData
from autosched.measure.result import BuildResult, ErrorKind, MeasureInput, MeasureResult, ResultFlag
from autosched.measure.runner import LOAD_TIMEOUT, TURN_TIMEOUT, LimitFn, ResultCallback, RunConfig, Runner
from autosched.measure.worker import NEED_DATA
from autosched.shipment import task_state, workload_shipment

OK, DIED, FAILED = "ok", "died", "failed"  # how a call ended: a reply, its worker died, its code raised
TIMED_OUT, RECYCLED = "timed out", "recycled"  # why a worker is replaced (besides DIED)

#: a call a job makes: ``(method, args, seconds its reply may take)``
Call = tuple[str, tuple, float]


@dataclass
class Reply:
    """How one call ended: ``kind`` is OK (``value`` is what it returned), DIED or FAILED (``value`` says how)."""

    kind: str
    value: Any = None


class Slot:
    """One worker as the engine sees it: the transport's handle, where it runs, and what happened to it."""

    def __init__(self, handle: Any):
        self.handle = handle
        self.pid: int | None = None
        self.node: str | None = None
        self.jobs = 0  # jobs since it (re)started
        self.restarts = 0  # replaced after a crash or a missed deadline
        self.recycled = 0  # replaced after max_jobs jobs (see measure.builder.builds_per_worker)


class Transport(abc.ABC):
    """Workers of one role, and how calls reach them. Subclasses start the workers, carry calls and replies,
    and replace workers; which are idle, the count of their jobs and their recycling are kept here."""

    #: seconds a call may run before the engine asks whether its worker's node is still there, and again after
    node_check: float = math.inf

    def __init__(self, what: str, max_jobs: int | None = None):
        self.what, self.max_jobs = what, max_jobs  # ``what`` names them in messages ("builders")
        self.slots: list[Slot] = []
        self.idle: deque[Slot] = deque()
        self.closed = False

    @abc.abstractmethod
    def call(self, slot: Slot, method: str, *args: Any) -> Hashable:
        """Send one call to ``slot``'s worker; returns what :meth:`wait` names its reply by."""

    @abc.abstractmethod
    def wait(self, calls: list[Hashable], timeout: float) -> list[tuple[Hashable, Reply]]:
        """The calls among ``calls`` that ended within ``timeout`` seconds; meanwhile workers that finished
        starting join :attr:`idle`."""

    @abc.abstractmethod
    def replace(self, slot: Slot, why: str) -> None:
        """Give ``slot`` a fresh worker (it died, missed a deadline, or is recycled); it joins :attr:`idle`
        once it answers."""

    @abc.abstractmethod
    def starting(self) -> bool:
        """Whether a worker is on its way to :attr:`idle`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop every worker (idempotent)."""

    def lost(self, slot: Slot) -> bool:
        """Whether ``slot``'s worker is gone with its node (then it is dropped): no fault of the candidate."""
        return False

    def check(self) -> None:  # noqa: B027 - most transports have nothing to check
        """Raise when the workers cannot be reached at all, or one did not start in time."""

    def none_left(self) -> Exception:
        return RuntimeError(f"no {self.what} are left")

    @property
    def restarts(self) -> int:
        return sum(s.restarts for s in self.slots)

    @property
    def recycled(self) -> int:
        return sum(s.recycled for s in self.slots)

    @property
    def pids(self) -> set[int]:
        return {s.pid for s in self.slots if s.pid is not None}

    def restart(self, slot: Slot, why: str) -> None:
        if why == RECYCLED:
            slot.recycled += 1
        else:
            slot.restarts += 1
        slot.jobs = 0
        self.replace(slot, why)

    def job_done(self, slot: Slot) -> None:
        """A job ended on ``slot``: back to idle, or past ``max_jobs`` replaced by a fresh worker."""
        slot.jobs += 1
        if self.max_jobs and slot.jobs >= self.max_jobs:
            self.restart(slot, RECYCLED)
        else:
            self.idle.append(slot)


class Job:
    """One candidate's conversation with a worker: a call at a time, each with the seconds its reply may take."""

    def start(self) -> Call:
        raise NotImplementedError

    def handle(self, value: Any) -> Call | None:
        """Read one reply; the next call, or None when the job is finished."""
        raise NotImplementedError

    def timed_out(self) -> None:
        raise NotImplementedError

    def died(self, how: str) -> None:
        """Its worker died during a call (a crash the candidate caused)."""
        raise NotImplementedError

    def failed(self, msg: str) -> None:
        """The worker's code raised: a bug, not the candidate."""
        raise NotImplementedError

    def again(self) -> None:
        """Its worker's node is gone: the job starts afresh on another worker."""

    def cut_at(self) -> float:
        """A deadline sooner than the call's, which may move while the job runs (a build's cut-off)."""
        return math.inf


def dispatch(transport: Transport, jobs: Sequence[Job]) -> None:
    """Feed jobs to idle workers; enforce deadlines; replace workers that die or miss one; hand the jobs of a
    worker whose node is gone to the others. Raises what ``transport.check`` raises, and ``none_left`` when no
    worker is left for the jobs still to do."""
    pending = deque(jobs)
    active: dict[Hashable, list] = {}  # call -> [job, slot, deadline, when to ask whether its node is there]

    def send(job: Job, slot: Slot, call: Call) -> None:
        method, args, seconds = call
        now = time.monotonic()
        active[transport.call(slot, method, *args)] = [job, slot, now + seconds, now + transport.node_check]

    def elsewhere(job: Job) -> None:
        job.again()
        pending.appendleft(job)

    while pending or active:
        transport.check()
        while pending and transport.idle:
            job = pending.popleft()
            send(job, transport.idle.popleft(), job.start())
        if not active and not transport.starting():
            raise transport.none_left()
        now = time.monotonic()
        soon = min((min(d, c, j.cut_at()) for j, _, d, c in active.values()), default=now + 1.0)
        for call, reply in transport.wait(list(active), max(0.0, min(soon - now, 1.0))):
            job, slot, _, _ = active.pop(call)
            if reply.kind == DIED:
                if transport.lost(slot):
                    elsewhere(job)
                else:
                    job.died(reply.value)
                    transport.restart(slot, DIED)
            elif reply.kind == FAILED:
                job.failed(reply.value)
                transport.job_done(slot)
            else:
                nxt = job.handle(reply.value)
                if nxt is None:
                    transport.job_done(slot)
                else:
                    send(job, slot, nxt)
        now = time.monotonic()
        for call, (job, slot, deadline, check) in list(active.items()):
            deadline = min(deadline, job.cut_at())
            if now < min(deadline, check):
                continue
            # a call that runs long, or past its deadline, may be on a node that died (Ray says so only once
            # its GCS noticed, 15-30 s later): that is not the candidate's fault
            if transport.lost(slot):
                del active[call]
                elsewhere(job)
            elif now >= deadline:
                del active[call]
                job.timed_out()
                transport.restart(slot, TIMED_OUT)
            else:
                active[call][3] = now + transport.node_check


# ---------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------


def candidate_key(inp: MeasureInput) -> tuple:
    """Candidates with the same key build the same library: a batch builds each once."""
    return (inp.task.workload_key, str(inp.task.target), inp.trace.dumps())


class BuildJob(Job):
    """One ``build`` call, stopped at the builder's timeout or sooner at the task's build cut-off."""

    def __init__(self, index: int, inp: MeasureInput, timeout: float, results: list, cutoff: BuildCutoff | None):
        self.index, self.timeout, self.results = index, timeout, results
        self.args = (workload_shipment(inp.task), task_state(inp.task), inp.trace.to_json())
        self.clock = BuildClock(inp, timeout, cutoff)

    def start(self) -> Call:
        self.clock.start()
        return "build", self.args, self.timeout

    def cut_at(self) -> float:
        return self.clock.cut_at()

    def handle(self, value: Any) -> None:
        self.results[self.index] = self.clock.finished(value)

    def timed_out(self) -> None:
        self.results[self.index] = self.clock.stopped()

    def died(self, how: str) -> None:
        self.results[self.index] = BuildResult(error_kind=ErrorKind.COMPILE_ERROR, build_seconds=self.clock.elapsed(),
                                               error_msg=f"the compiler crashed its worker ({how})")

    def failed(self, msg: str) -> None:
        self.results[self.index] = BuildResult(error_kind=ErrorKind.UNKNOWN, error_msg=f"builder error: {msg}",
                                               build_seconds=self.clock.elapsed())


def own_cache_dir() -> str:
    """A fresh temporary directory for this process's libraries, named by its pid (see
    :func:`remove_cache_dirs_of`)."""
    return tempfile.mkdtemp(prefix=f"autosched-build-{os.getpid()}-")


def remove_cache_dirs_of(pid: int) -> None:
    """Remove the library directories that process ``pid``, now dead of a signal, left behind: it could not
    run the exit handlers that remove them."""
    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"autosched-build-{int(pid)}-*")):
        shutil.rmtree(path, ignore_errors=True)


def _close(transport: Transport | None, rmdir: str | None) -> None:
    if transport is not None:
        transport.close()
    if rmdir:
        shutil.rmtree(rmdir, ignore_errors=True)


class EngineBuilder(Builder):
    """A Builder whose candidates the engine dispatches to the workers ``make_pool(cache_dir)`` starts;
    identical candidates of a batch are built once. Libraries go to ``cache_dir`` (default: a fresh temporary
    directory, removed by :meth:`close` and at exit); ``stop_at_exit`` also stops the workers at exit (Ctrl-C,
    a forgotten close)."""

    def __init__(self, make_pool: Callable[[str], Transport], parallelism: int, timeout: float,
                 cache_dir: str | None, stop_at_exit: bool = True):
        self.parallelism, self.timeout = int(parallelism), float(timeout)
        self._own_dir = cache_dir is None
        self.cache_dir = cache_dir or own_cache_dir()
        self._closed = False
        self._pool = make_pool(self.cache_dir)
        self._finalizer = weakref.finalize(self, _close, self._pool if stop_at_exit else None,
                                           self.cache_dir if self._own_dir else None)

    @property
    def restarts(self) -> int:
        """How many times a worker was replaced (crashes and timeouts)."""
        return self._pool.restarts

    @property
    def worker_pids(self) -> list[int]:
        return [s.pid for s in self._pool.slots if s.pid is not None]

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        if self._closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        results: list[Any] = [None] * len(inputs)
        first: dict[tuple, int] = {}
        jobs = []
        for i, inp in enumerate(inputs):
            k = candidate_key(inp)
            if k not in first:
                first[k] = i
                jobs.append(BuildJob(i, inp, self.timeout, results, self.cutoff))
        dispatch(self._pool, jobs)
        for i, inp in enumerate(inputs):
            if results[i] is None:
                results[i] = results[first[candidate_key(inp)]]
        return results

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.close()
        self._finalizer()


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------


class RunJob(Job):
    """One candidate timed: ``load`` (with ``put_data`` first when the worker lacks the task's data), then
    ``take_turn`` if another process times on that machine, ``warmup`` (checked against the reference, stopped
    past the candidate's limit) and ``time``. A result carries the build's flags, and ``unchecked`` when its
    output was not compared."""

    def __init__(self, index: int, inp: MeasureInput, br: BuildResult, runner: EngineRunner,
                 limits: LimitFn | None, results: list, on_result: ResultCallback | None):
        self.index, self.inp, self.br, self.runner = index, inp, br, runner
        self.limits, self.results, self.on_result = limits, results, on_result
        self.data: TaskData = runner.task_data(inp.task)
        self.cfg: RunConfig = runner.config
        self.limit = self.cfg.timeout
        self.phase, self.step, self.foreign_turn, self.t0 = "loading", "", False, time.perf_counter()

    def start(self) -> Call:
        self.t0 = time.perf_counter()
        self.limit = self.runner.limit_for(self.inp, self.limits)  # now: limits see the best time up to here
        self.phase, self.foreign_turn = "loading", False
        return self._call("load", self.data.key, self.br.artifact_path, self.br.artifact)

    def _call(self, method: str, *args: Any) -> Call:
        self.step = method
        if method == "take_turn":
            return method, args, TURN_TIMEOUT + 30.0
        if method == "warmup":
            self.phase = "warming up"
            return method, args, 1.0 + 1.5 * self.limit * (self.cfg.warmup + 1)  # with slack for loading
        return method, args, LOAD_TIMEOUT

    def _warmup(self) -> Call:
        return self._call("warmup", self.cfg.warmup, self.limit, self.cfg.check)

    def handle(self, value: Any) -> Call | None:
        cfg = self.cfg
        if self.step == "load":
            if value == NEED_DATA:
                return self._call("put_data", self.runner.ship(self.data))
            err, busy_with = value
            if err is not None:
                return self.finish(kind=err[0], msg=err[1])
            if busy_with is None:
                return self._warmup()
            self.phase = "waiting for the machine"
            # the runner's own workers take turns too (several per machine, or a loopback cluster): no other tuner
            self.foreign_turn = not self.runner.own_turn(busy_with)
            if self.foreign_turn:
                self.runner.waiting(busy_with)
            return self._call("take_turn", TURN_TIMEOUT)
        if self.step == "put_data":
            return self._call("load", self.data.key, self.br.artifact_path, self.br.artifact)
        if self.step == "take_turn":
            if self.foreign_turn:
                self.runner.waited(*value)
            return self._warmup()
        if self.step == "warmup":
            if isinstance(value, tuple):
                return self.finish(kind=value[0], msg=value[1])
            self.phase = "timing"
            self.step = "time"
            return ("time", (cfg.number, cfg.repeat, cfg.min_repeat_ms, cfg.flush_cache),
                    cfg.deadline_after_warmup(value))
        costs, inside, flags, machine = value
        if costs:
            return self.finish(costs=costs, inside=inside, flags=flags, machine=machine)
        return self.finish(kind=ErrorKind.UNKNOWN, msg="the runner returned no timings")

    def finish(self, costs: list[float] | None = None, kind: str | None = None, msg: str = "",
               inside: float | None = None, flags: list[str] | None = None,
               machine: dict[str, str] | None = None) -> None:
        elapsed = time.perf_counter() - self.t0
        if kind == ErrorKind.RUN_TIMEOUT and self.limit < self.cfg.timeout:
            # the limit was the measurer's multiple of the best so far, not the absolute one: slow, not broken
            kind = ErrorKind.CUT_OFF
            msg = f"cut off at {self.limit:.3g} s per run (a multiple of the best so far): {msg}"
        flags = list(self.br.flags) + list(flags or [])
        if costs and (not self.cfg.check or self.data.reference is None):
            flags.append(ResultFlag.UNCHECKED)
        if costs and self.cfg.flush_cache:  # a cold-cache time: the database compares it with its kind only
            flags.append(ResultFlag.COLD)
        res = MeasureResult(costs=list(costs or []), error_kind=kind, error_msg=msg,
                            build_seconds=self.br.build_seconds,
                            run_seconds=elapsed if inside is None else inside, flags=flags,
                            machine=dict(machine or {}))
        self.results[self.index] = res
        if self.on_result is not None:
            self.on_result(self.index, res)

    def timed_out(self) -> None:
        if self.phase == "loading":
            self.finish(kind=ErrorKind.UNKNOWN, msg=f"loading the library took more than {LOAD_TIMEOUT:g} s")
        elif self.phase == "waiting for the machine":
            self.finish(kind=ErrorKind.UNKNOWN,
                        msg=f"another process kept this machine's measurement turn over {TURN_TIMEOUT:g} s")
        elif self.phase == "warming up":
            self.finish(kind=ErrorKind.RUN_TIMEOUT,
                        msg=f"one run took more than {self.limit:.3g} s; its worker was stopped")
        else:
            self.finish(kind=ErrorKind.RUN_TIMEOUT, msg="the timing loop overran its deadline; its worker was stopped")

    def died(self, how: str) -> None:
        self.finish(kind=ErrorKind.RUNTIME_CRASH, msg=f"the kernel crashed its worker while {self.phase} ({how})")

    def failed(self, msg: str) -> None:
        self.finish(kind=ErrorKind.UNKNOWN, msg=f"runner error: {msg}")


class EngineRunner(Runner):
    """A Runner whose candidates the engine dispatches to run workers, one candidate per worker at a time.
    Subclasses say which workers time a target (:meth:`pool_for`) and how task data travels (:meth:`ship`)."""

    def __init__(self, config: RunConfig | None = None, seed: int = 0):
        super().__init__(config, seed)
        self._pools: OrderedDict[str, Transport] = OrderedDict()
        self._closed = False

    @abc.abstractmethod
    def pool_for(self, target: Any) -> Transport:
        """The workers that time candidates of ``target``."""

    def ship(self, data: TaskData) -> Any:
        """What ``put_data`` sends for ``data`` (the data itself; Ray: a reference to one stored copy)."""
        return data

    def own_turn(self, holder: str) -> bool:
        """Whether the holder of a machine's measurement turn ("pid N ...") is one of this runner's workers."""
        pid = holder.split()[1] if holder.startswith("pid ") else ""
        return pid.isdigit() and any(int(pid) in p.pids for p in self._pools.values())

    @property
    def restarts(self) -> int:
        """How many times a worker was replaced (crashes and timeouts)."""
        return sum(p.restarts for p in self._pools.values())

    @property
    def worker_pids(self) -> list[int]:
        return [s.pid for p in self._pools.values() for s in p.slots if s.pid is not None]

    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult], *,
            limits: LimitFn | None = None, on_result: ResultCallback | None = None) -> list[MeasureResult]:
        if self._closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        results, to_time = self._split_built(inputs, build_results, on_result)
        by_pool: dict[int, tuple[Transport, list[Job]]] = {}
        for i, inp, br in to_time:
            pool = self.pool_for(inp.task.target)
            by_pool.setdefault(id(pool), (pool, []))[1].append(RunJob(i, inp, br, self, limits, results, on_result))
        for pool, jobs in by_pool.values():
            dispatch(pool, jobs)
        return results

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for p in self._pools.values():
            p.close()


__all__ = ["BuildJob", "EngineBuilder", "EngineRunner", "Job", "Reply", "RunJob", "Slot", "Transport",
           "candidate_key", "dispatch", "own_cache_dir", "remove_cache_dirs_of"]
