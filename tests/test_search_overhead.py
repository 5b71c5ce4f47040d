"""The tuner's own work off the critical path (issue 44): the next batch is proposed while the current one
builds (``Measurer.measure(during_build=...)``), never while a candidate is timed.

Fakes only (no compiling, no timing), so the tests are fast and check order, not seconds.
"""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

import autosched
from autosched import te
from autosched.cost_model import XGBCostModel
from autosched.cost_model.helpers import FeatureHelpers, default_helpers
from autosched.cost_model.model import HELPER_MIN_BATCH, FeatureCache
from autosched.database import Database
from autosched.measure import MeasureInput, Measurer, MeasureResult
from autosched.measure.builder import Builder
from autosched.measure.result import BuildResult
from autosched.measure.runner import Runner
from autosched.search import SearchPolicy, register_policy, tune, unregister_policy

TASK = autosched.Task("matmul", dict(M=64, N=64, K=64))
SMALL = dict(population=24, generations=2, scout=32)


def fake_cost(text: str) -> float:
    return 1e-4 * (1 + int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 2**32)


class AheadMeasurer:
    """A measurer that takes ``during_build`` like :class:`Measurer`: it notes each step in ``events``."""

    accepts_during_build = True

    def __init__(self):
        self.seen: list[str] = []
        self.events: list[tuple] = []

    def measure(self, inputs, during_build=None):
        self.events.append(("build", len(inputs)))
        if during_build is not None:
            during_build()
        self.events.append(("time", len(inputs)))
        self.seen += [i.trace.dumps() for i in inputs]
        return [MeasureResult(costs=[fake_cost(i.trace.dumps())]) for i in inputs]


class Logged(SearchPolicy):
    """Random samples; notes when it proposes and learns, and whether the batch in flight looked new."""

    propose_ahead = True

    def __init__(self, context, fail_at: int = 0):
        super().__init__(context)
        self.fail_at, self.calls = fail_at, 0
        Logged.last = self

    def propose(self, n):
        self.calls += 1
        if self.calls == self.fail_at:
            raise ValueError("the search broke")
        log = Logged.events
        in_flight = [e[1] for e in log if e[0] == "measuring"]
        log.append(("propose", n, all(text in self.context.measured for text in in_flight)))
        return self.context.sample_new(n)

    def update(self, inputs, results):
        Logged.events.append(("update", len(inputs)))


@pytest.fixture
def logged():
    register_policy("test_logged_ahead")(Logged)
    Logged.events = []
    yield "test_logged_ahead"
    unregister_policy("test_logged_ahead")


def test_the_next_batch_is_proposed_while_this_one_builds(logged):
    m = AheadMeasurer()
    measure = m.measure

    def noting(inputs, during_build=None):  # the policy sees which traces are in flight
        Logged.events[:] = [e for e in Logged.events if e[0] != "measuring"]
        Logged.events.extend(("measuring", i.trace.dumps()) for i in inputs)
        return measure(inputs, during_build)

    m.measure = noting
    tune(TASK, 20, policy=logged, database=":memory:", measurer=m, batch_size=8, remeasure=0)
    steps = [e for e in Logged.events if e[0] != "measuring"]
    # batch 1 is proposed alone; batch 2 (8) and 3 (the last 4) while the batch before builds; nothing after
    assert [e[:2] for e in steps] == [("propose", 8), ("propose", 8), ("update", 8), ("propose", 4),
                                      ("update", 8), ("update", 4)]
    assert all(e[2] for e in steps if e[0] == "propose")  # the batch in flight counted as measured
    assert m.events == [("build", 8), ("time", 8), ("build", 8), ("time", 8), ("build", 4),
                                     ("time", 4)]
    assert len(m.seen) == len(set(m.seen)) == 20


def test_a_policy_that_does_not_allow_it_is_asked_after_it_learned(logged):
    class Plain(Logged):
        propose_ahead = False

    register_policy("test_plain_ahead")(Plain)
    try:
        tune(TASK, 16, policy="test_plain_ahead", database=":memory:", measurer=AheadMeasurer(), batch_size=8,
             remeasure=0)
    finally:
        unregister_policy("test_plain_ahead")
    assert [e[:2] for e in Logged.events] == [("propose", 8), ("update", 8), ("propose", 8), ("update", 8)]


def test_an_error_of_the_search_ahead_reaches_the_caller(logged):
    m = AheadMeasurer()
    with pytest.raises(ValueError, match="the search broke"):
        tune(TASK, 24, policy=logged, database=":memory:", measurer=m, batch_size=8, remeasure=0,
             policy_options={"fail_at": 2})
    assert len(m.seen) == 8  # the batch that was building when the search failed was measured and kept


def _evolutionary(measurer, seed: int = 3, **options) -> list[str]:
    with Database(":memory:") as db:
        best = tune(TASK, 32, policy="evolutionary", database=db, measurer=measurer, batch_size=8, seed=seed,
                    policy_options={**SMALL, **options}, remeasure=0)
        assert best is not None and best.ok and db.count(TASK) == 32
    return measurer.seen


def test_evolutionary_ahead_is_seeded_and_measures_nothing_twice():
    one = _evolutionary(AheadMeasurer())
    assert len(one) == len(set(one)) == 32
    assert _evolutionary(AheadMeasurer()) == one  # the same seed proposes the same traces, in order


def test_evolutionary_without_ahead_is_the_search_it_was():
    class Plain(AheadMeasurer):
        accepts_during_build = False

        def measure(self, inputs):
            return super().measure(inputs)

    assert _evolutionary(AheadMeasurer(), propose_ahead=False) == _evolutionary(Plain())


# -- the measurer's side: the caller's work runs while the builders compile, before anything is timed --


class SlowBuilder(Builder):
    """Waits (at most 5 s) for the caller's work to start before it finishes the build: it says whether the
    two ran at the same time."""

    def __init__(self, caller_started: threading.Event, events: list):
        self.caller_started, self.events = caller_started, events
        self.parallelism = 1

    def build(self, inputs):
        self.events.append(("built", len(inputs), self.caller_started.wait(5)))
        return [BuildResult(artifact_path=f"/nonexistent/{i}.so", build_seconds=0.01) for i in range(len(inputs))]

    def remove(self, result):
        pass


class NotingRunner(Runner):
    def __init__(self, events: list):
        super().__init__()
        self.events = events

    def run(self, inputs, build_results, *, limits=None, on_result=None):
        self.events.append(("timed", len(inputs)))
        results = [MeasureResult(costs=[1e-3]) for _ in inputs]
        for i, r in enumerate(results):
            if on_result is not None:
                on_result(i, r)
        return results


def _measurer(overlap: bool):
    events: list = []
    started = threading.Event()
    m = Measurer(SlowBuilder(started, events), NotingRunner(events), overlap=overlap)
    return m, events, started


@pytest.mark.parametrize("overlap", [False, True])
def test_during_build_runs_beside_the_build_and_before_any_timing(overlap):
    m, events, started = _measurer(overlap)
    inputs = [MeasureInput(TASK, TASK.default_trace())] * 6

    def caller():
        started.set()
        events.append(("caller",))

    with m:
        results = m.measure(inputs, during_build=caller)
    assert all(r.ok for r in results)
    first_timed = next(i for i, e in enumerate(events) if e[0] == "timed")
    assert events.index(("caller",)) < first_timed  # nothing was timed before the caller's work ended
    built = [e for e in events if e[0] == "built"]
    assert built[0][2]  # the first build was still going when the caller's work started
    assert m.stats.during_build_seconds >= 0 and m.stats.candidates == 6


def test_an_error_in_during_build_stops_the_batch_before_it_is_timed():
    m, events, started = _measurer(False)

    def caller():
        started.set()
        raise KeyError("nope")

    with m, pytest.raises(KeyError):
        m.measure([MeasureInput(TASK, TASK.default_trace())], during_build=caller)
    assert [e[0] for e in events] == ["built"]  # the build ended; nothing was timed


def test_during_build_is_called_for_an_empty_batch():
    m, events, started = _measurer(False)
    with m:
        assert m.measure([], during_build=started.set) == []
    assert started.is_set() and not events


# -- feature helpers: shares of the cost model's features computed in other processes, the same features --


def _inputs(task, n: int, seed: int = 5):
    import numpy as np

    return [MeasureInput(task, t) for t in task.space("generated").sample(n, np.random.default_rng(seed))]


def test_helpers_compute_the_same_features_as_this_process():
    import numpy as np


    inputs = _inputs(TASK, 2 * HELPER_MIN_BATCH)
    here = FeatureCache().features(inputs)
    with FeatureHelpers(1) as helpers:
        assert helpers.wait_ready() == 1
        cache = FeatureCache()
        cache.helpers = helpers
        sent = []
        send = helpers.send
        helpers.send = lambda h, state, texts: sent.append(len(texts)) or send(h, state, texts)
        both = cache.features(inputs)
        assert sent == [HELPER_MIN_BATCH]  # half of them went to the helper
        np.testing.assert_array_equal(both, here)
        cache.features(inputs[:3])  # few, and known: nothing sent
        assert sent == [HELPER_MIN_BATCH]


def _local_matmul(name: str, lock=None):

    @autosched.register_workload(name, override=True)
    def local(n=64):  # registered here, in a test: a helper process knows it only if it is sent
        if lock is not None:
            assert not lock.locked()
        a = te.placeholder((n, n), name="A")
        b = te.placeholder((n, n), name="B")
        k = te.reduce_axis((0, n), name="k")
        c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
        return [a, b, c]

    return autosched.Task(name, {})


def test_a_workload_of_the_users_code_travels_to_the_helpers_by_value():
    """A workload registered in the user's code (here: inside a test) reaches the feature helpers as it reaches
    the measurement workers (autosched.shipment, cloudpickled); one that cannot be sent (its function holds a
    lock) is refused by the helper once and computed here from then on, with the same features."""
    import threading

    import numpy as np


    sendable = _local_matmul("test_overhead_sent_by_value")
    unsendable = _local_matmul("test_overhead_not_sendable", lock=threading.Lock())
    with FeatureHelpers(1) as helpers:
        assert helpers.wait_ready() == 1
        for task, travels in ((sendable, True), (unsendable, False)):
            inputs = _inputs(task, HELPER_MIN_BATCH + 4)
            cache = FeatureCache()
            cache.helpers = helpers
            answered = []
            receive = helpers.receive
            helpers.receive = lambda h, t: answered.append(rows := receive(h, t)) or rows
            np.testing.assert_array_equal(cache.features(inputs), FeatureCache().features(inputs))
            helpers.receive = receive
            assert len(answered) == 1 and (answered[0] is not None) == travels
            assert bool(helpers.ready(task)) == travels  # refused once: not asked again


def test_a_run_with_helpers_searches_as_one_without(monkeypatch):

    runs = []
    for n in ("1", "0"):
        monkeypatch.setenv("AUTOSCHED_FEATURE_HELPERS", n)
        model = XGBCostModel(seed=3)
        m = AheadMeasurer()
        m.accepts_during_build = False
        with Database(":memory:") as db:
            tune(TASK, 32, policy="evolutionary", database=db, measurer=m, batch_size=8, seed=3,
                 cost_model=model, policy_options=SMALL, remeasure=0)
        assert model.cache.helpers is None  # the run's helpers are the run's
        runs.append(m.seen)
    assert runs[0] == runs[1]


def test_a_gpu_run_takes_more_helpers_than_a_cpu_run_where_the_cores_allow(monkeypatch):
    monkeypatch.delenv("AUTOSCHED_FEATURE_HELPERS", raising=False)
    for cores, cpu, gpu in ((16, 3, 7), (4, 3, 3), (2, 1, 1), (1, 0, 0)):
        monkeypatch.setattr(os, "cpu_count", lambda c=cores: c)
        assert (default_helpers(), default_helpers(gpu=True)) == (cpu, gpu)
    monkeypatch.setenv("AUTOSCHED_FEATURE_HELPERS", "5")
    assert default_helpers() == default_helpers(gpu=True) == 5


def test_a_gpu_run_with_helpers_proposes_what_one_without_does(monkeypatch):
    """A cuda run's samples, children and features in shares: the same candidates with a helper as without."""
    task = autosched.Task("matmul", dict(M=64, N=64, K=64), target="cuda -arch=sm_80")
    runs = []
    for n in ("1", "0"):
        monkeypatch.setenv("AUTOSCHED_FEATURE_HELPERS", n)
        m = AheadMeasurer()
        m.accepts_during_build = False
        with Database(":memory:") as db:
            tune(task, 24, policy="evolutionary", database=db, measurer=m, batch_size=8, seed=4,
                 cost_model=XGBCostModel(seed=4), policy_options=SMALL, remeasure=0)
        runs.append(m.seen)
    assert len(runs[0]) == 24 and runs[0] == runs[1]


def _note_answers(helpers: FeatureHelpers) -> list:
    """The list each answer of ``helpers`` is appended to (None for one that failed), as they are received."""
    answers: list = []
    receive = helpers.receive
    helpers.receive = lambda h, t: answers.append(got := receive(h, t)) or got
    return answers


def test_helpers_draw_shares_of_a_sample_and_the_traces_are_the_same():
    """A tuning run's space draws its fresh samples in seeded shares, the helpers' and its own at once: the same
    traces (and the points they come from) whether a helper or this process drew a share; a sample of 8 or
    fewer is one sequence of draws, as outside a tuning run."""
    import numpy as np

    task = autosched.Task("matmul", dict(M=48, N=64, K=32))
    space = task.space("generated")
    here = FeatureHelpers(0)  # no processes: every share drawn here
    space.helpers = here
    try:
        alone = space.sample(40, np.random.default_rng(7))
        with FeatureHelpers(1) as helpers:
            assert helpers.wait_ready() == 1
            answers = _note_answers(helpers)
            space.helpers = helpers
            space._points.clear()
            both = space.sample(40, np.random.default_rng(7))
        assert len(answers) == 1 and len(answers[0]) == 2  # 5 shares of 8: the last 2 drawn by the helper
        assert [t.dumps() for t in both] == [t.dumps() for t in alone] and len(both) == 40
        assert all(space.trace_of(space.point_of(t)) == t for t in both[-16:])  # the helper's points came back
        space.helpers = here
        few = space.sample(8, np.random.default_rng(3))
        space.helpers = None
        assert few == space.sample(8, np.random.default_rng(3))
    finally:
        space.helpers = None


def test_helpers_breed_shares_of_offspring_and_the_children_are_the_same():
    """Children bred in seeded shares are the same whether a helper or this process bred a share (mutations,
    crossovers, and a parent of another space, which stands for its child); the helper's come with their points."""
    import numpy as np

    space = autosched.Task("matmul", dict(M=48, N=64, K=32)).space("generated")
    parents = space.sample(6, np.random.default_rng(1))
    conv = autosched.Task("conv2d", dict(N=1, H=8, W=8, CI=4, CO=8, KH=3, KW=3, stride=1, padding=1))
    foreign = conv.space("generated").sample(1, np.random.default_rng(1))
    requests = [(parents[k % 6], parents[(k + 1) % 6] if k % 3 == 0 else None) for k in range(19)]
    requests.append((foreign[0], None))
    kept = {t: space.point_of(t) for t in parents}
    space.helpers = FeatureHelpers(0)  # every share bred here
    try:
        alone = space.offspring(requests, np.random.default_rng(5))
        memory_alone = list(space._points.items())
        with FeatureHelpers(1) as helpers:
            assert helpers.wait_ready() == 1
            answers = _note_answers(helpers)
            space.helpers = helpers
            space._points.clear()  # as before the first call: children of the same trace with other points go
            space._points.update(kept)
            both = space.offspring(requests, np.random.default_rng(5))
    finally:
        space.helpers = None
    assert len(answers) == 1 and len(answers[0]) == 2  # 5 shares of 4: the last 2 bred by the helper
    assert [t.dumps() for t in both] == [t.dumps() for t in alone] and len(both) == 20
    # the points it remembers, and their order (which goes first when the memory is full), are the same too
    assert list(space._points.items()) == memory_alone
    assert both[-1] == foreign[0]  # no child of a trace this space does not make: the parent stands
    assert sum(c != a for c, (a, _) in zip(both, requests)) >= 15
    assert all(space.remembered(t) is not None and space.trace_of(space.remembered(t)) == t for t in both[12:19])


def test_a_space_drawn_in_shares_still_runs_dry():
    """Shares of a tiny space repeat each other; the sample makes up the rest with draws of its own, which
    find it dry, and later samples pick from what it found."""
    import numpy as np

    space = autosched.Task("matmul", dict(M=2, N=2, K=2)).space("generated")
    space.helpers = FeatureHelpers(0)
    try:
        found = space.sample(1000, np.random.default_rng(0))
    finally:
        space.helpers = None
    assert 10 < len(found) < 1000 and sorted(t.dumps() for t in found) == [t.dumps() for t in space.dry_sample]


def test_a_gpu_tuning_run_draws_in_shares_and_a_cpu_run_in_one_sequence(monkeypatch):
    """The tuning loop lends its space the run's helpers (an empty pool without any: every share here) for a
    cuda target only, and takes them back at the end; the GPU run's samples are its shares' traces."""
    import numpy as np

    monkeypatch.setenv("AUTOSCHED_FEATURE_HELPERS", "0")
    seen = {}
    for target in ("cuda -arch=sm_80", "llvm"):
        task = autosched.Task("matmul", dict(M=64, N=64, K=64), target=target)
        lent = []
        m = AheadMeasurer()
        m.accepts_during_build = False
        with Database(":memory:") as db:
            tune(task, 16, policy="random", database=db, measurer=m, batch_size=16, seed=2, remeasure=0,
                 callbacks=[lambda s, i, r: lent.append(s.context.space.helpers)])
        assert task.space("generated").helpers is None  # given back
        seen[target] = (lent, m.seen)
    lent, traces = seen["cuda -arch=sm_80"]
    assert isinstance(lent[0], FeatureHelpers) and lent[0].size == 0
    assert seen["llvm"][0] == [None]
    space = autosched.Task("matmul", dict(M=64, N=64, K=64), target="cuda -arch=sm_80").space("generated")
    space.helpers = FeatureHelpers(0)
    try:  # the random policy's batch: sample_new(16), two shares from the run's seeded generator
        again = space.sample(16, np.random.default_rng(2))
    finally:
        space.helpers = None
    assert [t.dumps() for t in again] == traces
