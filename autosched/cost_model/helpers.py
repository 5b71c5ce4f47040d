"""Helper processes that compute candidates' features beside the tuner's own process.

Scoring candidates is most of a tuning run's own work (each is lowered for its features: on conv2d, 70% of
the search's time), and it runs while the builders and the runner are idle: one core computes, the others
wait. :class:`FeatureHelpers` gives :class:`~autosched.cost_model.model.FeatureCache` processes that take a
share of each large batch of unseen candidates while this process computes its own share; they work only
while it waits for them (never beside a build or a timing of the tuner's), and the features are the same
wherever they are computed, so the search is unchanged. A helper is a worker process of
:mod:`autosched.process` serving :class:`~autosched.cost_model.model.FeatureService` (not a
``multiprocessing`` child, so a user's script needs no ``__main__`` guard); it starts in the background, and
until it says it is ready (or after it failed) this process computes everything itself.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from typing import Any

from autosched.process import WorkerProcess
from autosched.shipment import task_state, workload_shipment

log = logging.getLogger("autosched.cost_model")

#: seconds a helper may take to answer one share before it is stopped and its share computed here
ANSWER_TIMEOUT = 120.0


#: the number of helpers a tuning run starts (0: none), instead of :func:`default_helpers`
HELPERS_ENV = "AUTOSCHED_FEATURE_HELPERS"


def default_helpers() -> int:
    """``$AUTOSCHED_FEATURE_HELPERS`` if set, else one helper per core beyond this process's, at most 3."""
    env = os.environ.get(HELPERS_ENV, "").strip()
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            log.warning("%s=%r is not a number of helpers; using the default", HELPERS_ENV, env)
    return max(0, min(3, (os.cpu_count() or 1) - 1))


#: what a helper process serves (:mod:`autosched.process` names it by text: this module imports no model)
SERVICE = "autosched.cost_model.model:FeatureService"


class _Helper:
    """One helper process, and whether it has said it is ready (or is gone)."""

    def __init__(self) -> None:
        self.worker = WorkerProcess(SERVICE, name="autosched-features")
        self.conn, self.proc = self.worker.conn, self.worker.proc
        self.ready = False
        self.dead = False

    def poll_ready(self) -> bool:
        if not self.ready and not self.dead:
            try:
                if self.conn.poll(0):
                    self.ready = self.conn.recv()[0] == "ready"
                    self.dead = not self.ready
            except (EOFError, OSError):
                self.dead = True
        return self.ready and not self.dead

    def close(self) -> None:
        self.dead = True
        self.worker.close()


class FeatureHelpers:
    """``n`` helper processes (default :func:`default_helpers`); :meth:`close` stops them."""

    def __init__(self, n: int | None = None):
        n = default_helpers() if n is None else int(n)
        self._helpers = [_Helper() for _ in range(n)]
        self._refused: set[str] = set()  # task states (repr) a helper could not rebuild: computed here

    def ready(self, task: Any) -> list[_Helper]:
        """The helpers that can take a share of ``task``'s candidates now."""
        if repr(task_state(task)) in self._refused:
            return []
        return [h for h in self._helpers if h.poll_ready()]

    def send(self, helper: _Helper, task: Any, texts: list[str]) -> bool:
        """Ask ``helper`` for the features of ``texts`` (trace texts) of ``task``, which travels as the
        measurement workers' tasks do (:mod:`autosched.shipment`: a workload of the user's script by value)."""
        try:
            helper.conn.send(("features", (workload_shipment(task), task_state(task), texts)))
            return True
        except (OSError, ValueError):
            helper.dead = True
            return False

    def receive(self, helper: _Helper, task: Any) -> Any:
        """The features ``helper`` computed (an array), or None: then the caller computes them."""
        try:
            if not helper.conn.poll(ANSWER_TIMEOUT):
                log.warning("a feature helper did not answer in %.0f s; stopping it", ANSWER_TIMEOUT)
                helper.proc.kill()
                helper.dead = True
                return None
            kind, value = helper.conn.recv()
        except (EOFError, OSError):
            helper.dead = True
            return None
        if kind != "done":
            log.debug("a feature helper cannot compute features of %s (%s): computed here", task.name, value)
            self._refused.add(repr(task_state(task)))
            return None
        return value

    def wait_ready(self, timeout: float = 60.0) -> int:
        """Wait until every helper is ready (or gone, or ``timeout`` seconds passed); how many are ready. A
        starting helper imports what it needs: that is work on a core, and it must not go on beside a timing."""
        deadline = time.monotonic() + timeout
        for h in self._helpers:
            while not h.dead and not h.poll_ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("a feature helper was not ready in %.0f s; stopping it", timeout)
                    h.proc.kill()
                    h.dead = True
                    break
                try:
                    h.conn.poll(min(left, 1.0))
                except (EOFError, OSError):
                    h.dead = True
        return sum(h.ready and not h.dead for h in self._helpers)

    @property
    def size(self) -> int:
        return len(self._helpers)

    def close(self) -> None:
        for h in self._helpers:
            h.close()
        self._helpers = []

    def __enter__(self) -> FeatureHelpers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_shared: FeatureHelpers | None = None


def shared_helpers(n: int) -> FeatureHelpers:
    """This process's ``n`` helpers, started at the first call (and again when ``n`` changes), stopped at exit:
    tuning runs one after another (a model's tasks, round by round) share them instead of each starting its own."""
    global _shared
    if _shared is None or _shared.size != n or any(h.dead for h in _shared._helpers):
        if _shared is not None:
            _shared.close()
        else:
            atexit.register(_close_shared)
        _shared = FeatureHelpers(n)
    return _shared


def _close_shared() -> None:
    global _shared
    if _shared is not None:
        _shared.close()
        _shared = None


__all__ = ["HELPERS_ENV", "FeatureHelpers", "default_helpers", "shared_helpers"]
