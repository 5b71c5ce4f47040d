"""Search policies and the tuning loop (autosched.search, autosched.tune).

Most tests measure with ``FakeMeasurer`` (a deterministic cost per trace, no compiling) so that they test
the loop and the policies, fast; one test tunes for real with the process-pool backend.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import autosched
from autosched.database import Database
from autosched.database.query import trusted
from autosched.measure import MeasureResult, TooManyFailures
from autosched.search import SearchPolicy, TuningFailed, list_policies, register_policy, tune, unregister_policy
from autosched.search.callbacks import StopCondition

TASK = autosched.Task("matmul", dict(M=64, N=64, K=64))
SMALL = {"annealing": dict(parallel_size=16, n_iter=3, scout=32),
         "evolutionary": dict(population=24, generations=2, scout=32)}


def fake_cost(text: str) -> float:
    return 1e-4 * (1 + int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 2**32)


class FakeMeasurer:
    """Costs from a hash of the trace; remembers every trace it was asked to measure."""

    def __init__(self, fail_after: int | None = None):
        self.seen: list[str] = []
        self.fail_after = fail_after

    def measure(self, inputs):
        self.seen += [i.trace.dumps() for i in inputs]
        if self.fail_after is None:
            return [MeasureResult(costs=[fake_cost(i.trace.dumps())]) for i in inputs]
        results = [MeasureResult(error_kind="compile_error", error_msg="boom") for _ in inputs]
        if len(self.seen) >= self.fail_after:
            raise TooManyFailures("measurement stopped: the last candidates all failed", "boom", results)
        return results

    def close(self):
        raise AssertionError("tune must not close a measurer it was given")


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "tuning.db") as d:
        yield d


class FirstSamples(SearchPolicy):
    """A researcher's policy: a few samples at a time, and it counts what it is told."""

    def __init__(self, context, per_batch: int = 5):
        super().__init__(context)
        self.per_batch, self.updates = per_batch, 0
        FirstSamples.last = self

    def propose(self, n):
        return self.context.sample_new(min(n, self.per_batch))

    def update(self, inputs, results):
        assert all(r.error_kind is None and r.costs for r in results)
        self.updates += len(inputs)


@pytest.fixture
def first_samples():
    register_policy("test_first_samples")(FirstSamples)
    yield "test_first_samples"
    unregister_policy("test_first_samples")


def test_registered_policy_through_tune(db, first_samples):
    assert first_samples in list_policies()
    m = FakeMeasurer()
    best = tune(TASK, 12, policy=first_samples, database=db, measurer=m, policy_options={"per_batch": 4})
    assert len(m.seen) == len(set(m.seen)) == 12 and FirstSamples.last.updates == 12
    assert db.count(TASK) == 12
    assert best.ok and best.cost == min(fake_cost(t) for t in m.seen)
    run = db.runs()[0]
    assert (run.policy, run.status, run.trials_done) == (first_samples, "done", 12)


def test_register_policy_errors(first_samples):
    with pytest.raises(ValueError, match="already registered"):
        register_policy(first_samples)(type("Other", (SearchPolicy,), {}))
    with pytest.raises(TypeError, match="SearchPolicy subclass"):
        register_policy("not_a_policy")(object)
    with pytest.raises(ValueError, match="unknown search policy 'nope'.*evolutionary"):
        autosched.search.get_policy("nope")
    with pytest.raises(ValueError, match=f"policy '{first_samples}' has no option 'width'; its options: per_batch=5"):
        tune(TASK, 4, policy=first_samples, database=":memory:", measurer=FakeMeasurer(), policy_options={"width": 2})
    with pytest.raises(ValueError, match="option per_batch: expected an integer \\(default 5\\), got '4'"):
        tune(TASK, 4, policy=first_samples, database=":memory:", measurer=FakeMeasurer(),
             policy_options={"per_batch": "4"})


def test_policy_from_entry_point(monkeypatch, db):
    class FromPlugin(FirstSamples):
        pass

    ep = SimpleNamespace(name="test_plugin_policy", value="theirs.policies:FromPlugin", load=lambda: FromPlugin)
    monkeypatch.setattr("importlib.metadata.entry_points",
                        lambda group: [ep] if group == autosched.search.ENTRY_POINT_GROUP else [])
    try:
        assert "test_plugin_policy" in list_policies()
        m = FakeMeasurer()
        tune(TASK, 6, policy="test_plugin_policy", database=db, measurer=m)
        assert len(m.seen) == 6
    finally:
        unregister_policy("test_plugin_policy")


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("policy", ["random", "evolutionary"])
def test_resume_after_interruption_measures_nothing_twice(db, policy):
    first = FakeMeasurer()

    def stop_after_two_batches(state, inputs, results):
        if state.trials_done >= 16:
            raise KeyboardInterrupt  # as Ctrl-C would, after the second batch was committed

    with pytest.raises(KeyboardInterrupt):
        tune(TASK, 40, policy=policy, database=db, measurer=first, batch_size=8,
             callbacks=[stop_after_two_batches], policy_options=SMALL.get(policy))
    assert db.count(TASK) == 16 and db.runs()[0].status == "interrupted"

    second, states = FakeMeasurer(), []
    best = tune(TASK, 24, policy=policy, database=db, measurer=second, batch_size=8,
                callbacks=[lambda s, i, r: states.append(s)], policy_options=SMALL.get(policy))
    assert states[-1].resumed == 16 and states[-1].trials_done == 24
    assert len(second.seen) == len(set(second.seen)) == 24
    assert not set(first.seen) & set(second.seen)  # the first run's traces were never measured again
    assert db.count(TASK) == 40
    assert best.cost == min(fake_cost(t) for t in first.seen + second.seen)


def _run(policy: str, db, seed: int, trials: int = 32) -> list[str]:
    m = FakeMeasurer()
    best = tune(TASK, trials, policy=policy, database=db, measurer=m, batch_size=8, seed=seed,
                policy_options=SMALL.get(policy))
    assert best is not None and best.ok
    return m.seen


@pytest.mark.parametrize("policy", ["random", "grid", "annealing", "evolutionary"])
def test_builtin_policy_is_seeded(tmp_path, policy):
    with Database(tmp_path / "a.db") as a, Database(tmp_path / "b.db") as b:
        one = _run(policy, a, seed=3)
        assert len(one) == len(set(one)) == 32 and a.count(TASK) == 32
        assert _run(policy, b, seed=3) == one  # the same seed proposes the same traces, in order
    if policy in ("random", "annealing"):
        with Database(tmp_path / "c.db") as c:
            assert _run(policy, c, seed=4) != one


def test_model_guided_policies_use_the_model(db):
    """After the first (random) batch, annealing and evolutionary measure what the model scores best."""
    from autosched.cost_model import CostModel

    class LongestTrace(CostModel):  # a model with an opinion: longer traces are faster
        trained = True

        def update(self, inputs, results):
            pass

        def predict(self, candidates):
            return [len(c.trace.dumps()) for c in candidates]

    for policy in ("annealing", "evolutionary"):
        m = FakeMeasurer()
        tune(TASK, 16, policy=policy, database=":memory:", measurer=m, batch_size=8, cost_model=LongestTrace(),
             policy_options=dict(SMALL[policy], eps=0.0))
        rand = FakeMeasurer()
        tune(TASK, 16, policy="random", database=":memory:", measurer=rand, batch_size=8, seed=1)
        assert sum(map(len, m.seen)) > sum(map(len, rand.seen)), policy


def test_grid_stops_when_the_space_is_exhausted(db, caplog):
    task = autosched.Task("matmul", dict(M=4, N=4, K=4))
    size = task.space("template").size()
    m, states = FakeMeasurer(), []
    best = tune(task, size + 50, policy="grid", database=db, measurer=m, callbacks=[lambda s, i, r: states.append(s)])
    assert best is not None and len(m.seen) == len(set(m.seen)) <= size
    assert "proposed nothing new" in states[-1].stop_reason and "proposed nothing new" in caplog.text
    with pytest.raises(ValueError, match="template space"):
        tune(task, 4, policy="grid", space="generated", database=db, measurer=m)


def test_a_space_that_ran_dry_is_sampled_from_what_it_found():
    """A sample that drew nothing new 200 times in a row found every trace a draw reaches; later samples pick
    from those (seeded) instead of drawing hundreds of duplicates again (on a GPU, 20-100 ms a draw)."""
    space = autosched.Task("matmul", dict(M=2, N=2, K=2)).space("generated")
    found = space.sample(1000, np.random.default_rng(0))
    assert 10 < len(found) < 1000 and sorted(t.dumps() for t in found) == [t.dumps() for t in space.dry_sample]

    def no_draws(*a):
        raise AssertionError("drew again")

    space._try = no_draws
    again = space.sample(8, np.random.default_rng(1))
    assert len({t.dumps() for t in again}) == 8 and set(again) <= set(found)
    assert again == space.sample(8, np.random.default_rng(1))
    assert len(space.sample(10_000, np.random.default_rng(2))) == len(found)


def test_a_stop_condition_is_asked_after_a_proposal_that_brought_nothing_new(db):
    """A time budget or a signal ends the run between the proposals of a dry space too, not only after a
    measured batch (tune --model on a GPU overran its budget by a minute in max pooling's 15-trace space)."""

    class StopWhenIdle(StopCondition):
        def __init__(self):
            self.batches = []

        def __call__(self, state, inputs, results):
            self.batches.append(len(inputs))
            if not inputs:
                state.stop_reason = "asked to stop"

    task, stop, states = autosched.Task("matmul", dict(M=4, N=4, K=4)), StopWhenIdle(), []
    tune(task, 1000, policy="random", space="template", database=db, measurer=FakeMeasurer(), batch_size=16,
         callbacks=[stop, lambda s, i, r: states.append(s)])
    assert stop.batches[-1] == 0 and stop.batches.count(0) == 1 and states[-1].stop_reason == "asked to stop"


def test_everything_fails_ends_with_a_clear_error(db):
    m = FakeMeasurer(fail_after=16)
    with pytest.raises(TuningFailed, match="every candidate failed"):
        tune(TASK, 100, policy="random", database=db, measurer=m, batch_size=8)
    assert db.count(TASK) == 16 and db.count(TASK, ok=False) == 16  # failures are committed too
    assert db.runs()[0].status == "failed"


def test_early_stopping(db):
    m, states = FakeMeasurer(), []
    tune(TASK, 200, policy="random", database=db, measurer=m, batch_size=4, early_stopping=12,
         callbacks=[lambda s, i, r: states.append(s)])
    s = states[-1]
    assert s.trials_done < 200 and s.trials_done - s.best_trial >= 12 and "early stopping" in s.stop_reason


def test_import_autosched_stays_light():
    code = ("import sys, autosched; autosched.search; f = autosched.tune; "
            "print(sorted(m for m in ('ray', 'xgboost', 'sqlalchemy', 'llvmlite') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_resume_warms_the_model_with_at_most_warm_start_records(db):
    from autosched.cost_model import CostModel

    class Counting(CostModel):
        trained = True

        def __init__(self):
            self.updates = []

        def update(self, inputs, results):
            self.updates.append(sorted(r.cost for r in results))

        def predict(self, candidates):
            return [0.0] * len(candidates)

    m = FakeMeasurer()
    tune(TASK, 24, policy="random", database=db, measurer=m, batch_size=8)
    model = Counting()
    tune(TASK, 8, policy="annealing", database=db, measurer=FakeMeasurer(), cost_model=model, warm_start=10,
         policy_options=SMALL["annealing"])
    costs = sorted(fake_cost(t) for t in m.seen)
    assert len(model.updates[0]) == 10 and model.updates[0][:5] == costs[:5]  # the fastest half, then recent
    assert len(model.updates) == 2 and len(model.updates[1]) == 8


SMALL_TASK = autosched.Task("matmul", dict(M=32, N=32, K=32))


@pytest.mark.parametrize("policy", ["random", "grid", "annealing", "evolutionary"])
def test_each_policy_tunes_for_real(tmp_path, policy):
    """A few dozen real measurements (process pool): every record committed once, the best kernel is right;
    policies that do not learn propose exactly what the same seed proposes with fake measurements."""
    import numpy as np

    from autosched.measure import RunConfig

    seen = []
    with Database(tmp_path / "real.db") as db:
        best = tune(SMALL_TASK, 20, policy=policy, database=db, backend="local", batch_size=10, seed=7,
                    run_config=RunConfig(repeat=2, min_repeat_ms=2), policy_options=SMALL.get(policy),
                    callbacks=[lambda s, inputs, r: seen.extend(i.trace.dumps() for i in inputs)])
        assert len(seen) == len(set(seen)) == 20 and db.count(SMALL_TASK) == 20
        ok = db.records(SMALL_TASK, ok=True)
        trusted_ok = [r for r in ok if trusted(r)] or ok  # a noisy record is a best only when nothing else is
        assert best.ok and best.cost == min(r.cost for r in trusted_ok)
    if policy in ("random", "grid"):
        fake = FakeMeasurer()
        tune(SMALL_TASK, 20, policy=policy, database=":memory:", measurer=fake, batch_size=10, seed=7)
        assert fake.seen == seen
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (32, 32)).astype("float32") for _ in range(2))
    c = np.zeros((32, 32), "float32")
    autosched.build(*SMALL_TASK.apply(best.trace))(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


class RemeasuringFake(FakeMeasurer):
    """Keeps every task's inputs, like a Measurer, and re-measures the best ones 10% slower."""

    def __init__(self):
        super().__init__()
        self.inputs = []

    def measure(self, inputs):
        self.inputs += inputs
        return super().measure(inputs)

    def remeasure_top(self, k):
        out = []
        for task in {i.task for i in self.inputs}:
            top = sorted((i for i in self.inputs if i.task == task), key=lambda i: fake_cost(i.trace.dumps()))
            out += [(i, MeasureResult(costs=[1.1 * fake_cost(i.trace.dumps())])) for i in top[:k]]
        return out


def test_remeasured_best_replaces_its_record_and_other_tasks_are_left_alone(tmp_path):
    shared = RemeasuringFake()
    with Database(tmp_path / "a.db") as a, Database(tmp_path / "b.db") as b:
        tune(SMALL_TASK, 8, policy="random", database=a, measurer=shared, remeasure=1)
        tune(TASK, 8, policy="random", database=b, measurer=shared, remeasure=1)
        assert b.count() == 8 and b.count(SMALL_TASK) == 0  # the shared measurer's other task stays out
        costs = {r.trace.dumps(): r.cost for r in b.records(TASK)}
        fastest = min(costs, key=fake_cost)
        assert costs[fastest] == pytest.approx(1.1 * fake_cost(fastest))  # the re-measured time replaced it


def test_measure_default_puts_the_expert_schedule_first_once(db):
    """The command line's tuning measures the workload's expert schedule first, so the best record is never
    slower than the untuned build; a resumed run does not measure it again."""
    m = FakeMeasurer()
    tune(TASK, 8, policy="random", database=db, measurer=m, batch_size=4, measure_default=True)
    assert m.seen[0] == TASK.default_trace().dumps()
    tune(TASK, 4, policy="random", database=db, measurer=m, batch_size=4, measure_default=True)
    assert m.seen.count(TASK.default_trace().dumps()) == 1 and len(m.seen) == 12


def test_a_batch_is_picked_for_diversity():
    """Of many near copies of one kernel (one decision changed each) and a few different kernels ranked
    below them, a diverse batch takes the different ones too instead of only the best-scored copies."""
    import numpy as np

    from autosched.search.policy import TuneContext

    space = TASK.space("generated")
    rng = np.random.default_rng(0)
    base = space.sample(1, rng)[0]
    copies = []
    while len(copies) < 12:
        m = space.mutate(base, rng)
        if m not in copies:
            copies.append(m)
    point = space.point_of(base)

    def differences(t):
        return sum(point.get(k) != v for k, v in space.point_of(t).items())

    # different kernels: of 20 samples, the 4 that differ from the base in the most decisions
    others = sorted((t for t in space.sample(20, rng) if t != base and t not in copies), key=differences)[-4:]
    ctx = TuneContext(TASK, space, rng=rng)
    ranked = [base] + copies + others  # best first
    assert ctx.diverse(ranked, 4, pool=1) == ranked[:4]  # no room to choose: the best
    picked = ctx.diverse(ranked, 8)
    assert picked[0] == base and len(picked) == 8 and len(set(picked)) == 8
    assert sum(t in others for t in picked) >= 3
    assert set(picked) <= set(ranked[:16])  # only from the 2n best


def test_annealing_walks_on_from_the_fastest_measured_kernels():
    """Each batch, ``anchors`` walkers restart at the fastest measured kernels, even when the model scores
    them below every walker (the model is wrong about what measured fastest)."""
    import numpy as np

    from autosched.cost_model import CostModel
    from autosched.search.annealing import AnnealingPolicy
    from autosched.search.policy import TuneContext

    class Contrary(CostModel):  # scores the measured kernels lowest of all
        trained = True

        def update(self, inputs, results):
            pass

        def predict(self, candidates):
            return [-1.0 if c.trace.dumps() in ctx.measured else 1.0 for c in candidates]

    space = TASK.space("generated")
    ctx = TuneContext(TASK, space, cost_model=Contrary(), rng=np.random.default_rng(0))
    fast, slow = space.sample(2, ctx.rng)
    ctx.record(slow, 2e-3)
    ctx.record(fast, 1e-3)
    options = dict(SMALL["annealing"], n_iter=0, scout=0)
    with_anchor = AnnealingPolicy(ctx, **options, anchors=1)
    with_anchor.points = space.sample(16, ctx.rng)
    with_anchor.propose(8)
    assert fast in with_anchor.points and slow not in with_anchor.points
    without = AnnealingPolicy(ctx, **options, anchors=0)
    without.points = list(with_anchor.points)
    without.points.remove(fast)
    without.points.append(space.sample(1, ctx.rng)[0])
    without.propose(8)
    assert fast not in without.points
