"""Training the cost model shipped with autosched, and how well it ranks unseen workloads: :class:`LogData`
(features and labels of tuning records, :func:`log_data`), :func:`fit` (an XGBoost ranker with the tuner's
objective and parameters), :func:`save` (the model and its metadata, ``shipped.META_FILE``) and :func:`evaluate`
(leave one workload out with scikit-learn's ``LeaveOneGroupOut``: NDCG@k, recall of the k fastest among the
model's top k, the best normalised throughput among its top k, Kendall's tau). Reading the records out of
JSON-lines logs, and the command, are ``python -m autosched.cli.train_pretrained``."""

from __future__ import annotations

import datetime
import glob
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autosched.cost_model.features import FEATURE_NAMES, FEATURES_VERSION, feature_fingerprint
from autosched.cost_model.model import FeatureCache, _throughput, train_ranker, xgb_params
from autosched.cost_model.shipped import META_FILE, MODEL_FILE, RETRAIN, _loaded
from autosched.cost_model.xgb import xgboost
from autosched.result import MeasureInput

DATA_DIR = Path(__file__).resolve().parent / "data"
NUM_ROUNDS = 80  # trees of the shipped model (about 3 KB each at depth 6)
TOP_K = 32  # the figures look at the model's top 32: two batches of the tuner


@dataclass
class LogData:
    """Features and labels of every record of some logs: one row per record."""

    x: np.ndarray  # (rows, N_FEATURES)
    y: np.ndarray  # normalised throughput within the row's task: 1 for its fastest record, 0 for a failure
    groups: list[str]  # the task of each row (workload key and target): what the ranking compares within
    names: list[str]  # the workload name of each row: what the held-out evaluation leaves out
    logs: dict[str, int]  # records read per log file
    target_kinds: list[str]  # the kinds of target the records were measured on ("llvm", "cuda")

    def without(self, names: Sequence[str]) -> LogData:
        """The rows of every workload but ``names``."""
        drop = set(names)
        idx = np.flatnonzero([n not in drop for n in self.names])
        return LogData(self.x[idx], self.y[idx], [self.groups[i] for i in idx], [self.names[i] for i in idx],
                       self.logs, self.target_kinds)




def log_data(inputs: Sequence[MeasureInput], costs: Sequence[float], groups: list[str], names: list[str],
             logs: dict[str, int], progress: Any = None) -> LogData:
    """Features of measured candidates (lowered, then read, as the tuner does: :class:`FeatureCache`) and
    labels (normalised throughput within each group; ``inf`` cost: a failure); ``groups`` the task of each
    row, ``names`` its workload, ``logs`` records per source. ``progress`` receives a line of text."""
    t0 = time.perf_counter()
    x = FeatureCache(capacity=len(inputs) + 1).features(list(inputs))  # the tuner's path: lower, then extract
    if progress is not None:
        progress(f"features of {len(inputs)} records in {time.perf_counter() - t0:.1f} s")
    kinds = sorted({inp.task.target.kind for inp in inputs})
    return LogData(x, _throughput(groups, list(costs)), groups, names, logs, kinds)


def fit(data: LogData, seed: int = 0, num_rounds: int = NUM_ROUNDS) -> Any:
    """An XGBoost ranker on ``data`` with the tuner's parameters (an ``xgboost.Booster``)."""
    return train_ranker(xgb_params(seed), data.x, data.y, data.groups, num_rounds)


def save(booster: Any, data: LogData, out: str | Path, heldout: dict | None = None,
         excluded: Sequence[str] = ()) -> Path:
    """Write ``booster`` and its metadata (``META_FILE``) into the folder ``out``; returns the model's path."""
    xgb = xgboost()  # heavy: loaded when a model is written or evaluated

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = out / MODEL_FILE
    booster.save_model(str(model))
    meta = {
        "feature_fingerprint": feature_fingerprint(),
        "features_version": FEATURES_VERSION,
        "n_features": len(FEATURE_NAMES),
        "xgboost": xgb.__version__,
        "params": {**xgb_params(), "num_rounds": booster.num_boosted_rounds()},
        "trained_on": data.logs,
        "excluded_workloads": sorted(excluded),
        "records": len(data.y),
        "tasks": len(set(data.groups)),
        "workloads": dict(sorted(Counter(data.names).items())),
        "target_kinds": data.target_kinds,
        "date": datetime.date.today().isoformat(),
        "heldout": heldout,
        "command": RETRAIN,
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    _loaded.pop(str(out), None)  # this process reads the new model, not one it read before
    if out.resolve() == DATA_DIR.resolve():
        _loaded.pop(None, None)
    return model


def _task_metrics(y: np.ndarray, score: np.ndarray, k: int) -> dict[str, float]:
    """Ranking figures of one task's records: ``y`` the true normalised throughput, ``score`` the model's."""
    from scipy.stats import kendalltau
    from sklearn.metrics import ndcg_score

    k = min(k, len(y))
    top_model = np.argsort(-score, kind="stable")[:k]
    top_true = np.argsort(-y, kind="stable")[:k]
    tau = kendalltau(y, score).statistic
    return {"ndcg": float(ndcg_score(y[None, :], score[None, :], k=k)),
            "recall": len(set(top_model) & set(top_true)) / k,
            "best": float(y[top_model].max() / y.max()) if y.max() > 0 else 0.0,
            "tau": float(tau) if np.isfinite(tau) else 0.0}


def evaluate(data: LogData, seed: int = 0, num_rounds: int = NUM_ROUNDS, k: int = TOP_K,
             progress: Any = None) -> dict:
    """Leave-one-workload-out figures: per workload name, a model trained on the others ranks its records
    (each task separately; figures averaged over its tasks); ``mean`` averages the workloads, and ``random``
    gives the same figures for a random order (seeded), what the model is to beat."""
    xgb = xgboost()
    from sklearn.model_selection import LeaveOneGroupOut

    rng = np.random.default_rng(seed)
    per: dict[str, dict] = {}
    names = np.asarray(data.names)
    for train_idx, test_idx in LeaveOneGroupOut().split(data.x, data.y, groups=names):
        name = str(names[test_idx[0]])
        train = LogData(data.x[train_idx], data.y[train_idx], [data.groups[i] for i in train_idx],
                        [data.names[i] for i in train_idx], data.logs, data.target_kinds)
        booster = fit(train, seed, num_rounds)
        score = booster.predict(xgb.DMatrix(data.x[test_idx]))
        rows, rand = [], []
        tasks = np.asarray([data.groups[i] for i in test_idx])
        for task in dict.fromkeys(tasks):
            sel = tasks == task
            if sel.sum() < 2:
                continue
            y = data.y[test_idx][sel]
            rows.append(_task_metrics(y, score[sel], k))
            rand.append(_task_metrics(y, rng.random(int(sel.sum())), k))
        if not rows:
            continue
        per[name] = {"tasks": len(rows), "records": int(len(test_idx)),
                     **{m: float(np.mean([r[m] for r in rows])) for m in rows[0]},
                     "random": {m: float(np.mean([r[m] for r in rand])) for m in rand[0]}}
        if progress is not None:
            progress(heldout_line(name, per[name]))
    metrics = ["ndcg", "recall", "best", "tau"]
    mean = {m: float(np.mean([v[m] for v in per.values()])) for m in metrics}
    mean["random"] = {m: float(np.mean([v["random"][m] for v in per.values()])) for m in metrics}
    return {"method": "leave one workload out (sklearn LeaveOneGroupOut), metrics per task, then averaged",
            "k": k, "workloads": per, "mean": mean}


def heldout_line(name: str, v: dict) -> str:
    r = v["random"]
    return (f"  {name:<18} tasks {v['tasks']:>2}  NDCG@k {v['ndcg']:.3f} ({r['ndcg']:.3f})  recall@k "
            f"{v['recall']:.3f} ({r['recall']:.3f})  best@k {v['best']:.3f} ({r['best']:.3f})  tau "
            f"{v['tau']:+.3f} ({r['tau']:+.3f})")


def log_name(path: str | Path) -> str:
    """How the model's metadata names a log it was trained on: its folder and file name
    (``tuning_logs/conv2d.jsonl``, ``training/conv2d.jsonl``)."""
    path = Path(path)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def default_logs() -> list[str]:
    """The logs the shipped model is trained on, under the current directory, else beside the package: the
    shipped logs (``tuning_logs/*.jsonl``: the fastest records of long runs) and the training logs
    (``tuning_logs/training/*.jsonl``: every record of shorter runs, slow and failed ones too)."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        found = sorted(glob.glob(str(root / "tuning_logs" / "*.jsonl")))
        if found:
            return found + sorted(glob.glob(str(root / "tuning_logs" / "training" / "*.jsonl")))
    return []



