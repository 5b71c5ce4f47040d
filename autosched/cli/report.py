"""``autosched report``: how tuning went for one task, as a table and (``--plot``) a picture.

    autosched report --plot curve.png                  # the database's one task
    autosched report --workload matmul --param M=512 --param N=512 --param K=512 --db tuning.db

The table has one row per tuning run (policy, seed, trials, best GFLOPS, the trial at which the run first
reached 90% of its own best). Below it: the best kernel (the figure `autosched tune` and `autosched db best`
show) against the machine's measured fp32 peak and against the vendor library the tune summary compared
with, timed now on this machine. The plot has two panels: the tuning curve of each run (best GFLOPS so far
against trials) and bars of the best kernel, the vendor library and the peak.

With one task in the database, no --workload is needed; with several, a miss lists them.
Exit codes: 0 done, 1 no such task or no successful record (the tasks held are listed), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from autosched.cli.common import UsageError, add_verbosity, at_least, first_line, make_task, parse_params, setup_logging
from autosched.cli.db import NotFound, find_task, task_flags
from autosched.cli.tune import vendor_comparison
from autosched.measure.measurer import TIMEOUT_FACTOR
from autosched.measure.peak import PeakWatch, share_of_peak
from autosched.result import ResultFlag, count_summary
from autosched.search.progress import fewer_flops
from autosched.search.report import plot, run_curves
from autosched.target import check_target

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="how tuning went: each run's curve, the best kernel against the peak and "
                                      "the vendor library",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default=None,
                   help="workload name, e.g. conv2d (not needed when the database holds one task)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a workload parameter (repeatable); selects the task with that value")
    p.add_argument("--target", default=None, help="target whose records to report (default: this machine's CPU)")
    p.add_argument("--db", default=None, metavar="URL_OR_PATH", help="tuning database (default: $AUTOSCHED_DB, "
                                                                     "else the user data directory)")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="also draw the report to this PNG")
    p.add_argument("--no-compare", action="store_true", help="do not time the vendor library for the comparison")
    p.add_argument("--threads", type=at_least(1), default=None,
                   help="threads for the peak and the vendor library (default: all cores)")
    p.add_argument("--json", action="store_true", help="the report as one JSON object, for scripts")
    add_verbosity(p)
    return p


def run(args: argparse.Namespace) -> int:
    setup_logging(args)
    try:
        params = parse_params(args.param)
        if args.workload is not None:  # named: checked before the database is opened
            make_task(args.workload, params, args.target or "llvm")
        elif args.target is not None:
            try:
                check_target(args.target)
            except ValueError as e:
                raise UsageError(f"--target {args.target!r}: {e}") from None
        from autosched.database import Database, DatabaseError  # SQLAlchemy: when a database is opened

        try:
            db = Database(args.db, create=False)
        except (DatabaseError, FileNotFoundError, ValueError) as e:
            raise UsageError(f"cannot open the tuning database: {first_line(e)}") from None
        with db:
            try:
                task = find_task(db, args.workload, params, args.target)
            except (KeyError, TypeError, ValueError) as e:
                raise UsageError(str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)) from None
            except NotFound as e:
                print(f"autosched report: {e}", file=sys.stderr)
                return EXIT_NOT_FOUND
            return _report(args, task, db)
    except UsageError as e:
        print(f"autosched report: error: {e}", file=sys.stderr)
        return EXIT_USAGE


def _report(args: argparse.Namespace, task: Any, db: Any) -> int:
    from autosched.database.query import trusted  # SQLAlchemy: loaded once a database is read


    curves = run_curves(db, task)
    best = db.best(task, k=1)
    if not best:
        print(f"autosched report: no successful record of {task.label} in {db}; tune it first: "
              f"autosched tune {task_flags(task.name, task.args, task.target.key)}", file=sys.stderr)
        return EXIT_NOT_FOUND
    best_g = best[0].gflops(task.flop)
    threads = args.threads or task.target.num_cores
    watch = PeakWatch(args.threads)
    if not fewer_flops(task):  # a Winograd kernel's effective figure says nothing about the peak
        watch.observe(best_g)  # a record faster than the cached peak means the peak is stale: measured again
    peak = watch.gflops
    ref = None if args.no_compare else vendor_comparison(task, threads)
    row = next((r for r in db.stats() if r["key"] == task.workload_key and r["target"] == task.target.key), None)
    counts = (count_summary(row["records"], row["errors"], row["flags"].get(ResultFlag.NOISY, 0), TIMEOUT_FACTOR)
              if row else "")
    vendor = ref[0] if isinstance(ref, tuple) else None
    if args.json:
        print(json.dumps({
            "task": task.label, "workload": task.name, "params": task.args, "target": task.target.key,
            "runs": [{"run": c.label, "policy": c.policy, "seed": c.seed, "trials": len(c.gflops),
                      "best_gflops": c.best, "trials_to_90": c.trials_to(0.9)} for c in curves],
            "best": {"record": best[0].id, "seconds": best[0].cost, "gflops": best_g, "trusted": trusted(best[0]),
                     "effective": fewer_flops(task), "peak_gflops": peak},
            "vendor": None if vendor is None else {"library": vendor.library, "seconds": vendor.seconds,
                                                   "gflops": vendor.gflops, "speedup": vendor.seconds / best[0].cost},
            "counts": counts, "database": str(db)}))
    else:
        print(f"{task.label} on {task.target.key}")
        print(f"{'run':<44} {'trials':>7} {'best GFLOPS':>12} {'90% at trial':>13}")
        for c in curves:
            t90 = c.trials_to(0.9)
            print(f"{c.label:<44} {len(c.gflops):>7} {c.best:>12.1f} {t90 if t90 else '-':>13}")
        what = ("effective (the direct computation's flops over its time)" if fewer_flops(task) else
                f"= {share_of_peak(best_g, peak)} of this machine's fp32 peak ({peak:.0f} GFLOPS, "
                f"{watch.peak.describe()})")
        print(f"best kernel: {best[0].cost * 1e6:,.1f} us, {best_g:.1f} GFLOPS {what} (record #{best[0].id})")
        if not trusted(best[0]):
            print("  noisy: every successful record's timing was disturbed (another program was busy) or its repeats "
                  "disagree; tune again on a quieter machine for a figure to trust")
        if vendor is not None:
            print(f"  vs {vendor.library} ({ref[1]}), timed now on {threads} thread(s): "
                  f"{vendor.seconds * 1e6:,.1f} us, {vendor.gflops:.1f} GFLOPS; the tuned kernel is "
                  f"{vendor.seconds / best[0].cost:.2f}x its speed")
        elif isinstance(ref, str):
            print(f"  {ref}")
        if counts:
            print(f"  {counts}")
    if args.plot:
        try:
            plot(args.plot, task, curves, best_g, peak, vendor.gflops if vendor else None,
                 vendor=vendor.library if vendor else "vendor library")
        except ImportError as e:
            raise UsageError(f"--plot needs matplotlib ({e}): pip install 'autosched[plot]'") from None
        except OSError as e:
            raise UsageError(f"cannot write the plot {args.plot}: {e.strerror or e}") from None
        print(f"plot written to {args.plot}", file=sys.stderr)
    return EXIT_OK
