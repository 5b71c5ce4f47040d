"""The pretrained cost model against a cold one, on workloads held out of its training data.

    python benchmarks/bench_pretrained.py [--workloads conv2d matmul depthwise_conv2d batch_matmul]
                                          [--seeds 0 1 2 3 4] [--trials 96] [--out benchmarks/results]
                                          [--models /tmp/autosched-pretrained-held-out] [--with-default]

The issue's figure: with the pretrained model, the search reaches 0.9x the fastest vendor library on the
same computation sooner (median seconds over the seeds, from the shell) than with a cold model, on workloads
the model never saw. For each held-out workload a model is trained on the training logs (default: the
shipped ones, ``tuning_logs/*.jsonl``, and the whole runs in ``tuning_logs/training/``) without that
workload's records, exactly as ``python -m autosched.cli.train_pretrained --exclude W --no-eval`` does
(cached in MODELS/pretrained-without-W/, retrained when the features or the logs changed). Then
:func:`autosched.search.race.race` runs the evolutionary policy with each model, seeds outermost, each run
from an empty database and, by default, from the search alone: the workload's default schedule, the same
for both models, is not measured first (``--with-default`` measures it), since where it is already near the
vendor it would hide what the model adds. Prints the race table per workload and the time-to-0.9x ratio
cold / pretrained (a run that never got there counts as its whole length, so the ratio is then a bound);
writes OUT/pretrained.json and OUT/pretrained_W.png. On a 2-core machine run it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict
from pathlib import Path

import autosched
from autosched.cli.train_pretrained import default_logs, fit, read_logs, save
from autosched.cost_model import load_pretrained, pretrained_info
from autosched.cost_model.training import log_name
from autosched.search.race import RaceRun, command_startup, plot, race, reference, table
from autosched.target import Target

HERE = Path(__file__).resolve().parent
HELD_OUT = ["conv2d", "matmul", "depthwise_conv2d", "batch_matmul"]
GOAL = 1.5  # the issue's: 0.9x vendor reached at least 1.5x sooner with the pretrained model
QUALITY = 0.9


def held_out_models(workloads: list[str], logs: list[str], out: Path) -> dict[str, Path]:
    """A folder per workload holding a model trained on ``logs`` without it; reused while it still loads and
    was trained on the same logs (names and records)."""
    folders = {w: out / f"pretrained-without-{w}" for w in workloads}
    lines = {log_name(x): sum(1 for line in open(x, encoding="utf-8") if line.strip()) for x in logs}
    missing = [w for w, f in folders.items()
               if (info := pretrained_info(f)) is None or info.get("trained_on") != lines]
    if missing:
        print(f"training models without {', '.join(missing)} on {len(logs)} logs", file=sys.stderr)
        data = read_logs(logs, progress=lambda s: print("  " + s, file=sys.stderr))
        for w in missing:
            kept = data.without([w])
            if len(kept.y) == len(data.y):
                raise SystemExit(f"bench_pretrained: the logs hold no record of {w}: nothing is held out")
            save(fit(kept), kept, folders[w], excluded=[w])
    return folders


def seconds_to(run: RaceRun, gflops: float) -> tuple[float, bool]:
    """Seconds from the shell until ``run`` reached ``gflops``, and whether it did; a run that never got there
    counts as its whole length (a lower bound)."""
    got = run.seconds_to(gflops)
    return (got, True) if got is not None else (run.startup + run.seconds, False)


def summarise(w: str, runs: list[RaceRun], ref_gflops: float) -> dict:
    """Per model: the seconds to 0.9x of each seed, their median; the ratio cold / pretrained of the medians."""
    row: dict = {"workload": w, "reference_gflops": ref_gflops}
    for m in ("cold", "pretrained"):
        got = [seconds_to(r, QUALITY * ref_gflops) for r in runs if r.policy.endswith(f"({m})")]
        secs = [s for s, _ in got]
        row[m] = {"seconds": secs, "reached": [ok for _, ok in got], "median": statistics.median(secs),
                  "median_reached": sorted(got)[len(got) // 2][1]}
    row["sooner"] = row["cold"]["median"] / row["pretrained"]["median"]
    row["bound"] = not (row["cold"]["median_reached"] and row["pretrained"]["median_reached"])
    return row


def line(row: dict) -> str:
    def cell(m: str) -> str:
        d = row[m]
        secs = " ".join(f"{s:.0f}" + ("" if ok else "+") for s, ok in zip(d["seconds"], d["reached"]))
        return f"{m} {d['median']:.1f} s [{secs}]"

    reached = row["cold"]["median_reached"], row["pretrained"]["median_reached"]
    sign = {(True, True): "", (False, True): ">="}.get(reached, "about ")  # a never-reached median is a bound
    return (f"{row['workload']:<18} to {QUALITY}x: {cell('cold')}  {cell('pretrained')}  "
            f"pretrained sooner {sign}{row['sooner']:.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", nargs="+", default=HELD_OUT, help="held-out workloads (default: %(default)s)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--trials", type=int, default=96, help="trials per run (default %(default)s)")
    ap.add_argument("--logs", nargs="+", default=None,
                    help="training logs (default: tuning_logs/*.jsonl and tuning_logs/training/*.jsonl)")
    ap.add_argument("--backend", choices=["local", "ray"], default="local")
    ap.add_argument("--with-default", action="store_true", help="measure the default schedule first in each run")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--models", type=Path, default=Path("/tmp/autosched-pretrained-held-out"),
                    help="where the held-out models are cached (default: %(default)s)")
    args = ap.parse_args()
    logs = args.logs or default_logs()
    if not logs:
        ap.error("no tuning_logs/*.jsonl here: run from the repository root or pass --logs")
    args.out.mkdir(parents=True, exist_ok=True)
    folders = held_out_models(args.workloads, logs, args.models)
    startup = command_startup()
    result: dict = {"machine": Target("llvm").key, "trials": args.trials, "seeds": args.seeds,
                    "from_scratch": not args.with_default, "startup": startup, "workloads": {},
                    "models": {w: pretrained_info(f) for w, f in folders.items()}}
    rows = []
    for w in args.workloads:
        task = autosched.Task(w)
        ref = reference(task, task.target.num_cores)
        if ref is None:
            raise SystemExit(f"bench_pretrained: no reference for {w}")

        def progress(r: RaceRun, trials: int) -> None:
            n, t, g = r.curve[-1]
            print(f"\r  {w} {r.policy} seed {r.seed}: {n}/{trials} {t:.0f} s best {g / ref.gflops:.2f}x  ",
                  end="", file=sys.stderr, flush=True)

        models = {"cold": "xgb", "pretrained": lambda seed, f=folders[w]: load_pretrained(seed, where=f)}
        runs = race(task, ["evolutionary"], args.trials, args.seeds, backend=args.backend, progress=progress,
                    startup=startup, cost_models=models, measure_default=args.with_default)
        print(file=sys.stderr)
        print(f"{task.label} (held out of the pretrained model's training)")
        print(table(runs, args.trials, ref))
        rows.append(summarise(w, runs, ref.gflops))
        result["workloads"][w] = {"reference": asdict(ref), "runs": [asdict(r) for r in runs], "summary": rows[-1]}
        (args.out / "pretrained.json").write_text(json.dumps(result, indent=1))
        try:
            plot(str(args.out / f"pretrained_{w}.png"), runs, args.trials, ref,
                 f"{task.label}: pretrained (trained without {w}) vs cold model")
        except ImportError:
            pass
    print(f"\ntime to {QUALITY}x the vendor from the shell, median over seeds {args.seeds} [each seed; +: never "
          f"reached, its run's length], {args.trials} trials per run, "
          f"{'from the default schedule' if args.with_default else 'search alone'}, on {Target('llvm').key}")
    for row in rows:
        print(line(row))
    finite = [r["sooner"] for r in rows if math.isfinite(r["sooner"])]
    if finite:
        med = statistics.median(finite)
        print(f"median over the workloads: {med:.2f}x sooner (goal >= {GOAL}x: {'met' if med >= GOAL else 'not met'})")
    print(f"wrote {args.out / 'pretrained.json'} and the plots beside it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
