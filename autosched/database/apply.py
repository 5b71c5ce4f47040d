"""Applying the best records at build time: ``apply_history_best`` and ``Task.apply_best``.

    with autosched.apply_history_best("tuning.db"):          # or a .jsonl log, a URL, a Database
        sch, args = task.apply_best()                        # the best record's schedule, or the default
        lib = autosched.build(sch, args)

Contexts nest: a lookup asks the innermost first and falls back to the outer ones, so a personal
database can sit inside the team's. The active contexts are held in a ``contextvars.ContextVar``: each
thread (and asyncio task) sees the contexts it entered itself; code that hands work to a thread pool
and wants the contexts there runs it under ``contextvars.copy_context().run``.

A miss logs (once per workload and target, at WARNING) the workload key and the target it looked
for, and the targets that do have records, then uses the workload's default schedule.
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
from typing import Any

from autosched.database.interface import Database, open_database
from autosched.database.record import TuningRecord

logger = logging.getLogger("autosched.database")

_ACTIVE: contextvars.ContextVar[tuple[ApplyHistoryBest, ...]] = contextvars.ContextVar(
    "autosched_apply_history_best", default=())

#: how many of the best records are tried, in order, when the best one no longer replays
_CANDIDATES = 5


class ApplyHistoryBest:
    """The best records of a database (or log), applied to tasks looked up while the context is active.

    ``allow_other_cpus=True``: where this CPU has no record for a task, use the best record tuned on
    another CPU of the same target kind (a working schedule, perhaps not the fastest one here).
    """

    def __init__(self, db_or_log: Database | str | os.PathLike | None = None, *,
                 allow_other_cpus: bool = False, missing_ok: bool = False):
        # missing_ok: a database or log that does not exist applies nothing (TVM's auto_scheduler reads a
        # missing log as empty); by default it is an error, which catches a mistyped path
        self.database, self._owned = open_database(db_or_log, create=missing_ok)
        self.allow_other_cpus = allow_other_cpus
        self._cache: dict[tuple[str, str], list[TuningRecord]] = {}
        self._missed: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._tokens: list[contextvars.Token] = []

    def candidates(self, task: Any) -> list[TuningRecord]:
        """The best few records for ``task`` on its target (cached for the life of this context)."""
        ident = (task.workload_key, task.target.key)
        with self._lock:
            got = self._cache.get(ident)
        if got is None:
            got = self.database.best(task, k=_CANDIDATES, allow_other_cpus=self.allow_other_cpus)
            with self._lock:
                self._cache[ident] = got
        return got

    def query(self, task: Any) -> TuningRecord | None:
        """The best record for ``task``, or None."""
        got = self.candidates(task)
        return got[0] if got else None

    def __enter__(self) -> ApplyHistoryBest:
        self._tokens.append(_ACTIVE.set(_ACTIVE.get() + (self,)))
        return self

    def __exit__(self, *exc: Any) -> None:
        _ACTIVE.reset(self._tokens.pop())
        if not self._tokens and self._owned:
            self.database.close()

    def close(self) -> None:
        if self._owned:
            self.database.close()

    def __repr__(self) -> str:
        return f"apply_history_best({self.database})"


def apply_history_best(db_or_log: Database | str | os.PathLike | None = None, *,
                       allow_other_cpus: bool = False) -> ApplyHistoryBest:
    """A context manager under which :meth:`Task.apply_best` (and model builds) use the best records of
    ``db_or_log``: a :class:`Database`, a URL, an SQLite path, or a ``.jsonl`` tuning log."""
    return ApplyHistoryBest(db_or_log, allow_other_cpus=allow_other_cpus)


def current_contexts() -> tuple[ApplyHistoryBest, ...]:
    """The active ``apply_history_best`` contexts of this thread / task, outermost first."""
    return _ACTIVE.get()


def best_record(task: Any) -> TuningRecord | None:
    """The best record for ``task`` in the active contexts (innermost first), or None."""
    for ctx in reversed(_ACTIVE.get()):
        rec = ctx.query(task)
        if rec is not None:
            return rec
    return None


def apply_best(task: Any, db_or_log: Database | str | os.PathLike | None = None, *,
               allow_other_cpus: bool = False) -> tuple[Any, list]:
    """``(schedule, args)`` of the best record for ``task``, ready for ``autosched.build``.

    ``db_or_log=None`` uses the active ``apply_history_best`` contexts, or, when none is active, the
    default database (``$AUTOSCHED_DB`` or the user data directory) if it exists. When no record applies,
    logs the workload key and target it looked for and returns ``task.default_schedule()``.
    """
    if db_or_log is not None:
        ctx = ApplyHistoryBest(db_or_log, allow_other_cpus=allow_other_cpus)
        try:
            return _apply_from([ctx], task)
        finally:
            ctx.close()
    contexts = list(reversed(_ACTIVE.get()))
    if contexts:
        return _apply_from(contexts, task)
    try:
        ctx = ApplyHistoryBest(None, allow_other_cpus=allow_other_cpus)
    except FileNotFoundError as e:
        logger.warning("no tuning record for workload %s (key %s) on target %r: %s; using the default "
                       "schedule", task.name, task.workload_key, task.target.key, e)
        return task.default_schedule()
    try:
        return _apply_from([ctx], task)
    finally:
        ctx.close()


def _apply_from(contexts: list[ApplyHistoryBest], task: Any) -> tuple[Any, list]:
    tkey = task.target.key
    for ctx in contexts:
        for rec in ctx.candidates(task):
            try:
                sch, args = task.apply(rec.trace)
            except Exception as e:  # a record from an older autosched whose steps no longer apply
                logger.warning("record %s of %s (key %s) in %s does not replay here (%s: %s); trying the "
                               "next",
                               rec.id, task.name, task.workload_key, ctx.database, type(e).__name__, e)
                continue
            if rec.target != tkey:
                logger.info("using a record tuned for %r on target %r (allow_other_cpus)", rec.target, tkey)
            return sch, args
    ident = (task.workload_key, tkey)
    first = contexts[0] if contexts else None
    if first is not None and ident not in first._missed:
        first._missed.add(ident)
        where = ", ".join(str(c.database) for c in contexts)
        others = sorted({t for c in contexts for t in c.database.targets(task) if t != tkey})
        hint = ""
        if others:
            hint = (f"; records exist for target(s) {', '.join(map(repr, others))}"
                    + ("" if contexts[0].allow_other_cpus else " (allow_other_cpus=True would use them)"))
        logger.warning("no tuning record for workload %s (key %s) on target %r in %s%s; using the default "
                       "schedule", task.name, task.workload_key, tkey, where, hint)
    return task.default_schedule()


__all__ = ["ApplyHistoryBest", "apply_best", "apply_history_best", "best_record", "current_contexts"]
