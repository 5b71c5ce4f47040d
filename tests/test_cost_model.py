"""Loop-IR features and the cost models (XGBoost and random)."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

import autosched
from autosched.cost_model.features import FEATURE_NAMES, N_FEATURES, extract, extract_batch
from autosched.cost_model.model import CostModel, RandomCostModel, XGBCostModel, normalised_throughput
from autosched.measure.result import MeasureInput, MeasureResult

TASK = autosched.Task("matmul", dict(M=64, N=64, K=64))


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


def test_features_tell_schedules_apart_and_batch_is_fast():
    cands = _variants()
    funcs = [autosched.lower(*TASK.apply(c.trace)) for c in cands]
    t0 = time.perf_counter()
    x = extract_batch(funcs)
    per = (time.perf_counter() - t0) / len(funcs)
    assert x.shape == (len(cands), N_FEATURES)
    distinct_loops = len({str(f) for f in funcs})  # some variants lower identically (a split by 1)
    assert len({row.tobytes() for row in x}) >= 0.8 * distinct_loops
    assert per < 0.05


def _synthetic_results(cands):
    """Deterministic costs that depend on the schedule (vectorized and bigger blocks are faster)."""
    feats = np.stack([extract(autosched.lower(*TASK.apply(c.trace))) for c in cands])
    lanes = feats[:, FEATURE_NAMES.index("s0_vec_len")]
    unroll = feats[:, FEATURE_NAMES.index("s0_unroll")]
    cost = 1.0 / (1.0 + lanes + 0.5 * unroll)
    return [MeasureResult(costs=[float(c)]) for c in cost]


def _pairwise_accuracy(scores, costs):
    good = total = 0
    for i in range(len(costs)):
        for j in range(i + 1, len(costs)):
            if costs[i] == costs[j]:
                continue
            total += 1
            good += (scores[i] > scores[j]) == (costs[i] < costs[j])
    return good / total


def test_xgboost_learns_a_ranking_and_round_trips(tmp_path):
    cands = _variants()
    results = _synthetic_results(cands)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(cands))
    train, test = order[:40], order[40:]
    model = XGBCostModel(seed=0)
    model.update([cands[i] for i in train], [results[i] for i in train])
    assert model.trained
    scores = model.predict([cands[i] for i in test])
    acc = _pairwise_accuracy(scores, [results[i].cost for i in test])
    assert acc > 0.8, acc
    path = tmp_path / "model.pkl"
    model.save(str(path))
    again = CostModel.load(str(path))
    np.testing.assert_allclose(again.predict([cands[i] for i in test]), scores, rtol=1e-6)


def test_feature_gain_names_what_the_costs_depend_on():
    """The synthetic costs depend on vector length and unroll; the model's gain says so, largest first."""
    cands = _variants()
    model = XGBCostModel(seed=0)
    assert model.feature_gain() == {}  # untrained
    model.update(cands, _synthetic_results(cands))
    gain = model.feature_gain()
    assert set(gain) <= set(FEATURE_NAMES) and list(gain.values()) == sorted(gain.values(), reverse=True)
    assert set(list(gain)[:3]) & {"s0_vec_len", "s0_unroll", "vector_lanes", "s1_vec_len", "s1_unroll"}


def test_failed_candidates_rank_last_and_throughput_is_normalised():
    cands = _variants()[:4]
    results = [MeasureResult(costs=[2.0]), MeasureResult(costs=[1.0]), MeasureResult(error_kind="compile_error"),
               MeasureResult(costs=[4.0])]
    np.testing.assert_allclose(normalised_throughput(cands, results), [0.5, 1.0, 0.0, 0.25])


def test_random_model_is_seeded():
    cands = _variants()[:10]
    a = RandomCostModel(seed=3).predict(cands)
    b = RandomCostModel(seed=3).predict(cands)
    np.testing.assert_array_equal(a, b)
    RandomCostModel().update(cands, [MeasureResult(costs=[1.0])] * 10)
