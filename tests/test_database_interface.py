"""Another kind of tuning database, written from the interface alone: records in a dict, runs in a list.

It implements the five methods of ``autosched.database.Database`` and nothing else; everything users call
(``best``, ``records``, ``measured_records``, ``export``, ``import_``, ``autosched.tune``,
``apply_history_best``) then works on it as on the SQL one.
"""

from __future__ import annotations

import io
import time
from dataclasses import replace

import autosched
from _database_helpers import OTHER_CPU, failed, ok, task, trace
from autosched.database import Database, TuningRecord, TuningRun, Where
from autosched.database.common import ORDERS, resolve_conflict


class MemoryDatabase(Database):
    """A tuning database in this process's memory."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str, str], TuningRecord] = {}  # by candidate
        self._runs: list[TuningRun] = []

    def commit_records(self, records, *, run=None, on_conflict="skip") -> int:
        run_id = run.id if isinstance(run, TuningRun) else run
        written = 0
        for rec in records:
            rec = replace(rec, run_id=run_id, id=len(self._records) + 1)
            ident = (rec.workload_key, rec.target, rec.trace_json)
            stored = self._records.get(ident)
            if stored is not None:
                rec = resolve_conflict(stored, rec, on_conflict)
            if rec is not None:
                self._records[ident] = rec
                written += 1
        return written

    def select_records(self, where: Where, *, order="id", limit=None) -> list[TuningRecord]:
        return sorted(filter(where.matches, self._records.values()), key=ORDERS[order])[:limit]

    def start_run(self, policy, **info) -> TuningRun:
        run = replace(TuningRun.new(policy, **info), id=len(self._runs) + 1)
        self._runs.append(run)
        return run

    def end_run(self, run, *, trials_done=None, status="done") -> None:
        run = run if isinstance(run, TuningRun) else self._runs[run - 1]
        if trials_done is None:
            trials_done = self.count_records(Where(run_id=run.id))
        run.trials_done, run.status, run.ended_at = trials_done, status, time.time()

    def runs(self, limit=None) -> list[TuningRun]:
        return self._runs[::-1][:limit]


def exercise(db: Database) -> list:
    """What a user sees of ``db`` after the same commits and queries (compared across kinds of database)."""
    t, there = task(), task(target=OTHER_CPU)
    seen = []
    with db.tuning_run("random", seed=1) as a:
        seen.append(db.commit_many([(t, trace(i), ok(i * 1e-4) if i % 3 else failed()) for i in range(1, 8)],
                                   run=a))
        seen.append(db.commit_many([(t, trace(2), ok(9e-4)), (t, trace(4), ok(1e-5))], run=a,
                                   on_conflict="keep_better"))
    db.commit(there, trace(9), ok(1e-3))
    seen.append(db.commit_many([(t, trace(1), ok(1e-3))], on_conflict="skip"))
    seen += [
        [(r.trace_json, r.cost) for r in db.best(t, k=3)],
        [r.target for r in db.best(task(target="llvm -mcpu=znver3"), allow_other_cpus=True)],
        [r.trace_json for r in db.records(t, ok=False)],
        [r.trace_json for r in db.records(order="cost", limit=4)],
        [r.trace_json for r in db.records(order="time")],
        [r.trace_json for r in db.measured_records(t, [trace(8), trace(3), trace(5)])],
        sorted(db.measured_traces(there)),
        db.count(), db.count(t, ok=True), db.count(t.workload_key), db.has_workload(t), db.has_measured(t, trace(9)),
        db.targets(), db.targets(t), [(w.name, w.records) for w in db.workloads()],
        [{k: v for k, v in row.items() if k not in ("first", "last")} for row in db.stats()],
        [(r.policy, r.trials_done, r.status) for r in db.runs()],
        len(list(db.iter_records(batch=2))),
    ]
    log = io.StringIO()
    seen.append(db.export(log, best=2))
    seen.append(log.getvalue())
    return seen


def test_a_database_of_ones_own_answers_as_the_sql_one():
    mem, sql = MemoryDatabase(), Database(":memory:")
    assert exercise(mem) == exercise(sql)
    report = MemoryDatabase().import_(io.StringIO("".join(r.dumps() + "\n" for r in sql.records())))
    assert (report.imported, report.duplicates, report.ok) == (8, 0, True)
    sql.close()


def test_tune_and_build_with_a_database_of_ones_own():
    """A real tuning run of a few trials stores into the in-memory database, resumes from it, and its best
    record is applied at build time."""
    t = autosched.Task("matmul", dict(M=32, N=32, K=32), target="llvm")
    db = MemoryDatabase()
    best = autosched.tune(t, 4, policy="random", database=db, backend="local", batch_size=4, seed=0)
    assert best is not None and best.ok and db.count(t) >= 4
    (run,) = db.runs()
    assert run.status == "done" and run.trials_done == db.count(t)
    assert db.best(t)[0].trace_json == best.trace_json
    before = db.count(t)
    autosched.tune(t, 4, policy="random", database=db, backend="local", batch_size=4, seed=0)  # resumes
    assert db.count(t) > before and len(db.measured_traces(t)) == db.count(t)  # nothing measured twice
    with autosched.apply_history_best(db):
        sch, args = t.apply_best()
    assert autosched.lower(sch, args) is not None
    sch_best, _ = t.apply(db.best(t)[0].trace)
    assert str(autosched.lower(sch, args)) == str(autosched.lower(sch_best, args))
    assert {r.target for r in db.records()} == {t.target.key}
