"""JSON-lines logs in and out of any ``Database`` (the portable form of one): ``export`` and ``import_``
(with its ``ImportReport``), written over the interface."""

from __future__ import annotations

import heapq
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from autosched.database.common import Records, Where, check_on_conflict
from autosched.database.record import (
    LogFormatError,
    TuningRecord,
    WorkloadChecker,
)

logger = logging.getLogger("autosched.database")

#: log lines read before they are committed (one transaction each)
_FLUSH = 10_000


@dataclass
class ImportReport:
    """What :meth:`Database.import_` did: lines read, records added, duplicates, and the bad lines."""

    source: str
    lines: int = 0
    imported: int = 0  # new records
    duplicates: int = 0  # candidates already in the database (skipped or replaced per on_conflict)
    errors: list[LogFormatError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def __str__(self) -> str:
        s = (f"{self.source}: {self.lines} lines, {self.imported} new records, "
             f"{self.duplicates} already present, {len(self.errors)} bad lines")
        for e in self.errors[:10]:
            s += f"\n  line {e.line}: {e.reason}"
        if len(self.errors) > 10:
            s += f"\n  ... and {len(self.errors) - 10} more"
        return s


def _best_per_task(records: Iterable[TuningRecord], k: int) -> list[TuningRecord]:
    """The ``k`` fastest of each (workload, target), in their original order; one pass, ``k`` kept per task."""
    kept: dict[tuple[str, str], list[tuple[float, int, TuningRecord]]] = {}
    for n, rec in enumerate(records):
        heap = kept.setdefault((rec.workload_key, rec.target), [])
        item = (-(rec.cost or 0.0), -n, rec)  # a max-heap on cost: the slowest kept is the one to drop
        if len(heap) < k:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    chosen = sorted(((-neg_n, rec) for heap in kept.values() for _, neg_n, rec in heap), key=lambda x: x[0])
    return [rec for _, rec in chosen]


def export(db: Records, dest: str | os.PathLike | IO[str], task_or_key: Any = None, target: Any = None, *,
           append: bool = False, best: int | None = None, **filters: Any) -> int:
    """Write matching records (filters as in :func:`~autosched.database.query.records`) as a JSON-lines
    log, in insertion order; returns how many. ``best=K`` keeps only the K fastest successful records of
    each workload and target (a compact log that still applies and warms a search). A path is written
    atomically (a temporary file renamed) unless ``append``."""
    if best is not None and best < 1:
        raise ValueError(f"best must be at least 1, got {best}")
    if best:
        filters["ok"] = True
    if not hasattr(dest, "write"):
        path = Path(dest)
        path.parent.mkdir(parents=True, exist_ok=True)
        if append:
            with open(path, "a", encoding="utf-8") as f:
                return export(db, f, task_or_key, target, best=best, **filters)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                n = export(db, f, task_or_key, target, best=best, **filters)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return n
    it: Iterable[TuningRecord] = db.iter_records(task_or_key, target, **filters)
    if best:
        it = _best_per_task(it, best)
    n = 0
    for rec in it:
        dest.write(rec.dumps() + "\n")
        n += 1
    return n


def import_(db: Records, source: str | os.PathLike | IO[str], *, strict: bool = False,
            on_conflict: str = "skip", _quiet: bool = False) -> ImportReport:
    """Read a JSON-lines log into ``db``; returns an :class:`ImportReport`.

    Every bad line (not JSON, truncated, a newer or unknown record version, a workload that is not
    registered here or whose computation changed) is reported with its line number and reason, and the
    valid lines are imported. With ``strict=True`` the first bad line raises :class:`LogFormatError`
    and nothing is imported. ``on_conflict`` as in :meth:`commit` (default: keep what is stored).
    """
    check_on_conflict(on_conflict)
    if hasattr(source, "read"):
        return _import_lines(db, source, str(getattr(source, "name", "<stream>")), strict, on_conflict, _quiet)
    with open(source, encoding="utf-8", errors="replace") as f:
        return _import_lines(db, f, str(Path(source)), strict, on_conflict, _quiet)


def _import_lines(db: Records, lines: Iterable[str], name: str, strict: bool, on_conflict: str,
                  quiet: bool) -> ImportReport:
    report = ImportReport(source=name)
    checker = WorkloadChecker()
    pending: list[TuningRecord] = []

    def flush() -> None:
        if not pending:
            return
        before = db.count_records(Where())  # new records: what the database gained
        db.commit_records(pending, on_conflict=on_conflict)
        new = db.count_records(Where()) - before
        report.imported += new
        report.duplicates += len(pending) - new
        pending.clear()

    for lineno, line in enumerate(lines, 1):
        report.lines = lineno
        if not line.strip():
            continue
        try:
            rec = TuningRecord.loads(line)
            checker.check(rec)
        except LogFormatError as e:
            err = LogFormatError(e.reason, lineno, name)
            if strict:
                raise err from None
            report.errors.append(err)
            continue
        pending.append(rec)
        if not strict and len(pending) >= _FLUSH:
            flush()
    flush()
    if report.errors and not quiet:
        for e in report.errors[:20]:
            logger.warning("%s (line skipped)", e)
        if len(report.errors) > 20:
            logger.warning("%s: %d more bad lines skipped", name, len(report.errors) - 20)
    if not quiet:
        logger.info("%s", report.__str__().split("\n", 1)[0])
    return report
