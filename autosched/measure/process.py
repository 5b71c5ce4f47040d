"""Worker processes for the pool backend: started fresh, spoken to over a socket, killed at will.

A worker is ``python -m autosched.measure._child`` (not a ``multiprocessing``
child), so a user's script needs no ``if __name__ == "__main__":`` guard and
nothing of the parent (locks, LLVM state, threads) is inherited. It gets the
parent's ``sys.path``, says ``("ready", pid)``, then answers pickled
``(method, args)`` calls of its service (:mod:`autosched.measure.worker`) with
``("done", value)`` or ``("error", message)``; workloads defined in the
user's ``__main__`` travel by value (see
:func:`autosched.measure.worker.workload_shipment`). :class:`ProcessTransport`
carries the engine's calls (:mod:`autosched.measure.engine`) to such workers.

Workers run in their own session, so a Ctrl-C at the terminal reaches only
the parent, which stops them; and each exits by itself when its parent
disappears, even if the parent was killed outright.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from autosched.measure.data import describe_exit
from autosched.measure.engine import DIED, FAILED, OK, RECYCLED, Reply, Slot, Transport

STARTUP_TIMEOUT = 120.0  # seconds a fresh worker may take to import numpy/llvmlite and say it is ready
START_TRIES = 3  # a worker that dies this many times before it is ready cannot start (a broken install)


class WorkerProcess:
    """One worker process of ``role`` (``build``, ``run`` or ``reference``); :meth:`restart` replaces it."""

    def __init__(self, role: str, init: dict | None = None, name: str = "autosched-worker"):
        self.role, self.init, self.name = role, dict(init or {}), name
        self.proc: subprocess.Popen | None = None
        self.conn: Any = None
        self.pid: int | None = None
        self.closed = False
        self.start()

    def start(self) -> None:
        if self.closed:  # e.g. a build thread finding its worker killed by close(): do not start another
            raise RuntimeError(f"{self.name} was closed")
        parent_sock, child_sock = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autosched.measure._child", str(child_sock.fileno()), self.name],
                pass_fds=[child_sock.fileno()], stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        finally:
            child_sock.close()
        self.conn = multiprocessing.connection.Connection(parent_sock.detach())
        self.conn.send((list(sys.path), self.role, self.init, os.getpid()))
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL
                pass
        if self.conn is not None:
            self.conn.close()

    def exit_description(self) -> str:
        assert self.proc is not None
        try:
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        return describe_exit(self.proc.returncode)

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        self.closed = True
        try:
            if self.alive():
                self.conn.send(None)
                self.proc.wait(2)  # type: ignore[union-attr]
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class ProcessTransport(Transport):
    """``n`` worker processes of ``role`` on this machine, reached over their sockets; ``name`` names them."""

    def __init__(self, role: str, init: dict, name: str, n: int, what: str, max_jobs: int | None = None):
        super().__init__(what, max_jobs)
        self._starting: dict[Slot, list] = {}  # slot -> [deadline to say ready, deaths before that]
        self._broken: set[Slot] = set()  # a call could not be sent: its worker is gone
        for i in range(n):
            slot = Slot(WorkerProcess(role, init, f"{name}-{i}"))
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
                               f"{deaths} times (last: {how}); can `{sys.executable} -m autosched.measure._child` "
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


# ---------------------------------------------------------------------------
# the child side
# ---------------------------------------------------------------------------


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)


def child_main(fd: int) -> None:
    """The worker's main loop: ``(method, args)`` in, ``("done", value)`` or ``("error", message)`` out,
    ``None`` to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    conn = multiprocessing.connection.Connection(fd)
    path, role, init, parent_pid = conn.recv()
    sys.path[:] = path
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    from autosched.measure.worker import BuildService, ReferenceService, RunService

    service = {"build": BuildService, "run": RunService, "reference": ReferenceService}[role](**init)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        method, args = msg
        fn = getattr(service, method, None) if not method.startswith("_") else None
        try:
            reply = ("done", fn(*args)) if fn is not None else ("error", f"unknown operation {method!r}")
        except Exception as e:  # noqa: BLE001 - a bug in the worker: report it, keep serving
            reply = ("error", f"{type(e).__name__}: {e}")
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return


__all__ = ["STARTUP_TIMEOUT", "ProcessTransport", "WorkerProcess", "child_main"]
