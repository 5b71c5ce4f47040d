"""tune_tasks: one budget over many tasks, spent where it helps most."""

from __future__ import annotations

import hashlib

import pytest

import autosched
from autosched.database import Database
from autosched.measure.result import MeasureResult
from autosched.search.scheduler import TaskProgress, tune_tasks


class ScaledFakeMeasurer:
    """Costs from a hash of the trace, scaled per task (``scales``: workload key -> seconds)."""

    def __init__(self, scales: dict[str, float] | None = None):
        self.scales = scales or {}
        self.per_task: dict[str, int] = {}

    def measure(self, inputs):
        out = []
        for i in inputs:
            text = i.trace.dumps()
            scale = self.scales.get(i.task.workload_key, 1e-3 if i.task.name == "matmul" else 1e-6)
            out.append(MeasureResult(costs=[scale * (1 + int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
                                                    / 2**32)]))
            self.per_task[i.task.name] = self.per_task.get(i.task.name, 0) + 1
        return out

    def close(self):
        raise AssertionError("tune_tasks must not close a measurer it was given")


def test_the_task_with_more_to_gain_gets_more_trials(tmp_path):
    slow = autosched.Task("matmul", dict(M=32, N=32, K=32))
    fast = autosched.Task("elementwise", dict(C=2, H=4, W=8))
    m = ScaledFakeMeasurer()
    with Database(tmp_path / "t.db") as db:
        prog = tune_tasks([fast, slow], trials=96, round_trials=8, database=db, measurer=m, policy="random",
                          seed=0)
        by = {p.task.name: p for p in prog}
        assert sum(p.trials for p in prog) == 96
        assert by["matmul"].trials > 2 * by["elementwise"].trials, (by["matmul"].trials, by["elementwise"].trials)
        assert by["elementwise"].trials >= 8  # the warm-up round
        assert db.count(slow) == by["matmul"].trials and db.count(fast) == by["elementwise"].trials
        assert m.per_task == {"matmul": by["matmul"].trials, "elementwise": by["elementwise"].trials}


def test_weights_count():
    """Two tasks of equal single-run cost: the one that runs 100 times per model use gets the trials."""
    a = autosched.Task("matmul", dict(M=32, N=32, K=32))
    b = autosched.Task("matmul", dict(M=48, N=32, K=32))
    m = ScaledFakeMeasurer({a.workload_key: 1e-4, b.workload_key: 1e-4})
    prog = tune_tasks([a, b], weights=[1.0, 100.0], trials=64, round_trials=8, database=":memory:", measurer=m,
                      policy="random", seed=0)
    assert prog[1].trials > 2 * prog[0].trials, (prog[0].trials, prog[1].trials)


def test_expected_gain_prefers_untried_and_improving_tasks():
    a, b = TaskProgress("a", 1.0), TaskProgress("b", 1.0)
    assert a.expected_gain(8) == float("inf")  # never measured: must be tried
    a.trials, a.best_cost, a.history = 64, 1.0, [(16, 1.0), (32, 1.0), (48, 1.0), (64, 1.0)]
    b.trials, b.best_cost, b.history = 64, 1.0, [(16, 2.0), (32, 1.6), (48, 1.3), (64, 1.0)]
    assert b.expected_gain(8) > a.expected_gain(8) > 0
    a.done = True
    assert a.expected_gain(8) == 0.0


def test_bad_arguments():
    t = autosched.Task("matmul", dict(M=8, N=8, K=8))
    with pytest.raises(ValueError, match="weights"):
        tune_tasks([t], weights=[1.0, 2.0], trials=8, measurer=ScaledFakeMeasurer())
    with pytest.raises(ValueError, match="non-negative"):
        tune_tasks([t], weights=[-1.0], trials=8, measurer=ScaledFakeMeasurer())
