"""TVM's ``tvm.auto_scheduler`` names, over autosched's tuning, so that its tutorials' flows run as written:

    task = auto_scheduler.SearchTask(func=matmul_add, args=(N, L, M, "float32"), target="llvm")
    task.tune(auto_scheduler.TuningOptions(num_measure_trials=64,
                                           measure_callbacks=[auto_scheduler.RecordToFile("matmul.json")]))
    sch, args = task.apply_best("matmul.json")

    tasks, task_weights = auto_scheduler.extract_tasks(mod["main"], params, target)
    auto_scheduler.TaskScheduler(tasks, task_weights).tune(tune_option)
    policy = auto_scheduler.SketchPolicy(task, auto_scheduler.XGBModel(),          # resume the log's search
                                         init_search_callbacks=[auto_scheduler.PreloadMeasuredStates(log_file)])
    with auto_scheduler.ApplyHistoryBest(log_file):
        lib = relay.build(mod, target=target, params=params)

A ``RecordToFile`` log is the run's database: autosched's JSON-lines records (not TVM's format: a log of one
tool does not load in the other), appended as they are measured; a run given a log that has records resumes
from them (the cost model learns from them, and they are not measured again), which is what TVM's
``PreloadMeasuredStates`` and ``XGBModel.update_from_file`` do. Without one, records go to the user's
database. ``LocalBuilder`` / ``LocalRunner`` build and time candidates in local worker processes; the search
is autosched's evolutionary search over generated sketches with its XGBoost cost model (TVM's
``SketchPolicy`` with ``XGBModel``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from autosched.database.apply import ApplyHistoryBest as _ApplyHistoryBest
from autosched.database.location import LOG_SUFFIXES
from autosched.measure.runner import RunConfig
from autosched.relay.backend.build_module import extract_tasks as _extract_tasks
from autosched.search import tune, tune_tasks
from autosched.task import Task
from autosched.te.analysis import ComputeDAG
from autosched.te.trace_code import schedule_code
from autosched.workloads import register_workload

log = logging.getLogger("autosched.auto_scheduler")


class ApplyHistoryBest(_ApplyHistoryBest):
    """TVM's ``with auto_scheduler.ApplyHistoryBest(log_file): relay.build(...)``: the log's best records used for
    the kernels built inside. As in TVM, a log that does not exist yet applies nothing (TVM's tutorials build
    before their tuning has run): a warning names it, and every kernel takes its default schedule."""

    def __init__(self, records: Any, n_lines: int | None = None, include_compatible: bool = False):
        missing = (isinstance(records, (str, os.PathLike)) and os.fspath(records).endswith(LOG_SUFFIXES)
                   and not os.path.exists(records))
        if missing:
            log.warning("ApplyHistoryBest: there is no tuning log at %s (yet): every kernel takes its default "
                        "schedule", os.fspath(records))
        super().__init__(os.fspath(records) if isinstance(records, os.PathLike) else records,
                         allow_other_cpus=include_compatible, missing_ok=missing)


class LocalBuilder:
    """TVM's local builder: candidates are compiled in local worker processes (``timeout`` seconds each)."""

    def __init__(self, timeout: float = 15, n_parallel: int | None = None, build_func: str = "default"):
        if build_func not in ("default", "ndk"):
            raise ValueError(f"LocalBuilder: build_func {build_func!r} is not one autosched has ('default')")
        self.timeout = timeout
        self.n_parallel = n_parallel


class LocalRunner:
    """TVM's local runner: each candidate runs ``repeat`` times ``number`` runs (``number`` raised until a repeat
    lasts ``min_repeat_ms``), with the CPU caches flushed first when ``enable_cpu_cache_flush``."""

    def __init__(self, timeout: float = 10, number: int = 3, repeat: int = 1, min_repeat_ms: float = 100,
                 cooldown_interval: float = 0.0, enable_cpu_cache_flush: bool = False, device: int = 0):
        self.config = RunConfig(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, timeout=timeout,
                                flush_cache=enable_cpu_cache_flush)


class RecordToFile:
    """TVM's callback that logs each measurement: the log (``.json`` or ``.jsonl``) becomes the run's database."""

    def __init__(self, filename: str | os.PathLike = "auto_scheduler_tuning.json"):
        self.filename = os.fspath(filename)
        if not self.filename.endswith(LOG_SUFFIXES):
            raise ValueError(f"RecordToFile: {self.filename!r} must end in {' or '.join(LOG_SUFFIXES)} (a JSON-lines "
                             f"tuning log)")


class TuningOptions:
    """TVM's tuning options: ``num_measure_trials`` in all, ``early_stopping`` (trials without improvement),
    ``num_measures_per_round`` (candidates measured per batch), the builder and runner, ``measure_callbacks``
    (a ``RecordToFile``, and callables ``f(state, inputs, results)`` called after each batch)."""

    def __init__(self, num_measure_trials: int = 0, early_stopping: int | None = None,
                 num_measures_per_round: int = 64, verbose: int = 1, builder: Any = "local", runner: Any = "local",
                 measure_callbacks: Sequence[Any] | None = None):
        for what, x, kind in (("builder", builder, LocalBuilder), ("runner", runner, LocalRunner)):
            if x != "local" and not isinstance(x, kind):
                raise ValueError(f"TuningOptions: {what} must be 'local' or a {kind.__name__} (autosched has no "
                                 f"RPC {what}; tune on the machine the kernels will run on), got {x!r}")
        logs = [c.filename for c in measure_callbacks or () if isinstance(c, RecordToFile)]
        if len(logs) > 1:
            raise ValueError(f"TuningOptions: one RecordToFile log per run (it is the run's database), got {logs}")
        self.num_measure_trials = int(num_measure_trials)
        self.early_stopping = early_stopping
        self.batch_size = max(1, int(num_measures_per_round))
        self.verbose = verbose
        self.run_config = runner.config if isinstance(runner, LocalRunner) else None
        self.log_file = logs[0] if logs else None
        self.callbacks = [c for c in measure_callbacks or () if not isinstance(c, RecordToFile)]

    def tune_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`autosched.tune` these options stand for."""
        return {"database": self.log_file, "backend": "local", "run_config": self.run_config,
                "batch_size": self.batch_size, "early_stopping": self.early_stopping, "callbacks": self.callbacks}


class RandomModel:
    """TVM's random cost model: the search ranks candidates without a learned model."""

    cost_model = "random"

    def __init__(self) -> None:
        self.files: list[str] = []


class XGBModel:
    """TVM's XGBoost cost model: autosched's, trained on the run's records as they come (and, on a resumed run,
    on the records already in its log). ``update_from_file(log)`` names that log: it must be the run's own
    ``RecordToFile`` log, the records the search resumes from."""

    cost_model = "xgb"

    def __init__(self, verbose_eval: int = 25, num_warmup_sample: int = 100, seed: int | None = None,
                 model_file: str | None = None, adaptive_training: bool = False, disable_update: bool = False):
        if model_file is not None:
            raise ValueError("XGBModel: model_file (a saved TVM XGBoost model) is not supported; the model learns "
                             "from the run's log (update_from_file)")
        self.seed = seed
        self.files: list[str] = []

    def update_from_file(self, file_name: str | os.PathLike, n_lines: int | None = None) -> None:
        """Learn from the records of ``file_name`` (the log this run resumes and writes)."""
        path = os.fspath(file_name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"XGBModel.update_from_file: no tuning log at {path}")
        self.files.append(path)


class PreloadMeasuredStates:
    """TVM's search callback that starts a search from a log's measured schedules; in autosched a run resumes
    from the records of the log it writes, so the file must be the run's ``RecordToFile`` log."""

    def __init__(self, filename: str | os.PathLike = "auto_scheduler_tuning.json"):
        self.filename = os.fspath(filename)


class SketchPolicy:
    """TVM's sketch search policy: autosched's evolutionary search over generated sketches, ranked by
    ``program_cost_model`` (``XGBModel()`` or ``RandomModel()``), seeded by ``seed``."""

    def __init__(self, task: Any, program_cost_model: Any = None, params: dict | None = None,
                 seed: int | None = None, verbose: int = 1, init_search_callbacks: Sequence[Any] | None = None):
        model = program_cost_model if program_cost_model is not None else RandomModel()
        if not isinstance(model, (XGBModel, RandomModel)):
            raise TypeError(f"SketchPolicy: program_cost_model must be an XGBModel or a RandomModel, got {model!r}")
        if params:
            raise ValueError(f"SketchPolicy: TVM's search parameters {sorted(params)} do not apply to autosched's "
                             "evolutionary search (its options are autosched.tune's policy_options)")
        for cb in init_search_callbacks or ():
            if not isinstance(cb, PreloadMeasuredStates):
                raise TypeError(f"SketchPolicy: init_search_callbacks may hold PreloadMeasuredStates, got {cb!r}")
        self.task = task
        self.cost_model = model.cost_model
        self.seed = seed if seed is not None else getattr(model, "seed", None) or 0
        self.resume_from = sorted({cb.filename for cb in init_search_callbacks or ()} | set(model.files))

    def tune_kwargs(self, log_file: str | None) -> dict[str, Any]:
        """autosched.tune's policy, cost model and seed; checks that every log to resume from is ``log_file``."""
        for f in self.resume_from:
            if log_file is None or os.path.abspath(f) != os.path.abspath(log_file):
                raise ValueError(f"SketchPolicy: the search resumes from {f}, but the run writes "
                                 f"{log_file or 'to the default database'}: autosched resumes from the log it "
                                 f"writes, so give RecordToFile({f!r}) in the TuningOptions")
        return {"policy": "evolutionary", "cost_model": self.cost_model, "seed": self.seed}


class SearchTask(Task):
    """TVM's ``SearchTask(func=f, args=(...), target=...)``: the task of a workload function (registered
    here if it is not yet), with ``compute_dag``, ``tune``, ``apply_best`` and ``print_best``."""

    def __init__(self, func: Callable | str | None = None, args: Sequence[Any] | None = None,
                 compute_dag: Any = None, workload_key: str | None = None, target: Any = None,
                 target_host: Any = None, hardware_params: Any = None, layout_rewrite_option: Any = None,
                 task_inputs: Any = None, task_inputs_overwrite: bool = False, task_inputs_save_to_file: bool = False,
                 desc: str = ""):
        if func is None:
            raise ValueError("SearchTask: give the workload function (func=...) and its args; autosched makes tasks "
                             "from registered workloads, not from a compute_dag or a TVM workload key")
        if callable(func) and not hasattr(func, "workload_name"):
            func = register_workload(func)
        super().__init__(func, tuple(args or ()), target if target is not None else "llvm")
        self.desc = desc

    def __setstate__(self, state: dict) -> None:  # a task travels as (name, args, target)
        Task.__init__(self, state["name"], state["args"], state["target"])
        self.desc = ""

    def tune(self, tuning_options: TuningOptions, search_policy: Any = None) -> Any:
        """Tune with ``tuning_options`` (and a ``SketchPolicy``); returns the best record (TVM returns nothing)."""
        kwargs = tuning_options.tune_kwargs()
        if search_policy is not None:
            if not isinstance(search_policy, SketchPolicy):
                raise TypeError(f"SearchTask.tune: search_policy must be a SketchPolicy, got {search_policy!r}")
            if search_policy.task is not self and search_policy.task.workload_key != self.workload_key:
                raise ValueError("SearchTask.tune: the SketchPolicy was made for another task")
            kwargs.update(search_policy.tune_kwargs(tuning_options.log_file))
        return tune(self, tuning_options.num_measure_trials, **kwargs)

    def print_best(self, log_file: str | os.PathLike, print_mode: str = "schedule") -> str:
        """The best schedule of ``log_file`` for this task as te schedule code (``print_mode="schedule"``;
        autosched has no CUDA source mode)."""
        if print_mode != "schedule":
            raise ValueError(f"print_best: print_mode {print_mode!r} is not supported (only 'schedule')")
        history = _ApplyHistoryBest(os.fspath(log_file))
        try:
            rec = history.query(self)
        finally:
            history.close()
        if rec is None:
            raise ValueError(f"print_best: {os.fspath(log_file)} has no record of task {self.name} "
                             f"(workload key {self.workload_key[:12]}...) on {self.target}")
        return schedule_code(self, rec.trace)


def extract_tasks(mod: Any, params: dict[str, Any] | None, target: Any, target_host: Any = None,
                  hardware_params: Any = None, include_simple_tasks: bool = False, opt_level: int = 3,
                  **unused: Any) -> tuple[list[Task], list[int]]:
    """TVM's ``(tasks, task_weights)`` of a model (``mod`` or ``mod["main"]``): its fused kernels worth tuning
    and how many times the model runs each."""
    tasks = _extract_tasks(mod, params, target, include_simple=include_simple_tasks)
    return list(tasks), [t.weight for t in tasks]


class TaskScheduler:
    """TVM's task scheduler: tunes the tasks of a model, giving each round to the task whose improvement would
    shorten the model's time most (``task_weights``: how many times the model runs each)."""

    def __init__(self, tasks: Sequence[Task], task_weights: Sequence[float] | None = None,
                 objective_func: Any = None, strategy: str = "gradient", load_model_file: Any = None,
                 load_log_file: str | None = None, **unused: Any):
        if objective_func is not None:
            raise ValueError("TaskScheduler: objective_func is not supported (the objective is the weighted sum of "
                             "the tasks' times)")
        self.tasks = list(tasks)
        self.task_weights = list(task_weights) if task_weights is not None else None
        self.load_log_file = load_log_file

    def tune(self, tuning_options: TuningOptions, search_policy: Any = "default", **unused: Any) -> Any:
        """Tune every task with ``num_measure_trials`` measurements in all; returns each task's progress."""
        kwargs = tuning_options.tune_kwargs()
        if kwargs["database"] is None:
            kwargs["database"] = self.load_log_file
        kwargs.pop("callbacks")  # (batch callbacks go to each round's tune)
        return tune_tasks(self.tasks, self.task_weights, tuning_options.num_measure_trials,
                          round_trials=tuning_options.batch_size, callbacks=tuning_options.callbacks, **kwargs)


__all__ = ["ApplyHistoryBest", "ComputeDAG", "LocalBuilder", "LocalRunner", "PreloadMeasuredStates", "RandomModel",
           "RecordToFile", "SearchTask", "SketchPolicy", "TaskScheduler", "TuningOptions", "XGBModel", "extract_tasks",
           "register_workload"]
