"""Cost-model feature throughput: lowering and feature extraction of sampled candidates, per candidate.

    python benchmarks/bench_features.py                       # 512 candidates per workload, 3 repeats
    python benchmarks/bench_features.py --n 128 --repeat 5 --label after --out benchmarks/results

For each workload (the default conv2d and a 512^3 matmul) it samples ``--n`` traces (seeded) from the
generated space, then, ``--repeat`` times, replays each trace on a fresh schedule (``Task.apply``), lowers
it (``autosched.lower``) and extracts its features (``cost_model.extract``), timing the three phases
separately. Every repeat starts from fresh schedules, so no cache of an earlier repeat can help. Prints
the median ms per candidate of each phase and the median batch total (apply + lower + extract of ``--n``
candidates: what the XGBoost model pays to score a batch it has not seen), and writes the figures to
``features.json`` under ``--label`` (other labels already in the file are kept, so a before and an after
run sit side by side). On a 2-core machine shared with others, compare medians of several repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

import autosched
from autosched.cost_model.features import extract
from autosched.tir.lower import lower

HERE = Path(__file__).resolve().parent
WORKLOADS = {
    "conv2d": ("conv2d", None),
    "matmul512": ("matmul", {"M": 512, "N": 512, "K": 512}),
}


def run_once(task: autosched.Task, traces: list) -> dict:
    """Apply, lower and extract every trace once; seconds spent in each phase."""
    t_apply = t_lower = t_feat = 0.0
    failed = 0
    for tr in traces:
        t0 = time.perf_counter()
        sch, args = task.apply(tr)
        t1 = time.perf_counter()
        try:
            func = lower(sch, args, partition=False)  # as the cost model's FeatureCache lowers
        except Exception:  # noqa: BLE001 - an illegal candidate: the model scores it as zeros
            failed += 1
            t_apply += t1 - t0
            t_lower += time.perf_counter() - t1
            continue
        t2 = time.perf_counter()
        extract(func)
        t3 = time.perf_counter()
        t_apply += t1 - t0
        t_lower += t2 - t1
        t_feat += t3 - t2
    return {"apply_s": t_apply, "lower_s": t_lower, "features_s": t_feat, "failed": failed}


def bench(name: str, args: dict | None, n: int, repeat: int, seed: int) -> dict:
    task = autosched.Task(name, args)
    traces = task.space("generated").sample(n, np.random.default_rng(seed))
    runs = [run_once(task, traces) for _ in range(repeat)]
    k = len(traces)

    def per(key: str) -> float:
        return statistics.median(r[key] for r in runs) / k * 1e3

    total = statistics.median(r["apply_s"] + r["lower_s"] + r["features_s"] for r in runs)
    return {"task": repr(task), "candidates": k, "repeat": repeat, "failed": runs[0]["failed"],
            "apply_ms": per("apply_s"), "lower_ms": per("lower_s"), "features_ms": per("features_s"),
            "batch_total_s": total, "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=512, help="candidates per workload")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--label", default="latest", help="key of these figures in features.json")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=HERE).stdout.strip()
    except OSError:
        commit = ""
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()}); commit {commit}")
    rows = {}
    for wl in a.workloads:
        name, params = WORKLOADS[wl]
        r = bench(name, params, a.n, a.repeat, a.seed)
        rows[wl] = r
        print(f"{wl:10s} {r['candidates']} candidates ({r['failed']} illegal), median of {a.repeat}: "
              f"apply {r['apply_ms']:.2f} ms  lower {r['lower_ms']:.2f} ms  features {r['features_ms']:.2f} ms "
              f"per candidate;  batch total {r['batch_total_s']:.2f} s", flush=True)
    path = a.out / "features.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[a.label] = {"commit": commit, "package": os.path.dirname(autosched.__file__), "cpu_count": os.cpu_count(),
                     "load_before": os.getloadavg()[0],
                     "n": a.n, "repeat": a.repeat, "seed": a.seed, "workloads": rows}
    path.write_text(json.dumps(data, indent=1))
    print(f"wrote {path} [{a.label}]")


if __name__ == "__main__":
    main()
