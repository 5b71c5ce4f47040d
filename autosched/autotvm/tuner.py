"""AutoTVM's tuners, each one of autosched's search policies: ``RandomTuner`` (random), ``GridSearchTuner``
(grid, over the template), ``GATuner`` (evolutionary, without a cost model) and ``XGBTuner`` (evolutionary
with the XGBoost cost model; AutoTVM's simulated annealing on it is ``policy="annealing"``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched.autotvm.callback import log_to_file
from autosched.autotvm.measure import MeasureOption
from autosched.autotvm.task import template_space
from autosched.search import tune


class Tuner:
    """Tunes one task with autosched's ``policy``; ``tune(n_trial, measure_option, early_stopping, callbacks)``."""

    policy = "random"
    options: dict[str, Any] = {}

    def __init__(self, task: Any, **options: Any):
        self.task = task
        self.best_record: Any = None

    def tune(self, n_trial: int, measure_option: MeasureOption | None = None, early_stopping: int | None = None,
             callbacks: Sequence[Any] = (), si_prefix: str = "G") -> Any:
        """Measure ``n_trial`` candidates (fewer when the space has fewer); ``callbacks``: a ``log_to_file`` (the
        run's database) and callables ``f(state, inputs, results)`` after each batch (AutoTVM passes the tuner
        as the first argument; here it is the run's state, with ``task``, ``trials_done`` and ``best_cost``)."""
        logs = [c.filename for c in callbacks if isinstance(c, log_to_file)]
        if len(logs) > 1:
            raise ValueError(f"tune: one log_to_file per run (it is the run's database), got {logs}")
        space = "template" if self.policy == "grid" or template_space(self.task) is not None else None
        self.best_record = tune(self.task, n_trial, policy=self.policy, space=space,
                                database=logs[0] if logs else None, backend="local",
                                run_config=measure_option.run_config if measure_option is not None else None,
                                early_stopping=early_stopping, policy_options=dict(self.options) or None,
                                callbacks=[c for c in callbacks if not isinstance(c, log_to_file)],
                                **self._tune_options())
        return self.best_record

    def _tune_options(self) -> dict[str, Any]:
        return {}



class RandomTuner(Tuner):
    """Candidates drawn at random."""

    policy = "random"


class GridSearchTuner(Tuner):
    """Every configuration of the template, in index order."""

    policy = "grid"


class GATuner(Tuner):
    """An evolutionary search that measures what it breeds (no cost model)."""

    policy = "evolutionary"

    def _tune_options(self) -> dict[str, Any]:
        return {"cost_model": "random"}


class XGBTuner(Tuner):
    """An evolutionary search ranked by the XGBoost cost model, trained on the measurements as they come."""

    policy = "evolutionary"

    def __init__(self, task: Any, plan_size: int = 64, feature_type: str = "itervar", loss_type: str = "rank",
                 num_threads: int | None = None, optimizer: str = "sa", diversity_filter_ratio: Any = None,
                 log_interval: int = 50):
        super().__init__(task)

    def _tune_options(self) -> dict[str, Any]:
        return {"cost_model": "xgb"}


__all__ = ["GATuner", "GridSearchTuner", "RandomTuner", "Tuner", "XGBTuner"]
