"""How a task travels to a worker process, and how the worker gets it back: measurement workers (pool processes
and Ray actors) and the cost model's feature helpers alike.

Tasks travel as ``(name, args, target)`` plus a *workload shipment*: a workload registered outside autosched
(in a user's script or a test module) is sent by value with cloudpickle, because a worker does not share the
driver's ``sys.path`` or ``__main__``. Beside :mod:`autosched.process`, below the layers that send tasks
(measure, cost_model).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import pickle
import sys
from typing import Any

from autosched.task import Task
from autosched.workloads import register_workload

Shipment = tuple  # (workload name, module name, cloudpickled function or None)


def _cloudpickle() -> Any:
    try:
        import cloudpickle

        return cloudpickle
    except ImportError:
        pass
    try:
        from ray import cloudpickle

        return cloudpickle
    except ImportError:
        return None


_shipments: dict[str, Shipment] = {}


def workload_shipment(task: Any) -> Shipment:
    """How a worker gets ``task``'s workload: built-ins by name, others by value (cloudpickle) if possible."""
    func = task.workload.func
    module = getattr(func, "__module__", "") or ""
    cache_key = f"{task.name}|{module}|{id(func)}"
    hit = _shipments.get(cache_key)
    if hit is not None:
        return hit
    blob = None
    if not module.startswith("autosched."):
        cp = _cloudpickle()
        if cp is not None:
            mod = sys.modules.get(module)
            by_value = mod is not None and module != "__main__"
            if by_value:
                cp.register_pickle_by_value(mod)
            try:
                blob = cp.dumps(func)
            except Exception as e:  # noqa: BLE001 - fall back to importing the module by name in the worker
                logging.getLogger("autosched.shipment").warning(
                    "workload %s cannot be sent to workers by value (%s: %s); they import module %r instead",
                    task.name, type(e).__name__, e, module)
                blob = None
            finally:
                if by_value:
                    cp.unregister_pickle_by_value(mod)
    ship = (task.name, module, blob)
    _shipments[cache_key] = ship
    return ship


def task_state(task: Any) -> tuple:
    """``(name, args, target)``: how a task travels (its tensors hold closures and are rebuilt on arrival)."""
    return (task.name, task.args, str(task.target))


_known_workloads: set[tuple] = set()
_tasks: dict[str, Any] = {}


def ensure_workload(shipment: Shipment) -> None:
    """Make the shipped workload known here (import its module, or register the shipped function)."""
    name, module, blob = shipment
    ident = (name, module, hashlib.sha256(blob).hexdigest() if blob else None)
    if ident in _known_workloads:
        return

    if blob is not None:
        func = pickle.loads(blob)
        register_workload(name, override=True)(func)
    elif module and module != "__main__":
        importlib.import_module(module)
    _known_workloads.add(ident)


def make_task(shipment: Shipment, state: tuple) -> Any:
    """The Task described by ``state``, its workload made known first; cached per process."""
    ensure_workload(shipment)
    key = json.dumps([state, shipment[1], shipment[2] is not None], sort_keys=True, default=str)
    task = _tasks.get(key)
    if task is None:
        task = Task(state[0], state[1], state[2])
        _tasks[key] = task
    return task


__all__ = ["Shipment", "ensure_workload", "make_task", "task_state", "workload_shipment"]
