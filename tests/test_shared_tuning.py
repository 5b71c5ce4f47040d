"""Several tuners, one database: what another run committed is taken from the database, not measured again.

The first tests drive ``tune`` in this process against a second connection to the same database (the other
tuner), with a measurer that computes costs from the trace (no compiling), so that what is measured is exact;
the last one runs three real ``autosched tune`` commands at once on one SQLite file and on one PostgreSQL
database.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import autosched
from _database_helpers import make_url
from autosched.database import Database
from autosched.database.query import trusted
from autosched.measure import MeasureResult
from autosched.search import tune
from autosched.search.callbacks import SharedWork
from autosched.search.progress import TuneProgress

REPO = Path(__file__).resolve().parents[1]
TASK = autosched.Task("matmul", dict(M=64, N=64, K=64))


def cost_of(text: str) -> float:
    return 1e-4 * (1 + int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 2**32)


class Measurer:
    """Costs from a hash of the trace; remembers what it was asked to measure. ``before(n, inputs)`` runs
    when the n-th batch (from 1) is being measured: what another tuner does meanwhile."""

    def __init__(self, before=None):
        self.seen: list[str] = []
        self.batches = 0
        self.before = before

    def measure(self, inputs):
        self.batches += 1
        if self.before is not None:
            self.before(self.batches, inputs)
        self.seen += [i.trace.dumps() for i in inputs]
        return [MeasureResult(costs=[cost_of(i.trace.dumps())]) for i in inputs]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    url, cleanup = make_url(request.param, tmp_path)
    yield url
    cleanup()


def _alone(trials: int) -> list[str]:
    """What a run of ``trials`` with seed 3 measures, in order, on an empty database of its own."""
    m = Measurer()
    tune(TASK, trials, policy="random", database=":memory:", measurer=m, batch_size=8, seed=3)
    return m.seen


def test_what_another_tuner_committed_meanwhile_is_taken_not_measured(url):
    alone = _alone(32)
    first, second, rest = alone[:8], alone[8:16], alone[16:]
    fastest = second[5]
    states = []
    with Database(url) as ours, Database(url) as theirs:

        def other_tuner(n, inputs):  # while our first batch is measured, another run commits our next one
            if n == 1:
                with theirs.tuning_run("random", seed=3) as run:
                    theirs.commit_many([(TASK, t, MeasureResult(costs=[1e-6 if t == fastest else cost_of(t)]))
                                        for t in second], run=run, on_conflict="skip")

        m, progress, shared = Measurer(before=other_tuner), TuneProgress(stream=io.StringIO(), live=False), SharedWork()
        best = tune(TASK, 24, policy="random", database=ours, measurer=m, batch_size=8, seed=3,
                    callbacks=[lambda s, i, r: states.append(s), progress, shared])
        assert m.seen == first + rest  # the other run's batch was never measured here, and the search went on
        state = states[-1]
        assert (state.trials_done, state.shared, state.raced) == (24, 8, 0)
        # its records taught this run: the context's best, the best cost, and the record returned
        assert state.best_elsewhere and state.best_cost == pytest.approx(1e-6)
        assert state.context.best(1)[0].dumps() == fastest and best.trace.dumps() == fastest
        assert ours.count(TASK) == 32
        mine, other = sorted(ours.runs(), key=lambda r: r.id != state.run.id)
        assert (mine.trials_done, other.trials_done) == (24, 8)
    # what the person watching is told: on each progress line, and in the command's summary
    assert "[24/24]" in progress.stream.getvalue() and "8 measured by another run" in progress.stream.getvalue()
    assert shared.summary() == ("shared database: 8 proposals were already measured by another run (taken from the "
                                "database, not measured again)")


def test_a_candidate_measured_by_two_at_once_keeps_the_first_record(url):
    """Both measured the batch; the other stored it first. This run counts it, keeps the other's records,
    and leaves the path it shared with the other (as two tuners with the same seed would)."""
    alone = _alone(24)
    states = []
    with Database(url) as ours, Database(url) as theirs:

        def other_tuner(n, inputs):  # the other run measures our second batch at the same moment, and commits first
            if n == 2:
                with theirs.tuning_run("random", seed=3) as run:
                    theirs.commit_many([(TASK, i.trace, MeasureResult(costs=[1e-6])) for i in inputs], run=run,
                                       on_conflict="skip")

        m = Measurer(before=other_tuner)
        tune(TASK, 24, policy="random", database=ours, measurer=m, batch_size=8, seed=3, remeasure=0,
             callbacks=[lambda s, i, r: states.append(s)])
        state = states[-1]
        assert (state.trials_done, state.shared, state.raced) == (24, 0, 8)
        assert len(m.seen) == len(set(m.seen)) == 24 and ours.count(TASK) == 24  # stored once each
        assert m.seen[:16] == alone[:16] and not set(m.seen[16:]) & set(alone[16:])  # then it went elsewhere
        mine, other = sorted(ours.runs(), key=lambda r: r.id != state.run.id)
        assert (mine.trials_done, other.trials_done) == (16, 8)  # a run counts what it stored
        assert {r.trace_json for r in ours.records(run=other)} == set(m.seen[8:16])
        assert all(r.costs == [1e-6] for r in ours.records(run=other))  # the first commit's measurement


# ------------------------------------------------------------------------------- three real processes
MATMUL = ["--workload", "matmul", "--param", "M=64", "--param", "N=64", "--param", "K=64"]
TRIALS, BATCH, TUNERS = 8, 4, 3
# local workers: three local Ray instances on two cores took 40 s, and how the runs share the database does
# not depend on the backend (the Ray backend's own tests are in test_measure_ray and test_ray_cluster)
TUNE = ["tune", *MATMUL, "--policy", "random", "--trials", str(TRIALS), "--batch-size", str(BATCH), "--seed", "0",
        "--backend", "local", "-q"]
RACED = re.compile(r"(\d+) candidates were measured here and by another run at the same moment")


def test_three_tuners_at_once_on_one_database(url, tmp_path):
    """Three identical ``autosched tune`` commands on one task, started together: all end well, each run's
    records are all there and nothing else is, no candidate is stored twice, and ``db best`` is the
    fastest record. Identical commands propose the same candidates in step, so at first they measure the
    same ones at the same moment; each says how many it measured that another stored first, then leaves
    the others' path: the three store at least twice what one would, instead of the same 8."""
    env = dict(os.environ, AUTOSCHED_NUM_THREADS="1", AUTOSCHED_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-m", "autosched", *TUNE, "--db", url], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(TUNERS)]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    raced = [int(m.group(1)) if (m := RACED.search(err)) else 0 for _, err in outs]

    if not url.startswith("postgresql"):
        con = sqlite3.connect(url)
        try:
            assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            con.close()
    with Database(url, create=False) as db:
        records = db.records(TASK)
        runs = db.runs()
        assert len(runs) == TUNERS and all(r.status == "done" for r in runs)
        stored = sorted(len(db.records(run=r)) for r in runs)
        assert stored == sorted(r.trials_done for r in runs)
        # each measured its trials: what it stored (all of it is there), and what another stored first
        assert stored == sorted(TRIALS - n for n in raced), [err for _, err in outs]
        assert sum(stored) == len(records) == len({r.trace_json for r in records})  # none outside the runs
        # measured twice: only what two had in flight at once, about a batch for each tuner but the first
        assert sum(raced) <= (TUNERS - 1) * BATCH, raced
        ok = [r for r in records if r.ok]
        fastest = min([r for r in ok if trusted(r)] or ok, key=lambda r: (r.cost, r.id))  # trusted first
    best = subprocess.run([sys.executable, "-m", "autosched", "db", "best", *MATMUL, "--db", url], env=env,
                          capture_output=True, text=True, timeout=120)
    assert best.returncode == 0, best.stderr
    assert best.stdout.splitlines()[1].split()[0] == f"#{fastest.id}"  # under the task's line


def test_progress_counts_are_each_tasks_own():
    """`tune --model` reuses one progress display for every task: each task's line counts that task's
    results (the second task's line once read '16 measured: -9 kept, 25 cut off')."""
    from types import SimpleNamespace

    from autosched.result import ErrorKind

    out = io.StringIO()
    progress = TuneProgress(stream=out, live=False)
    cut = SimpleNamespace(error_kind=ErrorKind.CUT_OFF, flags=())
    ok = SimpleNamespace(error_kind=None, flags=())
    for label in ("first", "second"):
        state = SimpleNamespace(task=SimpleNamespace(label=label), trials=16, trials_done=0, best_cost=float("inf"),
                                resumed=0, context=SimpleNamespace(cost_model=None), shared=0, raced=0)
        progress.on_start(state)
        state.trials_done = 16
        progress(state, [None] * 16, [cut] * 12 + [ok] * 4)
        progress.on_end(state)
    lines = [x for x in out.getvalue().splitlines() if x.startswith("[16/16]")]
    assert len(lines) == 2 and all("4 kept, 12 cut off" in x for x in lines), lines
