"""Worker processes for the pool backend: started fresh, spoken to over a socket, killed at will.

A worker is ``python -m autosched.measure._child`` (not a ``multiprocessing``
child), so a user's script needs no ``if __name__ == "__main__":`` guard and
nothing of the parent (locks, LLVM state, threads) is inherited. It gets the
parent's ``sys.path`` and speaks pickled ``(op, args)`` messages; workloads
defined in the user's ``__main__`` travel by value (see
:func:`autosched.measure.worker.workload_shipment`).

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


class WorkerProcess:
    """One worker process of ``role`` (``build``, ``run`` or ``reference``); :meth:`restart` replaces it."""

    def __init__(self, role: str, init: dict | None = None, name: str = "autosched-worker",
                 max_jobs: int | None = None):
        self.role, self.init, self.name = role, dict(init or {}), name
        self.proc: subprocess.Popen | None = None
        self.conn: Any = None
        self.ready = False
        self.pid: int | None = None
        self.restarts = -1  # replacements after a crash or a missed deadline
        self.recycled = 0  # replacements after max_jobs jobs (a worker whose memory grows with its jobs)
        self.max_jobs = max_jobs
        self.jobs = 0
        self.closed = False
        self.start()

    def job_done(self) -> None:
        """Count a finished job; past ``max_jobs``, replace the worker by a fresh one (between jobs)."""
        self.jobs += 1
        if self.max_jobs and self.jobs >= self.max_jobs:
            self.close()
            self.closed = False
            self.start()
            self.restarts -= 1  # not a failure
            self.recycled += 1

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
        self.ready = False
        self.pid = self.proc.pid
        self.restarts += 1
        self.jobs = 0

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


def close_all(procs: list[WorkerProcess]) -> None:
    for p in procs:
        p.close()


# ---------------------------------------------------------------------------
# the child side
# ---------------------------------------------------------------------------


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)


def child_main(fd: int) -> None:
    """The worker's main loop: ``(op, args)`` in, one or more ``(tag, value)`` out, ``None`` to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    conn = multiprocessing.connection.Connection(fd)
    path, role, init, parent_pid = conn.recv()
    sys.path[:] = path
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    from autosched.measure.worker import BuildWorker, RunWorker

    worker: Any = None
    if role == "build":
        worker = BuildWorker(**init)
    elif role == "run":
        worker = RunWorker(**init)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        op, args = msg
        try:
            if op == "build":
                conn.send(("done", worker.build(*args)))
            elif op == "run":
                _serve_run(conn, worker, args)
            elif op == "reference":
                conn.send(("done", _reference(*args)))
            else:
                conn.send(("error", f"unknown operation {op!r}"))
        except (EOFError, OSError):
            return
        except Exception as e:  # noqa: BLE001 - a bug in the worker: report it, keep serving
            conn.send(("error", f"{type(e).__name__}: {e}"))


def _serve_run(conn: Any, worker: Any, args: dict) -> None:
    if not worker.has_data(args["key"]):
        conn.send(("need_data", args["key"]))
        _, data = conn.recv()
        worker.put_data(data)
    err = worker.load(args["key"], args["path"], args.get("artifact"))
    conn.send(("loaded", err))
    if err is not None:
        return
    if not worker.turn.held:  # another process is timing on this machine: say so, then wait for it
        from autosched.measure.machine import holder

        conn.send(("waiting", holder()))
        conn.send(("turn", worker.take_turn()))
    cfg = args["config"]
    warm = worker.warmup(cfg.warmup, args["limit"], cfg.check)
    conn.send(("warm", warm))
    if isinstance(warm, tuple):
        worker.unload()
        return
    costs = worker.time(cfg.number, cfg.repeat, cfg.min_repeat_ms, cfg.flush_cache)
    conn.send(("done", (costs, worker.last_seconds, worker.last_flags, worker.machine)))


def _reference(shipment: Any, state: tuple, inputs: list) -> Any:
    from autosched.measure.data import _naive_outputs
    from autosched.measure.worker import make_task

    return _naive_outputs(make_task(shipment, state), inputs)


__all__ = ["WorkerProcess", "child_main", "close_all"]
