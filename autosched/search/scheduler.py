"""Tuning many tasks with one budget: spend each round where it is expected to help most (Ansor's scheduler).

The objective is the weighted sum of the tasks' best times (``weight`` = how often a kernel runs in the
model). After a warm-up round per task, each round goes to the task with the largest expected
reduction of that sum per trial: its weight times the larger of

* the recent slope of its best time (how much its last rounds gained), and
* an optimistic bound: the best time times the fraction of trials it has not had yet
  (a task that has had few trials may still improve a lot),

so that a task whose search has flattened yields to one that keeps improving or has barely been tried.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from autosched.measure.measurer import Measurer
from autosched.search.policy import log
from autosched.search.tune import TuningFailed, tune


@dataclass
class TaskProgress:
    """One task's share of a :func:`tune_tasks` run."""

    task: Any
    weight: float
    trials: int = 0
    best_cost: float = math.inf
    history: list[tuple[int, float]] = field(default_factory=list)  # (trials so far, best cost) per round
    done: bool = False  # nothing more to gain (the search stopped for this task)

    def expected_gain(self, round_trials: int, window: int = 2) -> float:
        """Expected reduction of ``weight * best_cost`` per trial if the next round goes to this task."""
        if self.done or not math.isfinite(self.best_cost):
            return 0.0 if self.done else math.inf
        slope = 0.0
        if len(self.history) > window:
            (t0, c0), (t1, c1) = self.history[-1 - window], self.history[-1]
            slope = max(0.0, (c0 - c1) / max(1, t1 - t0))
        optimistic = self.best_cost * round_trials / (self.trials + round_trials) / round_trials
        return self.weight * max(slope, optimistic)


def tune_tasks(tasks: Sequence[Any], weights: Sequence[float] | None = None, trials: int = 1000, *,
               round_trials: int = 32, database: Any = None, measurer: Any = None,
               should_stop: Callable[[], bool] | None = None, **tune_kwargs: Any) -> list[TaskProgress]:
    """Tune ``tasks`` with ``trials`` measurements in all, round by round; returns each task's progress.

    ``weights`` (default 1 each) say how many times each task's kernel runs per use of the model.
    Every round is a :func:`~autosched.tune` call of ``round_trials`` on one task; they share one
    ``database`` (so every round resumes the task's records) and one ``measurer`` (so workers start once).
    ``should_stop()`` is asked after each round (the command line's Ctrl-C handling ends the run there).
    Other keyword arguments go to :func:`~autosched.tune` (``policy``, ``seed``, ...).
    """
    if weights is None:
        weights = [1.0] * len(tasks)
    if len(weights) != len(tasks):
        raise ValueError(f"tune_tasks: {len(tasks)} tasks but {len(weights)} weights")
    if any(w < 0 for w in weights):
        raise ValueError("tune_tasks: weights must be non-negative")
    progress = [TaskProgress(t, float(w)) for t, w in zip(tasks, weights)]
    from autosched.database.database import open_database

    db, own_db = open_database(database)
    own_measurer = measurer is None
    try:
        if own_measurer:
            measurer = Measurer(backend=tune_kwargs.pop("backend", None), config=tune_kwargs.pop("run_config", None))
        spent = 0
        queue = list(range(len(progress)))  # warm-up: one round each, in order
        while spent < trials and not (should_stop is not None and should_stop()):
            if queue:
                i = queue.pop(0)
            else:
                gains = [p.expected_gain(round_trials) for p in progress]
                i = max(range(len(progress)), key=lambda k: gains[k])
                if gains[i] <= 0.0:
                    log.info("tune_tasks: no task has anything left to gain; stopping after %d trials", spent)
                    break
            p = progress[i]
            n = min(round_trials, trials - spent)
            before = db.count(p.task) if hasattr(db, "count") else None
            try:
                best = tune(p.task, n, database=db, measurer=measurer, remeasure=0, **tune_kwargs)
            except TuningFailed as e:
                log.warning("tune_tasks: %s failed this round: %s", p.task, e)
                best = None
                p.done = True
            measured = (db.count(p.task) - before) if before is not None else n
            p.trials += measured
            spent += max(measured, 1)
            if measured == 0:
                p.done = True  # the policy has nothing new to propose for this task
            if best is not None:
                p.best_cost = min(p.best_cost, best.cost)
            p.history.append((p.trials, p.best_cost))
            log.info("tune_tasks: round on %s: %d trials (total %d/%d), best %.3g s", p.task, measured, spent,
                     trials, p.best_cost)
        return progress
    finally:
        if own_measurer and measurer is not None:
            measurer.close()
        if own_db:
            db.close()
