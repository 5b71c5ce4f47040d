"""The words the parts of the database share: its errors, the ``Where`` of a query, what a stored candidate
becomes when it is committed again, tuning runs and workloads. No SQL here."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from autosched.database.record import TuningRecord, producer_info
from autosched.errors import AutoschedError
from autosched.result import ResultFlag
from autosched.target import Target

#: what ``commit_records`` may do with a candidate already stored: take the new figures, keep the stored
#: ones, or keep the lower cost (a success over a failure)
ON_CONFLICT = ("replace", "skip", "keep_better")

#: the orders ``select_records`` gives records in, as sort keys (for implementations that sort in Python)
ORDERS = {
    "id": lambda r: r.id,  # insertion
    "cost": lambda r: (r.cost is None, r.cost or 0.0, r.id),  # fastest first, failures last
    "time": lambda r: (-r.timestamp, r.id),  # newest first
}


class DatabaseError(AutoschedError, RuntimeError):
    """A tuning database cannot be opened or used; the message names the database and the reason."""


class SchemaVersionError(DatabaseError):
    """The database's schema is newer than this autosched, or not an autosched schema at all."""


@dataclass(frozen=True)
class Where:
    """Which records: each field given must hold (``None``: any). ``traces`` are canonical trace texts;
    ``after_id`` pages through records in insertion order."""

    workload_key: str | None = None
    target: str | None = None  # a target key, CPU included
    workload_name: str | None = None
    ok: bool | None = None  # successful (True) or failed (False) records
    run_id: int | None = None
    since: float | None = None  # timestamp >= since
    until: float | None = None  # timestamp < until
    traces: tuple[str, ...] | None = None
    after_id: int | None = None
    cold: bool | None = None  # timed with cold caches (flag ``cold_cache``, True) or warm (False)

    def matches(self, rec: TuningRecord) -> bool:
        """Whether ``rec`` is one of these records (for implementations that filter in Python)."""
        return ((self.workload_key is None or rec.workload_key == self.workload_key)
                and (self.target is None or rec.target == self.target)
                and (self.workload_name is None or rec.workload_name == self.workload_name)
                and (self.ok is None or rec.ok == self.ok)
                and (self.run_id is None or rec.run_id == self.run_id)
                and (self.since is None or rec.timestamp >= self.since)
                and (self.until is None or rec.timestamp < self.until)
                and (self.traces is None or rec.trace_json in self.traces)
                and (self.after_id is None or rec.id > self.after_id)
                and (self.cold is None or (ResultFlag.COLD in (rec.flags or ())) == self.cold))


def check_on_conflict(on_conflict: str) -> None:
    if on_conflict not in ON_CONFLICT:
        raise ValueError(f"on_conflict must be one of {', '.join(ON_CONFLICT)}, got {on_conflict!r}")


def resolve_conflict(stored: TuningRecord, new: TuningRecord, on_conflict: str) -> TuningRecord | None:
    """What a candidate stored already becomes when ``new`` is committed: the record to store in its place
    (same id; it stays with the run that first stored it), or None to leave it as it is."""
    if on_conflict == "skip":
        return None
    if on_conflict == "keep_better" and not (new.ok and (not stored.ok or new.cost < stored.cost)):
        return None
    return replace(new, id=stored.id, run_id=stored.run_id if stored.run_id is not None else new.run_id)


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

    @staticmethod
    def new(policy: str, *, seed: int | None = None, trials: int | None = None, target: Any = None,
            config: dict | None = None) -> TuningRun:
        """A run starting now on this machine (id 0 until a database stores it)."""
        return TuningRun(id=0, policy=policy, seed=seed, trials_asked=trials,
                         target=None if target is None else str(target), started_at=time.time(),
                         config=dict(config or {}), host=socket.gethostname(),
                         autosched_version=producer_info()["autosched"])


@dataclass
class WorkloadInfo:
    key: str
    name: str
    args: dict
    hash: str | None
    records: int


def target_key(target: Any) -> str:
    """The key records are stored under for ``target`` (a Target, a target string or a key)."""
    return Target(target).key


class Records(Protocol):
    """What ``query.py`` and ``logs.py`` call on a database: any :class:`~autosched.database.interface.Database`
    (named here, below the interface, so that the functions written over it do not import the class whose
    methods call them)."""

    def commit_records(self, records: Iterable[TuningRecord], *, run: TuningRun | int | None = None,
                       on_conflict: str = "skip") -> int: ...

    def select_records(self, where: Where, *, order: str = "id", limit: int | None = None) -> list[TuningRecord]: ...

    def count_records(self, where: Where) -> int: ...

    def iter_records(self, task_or_key: Any = None, target: Any = None, **filters: Any) -> Iterator[TuningRecord]: ...

    def stats(self, where: Where | None = None) -> list[dict[str, Any]]: ...

    def targets(self, task_or_key: Any = None) -> list[str]: ...
