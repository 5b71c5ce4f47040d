"""Measurement without Ray: builder and runner worker processes on this machine.

The engine (:mod:`autosched.measure.engine`) drives them; each worker is a fresh
Python process (:mod:`autosched.process`) reached over a socket
(:class:`ProcessTransport`). A
worker that misses a deadline is killed and a fresh one started, and a worker
that dies (a segfaulting kernel, a crashing compiler) is noticed at once through
its socket and replaced. So a batch always completes, with the bad candidates
recorded as errors.

Workers ignore Ctrl-C (the parent stops them) and exit by themselves when the
parent disappears, so no process outlives the run.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import sys
import time
import weakref
from typing import Any

from autosched.measure.builder import builds_per_worker
from autosched.measure.engine import DIED, FAILED, OK, RECYCLED, EngineBuilder, EngineRunner, Reply, Slot, Transport
from autosched.measure.runner import RunConfig
from autosched.process import START_TRIES, STARTUP_TIMEOUT, WorkerProcess

BUILD_SERVICE = "autosched.measure.worker:BuildService"
RUN_SERVICE = "autosched.measure.worker:RunService"


class ProcessTransport(Transport):
    """``n`` worker processes serving ``service`` (``"module:Class"``, built with ``init``) on this machine,
    reached over their sockets; ``name`` names them."""

    def __init__(self, service: str, init: dict, name: str, n: int, what: str, max_jobs: int | None = None):
        super().__init__(what, max_jobs)
        self._starting: dict[Slot, list] = {}  # slot -> [deadline to say ready, deaths before that]
        self._broken: set[Slot] = set()  # a call could not be sent: its worker is gone
        for i in range(n):
            slot = Slot(WorkerProcess(service, init, f"{name}-{i}"))
            self.slots.append(slot)
            self._started(slot)

    def _started(self, slot: Slot, deaths: int = 0) -> None:
        slot.pid = slot.handle.pid
        self._starting[slot] = [time.monotonic() + STARTUP_TIMEOUT, deaths]

    def call(self, slot: Slot, method: str, *args: Any) -> Slot:
        try:
            slot.handle.conn.send((method, args))
        except OSError:
            self._broken.add(slot)
        return slot  # one call at a time per worker: the slot names it

    def wait(self, calls: list, timeout: float) -> list[tuple[Slot, Reply]]:
        out = [(s, Reply(DIED, s.handle.exit_description())) for s in calls if s in self._broken]
        self._broken.difference_update(calls)
        if out:
            return out
        conns = {s.handle.conn: s for s in [*calls, *self._starting]}
        for conn in multiprocessing.connection.wait(list(conns), timeout=timeout):
            slot = conns[conn]
            try:
                tag, value = conn.recv()
            except (EOFError, OSError):
                if slot in self._starting:
                    self._died_starting(slot)
                else:
                    out.append((slot, Reply(DIED, slot.handle.exit_description())))
                continue
            if slot in self._starting:  # ("ready", pid)
                del self._starting[slot]
                self.idle.append(slot)
            else:
                out.append((slot, Reply(OK if tag == "done" else FAILED, value)))
        return out

    def _died_starting(self, slot: Slot) -> None:
        deaths = self._starting.pop(slot)[1] + 1
        how = slot.handle.exit_description()
        if deaths >= START_TRIES:
            raise RuntimeError(f"a measurement worker ({slot.handle.name}) exited before it was ready, "
                               f"{deaths} times (last: {how}); can `{sys.executable} -m autosched.process` "
                               "import autosched?")
        slot.handle.restart()
        self._started(slot, deaths)

    def replace(self, slot: Slot, why: str) -> None:
        if why == RECYCLED:  # between jobs: let it exit by itself
            slot.handle.close()
            slot.handle.closed = False
            slot.handle.start()
        else:
            slot.handle.restart()
        self._started(slot)

    def starting(self) -> bool:
        return bool(self._starting)

    def check(self) -> None:
        now = time.monotonic()
        for slot, (deadline, _) in self._starting.items():
            if now > deadline:
                raise RuntimeError(f"a measurement worker ({slot.handle.name}) did not start within "
                                   f"{STARTUP_TIMEOUT:.0f} s; is the machine short of memory?")

    def close(self) -> None:
        for s in self.slots:
            s.handle.close()
        self.idle.clear()
        self._starting.clear()


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
        super().__init__(lambda cache_dir: ProcessTransport(BUILD_SERVICE, {"cache_dir": cache_dir},
                                                            "autosched-builder", n, "builders",
                                                            max_jobs=builds_per_worker()),
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
        pool = self._pools[""] = ProcessTransport(RUN_SERVICE, {}, "autosched-runner", n_parallel, "runners")
        weakref.finalize(self, pool.close)  # at exit too (Ctrl-C, a forgotten close)

    def pool_for(self, target: Any) -> Transport:
        return self._pools[""]


__all__ = ["LocalBuilder", "LocalRunner", "default_builders"]
