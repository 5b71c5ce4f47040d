"""Entry point of a feature helper process: ``python -m autosched.cost_model._helper FD``.

The child's side of :class:`autosched.cost_model.helpers.FeatureHelpers`: it gets the parent's ``sys.path``
and pid, says ``("ready", pid)``, then answers ``(task state, trace texts)`` with ``("done", features)``
(one row per trace, as :func:`~autosched.cost_model.model.candidate_features` computes them) or
``("error", message)``; ``None`` stops it, and it exits by itself when its parent is gone.
"""

from __future__ import annotations

import importlib
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from typing import Any

import numpy as np

from autosched.cost_model.model import candidate_features
from autosched.task import Task


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)


def _task(state: tuple, tasks: dict) -> Any:
    name, module, args, target = state
    key = repr(state)
    if key not in tasks:
        if module and module != "__main__" and not module.startswith("autosched."):
            importlib.import_module(module)  # a workload registered by an importable module of the user's
        tasks[key] = Task(name, args, target)
    return tasks[key]


def main(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    conn = multiprocessing.connection.Connection(fd)
    path, parent_pid = conn.recv()
    sys.path[:] = path
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    conn.send(("ready", os.getpid()))
    tasks: dict = {}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        state, texts = msg
        try:
            task = _task(state, tasks)
            reply: tuple = ("done", np.stack([candidate_features(task, t) for t in texts]))
        except Exception as e:  # noqa: BLE001 - the parent computes these itself
            reply = ("error", f"{type(e).__name__}: {e}")
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return


if __name__ == "__main__":
    main(int(sys.argv[1]))
