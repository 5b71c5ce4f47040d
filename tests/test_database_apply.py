"""Applying the best records: ``apply_history_best`` and ``Task.apply_best``."""

from __future__ import annotations

import contextvars
import logging
import threading

import numpy as np
import pytest

import autosched
from _database_helpers import CPU, OTHER_CPU, ok, task, trace
from autosched.database import Database, apply_history_best, best_record, current_contexts
from autosched.te.trace import Split, Trace


@pytest.fixture
def db():
    d = Database(":memory:")
    yield d
    d.close()


def test_apply_best_gives_the_best_schedule_ready_to_build(db):
    t = task(24)
    db.commit(t, trace(5), ok(3e-3))
    db.commit(t, trace(8), ok(1e-3))
    sch, args = t.apply_best(db)
    assert sch.trace == trace(8)
    f = autosched.build(sch, args, target=t.target)
    a, b = np.random.rand(24, 16).astype("float32"), np.random.rand(16, 16).astype("float32")
    c = np.empty((24, 16), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_miss_falls_back_to_the_default_schedule_and_says_what_it_looked_for(db, caplog):
    t = task()
    with caplog.at_level(logging.WARNING, logger="autosched.database"):
        sch, _ = t.apply_best(db)
    assert sch.trace == t.default_trace()
    assert t.workload_key in caplog.text and repr(CPU) in caplog.text and "default schedule" in caplog.text


def test_records_of_another_cpu_need_allow_other_cpus(db, caplog):
    here = task(target=CPU)
    db.commit(task(target=OTHER_CPU), trace(4), ok(1e-3))
    with caplog.at_level(logging.WARNING, logger="autosched.database"):
        sch, _ = here.apply_best(db)
    assert sch.trace == here.default_trace()
    assert OTHER_CPU in caplog.text and "allow_other_cpus=True" in caplog.text
    sch, _ = here.apply_best(db, allow_other_cpus=True)
    assert sch.trace == trace(4)
    with apply_history_best(db, allow_other_cpus=True):
        assert here.apply_best()[0].trace == trace(4)


def test_contexts_nest_innermost_first(db):
    t, u = task(16), task(32)
    outer_db = Database(":memory:")
    outer_db.commit(t, trace(2), ok(1e-3))
    outer_db.commit(u, trace(3), ok(1e-3))
    db.commit(t, trace(7), ok(9e-3))  # slower, but the inner context is asked first
    assert current_contexts() == ()
    with apply_history_best(outer_db) as outer:
        assert t.apply_best()[0].trace == trace(2)
        with apply_history_best(db) as inner:
            assert current_contexts() == (outer, inner)
            assert t.apply_best()[0].trace == trace(7)
            assert u.apply_best()[0].trace == trace(3)  # missing inside: the outer one answers
            assert best_record(u).trace == trace(3)
        assert current_contexts() == (outer,)
        assert t.apply_best()[0].trace == trace(2)
    assert current_contexts() == () and best_record(t) is None
    # a context may be entered again (and nested in itself)
    ctx = apply_history_best(db)
    with ctx, ctx:
        assert len(current_contexts()) == 2
    assert current_contexts() == ()
    assert not db._closed and not outer_db._closed  # the caller's databases stay open


def test_contexts_belong_to_their_thread(db):
    t = task()
    db.commit(t, trace(6), ok(1e-3))
    seen = {}
    with apply_history_best(db):
        th = threading.Thread(target=lambda: seen.update(plain=best_record(t)))
        th.start()
        th.join()
        ctx = contextvars.copy_context()
        th = threading.Thread(target=lambda: seen.update(copied=ctx.run(best_record, t)))
        th.start()
        th.join()
    assert seen["plain"] is None and seen["copied"].trace == trace(6)


def test_concurrent_lookups_in_one_context(tmp_path):
    path = tmp_path / "t.db"
    tasks = [task(m) for m in (8, 16, 24, 32)]
    with Database(path) as db:
        for i, t in enumerate(tasks):
            db.commit_many([(t, trace(j), ok((j + i) * 1e-4)) for j in range(1, 20)])
    errors, found = [], []
    with apply_history_best(path) as ctx:
        def worker(k):
            try:
                for n in range(20):
                    t = tasks[(k + n) % 4]
                    found.append(ctx.query(t).trace == trace(1))
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert not errors and len(found) == 160 and all(found)
    assert ctx.database._closed  # opened from a path: closed with the context


def test_a_record_that_no_longer_replays_is_skipped(db, caplog):
    t = task()
    db.commit(t, Trace([Split(2, 5, 4, None)]), ok(1e-4))  # axis 5 does not exist: does not replay
    db.commit(t, trace(3), ok(2e-4))
    with caplog.at_level(logging.WARNING, logger="autosched.database"):
        sch, _ = t.apply_best(db)
    assert sch.trace == trace(3)
    assert "does not replay" in caplog.text


def test_logs_urls_and_the_default_database(tmp_path, monkeypatch):
    t = task()
    with Database(tmp_path / "t.jsonl") as log:
        log.commit(t, trace(9), ok(1e-3))
    assert t.apply_best(tmp_path / "t.jsonl")[0].trace == trace(9)
    with autosched.apply_history_best(str(tmp_path / "t.jsonl")):
        assert t.apply_best()[0].trace == trace(9)
    with Database(f"sqlite:///{tmp_path}/u.db") as d:
        d.commit(t, trace(10), ok(1e-3))
    assert t.apply_best(f"sqlite:///{tmp_path}/u.db")[0].trace == trace(10)
    # no argument and no context: the default database, if there is one
    monkeypatch.setenv("AUTOSCHED_DB", str(tmp_path / "u.db"))
    assert t.apply_best()[0].trace == trace(10)
    monkeypatch.setenv("AUTOSCHED_DB", str(tmp_path / "absent.db"))
    assert t.apply_best()[0].trace == t.default_trace()
    assert not (tmp_path / "absent.db").exists()  # looking up does not create a database
    with pytest.raises(FileNotFoundError):
        apply_history_best(tmp_path / "absent.db")
