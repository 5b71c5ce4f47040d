"""Two tuners on one machine: are the same candidates timed the same alone and beside another tuner?

    python benchmarks/bench_shared_machine.py                  # matmul, random policy, seed 7, 32 trials
    python benchmarks/bench_shared_machine.py --trials 48 --json shared.json

It runs ``autosched tune --workload matmul --policy random --seed 7`` twice into two fresh SQLite files:
once alone, and once while ``autosched tune --workload conv2d`` runs beside it (its own database, started
first, so both build and time at once). The random policy with one seed proposes the same candidates both
times; for each candidate measured both times it compares the median times. Measurements take turns
across processes (:mod:`autosched.measure.machine`), so the ratio should stay near 1 (goal: median within
10%). It also prints the spread of the repeats alone and beside, how many results were marked noisy, and
the lines in which the second tuner said it waited.

Run it on an otherwise quiet machine: the point is what one tuner does to the other.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time


def tune(db: str, workload: str, trials: int, *extra: str, wait: bool = True) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "autosched", "tune", "--workload", workload, "--trials", str(trials),
           "--db", db, *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if wait:
        proc.wait()
    return proc


def records(db: str) -> dict[str, tuple[float, float, str | None]]:
    """trace -> (median seconds, spread of the repeats, flags) of the successful records."""
    con = sqlite3.connect(db)
    out = {}
    for trace, costs, flags in con.execute(
            "SELECT trace, costs, flags FROM autosched_records WHERE cost IS NOT NULL"):
        c = json.loads(costs)
        med = statistics.median(c)
        out[trace] = (med, (max(c) - min(c)) / med if med > 0 else 0.0, flags)
    con.close()
    return out


def count(db: str) -> int:
    try:
        con = sqlite3.connect(db)
        n = con.execute("SELECT count(*) FROM autosched_records").fetchone()[0]
        con.close()
        return int(n)
    except sqlite3.Error:
        return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="autosched-shared-")
    mine = ["--policy", "random", "--seed", str(args.seed)]

    t0 = time.time()
    alone = tune(os.path.join(tmp, "alone.db"), "matmul", args.trials, *mine)
    print(f"alone: {time.time() - t0:.0f} s, exit {alone.returncode}", flush=True)

    other_db = os.path.join(tmp, "other.db")
    other = tune(other_db, "conv2d", 10_000, "--time-budget", "10m", wait=False)
    while count(other_db) < 8 and other.poll() is None:  # the other tuner is building and timing now
        time.sleep(0.5)
    t0 = time.time()
    beside = tune(os.path.join(tmp, "beside.db"), "matmul", args.trials, *mine)
    print(f"beside another tuner: {time.time() - t0:.0f} s, exit {beside.returncode}; the other tuner had "
          f"{count(other_db)} records when it ended", flush=True)
    other.terminate()
    try:
        other.wait(60)
    except subprocess.TimeoutExpired:
        other.kill()
    assert beside.stdout is not None
    waits = [line.strip() for line in beside.stdout.read().splitlines() if "wait" in line]

    a, b = records(os.path.join(tmp, "alone.db")), records(os.path.join(tmp, "beside.db"))
    both = sorted(set(a) & set(b))
    if not both:
        print("no candidate was measured in both runs", file=sys.stderr)
        return 1
    ratios = [b[t][0] / a[t][0] for t in both]
    spread_a = statistics.median(a[t][1] for t in both)
    spread_b = statistics.median(b[t][1] for t in both)
    noisy = sum(1 for t in both if b[t][2] and "noisy" in b[t][2])
    print(f"\n{len(both)} candidates measured alone and beside another tuner:")
    print(f"  time beside / time alone: median {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f} to {max(ratios):.3f} (goal: median within 10%)")
    print(f"  spread of the repeats: median {spread_a:.1%} alone, {spread_b:.1%} beside")
    print(f"  marked noisy beside: {noisy}")
    for line in waits[:3]:
        print(f"  the second tuner said: {line}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"candidates": len(both), "ratios": ratios, "spread_alone": spread_a,
                       "spread_beside": spread_b, "noisy": noisy, "waits": waits}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
