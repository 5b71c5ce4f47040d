"""The ``Database`` interface: what a tuning database stores and answers, whatever it is stored in.

An implementation writes five methods (MetaSchedule's ``Database`` has about as many):

- ``commit_records(records, run=, on_conflict=)``: store records; a candidate (workload key, target key,
  trace) is stored once, and ``on_conflict`` says what wins when it is stored already;
- ``select_records(where, order=, limit=)``: the records a :class:`Where` matches, in an order;
- ``start_run``, ``end_run``, ``runs``: the tuning runs records are committed under;

and may write three more where it can answer faster than from ``select_records``: ``count_records``,
``stats`` (per workload and target figures), ``workloads``; and ``close``.

Everything else a user calls (``commit``, ``commit_many``, ``best``, ``records``, ``measured_records``,
``export``, ``import_``, ...) is written once, over those methods, in ``query.py`` and ``logs.py``, and
reached as thin methods of this class: any implementation has them all, and ``autosched.tune``,
``apply_history_best`` and the ``autosched db`` command work on it.

``Database(url)`` opens the SQL implementation (``database.py``: SQLite by default, PostgreSQL by URL,
or a JSON-lines log), which the package names with :func:`set_default_database`. This module imports no
SQLAlchemy.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from autosched.database import logs, query
from autosched.database.common import TuningRun, Where, WorkloadInfo
from autosched.database.record import TuningRecord


class Database(ABC):
    """A tuning database: the interface (the module docstring), and what users call over it.

    ``Database(url)`` opens the SQL one (:class:`~autosched.database.database.SQLDatabase`); a subclass is
    another kind of database.
    """

    def __new__(cls, *args: Any, **kwargs: Any):
        if cls is Database:
            if _default_class is None:
                raise TypeError("Database(url) has no implementation to open: none was set with "
                                "set_default_database")
            cls = _default_class()
        return super().__new__(cls)

    # ------------------------------------------------------------------ the interface
    @abstractmethod
    def commit_records(self, records: Iterable[TuningRecord], *, run: TuningRun | int | None = None,
                       on_conflict: str = "skip") -> int:
        """Store records as they are, in one transaction where the storage has them; returns how many it
        wrote: new ones, and stored ones replaced per ``on_conflict`` (see
        :func:`~autosched.database.common.resolve_conflict`). Each new record gets an increasing ``id``."""

    @abstractmethod
    def select_records(self, where: Where, *, order: str = "id", limit: int | None = None) -> list[TuningRecord]:
        """The records ``where`` matches, in ``order`` (a key of :data:`~autosched.database.common.ORDERS`),
        at most ``limit``."""

    @abstractmethod
    def start_run(self, policy: str, *, seed: int | None = None, trials: int | None = None,
                  target: Any = None, config: dict | None = None) -> TuningRun:
        """Store a new run (``TuningRun.new``) and return it with its id."""

    @abstractmethod
    def end_run(self, run: TuningRun | int, *, trials_done: int | None = None, status: str = "done") -> None:
        """Mark a run ended; ``trials_done`` defaults to the number of records committed with it."""

    @abstractmethod
    def runs(self, limit: int | None = None) -> list[TuningRun]:
        """Tuning runs, newest first."""

    def count_records(self, where: Where) -> int:
        return len(self.select_records(where))

    def stats(self, where: Where | None = None) -> list[dict[str, Any]]:
        """Per workload and target: records, successful ones, the best cost, failures by error kind (cut-offs
        included, as ``cut_off``), results by flag (``noisy``, ``unchecked``), first and last timestamps."""
        return query.summarize(map(query.group_of, self.select_records(where or Where())))

    def workloads(self) -> list[WorkloadInfo]:
        """Every workload with its record count, by name."""
        return query.workloads(self)

    def close(self) -> None:  # noqa: B027 - optional: a database that holds nothing open has nothing to do
        """Release what the database holds open (connections, files)."""

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ over the interface (query.py, logs.py)
    def commit(self, task: Any, trace: Any, result: Any, *, run: TuningRun | int | None = None,
               on_conflict: str = "replace") -> TuningRecord:
        """Store one measured candidate; returns its record (see :func:`query.commit`)."""
        return query.commit(self, task, trace, result, run=run, on_conflict=on_conflict)

    def commit_many(self, items: Iterable[Any], *, run: TuningRun | int | None = None,
                    on_conflict: str = "replace") -> int:
        """Store a batch in one transaction; returns how many it stored (see :func:`query.commit_many`)."""
        return query.commit_many(self, items, run=run, on_conflict=on_conflict)

    @contextmanager
    def tuning_run(self, policy: str, **kwargs: Any) -> Iterator[TuningRun]:
        """``with db.tuning_run("evolutionary", seed=0, trials=1000) as run: db.commit(..., run=run)``;
        the run ends as done, interrupted (Ctrl-C) or failed."""
        run = self.start_run(policy, **kwargs)
        try:
            yield run
        except KeyboardInterrupt:
            self.end_run(run, status="interrupted")
            raise
        except BaseException:
            self.end_run(run, status="failed")
            raise
        else:
            self.end_run(run)

    def best(self, task_or_key: Any, target: Any = None, k: int = 1, *,
             allow_other_cpus: bool = False) -> list[TuningRecord]:
        """The ``k`` fastest successful records of a workload on a target (see :func:`query.best`)."""
        return query.best(self, task_or_key, target, k, allow_other_cpus=allow_other_cpus)

    def records(self, task_or_key: Any = None, target: Any = None, **filters: Any) -> list[TuningRecord]:
        """Records matching every filter given (see :func:`query.records`)."""
        return query.records(self, task_or_key, target, **filters)

    def iter_records(self, task_or_key: Any = None, target: Any = None, **filters: Any) -> Iterator[TuningRecord]:
        """Records in insertion order, read in batches (see :func:`query.iter_records`)."""
        return query.iter_records(self, task_or_key, target, **filters)

    def count(self, task_or_key: Any = None, target: Any = None, *, ok: bool | None = None) -> int:
        """How many records (of a workload, on a target, successful or failed when ``ok`` says)."""
        return self.count_records(query.where(task_or_key, target, ok=ok))

    def has_workload(self, task_or_key: Any) -> bool:
        """True when the database holds at least one record of this workload (on any target)."""
        return bool(self.select_records(Where(workload_key=query.key_of(task_or_key)), limit=1))

    def measured_traces(self, task: Any, target: Any = None) -> set[str]:
        """Canonical trace texts already measured (successfully or not) for the task on its target."""
        return {r.trace_json for r in self.records(task, target)}

    def measured_records(self, task: Any, traces: Iterable[Any], target: Any = None) -> list[TuningRecord]:
        """The stored records, for the task on its target, of those of ``traces`` already measured."""
        return query.measured_records(self, task, traces, target)

    def has_measured(self, task: Any, trace: Any, target: Any = None) -> bool:
        return bool(self.measured_records(task, [trace], target))

    def targets(self, task_or_key: Any = None) -> list[str]:
        """Target keys with successful records (of one workload, or of all)."""
        key = None if task_or_key is None else query.key_of(task_or_key)
        return sorted({r["target"] for r in self.stats(Where(workload_key=key, ok=True))})

    def export(self, dest: str | os.PathLike | IO[str], task_or_key: Any = None, target: Any = None,
               **options: Any) -> int:
        """Write matching records as a JSON-lines log; returns how many (see :func:`logs.export`)."""
        return logs.export(self, dest, task_or_key, target, **options)

    def import_(self, source: str | os.PathLike | IO[str], **options: Any) -> logs.ImportReport:
        """Read a JSON-lines log into the database (see :func:`logs.import_`)."""
        return logs.import_(self, source, **options)


#: returns the class ``Database(url)`` makes; the package (``autosched/database/__init__.py``) sets it to
#: SQLDatabase's, which imports SQLAlchemy on first call: the SQL implementation imports this module, so this
#: module does not import it
_default_class: Callable[[], type[Database]] | None = None


def set_default_database(get_class: Callable[[], type[Database]]) -> None:
    """``Database(...)`` makes an instance of ``get_class()`` (called at each opening, so that it may import
    its implementation then)."""
    global _default_class
    _default_class = get_class


def open_database(db: Database | str | os.PathLike | None = None, **kwargs: Any) -> tuple[Database, bool]:
    """``(db, owned)``: an open Database as is (not owned), or a new one for a URL or path (owned)."""
    if isinstance(db, Database):
        return db, False
    return Database(db, **kwargs), True
