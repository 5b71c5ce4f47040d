"""Callbacks of :func:`~autosched.search.tune.tune` that a tuning run may add: a wall-clock budget, the tally of
what other tuners on a shared database did for the run, a JSON-lines log appended batch by batch, and the
best so far against the clock (for the time to quality)."""

from __future__ import annotations

import math
import time
from typing import Any

from autosched.database.record import TuningRecord


class StopCondition:
    """A tune callback that only decides whether the run stops (it reads no results): the tuning loop also
    calls it, with empty batches, after a proposal that brought nothing new, so that a run in a space that
    ran dry stops on time."""

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        raise NotImplementedError


class TimeBudget(StopCondition):
    """A tune callback (and ``should_stop`` of the task scheduler) that ends the run once ``seconds`` passed."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.time() + seconds

    def spent(self) -> bool:
        return self.deadline is not None and time.time() >= self.deadline

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        if self.spent():
            state.stop_reason = "the time budget is spent"


class SharedWork:
    """A tune callback that adds up, over the runs of one command, what other tuners on the same database
    did for it: proposals they had measured (not measured here) and candidates both measured at once."""

    def __init__(self) -> None:
        self.shared = 0
        self.raced = 0
        self.states: dict[Any, Any] = {}

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        pass

    def on_end(self, state: Any) -> None:
        self.shared += state.shared
        self.raced += state.raced
        self.states[state.task] = state  # updated by tune after this: the re-measured best, and why it moved

    def summary(self) -> str:
        """The summary's line ("" when no other tuner was met)."""
        parts = []
        if self.shared:
            parts.append(f"{self.shared} proposals were already measured by another run (taken from the database, "
                         f"not measured again)")
        if self.raced:
            parts.append(f"{self.raced} candidates were measured here and by another run at the same moment (the "
                         f"record stored first is kept)")
        return "shared database: " + "; ".join(parts) if parts else ""


class AppendLog:
    """A tune callback that appends each batch's records to a JSON-lines log (one write per batch)."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        lines = [TuningRecord.from_measurement(inp.task, inp.trace, res).dumps() + "\n"
                 for inp, res in zip(inputs, results)]
        self.fh.write("".join(lines))
        self.fh.flush()



class BestOverTime:
    """A tune callback that keeps, per task, (wall-clock time, trials, best seconds so far) after each batch:
    :meth:`time_to` answers when the run's best first got within a factor of a reference time."""

    def __init__(self) -> None:
        self.points: dict[Any, list[tuple[float, int, float]]] = {}

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        self.points.setdefault(state.task, []).append((time.time(), state.trials_done, state.best_cost))

    def time_to(self, task: Any, seconds: float, share: float = 1.0) -> tuple[float, int] | None:
        """(wall-clock time, trials) of the first batch after which the best ran at ``share`` of the speed of a
        kernel taking ``seconds`` or faster; None when the run never got there."""
        for when, trials, best in self.points.get(task, ()):
            if math.isfinite(best) and seconds / best >= share:
                return when, trials
        return None
