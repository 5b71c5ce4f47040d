"""Worker processes: started fresh, spoken to over a socket, killed at will; each serves one object.

A worker is ``python -m autosched.process`` (not a ``multiprocessing`` child),
so a user's script needs no ``if __name__ == "__main__":`` guard and nothing of
the parent (locks, LLVM state, threads) is inherited. It gets the parent's
``sys.path`` and the service to serve, named ``"module:Class"`` with the
keyword arguments that build it, says ``("ready", pid)``, then answers
pickled ``(method, args)`` calls with ``("done", value)`` or
``("error", message)``; ``None`` stops it. The services: measurement's
builders, runners and reference computation (:mod:`autosched.measure.worker`,
driven by :class:`~autosched.measure.local.ProcessTransport`) and the cost
model's feature helpers (:mod:`autosched.cost_model.helpers`). Naming the
service by text keeps this module below both, importing neither.

Workers run in their own session, so a Ctrl-C at the terminal reaches only
the parent, which stops them; and each exits by itself when its parent
disappears, even if the parent was killed outright.
"""

from __future__ import annotations

import importlib
import multiprocessing.connection
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

STARTUP_TIMEOUT = 120.0  # seconds a fresh worker may take to import numpy/llvmlite and say it is ready
START_TRIES = 3  # a worker that dies this many times before it is ready cannot start (a broken install)


class WorkerProcess:
    """One worker process serving ``service`` (``"module:Class"``, built with ``init``); :meth:`restart`
    replaces it."""

    def __init__(self, service: str, init: dict | None = None, name: str = "autosched-worker"):
        self.service, self.init, self.name = service, dict(init or {}), name
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
                [sys.executable, "-m", "autosched.process", str(child_sock.fileno()), self.name],
                pass_fds=[child_sock.fileno()], stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        finally:
            child_sock.close()
        self.conn = multiprocessing.connection.Connection(parent_sock.detach())
        self.conn.send((list(sys.path), self.service, self.init, os.getpid()))
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


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)


def _service(name: str, init: dict) -> Any:
    module, _, cls = name.partition(":")
    return getattr(importlib.import_module(module), cls)(**init)


def child_main(fd: int) -> None:
    """The worker's main loop: ``(method, args)`` in, ``("done", value)`` or ``("error", message)`` out,
    ``None`` to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    conn = multiprocessing.connection.Connection(fd)
    path, service_name, init, parent_pid = conn.recv()
    sys.path[:] = path
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    service = _service(service_name, init)
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


__all__ = ["START_TRIES", "STARTUP_TIMEOUT", "WorkerProcess", "child_main", "describe_exit"]


if __name__ == "__main__":
    child_main(int(sys.argv[1]))
