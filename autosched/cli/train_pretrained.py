"""Train the cost model shipped with autosched from tuning logs, and say how well it ranks unseen workloads.

    python -m autosched.cli.train_pretrained [LOG.jsonl ...] [--out DIR] [--no-eval]

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
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autosched.cost_model.shipped import META_FILE, MODEL_FILE, RETRAIN
from autosched.cost_model.training import (
    DATA_DIR,
    NUM_ROUNDS,
    TOP_K,
    LogData,
    default_logs,
    evaluate,
    fit,
    heldout_line,
    log_data,
    log_name,
    save,
)
from autosched.database.record import LogFormatError, TuningRecord, WorkloadChecker
from autosched.result import MeasureInput
from autosched.task import Task

__all__ = ["LogData", "default_logs", "evaluate", "fit", "main", "read_logs", "save"]


def read_logs(paths: Sequence[str | Path], progress: Any = None) -> LogData:
    """Features and labels of the records of ``paths`` (JSON-lines tuning logs). A line that does not load here
    (bad JSON, a workload not registered or whose computation changed) is skipped and counted in the message
    ``progress`` (a callable taking a line of text) receives."""
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
        logs[log_name(path)] = n
        if progress is not None:
            progress(f"{log_name(path)}: {n} records" + (f", {sum(bad.values())} skipped ({dict(bad)})" if bad else "")
                     + f" ({time.perf_counter() - t0:.1f} s)")
    return log_data(inputs, costs, groups, names, logs, progress)


def main(argv: Sequence[str] | None = None) -> int:
    """Train (and evaluate) the shipped model from ``argv``'s logs; returns the exit code."""
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
        say(heldout_line("mean", {"tasks": sum(v["tasks"] for v in heldout["workloads"].values()), **heldout["mean"]}))
    booster = fit(data, args.seed, args.rounds)
    path = save(booster, data, args.out, heldout, args.exclude)
    say(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB; {len(data.y)} records of {len(set(data.groups))} "
        f"tasks) and {path.parent / META_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
