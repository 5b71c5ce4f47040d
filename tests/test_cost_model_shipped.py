"""The cost model shipped with autosched: package data read on first use (no network, no training), refused with
one warning when the features changed since it was trained, trees of the task's own on top of it as records
arrive, and the tuner's default for a task with no records. Also the script that trains it, on small logs."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import autosched
from autosched.cost_model import XGBCostModel, features, load_pretrained, pretrained_info, shipped
from autosched.cost_model.model import BASE_CHECK_RECORDS
from autosched.cost_model.training import default_logs
from autosched.database import Database
from autosched.measure import MeasureInput, MeasureResult
from autosched.search.evolutionary import EvolutionaryPolicy
from autosched.search.tune import _make_model

REPO = Path(__file__).resolve().parents[1]
TASK = autosched.Task("matmul", dict(M=64, N=64, K=64))


@pytest.fixture
def fresh_cache():
    """Forget what the loader read and warned about, before and after (the fingerprint tests change it)."""
    shipped._loaded.clear()
    shipped._warned.clear()
    yield
    shipped._loaded.clear()
    shipped._warned.clear()


def _candidates(n: int, seed: int = 0) -> list[MeasureInput]:
    return [MeasureInput(TASK, t) for t in TASK.space("generated").sample(n, np.random.default_rng(seed))]


@pytest.mark.subprocess
def test_importing_autosched_does_not_load_the_model():
    code = ("import sys, autosched, autosched.cost_model as cm; autosched.tune; "
            "print(len(cm.shipped._loaded), 'xgboost' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["0", "False"]


def test_the_shipped_model_loads_from_package_data_and_ranks_candidates(fresh_cache):
    assert (resources.files("autosched.cost_model") / "data" / shipped.MODEL_FILE).is_file()
    info = pretrained_info()
    assert info is not None and info["feature_fingerprint"] == features.feature_fingerprint()
    assert info["records"] > 1000 and "tuning_logs/matmul.jsonl" in info["trained_on"]
    assert "training/matmul.jsonl" in info["trained_on"]  # whole runs, slow records too
    model = load_pretrained(seed=0)
    assert model.trained and model.base is not None and model._booster is None  # nothing trained here
    assert model.base.num_boosted_rounds() == info["params"]["num_rounds"]
    assert "shipped pretrained model" in model.origin
    scores = model.predict(_candidates(12))
    assert scores.shape == (12,) and np.all(np.isfinite(scores)) and len(set(np.round(scores, 6))) > 1
    assert os.path.getsize(str(resources.files("autosched.cost_model") / "data" / shipped.MODEL_FILE)) < 500_000


def test_other_features_than_it_was_trained_on_give_one_warning_and_a_cold_model(fresh_cache, monkeypatch,
                                                                                   caplog):
    monkeypatch.setattr(features, "FEATURES_VERSION", features.FEATURES_VERSION + 1)
    with caplog.at_level(logging.WARNING, logger="autosched.cost_model"):
        first, second = load_pretrained(), load_pretrained()
    assert first.base is None and second.base is None and first.origin.startswith("cold")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "python -m autosched.cli.train_pretrained" in warnings[0] and "features" in warnings[0]


def test_own_records_train_trees_on_top_of_the_base(fresh_cache):
    model = load_pretrained(seed=0)
    base_rounds = model.base.num_boosted_rounds()
    cands = _candidates(BASE_CHECK_RECORDS - 1, seed=1)  # too few records to judge the base on
    costs = [1e-4 * (1 + (i * 7) % 16) for i in range(len(cands))]  # a fixed, arbitrary order to learn
    before = model.predict(cands)
    model.update(cands, [MeasureResult(costs=[c]) for c in costs])
    assert model._booster.num_boosted_rounds() == base_rounds + model.num_rounds
    assert model.base.num_boosted_rounds() == base_rounds  # the base is not changed by training on top
    after = model.predict(cands)
    assert not np.allclose(before, after)
    assert np.corrcoef(after, [-c for c in costs])[0, 1] > 0.5  # it learnt this task's order
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(again.predict(cands), after, rtol=1e-6)
    assert again.base.num_boosted_rounds() == base_rounds


@pytest.mark.parametrize("agrees", [True, False])
def test_a_base_that_orders_the_tasks_records_backwards_is_dropped(fresh_cache, agrees):
    """The base is judged on the records it never saw, the task's own: kept when it orders them as they
    measured, dropped (a cold model learns from the records alone) when it orders them backwards."""
    model = load_pretrained(seed=0)
    cands = _candidates(BASE_CHECK_RECORDS, seed=2)
    score = model.predict(cands)
    costs = 1e-4 * np.exp(-score if agrees else score)  # the base's favourite the fastest, or the slowest
    model.update(cands, [MeasureResult(costs=[float(c)]) for c in costs])
    if agrees:
        assert model.base is not None and "shipped" in model.origin
    else:
        assert model.base is None and model.origin.startswith("cold (dropped the shipped pretrained model")
        assert model._booster.num_boosted_rounds() == model.num_rounds  # trees of its own only
    assert np.corrcoef(model.predict(cands), -costs)[0, 1] > 0.5  # either way it learnt this task's order


def test_default_is_the_shipped_model_for_a_new_task_and_cold_for_a_resumed_one(fresh_cache, tmp_path):
    with Database(tmp_path / "t.db") as db:
        new = _make_model(None, EvolutionaryPolicy, 0, TASK, db)
        assert new.base is not None and "shipped" in new.origin
        db.commit(TASK, TASK.default_trace(), MeasureResult(costs=[1e-4]))
        resumed = _make_model(None, EvolutionaryPolicy, 0, TASK, db)
        assert isinstance(resumed, XGBCostModel) and resumed.base is None and "1 records" in resumed.origin
        assert _make_model("xgb", EvolutionaryPolicy, 0, TASK, db).base is None
        assert _make_model("pretrained", EvolutionaryPolicy, 0, TASK, db).base is not None
        assert "transfer" in _make_model("transfer", EvolutionaryPolicy, 0, TASK, db).origin
        with pytest.raises(ValueError, match="'pretrained', 'transfer'"):
            _make_model("shipped", EvolutionaryPolicy, 0, TASK, db)
        gpu = autosched.Task("matmul", dict(M=64, N=64, K=64), target="cuda")  # the model knows CPU kernels only
        assert _make_model(None, EvolutionaryPolicy, 0, gpu, db).base is None


def test_tune_with_the_pretrained_model_measures_for_real(fresh_cache, tmp_path):
    task = autosched.Task("matmul", dict(M=32, N=32, K=32))
    db = str(tmp_path / "t.db")
    best = autosched.tune(task, 4, cost_model="pretrained", database=db, backend="local", batch_size=4, seed=0,
                          remeasure=0)
    assert best is not None and best.ok
    with Database(db) as d:
        config = d.runs()[0].config
    assert "shipped pretrained model" in config["cost_model_origin"]


def _small_logs(tmp_path: Path) -> list[Path]:
    """Two small real logs: the shipped elementwise one, and the first 40 records of the softmax one."""
    softmax = tmp_path / "softmax.jsonl"
    softmax.write_text("".join((REPO / "tuning_logs" / "softmax.jsonl").read_text().splitlines(True)[:40]))
    return [REPO / "tuning_logs" / "elementwise.jsonl", softmax]


def test_the_training_script_writes_a_model_the_tuner_loads(fresh_cache, tmp_path, capsys):
    from autosched.cli.train_pretrained import main

    out = tmp_path / "model"
    assert main([*map(str, _small_logs(tmp_path)), "--out", str(out), "--no-eval", "--rounds", "10"]) == 0
    assert "wrote" in capsys.readouterr().out
    info = pretrained_info(out)
    assert info["trained_on"] == {"tuning_logs/elementwise.jsonl": 29, f"{tmp_path.name}/softmax.jsonl": 40}
    assert info["heldout"] is None
    assert info["target_kinds"] == ["llvm"]
    model = load_pretrained(where=out)
    assert model.base.num_boosted_rounds() == 10 and str(out) in model.origin


def test_the_held_out_evaluation_leaves_each_workload_out(tmp_path):
    pytest.importorskip("sklearn")
    from autosched.cli.train_pretrained import evaluate, read_logs

    data = read_logs(_small_logs(tmp_path))
    got = evaluate(data, num_rounds=10, k=8)
    assert set(got["workloads"]) == {"elementwise", "softmax"}
    for v in got["workloads"].values():
        assert 0.0 <= v["ndcg"] <= 1.0 and 0.0 <= v["recall"] <= 1.0 and -1.0 <= v["tau"] <= 1.0
        assert 0.0 < v["best"] <= 1.0


def test_the_training_script_names_a_missing_log(capsys):
    from autosched.cli.train_pretrained import main

    with pytest.raises(SystemExit) as e:
        main(["/nonexistent/log.jsonl", "--no-eval"])
    assert e.value.code == 2
    assert "no such log file: /nonexistent/log.jsonl" in capsys.readouterr().err


def test_the_default_training_logs_are_the_shipped_ones_and_whole_runs_across_the_speed_range():
    logs = [Path(x) for x in default_logs()]
    shipped_logs = [x for x in logs if x.parent.name == "tuning_logs"]
    training = [x for x in logs if x.parent.name == "training"]
    assert {x.name for x in shipped_logs} >= {"matmul.jsonl", "conv2d.jsonl"} and len(training) >= 8
    for log in training:  # every measured record is kept: the slowest is far from the fastest (a small space of
        recs = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]  # 15 is measured whole)
        costs = [min(r["result"]["costs"]) for r in recs if r["result"]["error_kind"] is None]
        assert len(recs) >= 10 and (len(recs) < 100 or max(costs) > 2 * min(costs)), log
