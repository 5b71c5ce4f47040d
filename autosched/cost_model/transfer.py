"""Warm start for a new task: an XGBoost model trained on the records of every other task in a database.

Features come from the lowered loop IR, not from a workload's knobs, so what the model learnt on other
workloads (vector widths, reuse, parallel extents, ...) carries over; the ranking objective groups rows
per workload, so tasks of very different speeds do not confuse each other. ``tune(..., cost_model=
"transfer")`` starts its search from such a model (``"pretrained"`` is the model shipped with autosched,
trained on the shipped logs: :mod:`autosched.cost_model.shipped`).
"""

from __future__ import annotations

import logging
from typing import Any

from autosched.cost_model.model import XGBCostModel
from autosched.result import MeasureInput

log = logging.getLogger("autosched.cost_model")


def _subset(records: list, limit: int) -> list:
    """At most ``limit`` records: the fastest half, and the others spread evenly over the rest."""
    if len(records) <= limit:
        return records
    ranked = sorted(records, key=lambda r: (r.cost is None, r.cost or 0.0))
    fast, rest = ranked[: limit // 2], ranked[limit // 2:]
    step = len(rest) / (limit - len(fast))
    return fast + [rest[int(i * step)] for i in range(limit - len(fast))]


def pretrain(db: Any, *, exclude: Any = None, target: Any = None, model: XGBCostModel | None = None,
             limit_per_task: int = 256, seed: int = 0) -> XGBCostModel:
    """An XGBoost model (``model`` or a new one) trained on the records in ``db`` (an open Database, or
    anything with its ``workloads()`` and ``records(key, target)``) of every workload but ``exclude``'s (a
    Task or workload key), on ``target`` (default: every target). At most ``limit_per_task`` records per
    workload. Workloads this process cannot rebuild (not registered here) are skipped with a log line. An
    empty database gives an untrained model. The caller opens the database: the cost model reads records
    and opens nothing."""
    model = model or XGBCostModel(seed=seed)
    skip = getattr(exclude, "workload_key", exclude)
    inputs, results = [], []
    for wl in db.workloads():
        if wl.key == skip or wl.records == 0:
            continue
        recs = _subset(db.records(wl.key, target), limit_per_task)
        try:
            task = recs[0].task()
            _ = task.workload_key
        except Exception as e:  # noqa: BLE001 - a workload this process cannot build is not fatal
            log.info("pretrain: skipping %s (%s)", wl.name, e)
            continue
        for rec in recs:
            if rec.target != task.target.key:
                task = rec.task()
            inputs.append(MeasureInput(task, rec.trace))
            results.append(rec.result)
    n_tasks = len({i.task.workload_key for i in inputs})
    model.origin = f"transfer: trained on {len(inputs)} records of {n_tasks} other tasks in the database"
    if inputs:
        model.update(inputs, results)
        log.info("pretrained the cost model on %d records of %d workloads", len(inputs), n_tasks)
    return model
