"""What the parts of ``Database`` share: its errors and row types, the tables' handles, statements built once,
and the target-key helpers."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Integer, bindparam, select

from autosched.database.schema import (
    RecordRow,
    RunRow,
    SchemaInfo,
    WorkloadRow,
)
from autosched.errors import AutoschedError
from autosched.target import Target

logger = logging.getLogger("autosched.database")

_R = RecordRow.__table__
_W = WorkloadRow.__table__
_RUN = RunRow.__table__
_S = SchemaInfo.__table__

ON_CONFLICT = ("replace", "skip", "keep_better")

# statements run in tuning loops, built once (building one costs more than SQLite takes to run it)
_BEST = (select(_R).where(_R.c.workload_id == bindparam("wid"), _R.c.target == bindparam("target"),
                          _R.c.cost.isnot(None))
         .order_by(_R.c.cost, _R.c.id).limit(bindparam("k", type_=Integer)))
_WORKLOAD_ID = select(_W.c.id).where(_W.c.key == bindparam("key"))
_MEASURED = select(_R.c.id).where(_R.c.workload_id == bindparam("wid"), _R.c.target == bindparam("target"),
                                  _R.c.trace_hash == bindparam("h"))
# the records of some traces of a task (a tuner sharing the database asks before measuring a batch)
_RECORDS_OF = (select(_R).where(_R.c.workload_id == bindparam("wid"), _R.c.target == bindparam("target"),
                                _R.c.trace_hash.in_(bindparam("hashes", expanding=True))).order_by(_R.c.id))
_BATCH = 2000  # rows per INSERT batch; keeps statements and memory small


class DatabaseError(AutoschedError, RuntimeError):
    """A tuning database cannot be opened or used; the message names the database and the reason."""


class SchemaVersionError(DatabaseError):
    """The database's schema is newer than this autosched, or not an autosched schema at all."""


@dataclass
class TuningRun:
    """A tuning run as stored: what was asked, what was done, when."""

    id: int
    policy: str
    seed: int | None = None
    trials_asked: int | None = None
    trials_done: int | None = None
    target: str | None = None
    status: str = "running"
    started_at: float = 0.0
    ended_at: float | None = None
    config: dict = field(default_factory=dict)
    host: str | None = None
    autosched_version: str = ""


@dataclass
class WorkloadInfo:
    key: str
    name: str
    args: dict
    hash: str | None
    records: int


def _costs_json(costs: list[float]) -> str:
    """JSON of a list of floats; several times faster than json.dumps (bulk imports spend time here)."""
    vals = [float(c) for c in costs]
    if all(math.isfinite(v) for v in vals):
        return "[" + ",".join(map(repr, vals)) + "]"
    return json.dumps(vals)


def _is_key(x: Any) -> bool:
    return isinstance(x, str) and len(x) == 64 and all(c in "0123456789abcdef" for c in x)


def target_key(target: Any) -> str:
    """The key records are stored under for ``target`` (a Target, a target string or a key)."""
    return Target(target).key


def _cpu_agnostic(key: str) -> tuple:
    """A target key without its CPU (mcpu, mattr): what must still match when reusing other CPUs' records."""
    try:
        t = Target(key)
    except ValueError:
        return (key,)
    return (t.kind, tuple(sorted((k, v) for k, v in t.options.items() if k not in ("mcpu", "mattr"))))


