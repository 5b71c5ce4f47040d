"""When did each tuning run reach 90% of its own final best? (the test behind issue 7's open figure)

    python benchmarks/reach_90.py RUN.db [RUN.db ...] [--workload conv2d] [--params JSON] [--trials 256]
                                  [--by 85] [--found 340]

Each database holds ``autosched.tune`` runs of ``--workload``. For each run it prints the best GFLOPS after
``--trials`` records and the first trial reaching 90% of it (counted per record; ``bench_tuning.py`` counts
per batch of 16, so it reads up to 15 trials later), then how many runs reach it within ``--by`` trials,
split by whether the run found a kernel of at least ``--found`` GFLOPS. On conv2d this shows the figure
rewarding runs that stall: a run that never finds the rare 14/28-wide family stops improving early and
passes; one that finds it after trial 85 fails.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import autosched
from autosched.database import Database
from autosched.search.report import RunCurve, run_curves


def runs_in(path: str, task, trials: int) -> list[RunCurve]:
    """Each tuning run of ``task`` in ``path`` with at least ``trials`` records, cut to its first ``trials``."""
    with Database(path, create=False) as db:
        curves = run_curves(db, task)
    return [RunCurve(c.label, c.policy, c.seed, c.gflops[:trials]) for c in curves if len(c.gflops) >= trials]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dbs", nargs="+")
    ap.add_argument("--workload", default="conv2d")
    ap.add_argument("--params", type=json.loads, default={}, help='workload parameters, e.g. \'{"M": 512}\'')
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--by", type=int, default=85, help="the trial the run should reach 90%% by")
    ap.add_argument("--found", type=float, default=340.0, help="GFLOPS that count as finding the fast family")
    args = ap.parse_args()
    task = autosched.Task(args.workload, args.params)
    rows = []
    for path in args.dbs:
        if not Path(path).is_file():
            raise SystemExit(f"{path}: no such tuning database")
        curves = runs_in(path, task, args.trials)
        if not curves:
            print(f"{path}: no run with {args.trials} records of {args.workload}, skipped")
        for c in curves:
            rows.append((c.trials_to(0.9), c.best))
            print(f"{path} ({c.label}): best {c.best:.1f} GFLOPS, 90% of it at trial {rows[-1][0]}")
    if not rows:
        return 1
    t90s, finals = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    ok, found = t90s <= args.by, finals >= args.found
    print(f"{len(rows)} runs: {ok.sum()} ({ok.mean():.0%}) reach 90% of their best by trial {args.by}; "
          f"median trial {np.median(t90s):.0f}, median best {np.median(finals):.0f} GFLOPS")
    print(f"  runs that found >= {args.found:.0f} GFLOPS: {ok[found].sum()} of {found.sum()} pass; "
          f"runs that did not: {ok[~found].sum()} of {(~found).sum()} pass")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
