"""Loop-IR features and the cost models (XGBoost and random).

The XGBoost model is trained and judged on real measurements: ``tests/data/cost_model_records.jsonl`` holds
64 candidates each of a 64^3 matmul and a 14x14x16x16 conv2d, sampled at random from their generated spaces
and timed on this project's 2-core Sapphire Rapids-class Xeon (one thread) by

    autosched tune --workload matmul --param M=64 --param N=64 --param K=64 --trials 64 --policy random \
        --backend local --threads 1 --seed 0 --db /tmp/cm.db --log tests/data/cost_model_records.jsonl
    autosched tune --workload conv2d --param H=14 --param W=14 --param CI=16 --param CO=16 --trials 64 \
        --policy random --backend local --threads 1 --seed 0 --db /tmp/cm.db --log tests/data/cost_model_records.jsonl

Feature extraction speed is measured in benchmarks/bench_features.py, not here.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import autosched
from autosched.cost_model import features
from autosched.cost_model.features import FEATURE_NAMES, N_FEATURES, extract, extract_batch
from autosched.cost_model.model import CostModel, RandomCostModel, XGBCostModel, kendall_tau, normalised_throughput
from autosched.database.record import TuningRecord
from autosched.measure.result import MeasureInput, MeasureResult

TASK = autosched.Task("matmul", dict(M=64, N=64, K=64))
RECORDS = Path(__file__).parent / "data" / "cost_model_records.jsonl"


def _variants():
    """Distinct hand-written matmul schedules: tile sizes, vectorize or not, unroll or not."""
    out = []
    for mr, nr, vec, unroll in itertools.product((1, 2, 4, 8), (4, 8, 16, 32), (False, True), (False, True)):
        sch, (A, B, C) = TASK.schedule()
        CL = sch.cache_write(C, "local")
        i, j = sch[C].op.axis
        io, jo, ii, ji = sch[C].tile(i, j, mr, nr)
        sch[CL].compute_at(sch[C], jo)
        ci, cj = sch[CL].op.axis
        (k,) = sch[CL].op.reduce_axis
        sch[CL].reorder(k, ci, cj)
        if vec:
            sch[CL].vectorize(cj)
            sch[C].vectorize(ji)
        if unroll:
            sch[CL].unroll(ci)
        out.append(MeasureInput(TASK, sch.trace))
    return out


def test_features_have_documented_names_and_fixed_length():
    sch, args = TASK.default_schedule()
    v = extract(autosched.lower(sch, args))
    assert v.shape == (N_FEATURES,) == (len(FEATURE_NAMES),)
    named = dict(zip(FEATURE_NAMES, v))
    assert named["n_parallel"] >= 1 and named["vector_lanes"] > 1
    assert named["s0_reduce"] == 1.0 and named["s0_flop_mul"] == 1.0 and named["s0_flop_add"] == 1.0
    assert named["total_flop"] == pytest.approx(np.log2(TASK.flop + 1), rel=1e-3)


def test_features_tell_schedules_apart():
    cands = _variants()
    funcs = [autosched.lower(*TASK.apply(c.trace)) for c in cands]
    x = extract_batch(funcs)
    assert x.shape == (len(cands), N_FEATURES)
    distinct_loops = len({str(f) for f in funcs})  # some variants lower identically (a split by 1)
    assert len({row.tobytes() for row in x}) >= 0.8 * distinct_loops


def _measured():
    """The committed records, per workload in the order they were measured: ``{name: (inputs, results)}``."""
    out: dict[str, tuple[list, list]] = {}
    for line in RECORDS.read_text().splitlines():
        rec = TuningRecord.loads(line)
        inputs, results = out.setdefault(rec.workload_name, ([], []))
        inputs.append(MeasureInput(rec.task(), rec.trace))
        results.append(rec.result)
    return out


def _pairwise_accuracy(scores, costs):
    good = total = 0
    for i in range(len(costs)):
        for j in range(i + 1, len(costs)):
            if costs[i] == costs[j]:
                continue
            total += 1
            good += (scores[i] > scores[j]) == (costs[i] < costs[j])
    return good / total


def _split(n_train: int = 40):
    """Per workload, a seeded split of the measured candidates into training and held-out ones."""
    rng = np.random.default_rng(0)
    train_in, train_res, held = [], [], {}
    for name, (inputs, results) in _measured().items():
        order = rng.permutation(len(inputs))
        train_in += [inputs[i] for i in order[:n_train]]
        train_res += [results[i] for i in order[:n_train]]
        held[name] = ([inputs[i] for i in order[n_train:]], [results[i] for i in order[n_train:]])
    return train_in, train_res, held


def test_xgboost_ranks_unseen_measured_candidates_and_round_trips(tmp_path):
    """Trained on 40 measured candidates of each workload, it orders the other 24 of each far better than
    chance (0.5 of the pairs): 0.79 of the matmul pairs and 0.67 of the conv2d pairs with this log."""
    train_in, train_res, held = _split()
    model = XGBCostModel(seed=0)
    model.update(train_in, train_res)
    assert model.trained
    for name, (inputs, results) in held.items():
        acc = _pairwise_accuracy(model.predict(inputs), [r.cost for r in results])
        assert acc > 0.6, (name, acc)
    inputs = held["matmul"][0]
    path = tmp_path / "model.pkl"
    model.save(str(path))
    again = CostModel.load(str(path))
    np.testing.assert_allclose(again.predict(inputs), model.predict(inputs), rtol=1e-6)


def test_feature_gain_is_named_and_ordered():
    model = XGBCostModel(seed=0)
    assert model.feature_gain() == {}  # untrained
    train_in, train_res, _ = _split()
    model.update(train_in, train_res)
    gain = model.feature_gain()
    assert gain and set(gain) <= set(FEATURE_NAMES)
    assert list(gain.values()) == sorted(gain.values(), reverse=True)


def test_failed_candidates_rank_last_and_throughput_is_normalised():
    cands = _variants()[:4]
    results = [MeasureResult(costs=[2.0]), MeasureResult(costs=[1.0]), MeasureResult(error_kind="compile_error"),
               MeasureResult(costs=[4.0])]
    np.testing.assert_allclose(normalised_throughput(cands, results), [0.5, 1.0, 0.0, 0.25])


def test_kendall_tau_is_scipys_tau_b_with_ties():
    """The base model's check computes Kendall's tau itself (scipy.stats costs a run 2 s to import): the same
    tau-b as scipy's, with ties on either side, across the blocks it sums in, and NaN for a constant side."""
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n in (2, 16, 300, 600):
        a = rng.integers(0, 20, n).astype(float)  # many ties
        b = a + rng.normal(0, 5, n)
        b[::3] = 1.0
        assert kendall_tau(a, b) == pytest.approx(stats.kendalltau(a, b).statistic, abs=1e-12)
    assert kendall_tau(np.arange(5.0), -np.arange(5.0)) == pytest.approx(-1.0)
    assert np.isnan(kendall_tau(np.ones(5), np.arange(5.0)))


def test_random_model_is_seeded():
    cands = _variants()[:10]
    a = RandomCostModel(seed=3).predict(cands)
    b = RandomCostModel(seed=3).predict(cands)
    np.testing.assert_array_equal(a, b)
    RandomCostModel().update(cands, [MeasureResult(costs=[1.0])] * 10)


def test_build_times_are_learned_and_slow_builds_go_last():
    """The model learns build seconds from its records' builds (after MIN_BUILD_RECORDS); the context's
    ``affordable`` keeps the candidates expected to build within the budget (a factor of the fastest
    kernels' build time), and keeps all of them before the model can tell or with a factor of 0."""
    from scipy.stats import spearmanr

    from autosched.cost_model.model import MIN_BUILD_RECORDS
    from autosched.search.policy import TuneContext

    task = autosched.Task("matmul", dict(M=64, N=64, K=64))
    traces = task.space("generated").sample(60, np.random.default_rng(0))
    model = XGBCostModel(seed=0)
    ctx = TuneContext(task, task.space("generated"), model)
    assert model.predict_build_seconds([MeasureInput(task, t) for t in traces]) is None
    assert ctx.affordable(traces, 3.0) == traces  # nothing to predict with yet
    x = model.cache.features([MeasureInput(task, t) for t in traces])
    size = x[:, FEATURE_NAMES.index("s0_unroll")]  # a build time that grows with the unrolling
    builds = 0.05 * 2.0 ** size
    costs = 1e-3 * (1 + np.arange(len(traces)) % 7)
    half = len(traces) // 2
    model.update([MeasureInput(task, t) for t in traces[:half]],
                 [MeasureResult(costs=[c], build_seconds=b) for c, b in zip(costs[:half], builds[:half])])
    assert half >= MIN_BUILD_RECORDS
    pred = model.predict_build_seconds([MeasureInput(task, t) for t in traces[half:]])
    assert pred is not None and np.all(pred > 0)
    assert spearmanr(pred, builds[half:]).correlation > 0.6
    budget = model.build_budget(task.workload_key, 3.0)
    kept = ctx.affordable(traces[half:], 3.0)
    expected = [t for t, p in zip(traces[half:], pred) if p <= budget]
    assert kept == expected and 0 < len(kept) < len(traces) - half
    assert ctx.affordable(traces[half:], 0) == traces[half:]


def _shared_chain(depth: int):
    """x = x * 0.5 + x * x * 0.01, ``depth`` times: each level uses the one before three times (a DAG)."""
    A = autosched.te.placeholder((64,), name="A")

    def f(i):
        x = A[i]
        for _ in range(depth):
            x = x * 0.5 + x * x * 0.01
        return x

    B = autosched.te.compute((64,), f, name="B")
    return autosched.lower(autosched.te.create_schedule(B.op), [A, B])


def _op_counts(func) -> dict[str, float]:
    store = next(x for x in autosched.tir.stmt.walk_stmts(func.body) if isinstance(x, autosched.tir.stmt.BufferStore))
    return features._count_ops(store.value)


def test_features_of_a_deeply_shared_expression_are_the_tree_counts_without_walking_the_tree(monkeypatch):
    """The op counts are per node of the expression's tree (what the shipped model was trained on); past
    TREE_WALK_MAX nodes they come from the distinct nodes times their paths: the same numbers (checked on a
    small DAG with the limit lowered), and forty levels (3^40 paths) count at once: 3 (3^40 - 1) / 2 multiplies
    and (3^40 - 1) / 2 adds."""
    small = _shared_chain(6)
    tree_walk = _op_counts(small)
    monkeypatch.setattr(features, "TREE_WALK_MAX", 10)
    assert _op_counts(small) == tree_walk
    monkeypatch.undo()
    deep = _shared_chain(40)
    counts = _op_counts(deep)
    assert counts["flop_mul"] == pytest.approx(3 * (3 ** 40 - 1) / 2) and counts["flop_add"] == pytest.approx(
        (3 ** 40 - 1) / 2)
    assert extract(deep).shape == (N_FEATURES,)
