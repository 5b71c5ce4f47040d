"""``pretrain`` (``cost_model="transfer"``): a new task's cost model starts from the records of the other tasks in
the database."""

from __future__ import annotations

import numpy as np
import pytest

import autosched
from autosched.cost_model.transfer import pretrain
from autosched.database import Database
from autosched.measure import MeasureInput, Measurer


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """Real measurements of two small matmuls (12 candidates each), and none of a third."""
    path = tmp_path_factory.mktemp("pre") / "pre.db"
    with Database(path) as d, Measurer(backend="local", n_builders=1) as m:
        for n in (32, 48):
            task = autosched.Task("matmul", dict(M=n, N=n, K=n))
            traces = task.space("generated").sample(12, np.random.default_rng(n))
            inputs = [MeasureInput(task, t) for t in traces]
            d.commit_many(zip(inputs, m.measure(inputs)))
    return path


def test_pretrain_learns_from_the_other_tasks_only(db):
    new = autosched.Task("matmul", dict(M=64, N=64, K=64))
    excluded = autosched.Task("matmul", dict(M=48, N=48, K=48))
    with Database(db) as d:
        model = pretrain(d, exclude=excluded, seed=0)
    assert model.trained
    keys = set(model._keys)
    assert keys == {autosched.Task("matmul", dict(M=32, N=32, K=32)).workload_key}
    assert len(model._keys) <= 12
    cands = [MeasureInput(new, t) for t in new.space("generated").sample(8, np.random.default_rng(0))]
    scores = model.predict(cands)
    assert scores.shape == (8,) and np.all(np.isfinite(scores))
    assert len(set(np.round(scores, 6))) > 1  # a trained model tells candidates apart


def test_pretrain_caps_records_per_task_and_an_empty_database_gives_an_untrained_model(db, tmp_path):
    with Database(db) as d:
        model = pretrain(d, limit_per_task=5, seed=0)
    assert model.trained and len(model._keys) == 10
    with Database(tmp_path / "empty.db") as empty:
        assert not pretrain(empty).trained


def test_tune_starts_from_a_model_trained_on_the_other_tasks(db):
    task = autosched.Task("matmul", dict(M=64, N=64, K=64))
    best = autosched.tune(task, 4, cost_model="transfer", database=str(db), backend="local", batch_size=4,
                          seed=0, remeasure=0)
    assert best is not None and best.ok
