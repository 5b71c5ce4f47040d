"""Tuning curves of the built-in policies, and the cost model's ranking quality on held-out records.

    python benchmarks/bench_tuning.py [--trials 256] [--seeds 0 1 2] [--policies random annealing evolutionary]
                                      [--workloads matmul512 conv2d] [--out benchmarks/results] [--resume]

For every workload, policy and seed: a fresh database, ``autosched.tune`` for ``--trials`` measurements
(local process workers, batch 16, no final re-measurement), and the best GFLOPS after each batch. Prints,
per workload and policy, the median over seeds of the best GFLOPS at 64, 128 and 256 trials and the trial
at which each run reached 90% of its own final best; draws ``tuning_curves.png`` (median curve per policy,
band from the worst to the best seed) and writes ``tuning.json``. Each finished run is saved at once, so
``--resume`` continues a run of this script that was cut off.

Then the cost model's quality: an XGBoost model trained on the first 256 records of the random-search run
of seed 0 ranks the records of the other seeds' runs (held out: other runs, never seen in training);
printed as pairwise ranking accuracy and Kendall's tau, on the random runs' records (an unbiased sample
of the space) and on all held-out records. On a 2-core machine run it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import autosched
from autosched.database import Database
from autosched.measure import MeasureInput
from autosched.target import Target

HERE = Path(__file__).resolve().parent
WORKLOADS = {
    "matmul512": ("matmul", dict(M=512, N=512, K=512)),
    "conv2d": ("conv2d", {}),  # the default: 1x64x56x56, 64 filters 3x3, stride 1, padding 1
}
CHECKPOINTS = (64, 128, 256)


def tune_once(wl: str, policy: str, seed: int, trials: int, dbdir: Path) -> dict:
    name, params = WORKLOADS[wl]
    task = autosched.Task(name, params)
    db = dbdir / f"{wl}-{policy}-{seed}.db"
    for p in dbdir.glob(f"{db.name}*"):
        p.unlink()
    curve: list[tuple[int, float]] = []

    def record(state, inputs, results):
        curve.append((state.trials_done, state.best_gflops))
        print(f"\r  {wl} {policy} seed {seed}: {state.trials_done}/{trials} best {state.best_gflops:.1f} GFLOPS",
              end="", file=sys.stderr, flush=True)

    t0 = time.time()
    autosched.tune(task, trials, policy=policy, database=str(db), backend="local", batch_size=16, seed=seed,
                   remeasure=0, callbacks=[record])
    print(file=sys.stderr)
    return {"workload": wl, "policy": policy, "seed": seed, "trials": trials, "seconds": time.time() - t0,
            "curve": curve, "db": str(db)}


def best_at(curve: list, n: int) -> float:
    got = [g for t, g in curve if t <= n]
    return got[-1] if got else 0.0


def reach(curve: list, fraction: float) -> int | None:
    final = curve[-1][1] if curve else 0.0
    for t, g in curve:
        if g >= fraction * final and g > 0:
            return t
    return None


def summarise(runs: list[dict], trials: int) -> list[dict]:
    rows = []
    for wl in dict.fromkeys(r["workload"] for r in runs):
        for policy in dict.fromkeys(r["policy"] for r in runs if r["workload"] == wl):
            rs = [r for r in runs if r["workload"] == wl and r["policy"] == policy]
            row = {"workload": wl, "policy": policy, "seeds": [r["seed"] for r in rs]}
            for n in (*CHECKPOINTS, trials):
                row[f"best@{n}"] = statistics.median(best_at(r["curve"], n) for r in rs)
            row["reach90"] = [reach(r["curve"], 0.9) for r in rs]
            row["trials_per_s"] = statistics.median(r["trials"] / r["seconds"] for r in rs)
            rows.append(row)
    return rows


def print_table(rows: list[dict], trials: int) -> None:
    cols = sorted(set(CHECKPOINTS) | {trials})
    head = f"{'workload':<10} {'policy':<13}" + "".join(f"{'@' + str(n):>9}" for n in cols)
    print("median best GFLOPS over seeds")
    print(head + f"  {'90% of own best at trial (per seed)':<38} trials/s")
    for r in rows:
        line = f"{r['workload']:<10} {r['policy']:<13}" + "".join(f"{r[f'best@{n}']:>9.1f}" for n in cols)
        print(line + f"  {str(r['reach90']):<38} {r['trials_per_s']:.2f}")
    for wl in dict.fromkeys(r["workload"] for r in rows):
        rand = next((r for r in rows if r["workload"] == wl and r["policy"] == "random"), None)
        if rand is None:
            continue
        for r in rows:
            if r["workload"] != wl or r["policy"] == "random":
                continue
            beats = [f"@{n}: {r[f'best@{n}'] / max(rand[f'best@{n}'], 1e-9):.2f}x" for n in cols]
            third = trials / 3
            fast = sum(1 for t in r["reach90"] if t is not None and t <= third)
            print(f"{wl} {r['policy']} vs random: {', '.join(beats)}; "
                  f"reached 90% of its best within the first third ({third:.0f} trials) in {fast}/{len(r['reach90'])}"
                  f" seeds")


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = list(dict.fromkeys(r["workload"] for r in runs))
    fig, axes = plt.subplots(1, len(wls), figsize=(6 * len(wls), 4.2), dpi=100, squeeze=False)
    for ax, wl in zip(axes[0], wls):
        for policy in dict.fromkeys(r["policy"] for r in runs if r["workload"] == wl):
            rs = [r for r in runs if r["workload"] == wl and r["policy"] == policy]
            xs = sorted({t for r in rs for t, _ in r["curve"]})
            ys = np.array([[best_at(r["curve"], x) for x in xs] for r in rs])
            line, = ax.plot(xs, np.median(ys, axis=0), label=f"{policy} (median of {len(rs)})", linewidth=1.8)
            ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=line.get_color(), alpha=0.15)
        ax.set_title(wl)
        ax.set_xlabel("trials")
        ax.set_ylabel("best GFLOPS so far")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("autosched tuning curves (band: worst to best seed)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def pairwise_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    """Fraction of pairs with different true values that the prediction orders the same way."""
    d_pred = np.sign(pred[:, None] - pred[None, :])
    d_true = np.sign(truth[:, None] - truth[None, :])
    mask = d_true != 0
    return float((d_pred[mask] == d_true[mask]).mean()) if mask.any() else float("nan")


def kendall_tau(pred: np.ndarray, truth: np.ndarray) -> float:
    """Kendall's tau-b (ties in either ranking discounted, as scipy.stats.kendalltau computes it)."""
    iu = np.triu_indices(len(pred), 1)
    d_pred = np.sign(pred[:, None] - pred[None, :])[iu]
    d_true = np.sign(truth[:, None] - truth[None, :])[iu]
    den = np.sqrt(float(np.count_nonzero(d_pred)) * float(np.count_nonzero(d_true)))
    return float((d_pred * d_true).sum() / den) if den else float("nan")


def model_quality(runs: list[dict], wl: str, train_n: int = 256) -> dict | None:
    """Train on the first ``train_n`` records of the random run of the lowest seed; rank the other runs'."""
    from autosched.cost_model import XGBCostModel

    mine = [r for r in runs if r["workload"] == wl]
    rand = sorted((r for r in mine if r["policy"] == "random"), key=lambda r: r["seed"])
    if not rand:
        return None
    name, params = WORKLOADS[wl]
    task = autosched.Task(name, params)

    def load(run: dict) -> list:
        with Database(run["db"], create=False) as db:
            return db.records(task)

    train = load(rand[0])[:train_n]
    model = XGBCostModel(seed=0)
    model.update([MeasureInput(task, r.trace) for r in train], [r.result for r in train])
    out = {"workload": wl, "train_records": len(train)}
    for label, held in (("random runs", [r for r in rand[1:]]), ("all other runs", [r for r in mine
                                                                                   if r is not rand[0]])):
        recs = [x for run in held for x in load(run) if x.ok]
        if len(recs) < 2:
            continue
        pred = model.predict([MeasureInput(task, r.trace) for r in recs])
        thr = np.array([1.0 / r.cost for r in recs])
        tau = kendall_tau(pred, thr)
        out[label] = {"records": len(recs), "pairwise_accuracy": pairwise_accuracy(pred, thr), "kendall_tau": tau}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--policies", nargs="+", default=["random", "annealing", "evolutionary"])
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--dbdir", type=Path, default=Path("/tmp/autosched-bench-tuning"))
    ap.add_argument("--resume", action="store_true", help="keep the runs already in OUT/tuning.json")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.dbdir.mkdir(parents=True, exist_ok=True)
    result_file = args.out / "tuning.json"
    runs: list[dict] = []
    if args.resume and result_file.exists():
        runs = json.loads(result_file.read_text())["runs"]
    done = {(r["workload"], r["policy"], r["seed"]) for r in runs if r["trials"] == args.trials}
    for wl in args.workloads:
        for seed in args.seeds:
            for policy in args.policies:
                if (wl, policy, seed) in done:
                    continue
                runs.append(tune_once(wl, policy, seed, args.trials, args.dbdir))
                result_file.write_text(json.dumps({"runs": runs}, indent=1))
    rows = summarise(runs, args.trials)
    print_table(rows, args.trials)
    quality = [q for wl in args.workloads if (q := model_quality(runs, wl)) is not None]
    for q in quality:
        for label in ("random runs", "all other runs"):
            if label in q:
                m = q[label]
                print(f"cost model on {q['workload']}, trained on {q['train_records']} records, ranking "
                      f"{m['records']} held-out records of {label}: pairwise accuracy {m['pairwise_accuracy']:.3f}, "
                      f"Kendall tau {m['kendall_tau']:.3f}")
    plot(runs, args.out / "tuning_curves.png")
    result_file.write_text(json.dumps({"runs": runs, "summary": rows, "model_quality": quality,
                                       "machine": Target("llvm").key}, indent=1))
    print(f"wrote {result_file} and {args.out / 'tuning_curves.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
