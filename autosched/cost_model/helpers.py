"""Helper processes that compute candidates' features beside the tuner's own process.

Scoring candidates is most of a tuning run's own work (each is lowered for its features: on conv2d, 70% of
the search's time), and it runs while the builders and the runner are idle: one core computes, the others
wait. :class:`FeatureHelpers` gives :class:`~autosched.cost_model.model.FeatureCache` processes that take a
share of each large batch of unseen candidates while this process computes its own share; they work only
while it waits for them (never beside a build or a timing of the tuner's), and the features are the same
wherever they are computed, so the search is unchanged. They also draw shares of a space's fresh samples
(:meth:`~autosched.space.Space.sample` with ``helpers`` set, as the tuning loop sets it: on a GPU each draw
lowers the kernel to check the device's limits, about 25 ms on a Zen 3 core); a share is the same wherever
it is drawn. A helper is a worker process of
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
from autosched.space.base import point_from_json, point_to_json
from autosched.te.trace import Trace

log = logging.getLogger("autosched.cost_model")

#: seconds a helper may take to answer one share before it is stopped and its share computed here
ANSWER_TIMEOUT = 120.0


#: the number of helpers a tuning run starts (0: none), instead of :func:`default_helpers`
HELPERS_ENV = "AUTOSCHED_FEATURE_HELPERS"


def default_helpers(gpu: bool = False) -> int:
    """``$AUTOSCHED_FEATURE_HELPERS`` if set, else one helper per core beyond this process's: at most 3 for a
    CPU target (the builders and the timed kernels need the cores), at most 7 for a GPU, where the search sets
    the pace and its work comes in shares enough for 8 processes (an evolutionary proposal's 32 children in
    8 shares, its 128 samples in 16)."""
    env = os.environ.get(HELPERS_ENV, "").strip()
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            log.warning("%s=%r is not a number of helpers; using the default", HELPERS_ENV, env)
    return max(0, min(7 if gpu else 3, (os.cpu_count() or 1) - 1))


#: what a helper process serves (:mod:`autosched.process` names it by text: this module imports no model)
SERVICE = "autosched.cost_model.model:FeatureService"


def _json_point(point: dict | None) -> dict | None:
    return None if point is None else point_to_json(point)


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
        return self._ask(helper, "features", (workload_shipment(task), task_state(task), texts))

    def _ask(self, helper: _Helper, method: str, args: tuple) -> bool:
        try:
            helper.conn.send((method, args))
            return True
        except (OSError, ValueError):
            helper.dead = True
            return False

    def sample_shares(self, space: Any, shares: list[tuple[int, int]]) -> list[list[tuple[Trace, dict]]]:
        """Each ``(n, seed)`` share of a sample of ``space`` (:meth:`~autosched.space.Space.draw_share`)."""
        return self._in_shares(space, "sample_shares", shares, lambda share: space.draw_share(*share))

    def offspring_shares(self, space: Any, shares: list[tuple[list[tuple[Trace, Trace | None]], int, dict]]
                         ) -> list[list[tuple[Trace, dict | None]]]:
        """Each ``(requests, seed, parents' points)`` share of the offspring of ``space``
        (:meth:`~autosched.space.Space.breed_share`)."""
        def wire(share: tuple[list, int, dict]) -> tuple[list, int]:
            requests, seed, points = share
            return ([(a.to_json(), _json_point(points.get(a)), None if b is None else b.to_json(),
                      None if b is None else _json_point(points.get(b))) for a, b in requests], seed)

        return self._in_shares(space, "offspring_shares", shares, lambda share: space.breed_share(*share), wire)

    def _in_shares(self, space: Any, method: str, shares: list, here: Any, wire: Any = None) -> list[list]:
        """Each share of work on ``space``, as ``here(share)`` computes it: the last shares by the ready
        helpers (``method`` of :class:`~autosched.cost_model.model.FeatureService`, each share sent as
        ``wire(share)``), the first ones here meanwhile; a helper that fails leaves its shares to be done
        here. A share's answer is ``[(trace, point)]``, the same wherever it is computed."""
        task = space.task
        ready = self.ready(task)
        size = len(shares) // (len(ready) + 1)
        sent: list[tuple[_Helper, int, int]] = []
        for k, helper in enumerate(ready if size else ()):
            lo, hi = len(shares) - (k + 1) * size, len(shares) - k * size
            payload = [wire(x) for x in shares[lo:hi]] if wire is not None else shares[lo:hi]
            if self._ask(helper, method, (workload_shipment(task), task_state(task), space.kind, payload)):
                sent.append((helper, lo, hi))
        away = {i for _, lo, hi in sent for i in range(lo, hi)}
        out: list[Any] = [None if i in away else here(share) for i, share in enumerate(shares)]
        for helper, lo, hi in sent:
            got = self.receive(helper, task)
            for i in range(lo, hi):
                if got is not None and len(got) == hi - lo:
                    out[i] = [(Trace.from_json(t), None if p is None else point_from_json(p)) for t, p in got[i - lo]]
                else:  # the helper failed: its shares are done here
                    out[i] = here(shares[i])
        return out

    def receive(self, helper: _Helper, task: Any) -> Any:
        """What ``helper`` computed (features: an array; samples: shares), or None: then the caller does it."""
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
            log.debug("a feature helper cannot serve %s (%s): done here", task.name, value)
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
