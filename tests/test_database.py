"""The record API of ``autosched.database.Database``, the same on SQLite and on a real PostgreSQL server.

The PostgreSQL cases need ``AUTOSCHED_TEST_POSTGRES_URL`` (``.ci/run`` starts a throwaway server and sets
it); without it they skip with the reason "no PostgreSQL server could be started".
"""

from __future__ import annotations

import statistics

import pytest

from _database_helpers import CPU, OTHER_CPU, failed, make_url, ok, task, trace
from autosched.database import LOG_VERSION, Database, DatabaseError, TuningRecord, producer_info
from autosched.measure import ErrorKind, MeasureInput, MeasureResult


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    url, cleanup = make_url(request.param, tmp_path)
    d = Database(url)
    yield d
    d.close()
    cleanup()


def test_best_orders_successful_records_by_median_cost(db):
    t = task()
    db.commit(t, trace(1), ok(3e-3))
    db.commit(t, trace(2), ok(1e-3))
    db.commit(t, trace(3), failed())
    db.commit(t, trace(4), ok(2e-3))
    best = db.best(t, k=10)
    assert [r.trace for r in best] == [trace(2), trace(4), trace(1)]
    assert all(r.ok for r in best)
    assert best[0].cost == pytest.approx(statistics.median([1e-3, 1.01e-3, 1.02e-3]))
    assert [r.trace for r in db.best(t)] == [trace(2)]
    assert db.best(t, k=0) == []
    # by workload key and explicit target, as a model build would ask
    assert [r.trace for r in db.best(t.workload_key, CPU, k=2)] == [trace(2), trace(4)]


def test_cold_times_are_compared_with_cold_times_only(db):
    """Records timed with cold caches (``tune --model`` on a CPU) are a task's ranking once there is one: a cold
    time is longer than a warm one of the same kernel, so the two are never weighed against each other."""
    from autosched.database import Where
    from autosched.result import ResultFlag

    t = task()
    db.commit(t, trace(1), ok(1e-3))  # warm, the shortest time
    assert [r.trace for r in db.best(t, k=3)] == [trace(1)]  # only warm ones: as before
    db.commit(t, trace(2), MeasureResult(costs=[3e-3] * 3, flags=[ResultFlag.COLD]))
    db.commit(t, trace(3), MeasureResult(costs=[2e-3] * 3, flags=[ResultFlag.UNCHECKED, ResultFlag.COLD]))
    assert [r.trace for r in db.best(t, k=3)] == [trace(3), trace(2)]
    assert [r.trace for r in db.select_records(Where(workload_key=t.workload_key, cold=False))] == [trace(1)]
    assert ResultFlag.COLD in db.best(t)[0].flags


def test_record_keeps_everything_measured(db):
    t = task()
    res = MeasureResult(costs=[1.5e-3, 1.25e-3, 1.75e-3], build_seconds=0.031, run_seconds=0.42,
                        timestamp=1_790_000_123.25)
    db.commit(t, trace(5), res)
    (rec,) = db.records()
    assert isinstance(rec, TuningRecord)
    assert rec.workload_key == t.workload_key and rec.workload_name == "matmul"
    assert rec.workload_args == t.args and rec.target == CPU
    assert rec.trace == trace(5)
    assert rec.result == res  # every field, floats exactly
    assert rec.cost == 1.5e-3 and rec.mean_cost == pytest.approx(1.5e-3)
    assert rec.spread == pytest.approx(0.5 / 1.5)
    assert rec.version == LOG_VERSION
    prod = producer_info()
    assert (rec.autosched_version, rec.llvm_version, rec.host_cpu) == (prod["autosched"], prod["llvm"],
                                                                        prod["host_cpu"])
    assert rec.autosched_version == __import__("autosched").__version__
    assert rec.task() == t


def test_failed_candidates_are_kept_but_never_best(db):
    t = task()
    db.commit(t, trace(1), failed(ErrorKind.RUNTIME_CRASH, "segfault in worker"))
    assert db.best(t) == []
    (rec,) = db.records(t, ok=False)
    assert not rec.ok and rec.cost is None
    assert rec.error_kind == ErrorKind.RUNTIME_CRASH and rec.error_msg == "segfault in worker"
    assert db.count(t) == 1 and db.count(t, ok=True) == 0 and db.count(t, ok=False) == 1
    assert db.has_measured(t, trace(1))


def test_a_candidate_is_stored_once(db):
    t = task()
    db.commit(t, trace(1), ok(2e-3))
    db.commit(t, trace(1), ok(3e-3))  # default: the newer measurement replaces
    assert db.count() == 1 and db.best(t)[0].costs[0] == 3e-3
    db.commit(t, trace(1), ok(1e-3), on_conflict="skip")
    assert db.best(t)[0].costs[0] == 3e-3
    db.commit(t, trace(1), ok(4e-3), on_conflict="keep_better")
    assert db.best(t)[0].costs[0] == 3e-3
    db.commit(t, trace(1), failed(), on_conflict="keep_better")
    assert db.best(t)[0].costs[0] == 3e-3
    db.commit(t, trace(1), ok(0.5e-3), on_conflict="keep_better")
    assert db.best(t)[0].costs[0] == 0.5e-3
    assert db.count() == 1
    # a trace given as JSON text or a list is the same candidate
    db.commit(t, trace(1).dumps(), ok(1e-3))
    db.commit(t, trace(1).to_json(), ok(1e-3))
    assert db.count() == 1
    with pytest.raises(ValueError, match="on_conflict"):
        db.commit(t, trace(1), ok(1e-3), on_conflict="merge")


def test_commit_many_in_one_call(db):
    t, u = task(16), task(32)
    n = db.commit_many([(t, trace(i), ok(i * 1e-4)) for i in range(1, 51)]
                       + [(MeasureInput(u, trace(i)), ok(i * 1e-4)) for i in range(1, 11)])
    assert n == 60
    assert db.count() == 60 and db.count(t) == 50 and db.count(u) == 10
    assert [r.trace for r in db.best(u, k=2)] == [trace(1), trace(2)]
    # records as they are (e.g. from another database)
    other = Database(":memory:")
    assert other.commit_records(db.records(u)) == 10
    assert [r.trace_json for r in other.records()] == [r.trace_json for r in db.records(u)]
    assert db.commit_many([]) == 0


def test_measured_traces_for_resume_are_per_target(db):
    t, t_other = task(), task(target=OTHER_CPU)
    db.commit_many([(t, trace(i), ok(1e-3) if i % 2 else failed()) for i in range(1, 7)])
    db.commit(t_other, trace(9), ok(1e-3))
    assert db.measured_traces(t) == {trace(i).dumps() for i in range(1, 7)}
    assert db.measured_traces(t_other) == {trace(9).dumps()}
    assert db.has_measured(t, trace(2)) and not db.has_measured(t, trace(9))
    assert db.has_measured(t_other, trace(9)) and not db.has_measured(task(64), trace(1))
    assert db.measured_traces(task(64)) == set()


def test_measured_records_of_some_traces(db):
    """A tuner sharing the database asks, before measuring a batch, which of its traces are stored."""
    t, t_other = task(), task(target=OTHER_CPU)
    assert db.measured_records(t, [trace(1)]) == []  # no workload yet
    db.commit_many([(t, trace(i), ok(i * 1e-4) if i % 2 else failed()) for i in range(1, 7)])
    db.commit(t_other, trace(8), ok(1e-3))
    got = db.measured_records(t, [trace(8), trace(2), trace(5), trace(9), trace(2)])
    assert [r.trace for r in got] == [trace(2), trace(5)]  # in the order stored; failures too
    assert not got[0].ok and got[1].cost == pytest.approx(5.05e-4)
    assert [r.trace for r in db.measured_records(t_other, [trace(8), trace(2)])] == [trace(8)]
    assert db.measured_records(t, []) == []


def test_a_candidate_stays_with_the_run_that_stored_it_first(db):
    """Two tuners that measured a candidate at the same moment: the first commit stays (with its run), the
    second stores nothing for it and is told so; a later re-measurement replaces the figures, not the run."""
    t = task()
    with db.tuning_run("random", seed=1) as a, db.tuning_run("random", seed=2) as b:
        assert db.commit_many([(t, trace(i), ok(1e-3)) for i in (1, 2, 3)], run=a, on_conflict="skip") == 3
        assert db.commit_many([(t, trace(i), ok(2e-3)) for i in (2, 3, 4)], run=b, on_conflict="skip") == 1
        db.commit_many([(t, trace(2), ok(0.5e-3))], run=b)  # b re-measures its best: replaced in a's record
        assert db.commit_many([(t, trace(3), ok(0.1e-3)), (t, trace(4), ok(9e-3))], run=b,
                              on_conflict="keep_better") == 1
    db.commit(t, trace(5), ok(1e-3))  # outside any run: it joins the run that measures it again
    db.commit_many([(t, trace(5), ok(1e-3))], run=b)
    assert db.count(t) == 5
    recs = {r.trace: r for r in db.records(t)}
    assert [recs[trace(i)].run_id for i in range(1, 6)] == [a.id, a.id, a.id, b.id, b.id]
    assert recs[trace(2)].costs[0] == 0.5e-3 and recs[trace(3)].costs[0] == 0.1e-3
    assert recs[trace(4)].costs[0] == 2e-3
    runs = {r.id: r for r in db.runs()}
    assert (runs[a.id].trials_done, runs[b.id].trials_done) == (3, 1)  # what each stored, at its end
    assert [len(db.records(run=r)) for r in (a, b)] == [3, 2]


def test_lookups_are_target_aware(db):
    here, there = task(target=CPU), task(target=OTHER_CPU)
    assert here.workload_key == there.workload_key
    db.commit(there, trace(3), ok(1e-3))
    assert db.best(here) == []  # tuned on another CPU: not silently reused
    (rec,) = db.best(here, allow_other_cpus=True)
    assert rec.target == OTHER_CPU and rec.trace == trace(3)
    db.commit(here, trace(4), ok(5e-3))  # slower, but this CPU's own record wins when there is one
    assert [r.target for r in db.best(here, allow_other_cpus=True)] == [CPU]
    assert db.targets(here) == sorted([CPU, OTHER_CPU])
    # a different target kind or option is never "another CPU"
    assert db.best(task(target="cuda"), allow_other_cpus=True) == []
    assert db.best(task(target=f"{CPU} -mtriple=aarch64-linux-gnu"), allow_other_cpus=True) == []
    # num-cores is not part of the key: same records
    assert db.best(task(target=f"{OTHER_CPU} -num-cores=1"))[0].trace == trace(3)


def test_records_filters_and_orders(db):
    t, u = task(16), task(32)
    db.commit_many([(t, trace(i), ok(i * 1e-4, ts=1000.0 + i)) for i in range(1, 21)])
    db.commit_many([(u, trace(i), failed()) for i in range(1, 6)])
    db.commit(task(16, OTHER_CPU), trace(1), ok(1.0, ts=2_000_000_000.0))
    assert len(db.records()) == 26
    assert len(db.records(t)) == 20 and len(db.records(t.workload_key, CPU)) == 20
    assert len(db.records(target=OTHER_CPU)) == 1
    assert len(db.records(workload_name="matmul")) == 26 and db.records(workload_name="conv2d") == []
    assert len(db.records(ok=False)) == 5 and len(db.records(ok=True)) == 21
    assert [r.trace for r in db.records(t, since=1005.0, until=1008.0)] == [trace(5), trace(6), trace(7)]
    assert [r.trace for r in db.records(t, order="cost", limit=2)] == [trace(1), trace(2)]
    assert db.records(order="time", limit=1)[0].target == OTHER_CPU
    assert db.records(order="cost")[-1].ok is False  # failures last
    assert [r.id for r in db.iter_records(batch=3)] == [r.id for r in db.records()]
    assert len(list(db.iter_records(limit=7, batch=3))) == 7
    assert db.records(task(64)) == [] and db.count(task(64)) == 0
    with pytest.raises(ValueError, match="order"):
        db.records(order="random")


def test_workloads_and_has_workload(db):
    t, u = task(16), task(32)
    assert not db.has_workload(t)
    db.commit(t, trace(1), ok(1e-3))
    db.commit(t, trace(2), ok(1e-3))
    db.commit(u, trace(1), failed())
    assert db.has_workload(t) and db.has_workload(u.workload_key) and not db.has_workload(task(64))
    infos = {w.key: w for w in db.workloads()}
    assert infos[t.workload_key].records == 2 and infos[u.workload_key].records == 1
    assert infos[t.workload_key].args == t.args and infos[t.workload_key].name == "matmul"
    assert len(infos[t.workload_key].hash) == 64
    with pytest.raises(TypeError, match="workload key"):
        db.best("not-a-key")


def test_tuning_runs(db):
    t = task()
    with db.tuning_run("random", seed=7, trials=10, target=t.target, config={"batch": 4}) as run:
        db.commit_many([(t, trace(i), ok(1e-3)) for i in range(1, 5)], run=run)
        db.commit(t, trace(5), failed(), run=run)
    db.commit(t, trace(6), ok(1e-3))  # outside the run
    with pytest.raises(RuntimeError):
        with db.tuning_run("evolutionary", trials=3) as bad:
            raise RuntimeError("policy crashed")
    r_bad, r = db.runs()
    assert (r.id, r.policy, r.seed, r.trials_asked, r.trials_done, r.status) == (
        run.id, "random", 7, 10, 5, "done")
    assert r.config == {"batch": 4} and r.target == CPU and r.ended_at >= r.started_at
    assert (r_bad.id, r_bad.status, r_bad.trials_done) == (bad.id, "failed", 0)
    assert {x.trace for x in db.records(run=run)} == {trace(i) for i in range(1, 6)}
    assert all(x.run_id == run.id for x in db.records(run=run.id))


def test_reopen_and_close(db):
    t = task()
    db.commit(t, trace(1), ok(1e-3))
    again = Database(db.location.url if db.dialect == "postgresql" else db.location.sqlite_path)
    try:
        assert again.best(t)[0].trace == trace(1)
        again.commit(t, trace(2), ok(0.5e-3))
    finally:
        again.close()
    assert db.best(t)[0].trace == trace(2)  # another connection's commit is seen
    db.close()
    db.close()  # twice is fine
    with pytest.raises(DatabaseError, match="closed"):
        db.best(t)


def test_password_is_not_shown():
    from autosched.database.location import resolve

    loc = resolve("postgresql://alice:s3cret@db.example:5432/tuning")
    assert loc.url.startswith("postgresql+psycopg://alice:s3cret@")
    d = Database.__new__(Database)
    d.location = loc
    assert "s3cret" not in str(d) and "alice" in repr(d)


def test_a_database_travels_to_other_processes_by_location(db):
    import pickle

    db.commit(task(), trace(1), ok(1e-3))
    again = pickle.loads(pickle.dumps(db))
    try:
        assert again is not db and again.best(task())[0].trace == trace(1)
    finally:
        again.close()
    with pytest.raises(TypeError, match="in memory"):
        pickle.dumps(Database(":memory:"))


def test_threads_share_one_database(db):
    import threading

    errors = []

    def writer(d, t, w):
        try:
            for i in range(40):
                d.commit(t, trace(w * 1000 + i + 1), ok(1e-3 + i * 1e-6))
                d.best(t)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def run(d, t):
        threads = [threading.Thread(target=writer, args=(d, t, w)) for w in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()

    run(db, task())
    assert not errors and db.count() == 160
    mem = Database(":memory:")  # one shared connection, serialised by a lock
    run(mem, task(32))
    assert not errors and mem.count() == 160
