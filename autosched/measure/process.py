"""Worker processes for the pool backend: started fresh, spoken to over a socket, killed at will.

A worker is ``python -m autosched.measure._child`` (not a ``multiprocessing``
child), so a user's script needs no ``if __name__ == "__main__":`` guard and
nothing of the parent (locks, LLVM state, threads) is inherited. It gets the
parent's ``sys.path``, says ``("ready", pid)``, then answers pickled
``(method, args)`` calls of its service (:mod:`autosched.measure.worker`) with
``("done", value)`` or ``("error", message)``; workloads defined in the
user's ``__main__`` travel by value (see
:func:`autosched.measure.shipment.workload_shipment`). The child's side is
:mod:`autosched.measure._child`; :class:`~autosched.measure.local.ProcessTransport`
carries the engine's calls (:mod:`autosched.measure.engine`) to such workers.
This module is below both (and below the reference computation of
:mod:`autosched.measure.data`, which runs in such a worker).

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
from typing import Any

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


def describe_exit(code: int | None) -> str:
    """``'killed by SIGSEGV'`` or ``'exit code 3'`` for a process's exit code."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


__all__ = ["START_TRIES", "STARTUP_TIMEOUT", "WorkerProcess", "describe_exit"]
