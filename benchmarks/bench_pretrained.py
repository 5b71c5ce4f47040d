"""The pretrained cost model against a cold one, on workloads held out of its training data.

    python benchmarks/bench_pretrained.py [--workloads conv2d matmul depthwise_conv2d batch_matmul]
                                          [--seeds 0 1 2 3 4] [--trials 32] [--out benchmarks/results]
                                          [--models /tmp/autosched-pretrained-held-out] [--resume]

The issue's figure: with the pretrained model, the best kernel found in 32 trials is at least 1.3x the cold
model's, median over 5 seeds, on workloads the model never saw. For each held-out workload a model is
trained on the shipped logs (``tuning_logs/*.jsonl``) without that workload's records, exactly as
``python -m autosched.cli.train_pretrained --exclude W --no-eval`` does (cached in
MODELS/pretrained-without-W/, retrained when the features changed). Then, per seed, two runs of
``autosched.tune`` on the workload at its default parameters: the evolutionary policy with that model (its
own records train trees on top of it), and with a cold XGBoost model; each from an empty database, local
process workers (``--backend``), batch 16, no final re-measurement. Prints per workload the best GFLOPS at
``--trials`` of every seed, the median ratio pretrained / cold over the seeds and the ratio of the medians;
writes OUT/pretrained.json and draws OUT/pretrained_curves.png (median curve, band from the worst to the
best seed). Each finished run is saved at once, so ``--resume`` continues a cut-off run. On a 2-core
machine run it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import autosched
from autosched.cli.train_pretrained import default_logs, fit, read_logs, save
from autosched.cost_model import XGBCostModel, load_pretrained, pretrained_info
from autosched.measure import Measurer
from autosched.target import Target

HERE = Path(__file__).resolve().parent
HELD_OUT = ["conv2d", "matmul", "depthwise_conv2d", "batch_matmul"]
MODELS = ("cold", "pretrained")


def held_out_models(workloads: list[str], logs: list[str], out: Path) -> dict[str, Path]:
    """A folder per workload holding a model trained on ``logs`` without it; reused while it still loads."""
    folders = {w: out / f"pretrained-without-{w}" for w in workloads}
    missing = [w for w, f in folders.items() if pretrained_info(f) is None]
    if missing:
        print(f"training models without {', '.join(missing)} on {len(logs)} logs", file=sys.stderr)
        data = read_logs(logs, progress=lambda s: print("  " + s, file=sys.stderr))
        for w in missing:
            kept = data.without([w])
            if len(kept.y) == len(data.y):
                raise SystemExit(f"bench_pretrained: the logs hold no record of {w}: nothing is held out")
            save(fit(kept), kept, folders[w], excluded=[w])
    return folders


def tune_once(workload: str, which: str, seed: int, trials: int, folder: Path, backend: str,
              dbdir: Path) -> dict:
    task = autosched.Task(workload)
    model = load_pretrained(seed, where=folder) if which == "pretrained" else XGBCostModel(seed=seed)
    if which == "pretrained" and model.base is None:
        raise SystemExit(f"bench_pretrained: the model in {folder} does not load (see the warning)")
    db = dbdir / f"{workload}-{which}-{seed}.db"
    for p in dbdir.glob(f"{db.name}*"):
        p.unlink()
    curve: list[tuple[int, float]] = []

    def note(state, inputs, results) -> None:
        curve.append((state.trials_done, state.best_gflops))
        print(f"\r  {workload} {which} seed {seed}: {state.trials_done}/{trials} best {state.best_gflops:.1f} "
              f"GFLOPS", end="", file=sys.stderr, flush=True)

    t0 = time.time()
    with Measurer(backend=backend, seed=seed) as measurer:  # its adaptive cut-off learns this run's best only
        autosched.tune(task, trials, policy="evolutionary", cost_model=model, database=str(db), measurer=measurer,
                       batch_size=16, seed=seed, remeasure=0, callbacks=[note])
    print(file=sys.stderr)
    for p in dbdir.glob(f"{db.name}*"):
        p.unlink()
    return {"workload": workload, "model": which, "seed": seed, "trials": trials, "seconds": time.time() - t0,
            "curve": curve}


def best_at(curve: list, n: int) -> float:
    got = [g for t, g in curve if t <= n]
    return got[-1] if got else 0.0


def summarise(runs: list[dict], trials: int) -> list[dict]:
    rows = []
    for w in dict.fromkeys(r["workload"] for r in runs):
        best = {m: {r["seed"]: best_at(r["curve"], trials) for r in runs if r["workload"] == w and r["model"] == m}
                for m in MODELS}
        seeds = sorted(set(best["cold"]) & set(best["pretrained"]))
        ratios = [best["pretrained"][s] / best["cold"][s] for s in seeds if best["cold"][s] > 0]
        medians = {m: statistics.median(best[m][s] for s in seeds) if seeds else 0.0 for m in MODELS}
        rows.append({"workload": w, "seeds": seeds, "cold": [best["cold"][s] for s in seeds],
                     "pretrained": [best["pretrained"][s] for s in seeds],
                     "median_ratio": statistics.median(ratios) if ratios else None,
                     "ratio_of_medians": medians["pretrained"] / medians["cold"] if medians["cold"] else None})
    return rows


def print_table(rows: list[dict], trials: int) -> None:
    print(f"best GFLOPS at {trials} trials, per seed (evolutionary policy; pretrained: trained without the workload)")
    for row in rows:
        print(f"{row['workload']} (seeds {', '.join(map(str, row['seeds']))})")
        for m in MODELS:
            print(f"  {m:<11} " + "  ".join(f"{g:7.1f}" for g in row[m]))
        mr, rm = row["median_ratio"], row["ratio_of_medians"]
        print(f"  pretrained / cold: median of the per-seed ratios {mr:.2f}x, ratio of the medians {rm:.2f}x"
              if mr is not None and rm is not None else "  pretrained / cold: no successful cold run")


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = list(dict.fromkeys(r["workload"] for r in runs))
    fig, axes = plt.subplots(1, len(wls), figsize=(5 * len(wls), 4), dpi=100, squeeze=False)
    for ax, w in zip(axes[0], wls):
        for m in MODELS:
            rs = [r for r in runs if r["workload"] == w and r["model"] == m]
            if not rs:
                continue
            xs = sorted({t for r in rs for t, _ in r["curve"]})
            ys = np.array([[best_at(r["curve"], x) for x in xs] for r in rs])
            line, = ax.plot(xs, np.median(ys, axis=0), label=f"{m} (median of {len(rs)})", linewidth=1.8, marker="o",
                            markersize=3)
            ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=line.get_color(), alpha=0.15)
        ax.set_title(f"{w} (held out)")
        ax.set_xlabel("trials")
        ax.set_ylabel("best GFLOPS so far")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("pretrained vs cold cost model (band: worst to best seed)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", nargs="+", default=HELD_OUT, help="held-out workloads (default: %(default)s)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--logs", nargs="+", default=None, help="training logs (default: tuning_logs/*.jsonl)")
    ap.add_argument("--backend", choices=["local", "ray"], default="local")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--models", type=Path, default=Path("/tmp/autosched-pretrained-held-out"),
                    help="where the held-out models are cached (default: %(default)s)")
    ap.add_argument("--resume", action="store_true", help="keep the runs already in OUT/pretrained.json")
    args = ap.parse_args()
    logs = args.logs or default_logs()
    if not logs:
        ap.error("no tuning_logs/*.jsonl here: run from the repository root or pass --logs")
    args.out.mkdir(parents=True, exist_ok=True)
    folders = held_out_models(args.workloads, logs, args.models)
    result_file = args.out / "pretrained.json"
    runs: list[dict] = []
    if args.resume and result_file.exists():
        runs = json.loads(result_file.read_text())["runs"]
    done = {(r["workload"], r["model"], r["seed"]) for r in runs if r["trials"] == args.trials}
    with tempfile.TemporaryDirectory(prefix="autosched-bench-pretrained-") as tmp:
        for w in args.workloads:
            for seed in args.seeds:
                for which in MODELS:
                    if (w, which, seed) not in done:
                        runs.append(tune_once(w, which, seed, args.trials, folders[w], args.backend, Path(tmp)))
                        result_file.write_text(json.dumps({"runs": runs}, indent=1))
    chosen = [r for r in runs if r["workload"] in args.workloads and r["seed"] in args.seeds
              and r["trials"] == args.trials]
    rows = summarise(chosen, args.trials)
    print_table(rows, args.trials)
    result_file.write_text(json.dumps({"runs": runs, "summary": rows, "machine": Target("llvm").key,
                                       "models": {w: pretrained_info(f) for w, f in folders.items()}}, indent=1))
    try:
        plot(chosen, args.out / "pretrained_curves.png")
        print(f"wrote {result_file} and {args.out / 'pretrained_curves.png'}")
    except ImportError:
        print(f"wrote {result_file} (no plot: matplotlib is not installed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
