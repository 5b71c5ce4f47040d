"""Entry point of a measurement worker process: ``python -m autosched.measure._child FD NAME``.

The child's side of :mod:`autosched.measure.process`: it serves the calls of its role's service
(:mod:`autosched.measure.worker`) until told to stop or its parent disappears.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import sys
import threading
import time

from autosched.measure.worker import BuildService, ReferenceService, RunService


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


if __name__ == "__main__":
    child_main(int(sys.argv[1]))
