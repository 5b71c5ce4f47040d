"""The tuning loop: ask the policy, measure what is new, commit it, teach the model, repeat.

:func:`tune` owns what every policy needs and none should re-implement:

* **no trace is measured twice**: proposals already measured (in this run, or by any other run in the
  database, also one running now: each batch is looked up there just before it is measured) are dropped,
  and the records another tuner committed meanwhile teach this run as its own measurements would;
* **resume**: records of the task already in the database warm the cost model and the policy
  (``update``) and fill ``context.measured`` and ``context.best()``;
* **every result is committed** (failures too, so they are not retried), batch by batch, under a tuning
  run (``db.runs()``) that ends as done, interrupted or failed; a candidate another run committed first
  (both measured it at the same moment) keeps that run's record, and this run's random choices then mix
  in its run id, so that tuners started alike (same seed and policy) stop proposing the same candidates;
* **stopping**: after ``trials`` new measurements, after ``early_stopping`` trials without a better
  candidate, when the policy proposes nothing new ``stale_rounds`` times in a row, when the measurer gives
  up on a run of failures (:class:`~autosched.measure.TooManyFailures`), or when a callback sets
  ``state.stop_reason``; each says why in the log (``autosched.search``) and in ``state.stop_reason``;
* the best few of the run are re-measured (longer) before the best record is returned.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autosched.cost_model import RandomCostModel, XGBCostModel, load_pretrained
from autosched.cost_model.helpers import FeatureHelpers, default_helpers, shared_helpers
from autosched.cost_model.model import FeatureCache
from autosched.cost_model.shipped import suits
from autosched.cost_model.transfer import pretrain
from autosched.errors import AutoschedError
from autosched.measure.measurer import Measurer, TooManyFailures
from autosched.measure.result import MeasureInput
from autosched.search.callbacks import StopCondition
from autosched.search.policy import SearchPolicy, TuneContext, check_policy_options, get_policy, log
from autosched.target import check_target

Callback = Callable[["TuneState", Sequence[Any], Sequence[Any]], None]
COST_MODELS = ("xgb", "pretrained", "transfer", "random")  # the names tune(cost_model=...) takes


class TuningFailed(AutoschedError):
    """The run ended without a single successful measurement; the message says what went wrong."""


@dataclass
class TuneState:
    """The progress of a :func:`tune` run, given to callbacks after each batch (``callback(state, inputs,
    results)``). A callback stops the run by setting ``stop_reason``; a callback object may also have
    ``on_start(state)`` (after the database's records are read) and ``on_end(state)`` methods."""

    task: Any
    trials: int
    policy: SearchPolicy
    context: TuneContext
    trials_done: int = 0  # measured in this run
    resumed: int = 0  # records found in the database at the start
    failures: int = 0  # failed measurements in this run
    best_cost: float = math.inf  # seconds, over this run and the resumed records
    best_trial: int = 0  # trials_done when best_cost was reached (0: a resumed record)
    best_elsewhere: bool = False  # best_cost is a record another run committed while this one ran
    shared: int = 0  # proposals another run measured while this one ran: taken from the database, not measured
    raced: int = 0  # candidates measured here that another run, measuring them at the same moment, stored first
    started: float = 0.0
    stop_reason: str | None = None
    #: after the final re-measure: the best cost as the run had it (best_cost is then the re-measured best,
    #: the database's) and why they differ ("" when they agree)
    best_in_run: float = math.inf
    remeasure_note: str = ""
    run: Any = None  # the database's TuningRun of this call
    interrupted: bool = False  # a callback stopped the run for the user (Ctrl-C): recorded as interrupted
    pending: list = field(default_factory=list)  # traces measured before the policy's (the default schedule)

    @property
    def best_gflops(self) -> float:
        return self.task.flop / self.best_cost / 1e9 if math.isfinite(self.best_cost) else 0.0

    @property
    def elapsed(self) -> float:
        return time.time() - self.started


def _make_space(task: Any, space: Any, policy_cls: type[SearchPolicy]) -> Any:
    if space is None:
        return task.space(policy_cls.space_kind)
    if isinstance(space, str):
        return task.space(space)
    return space


def _make_model(cost_model: Any, policy_cls: type[SearchPolicy], seed: int, task: Any, db: Any) -> Any:
    if cost_model is None:  # a new task starts from the shipped model; a resumed one from its own records
        if not policy_cls.uses_model:
            return None
        n = db.count(task)
        if n:
            return XGBCostModel(seed=seed, origin=f"cold, trained on the task's {n} records in the database")
        if not suits(task):
            return XGBCostModel(seed=seed, origin=f"cold (the shipped model knows no {task.target.kind} kernels)")
        return load_pretrained(seed)
    if cost_model == "xgb":
        return XGBCostModel(seed=seed, origin="cold")
    if cost_model == "pretrained":  # the model shipped with autosched, trained on the shipped tuning logs
        return load_pretrained(seed)
    if cost_model == "transfer":  # XGBoost, first trained on the other tasks' records in the database
        return pretrain(db, exclude=task, seed=seed)
    if cost_model == "random":
        return RandomCostModel(seed=seed)
    if isinstance(cost_model, str):
        raise ValueError(f"unknown cost model {cost_model!r}; use {', '.join(map(repr, COST_MODELS))} or a "
                         "CostModel instance")
    return cost_model


def _warm_subset(inputs: list, results: list, limit: int) -> tuple[list, list]:
    """At most ``limit`` records to train on: the fastest half and the most recent of the others (the model
    lowers every candidate it learns from, so thousands of stored records would be slow)."""
    if len(inputs) <= limit:
        return inputs, results
    by_cost = sorted(range(len(inputs)), key=lambda i: results[i].cost)
    fast = set(by_cost[: limit // 2])
    recent = [i for i in range(len(inputs)) if i not in fast][-(limit - len(fast)):]
    keep = sorted(fast | set(recent))
    return [inputs[i] for i in keep], [results[i] for i in keep]


def _fold(state: TuneState, records: Any) -> tuple[list, list]:
    """Note stored records of the task (measured by an earlier run, or by another one running now) in the
    context and the best cost; returns them as (inputs, results) for the model and the policy to learn."""
    ctx, inputs, results = state.context, [], []
    for rec in records:
        try:
            inp = MeasureInput(state.task, rec.trace)
        except Exception as e:  # noqa: BLE001 - a record this version cannot read is skipped, not fatal
            log.warning("skipping a stored record of %s that does not load: %s", state.task, e)
            continue
        res = rec.result
        inputs.append(inp)
        results.append(res)
        ctx.record(inp.trace, res.cost)
        state.best_cost = min(state.best_cost, res.cost)
    return inputs, results


def _resume(state: TuneState, db: Any, warm_start: int) -> None:
    """Warm the context, the model and the policy from the task's records in the database."""
    ctx = state.context
    inputs, results = _fold(state, db.records(state.task))
    state.resumed = len(inputs)
    if inputs:
        log.info("resuming %s: %d records in the database (best %.3g GFLOPS) warm the model and are skipped",
                 state.task, len(inputs), state.best_gflops)
        if ctx.cost_model is not None and warm_start > 0:
            ctx.cost_model.update(*_warm_subset(inputs, results, warm_start))
        state.policy.update(inputs, results)


def tune(task: Any, trials: int, *, policy: str | type[SearchPolicy] = "evolutionary", space: Any = None,
         cost_model: Any = None, database: Any = None, measurer: Any = None, builder: Any = None,
         runner: Any = None, backend: str | None = None, run_config: Any = None, batch_size: int = 16,
         seed: int = 0, early_stopping: int | None = None, callbacks: Sequence[Callback] = (),
         policy_options: dict | None = None, remeasure: int = 3, stale_rounds: int = 3,
         warm_start: int = 1024, measure_default: bool = False) -> Any:
    """Tune ``task`` with ``trials`` new measurements; returns the best record (a
    :class:`~autosched.database.TuningRecord`) in the database for the task, or None if there is none.

    ``policy``: a registered name (:func:`~autosched.search.list_policies`) or a SearchPolicy subclass,
    built with ``policy_options``. ``space``: ``"generated"``, ``"template"`` or a Space (default: the
    policy's ``space_kind``). ``cost_model``: ``"xgb"`` (XGBoost, cold: it learns from the task's records
    only), ``"pretrained"`` (XGBoost starting from the model shipped with autosched, trained on the shipped
    tuning logs; the task's records train trees on top), ``"transfer"`` (XGBoost trained first on the
    database's records of other tasks), ``"random"`` or a CostModel. Default, for policies that use a model:
    ``"pretrained"`` when the database holds no record of the task, else ``"xgb"`` (its records warm it).
    ``database``: a Database, URL or path (default: the user's database).
    Measurement: a ``measurer`` (anything with ``measure(inputs)``), or a ``builder`` and ``runner``, or a
    ``backend`` (``"ray"``, ``"local"``) with ``run_config``. ``early_stopping``: stop after that many trials
    without improvement. ``callbacks``: ``callback(state, inputs, results)`` after each batch. ``warm_start``:
    how many stored records (at most) the cost model learns from when the run starts (all of them are
    skipped). ``measure_default``: measure the workload's expert schedule first (once per database), so the
    best record is never slower than the untuned build (the command line does; benchmarks of pure search do
    not). Raises :class:`TuningFailed` when the measurer gives up and nothing ever succeeded.
    """
    from autosched.database.database import open_database  # SQLAlchemy: imported when tuning starts

    if trials < 0 or batch_size < 1:
        raise ValueError(f"need trials >= 0 and batch_size >= 1, got trials={trials}, batch_size={batch_size}")
    check_target(task.target)  # an -mcpu LLVM does not know aborts the process at the first build: say it here
    policy_cls = get_policy(policy) if isinstance(policy, str) else policy
    policy_name = policy if isinstance(policy, str) else policy_cls.name
    check_policy_options(policy_cls, policy_options or {})
    db, own_db = open_database(database)
    own_measurer = measurer is None
    try:
        model = _make_model(cost_model, policy_cls, seed, task, db)
        if model is not None:
            log.info("%s: cost model %s, from %s", task, type(model).__name__, getattr(model, "origin", "its start"))
        ctx = TuneContext(task, _make_space(task, space, policy_cls), model, db, np.random.default_rng(seed))
        state = TuneState(task, trials, policy_cls(ctx, **(policy_options or {})), ctx, started=time.time())
        _resume(state, db, warm_start)
        default = _default_trace(task) if measure_default else None
        state.pending = [default] if default is not None and ctx.is_new(default) else []
        if not state.resumed:  # the best schedules found on other CPUs are the first candidates here
            state.pending += [t for t in _other_cpu_seeds(task, db) if ctx.is_new(t) and t not in state.pending]
        if own_measurer:
            measurer = (Measurer(builder, runner, config=run_config) if builder is not None or runner is not None
                        else Measurer(backend=backend, config=run_config, seed=seed))
        config = {"batch_size": batch_size, "space": getattr(ctx.space, "kind", type(ctx.space).__name__),
                  "cost_model": type(ctx.cost_model).__name__ if ctx.cost_model is not None else None,
                  "cost_model_origin": getattr(ctx.cost_model, "origin", None),
                  "policy_options": policy_options or {}, "resumed": state.resumed}
        with db.tuning_run(policy_name, seed=seed, trials=trials, target=task.target, config=config) as run:
            state.run = run
            _hook(callbacks, "on_start", state)
            helpers = _feature_helpers(state, measurer)
            # a GPU space of the task's own kind draws its samples in shares, the helpers' and its own (the same
            # traces either way): each draw lowers the kernel (25 ms on a Zen 3 core); a CPU draw takes 1-2 ms,
            # and there the shares would only cost their messages
            own_space = (space is None or isinstance(space, str)) and task.target.kind == "cuda"
            if own_space:
                ctx.space.helpers = helpers if helpers is not None else FeatureHelpers(0)
            try:
                _loop(state, measurer, db, run, batch_size, early_stopping, callbacks, stale_rounds)
            finally:
                if helpers is not None:  # they stay up for the next run of this process (stopped at exit)
                    ctx.cost_model.cache.helpers = None
                if own_space:
                    ctx.space.helpers = None
                _hook(callbacks, "on_end", state)
            state.best_in_run = state.best_cost
            remeasured = False
            if (remeasure > 0 and not state.interrupted and state.trials_done > state.failures
                    and hasattr(measurer, "remeasure_top")):
                mine = ctx.measured  # a shared measurer knows other tasks
                again = [(inp, res) for inp, res in measurer.remeasure_top(remeasure)
                         if inp.task == task and inp.trace.dumps() in mine]
                # a candidate that failed its re-measure keeps its record, flagged noisy: never a best
                dropped = [(inp, res) for inp, res in getattr(measurer, "unconfirmed", ())
                           if inp.task == task and inp.trace.dumps() in mine]
                if again or dropped:
                    db.commit_many(again + dropped, run=run)
                remeasured = bool(again or dropped)
                fastest = ctx.best(1)  # the run's fastest trace, by its in-run time
                if fastest and any(inp.trace == fastest[0] for inp, _ in dropped):
                    state.remeasure_note = (f"the fastest candidate failed to re-measure (its record is kept, "
                                            f"marked noisy){'' if again else '; no other was re-measured'}")
        if state.interrupted:
            db.end_run(run, status="interrupted")
        best = db.best(task, k=1)
        if remeasured and best:
            state.best_cost = best[0].cost  # from here on, the figure everyone shows
            if not state.remeasure_note and abs(state.best_cost - state.best_in_run) > 0.005 * state.best_in_run:
                state.remeasure_note = "the re-measure, with longer repeats, timed it so"
            _hook(callbacks, "on_remeasured", state)
        if best:
            log.info("%s: best %.3g GFLOPS after %d trials (%s)", task, best[0].gflops(task.flop),
                     state.trials_done, state.stop_reason or "done")
        return best[0] if best else None
    finally:
        if own_measurer and measurer is not None:
            measurer.close()
        if own_db:
            db.close()


def _take_shared(state: TuneState, db: Any, traces: list) -> list:
    """``traces`` without those another run committed since this one last looked (tuners sharing the
    database): one indexed query per batch. Their records teach the context, the model and the policy as
    this run's own measurements would, and count towards the best."""
    records = db.measured_records(state.task, traces)
    if not records:
        return traces
    before = state.best_cost
    inputs, results = _fold(state, records)
    state.shared += len(records)
    if state.best_cost < before:  # reached now, in this run's count of trials (for early stopping)
        state.best_trial, state.best_elsewhere = state.trials_done, True
    if inputs:
        if state.context.cost_model is not None:
            state.context.cost_model.update(inputs, results)
        state.policy.update(inputs, results)
    log.info("%s: %d proposed candidates were measured meanwhile by another run: taken from the database, "
             "not measured again", state.task, len(records))
    done = {r.trace_json for r in records}
    return [t for t in traces if t.dumps() not in done]


def _other_cpu_seeds(task: Any, db: Any, k: int = 8) -> list:
    """The traces of the best ``k`` records of ``task`` tuned on each other CPU (same workload, another
    target key): a good start on a new CPU, measured here before the search proposes its own."""
    from autosched.database.database import _cpu_agnostic

    seeds = []
    here = task.target.key
    for target in db.targets(task):
        if target == here or _cpu_agnostic(target) != _cpu_agnostic(here):
            continue
        recs = [r for r in db.best(task, target=target, k=k) if r.result.ok]
        if recs:
            log.info("%s: the %d best records tuned on %s seed the search here", task, len(recs), target)
            seeds.extend(r.trace for r in recs)
    return seeds


def _default_trace(task: Any) -> Any:
    """The trace of the workload's expert schedule for the task's target, or None when it has none."""
    if task.workload.schedules.get(task.target.kind) is None:
        return None
    try:
        return task.default_trace()
    except Exception as e:  # noqa: BLE001 - a broken default schedule must not stop tuning
        log.warning("%s: its default schedule does not replay (%s); not measured", task, e)
        return None


def _hook(callbacks: Sequence[Callback], name: str, state: TuneState) -> None:
    """Call the optional ``on_start`` / ``on_end`` method of the callbacks that have one."""
    for cb in callbacks:
        fn = getattr(cb, name, None)
        if fn is not None:
            fn(state)


class _Ahead:
    """The next batch's proposal, made while the current batch builds (``Measurer.measure(during_build=...)``),
    where the measurer says the builders leave a core idle (a cluster, or fewer builders than cores; with a
    builder on every core, a search beside them slowed the builds by more than it saved): this process would
    only wait, so the search, the cost model's scoring and the lowering for features take no wall time of
    their own there, and none of it runs while a kernel is timed. The policy proposes before it has learned
    the batch in flight (it learns one batch later), and the batch in flight counts as measured for it, so it
    is not proposed again."""

    def __init__(self, state: TuneState, inputs: list, n: int):
        self.state, self.inputs, self.n = state, inputs, n
        self.traces: list | None = None
        self.error: BaseException | None = None

    def __call__(self) -> None:
        ctx = self.state.context
        for inp in self.inputs:  # in flight: not new to the policy (ctx.record notes their costs later)
            ctx.measured.add(inp.trace)
        try:
            self.traces = self.state.policy.propose(self.n)
        except Exception as e:  # noqa: BLE001 - raised where the proposal is used, as without pipelining
            self.error = e

    def take(self) -> list:
        if self.error is not None:
            raise self.error
        return self.traces if self.traces is not None else self.state.policy.propose(self.n)


def _feature_helpers(state: TuneState, measurer: Any) -> FeatureHelpers | None:
    """Helper processes that compute shares of the features the cost model scores candidates by, for this
    run (on the cores that wait meanwhile; none on one core, or when ``$AUTOSCHED_FEATURE_HELPERS`` is 0):
    the process's shared ones, ready before this returns; None when the model has no :class:`FeatureCache`
    or it has helpers already."""
    cache = getattr(state.context.cost_model, "cache", None)
    if not isinstance(cache, FeatureCache) or cache.helpers is not None:
        return None
    n = default_helpers(gpu=state.task.target.kind == "cuda")
    builder = getattr(measurer, "builder", None)
    if _proposes_ahead(state, measurer) and builder is not None and not getattr(builder, "cluster", False):
        # the search runs beside the builds then: only the cores the builders leave idle
        n = min(n, max(0, (os.cpu_count() or 1) - 1 - int(getattr(builder, "parallelism", 1))))
    if n <= 0:
        return None
    helpers = shared_helpers(n)
    if not helpers.wait_ready():  # started, and idle, before the first build or timing
        return None
    cache.helpers = helpers
    return helpers


def _proposes_ahead(state: TuneState, measurer: Any) -> bool:
    """True when the next batch may be proposed while this one builds: the policy allows it (its
    ``propose_ahead``) and the measurer takes ``during_build``."""
    return bool(getattr(state.policy, "propose_ahead", False) and getattr(measurer, "accepts_during_build", False))


def _loop(state: TuneState, measurer: Any, db: Any, run: Any, batch_size: int, early_stopping: int | None,
          callbacks: Sequence[Callback], stale_rounds: int) -> None:
    ctx, task, stale = state.context, state.task, 0
    ahead: _Ahead | None = None
    while state.trials_done < state.trials and state.stop_reason is None:
        want = min(batch_size, state.trials - state.trials_done)
        first, state.pending = state.pending[:want], state.pending[want:]
        proposed: list = []
        if ahead is not None and ahead.n == want - len(first):
            proposed = ahead.take()
        elif want > len(first):
            proposed = state.policy.propose(want - len(first))
        ahead = None
        traces = ctx.new_only(first + proposed)[:want]
        if not traces:
            stale += 1
            for cb in callbacks:  # a time budget or a signal ends the run here too (a proposal can take a minute)
                if isinstance(cb, StopCondition):
                    cb(state, [], [])
            if stale >= stale_rounds and state.stop_reason is None:
                state.stop_reason = (f"the {state.policy.name} policy proposed nothing new {stale} times in a row "
                                     f"(space exhausted? {len(ctx.measured)} traces measured for this task)")
            continue
        stale = 0
        traces = _take_shared(state, db, traces)
        if not traces:  # another tuner measured them all: the policy, taught them, proposes again
            continue
        inputs = [MeasureInput(task, t) for t in traces]
        gave_up = None
        after = min(batch_size, state.trials - state.trials_done - len(inputs))  # the next batch's size
        n_next = after - min(after, len(state.pending))
        if n_next > 0 and _proposes_ahead(state, measurer):
            ahead = _Ahead(state, inputs, n_next)
        try:
            results = measurer.measure(inputs, during_build=ahead) if ahead is not None else measurer.measure(inputs)
        except TooManyFailures as e:
            results, gave_up = e.results, e
        # the first measurement committed stays: another run that measured one of these at the same moment
        # and committed first keeps its record (and this run's trials_done counts only what it stored)
        stored = db.commit_many(zip(inputs, results), run=run, on_conflict="skip")
        if stored < len(inputs):
            state.raced += len(inputs) - stored
            # in step with another run (the same seed and policy propose the same candidates at the same
            # moment, and looking up the database first cannot see them): leave its path, by mixing this
            # run's id into the random choices from here on
            ctx.rng = np.random.default_rng([int(run.id), *map(int, ctx.rng.integers(2**63, size=2))])
            log.info("%s: %d of this batch were measured at the same moment by another run, which stored them "
                     "first (its records are kept); this run's search now leaves its path", task,
                     len(inputs) - stored)
        for inp, res in zip(inputs, results):
            ctx.record(inp.trace, res.cost)
            state.trials_done += 1
            state.failures += not res.ok
            if res.cost < state.best_cost:
                state.best_cost, state.best_trial, state.best_elsewhere = res.cost, state.trials_done, False
        if ctx.cost_model is not None:
            ctx.cost_model.update(inputs, results)
        state.policy.update(inputs, results)
        log.info("%s: %d/%d trials, best %.3g GFLOPS", task, state.trials_done, state.trials, state.best_gflops)
        for cb in callbacks:
            cb(state, inputs, results)
        if gave_up is not None:
            if not math.isfinite(state.best_cost):
                raise TuningFailed(f"tuning {task} stopped: every candidate failed. {gave_up}") from gave_up
            state.stop_reason = str(gave_up)
        elif early_stopping is not None and state.trials_done - state.best_trial >= early_stopping:
            state.stop_reason = f"early stopping: no better candidate in the last {early_stopping} trials"
    if state.stop_reason:
        log.warning("%s: stopped after %d of %d trials: %s", task, state.trials_done, state.trials,
                    state.stop_reason)
