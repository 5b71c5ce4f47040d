"""Train the cost model shipped with autosched from tuning logs, and say how well it ranks unseen workloads.

    python -m autosched.cost_model.train_pretrained [LOG.jsonl ...] [--out DIR] [--no-eval]

Run from the repository root, it reads the shipped logs (``tuning_logs/*.jsonl``), lowers every record's
trace for its record's task and target and reads its features with the tuner's own code
(:class:`~autosched.cost_model.FeatureCache`), labels each record with its normalised throughput within its
task (best cost / cost, as :class:`~autosched.cost_model.XGBCostModel` does), trains an XGBoost ranker with
the tuner's objective and parameters, and writes ``autosched/cost_model/data/pretrained.ubj`` with
``pretrained.json`` (the feature fingerprint, versions, the logs and record counts, the date and the
held-out metrics). Rerun it whenever ``features.py`` changes: the tuner refuses a model whose fingerprint
differs from the features it computes.

The held-out evaluation (scikit-learn's ``LeaveOneGroupOut``, one group per workload name) trains a model
without each workload in turn and ranks that workload's records: NDCG@32, recall of the 32 fastest among
the model's top 32, the best normalised throughput among its top 32 (1.0: it ranks the fastest there),
and Kendall's tau. The shipped logs hold only the fastest records of each task, so these figures say how
well the model orders good candidates, a harder task than telling good from bad.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import sys
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


def read_logs(paths: Sequence[str | Path], progress: Any = None) -> LogData:
    """Features and labels of the records of ``paths`` (JSON-lines tuning logs). A line that does not load here
    (bad JSON, a workload not registered or whose computation changed) is skipped and counted in the message
    ``progress`` (a callable taking a line of text) receives."""
    from autosched.database.record import LogFormatError, TuningRecord, WorkloadChecker
    from autosched.result import MeasureInput
    from autosched.task import Task

    checker, tasks = WorkloadChecker(), {}
    inputs, costs, groups, names, logs = [], [], [], [], {}
    for path in map(Path, paths):
        t0, n, bad = time.perf_counter(), 0, Counter()
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    rec = TuningRecord.loads(line)
                    checker.check(rec)
                except LogFormatError as e:
                    bad[e.reason.split(":")[0]] += 1
                    continue
                ident = (rec.workload_key, rec.target)
                task = tasks.get(ident)
                if task is None:
                    task = tasks[ident] = Task(rec.workload_name, rec.workload_args, rec.target)
                inputs.append(MeasureInput(task, rec.trace))
                costs.append(rec.cost if rec.ok else float("inf"))
                groups.append(f"{rec.workload_key} {rec.target}")
                names.append(rec.workload_name)
                n += 1
        if not n:
            raise ValueError(f"{path}: no record loads here ({dict(bad) or 'empty file'})")
        logs[path.name] = n
        if progress is not None:
            progress(f"{path.name}: {n} records" + (f", {sum(bad.values())} skipped ({dict(bad)})" if bad else "")
                     + f" ({time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    x = FeatureCache(capacity=len(inputs) + 1).features(inputs)  # the tuner's path: lower, then extract
    if progress is not None:
        progress(f"features of {len(inputs)} records in {time.perf_counter() - t0:.1f} s")
    kinds = sorted({t.target.kind for t in tasks.values()})
    return LogData(x, _throughput(groups, costs), groups, names, logs, kinds)


def fit(data: LogData, seed: int = 0, num_rounds: int = NUM_ROUNDS) -> Any:
    """An XGBoost ranker on ``data`` with the tuner's parameters (an ``xgboost.Booster``)."""
    return train_ranker(xgb_params(seed), data.x, data.y, data.groups, num_rounds)


def save(booster: Any, data: LogData, out: str | Path, heldout: dict | None = None,
         excluded: Sequence[str] = ()) -> Path:
    """Write ``booster`` and its metadata (``META_FILE``) into the folder ``out``; returns the model's path."""
    import xgboost as xgb

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
    import xgboost as xgb
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
            progress(_row(name, per[name]))
    metrics = ["ndcg", "recall", "best", "tau"]
    mean = {m: float(np.mean([v[m] for v in per.values()])) for m in metrics}
    mean["random"] = {m: float(np.mean([v["random"][m] for v in per.values()])) for m in metrics}
    return {"method": "leave one workload out (sklearn LeaveOneGroupOut), metrics per task, then averaged",
            "k": k, "workloads": per, "mean": mean}


def _row(name: str, v: dict) -> str:
    r = v["random"]
    return (f"  {name:<18} tasks {v['tasks']:>2}  NDCG@k {v['ndcg']:.3f} ({r['ndcg']:.3f})  recall@k "
            f"{v['recall']:.3f} ({r['recall']:.3f})  best@k {v['best']:.3f} ({r['best']:.3f})  tau "
            f"{v['tau']:+.3f} ({r['tau']:+.3f})")


def default_logs() -> list[str]:
    """The shipped logs: ``tuning_logs/*.jsonl`` under the current directory, else beside the package."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        found = sorted(glob.glob(str(root / "tuning_logs" / "*.jsonl")))
        if found:
            return found
    return []


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=RETRAIN, description=__doc__.split("\n\n")[0],
                                epilog="Default logs: tuning_logs/*.jsonl (run from the repository root).")
    p.add_argument("logs", nargs="*", help="JSON-lines tuning logs to train on (default: the shipped ones)")
    p.add_argument("--out", default=str(DATA_DIR), help=f"folder for {MODEL_FILE} and {META_FILE} "
                                                        f"(default: the package's data folder)")
    p.add_argument("--exclude", action="append", default=[], metavar="WORKLOAD",
                   help="leave this workload's records out of the training (repeatable)")
    p.add_argument("--rounds", type=int, default=NUM_ROUNDS, help=f"boosting rounds (default {NUM_ROUNDS})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation (needs scikit-learn)")
    args = p.parse_args(argv)
    logs = args.logs or default_logs()
    if not logs:
        p.error("no logs given and no tuning_logs/*.jsonl here: run from the repository root or name the logs")
    missing = [str(x) for x in logs if not Path(x).is_file()]
    if missing:
        p.error(f"no such log file: {', '.join(missing)}")
    if not args.no_eval:
        try:
            import sklearn  # noqa: F401 - checked before minutes of feature extraction, not after
        except ImportError:
            p.error("the held-out evaluation needs scikit-learn (pip install scikit-learn), or pass --no-eval")

    def say(text: str) -> None:
        print(text, flush=True)

    data = read_logs(logs, progress=say).without(args.exclude)
    heldout = None
    if not args.no_eval:
        say(f"held-out evaluation (leave one workload out; k={TOP_K}; a random order in brackets):")
        heldout = evaluate(data, args.seed, args.rounds, progress=say)
        say(_row("mean", {"tasks": sum(v["tasks"] for v in heldout["workloads"].values()), **heldout["mean"]}))
    booster = fit(data, args.seed, args.rounds)
    path = save(booster, data, args.out, heldout, args.exclude)
    say(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB; {len(data.y)} records of {len(set(data.groups))} "
        f"tasks) and {path.parent / META_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
