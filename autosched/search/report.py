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
import sys
import time
from dataclasses import dataclass, field
from typing import Any

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2


@dataclass
class RunCurve:
    """One tuning run's records of a task, in the order they were measured."""

    label: str
    policy: str
    seed: int | None
    gflops: list[float] = field(default_factory=list)  # per trial, 0 for a failed candidate

    @property
    def best_so_far(self) -> list[float]:
        out, best = [], 0.0
        for g in self.gflops:
            best = max(best, g)
            out.append(best)
        return out

    @property
    def best(self) -> float:
        return max(self.gflops, default=0.0)

    def trials_to(self, fraction: float) -> int | None:
        """The first trial (1-based) whose best so far reaches ``fraction`` of this run's best."""
        target = fraction * self.best
        for i, b in enumerate(self.best_so_far, 1):
            if b >= target and b > 0:
                return i
        return None


def run_curves(db: Any, task: Any) -> list[RunCurve]:
    """The task's records grouped by tuning run (records imported from logs form one group)."""
    runs = {r.id: r for r in db.runs()}
    flop = task.flop
    curves: dict[Any, RunCurve] = {}
    for rec in db.iter_records(task):
        rid = rec.run_id
        if rid not in curves:
            r = runs.get(rid)
            if r is None:
                curves[rid] = RunCurve("imported / no run", "-", None)
            else:
                when = time.strftime("%m-%d %H:%M", time.localtime(r.started_at))
                curves[rid] = RunCurve(f"run {rid}: {r.policy} seed {r.seed} ({when})", r.policy, r.seed)
        curves[rid].gflops.append(rec.gflops(flop) if rec.ok else 0.0)
    return list(curves.values())


def plot(path: str, task: Any, curves: list[RunCurve], best_gflops: float, peak: float | None,
         numpy: float | None, size: tuple[float, float] = (12.0, 4.5), dpi: int = 100,
         vendor: str = "numpy") -> None:
    """Write the two-panel report figure (tuning curves | best vs peak and the vendor library, whose figure is
    ``numpy`` and whose name is ``vendor``) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=size, dpi=dpi, gridspec_kw={"width_ratios": [2.2, 1]})
    for c in curves:
        ax1.plot(range(1, len(c.gflops) + 1), c.best_so_far, label=c.label, linewidth=1.6)
    ax1.set_xlabel("trials")
    ax1.set_ylabel("best GFLOPS so far")
    ax1.set_title(f"tuning curve: {task.name}")
    ax1.grid(alpha=0.3)
    if curves:
        ax1.legend(fontsize=8, loc="lower right")
    names, values, colors = ["best kernel"], [best_gflops], ["tab:blue"]
    if numpy is not None:
        names.append(vendor)
        values.append(numpy)
        colors.append("tab:orange")
    if peak:
        names.append("fp32 peak")
        values.append(peak)
        colors.append("tab:gray")
    bars = ax2.bar(names, values, color=colors)
    for b, v in zip(bars, values):
        share = f"\n{min(v / peak, 1.0):.0%} of peak" if peak and b is not bars[-1] else ""
        ax2.annotate(f"{v:.1f}{share}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    ax2.set_ylabel("GFLOPS")
    ax2.set_title("against the machine")
    ax2.set_ylim(0, max(values) * 1.25 if values and max(values) > 0 else 1)
    fig.suptitle(f"{task.label} on {task.target.key}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ------------------------------------------------------------------------------- the command
def add_parser(sub: Any) -> argparse.ArgumentParser:
    from autosched.search.cli import add_verbosity, at_least

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
    from autosched.database.cli import NotFound, find_task
    from autosched.search.cli import UsageError, first_line, parse_params, setup_logging

    setup_logging(args)
    try:
        params = parse_params(args.param)
        if args.workload is not None:  # named: checked before the database is opened
            from autosched.search.cli import make_task

            make_task(args.workload, params, args.target or "llvm")
        elif args.target is not None:
            from autosched.target import check_target

            try:
                check_target(args.target)
            except ValueError as e:
                raise UsageError(f"--target {args.target!r}: {e}") from None
        from autosched.database import Database, DatabaseError

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
    import json

    from autosched.database.cli import task_flags
    from autosched.database.query import trusted
    from autosched.measure.measurer import TIMEOUT_FACTOR
    from autosched.measure.peak import PeakWatch, share_of_peak
    from autosched.result import ResultFlag, count_summary
    from autosched.search.cli import UsageError, _vendor
    from autosched.search.progress import fewer_flops

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
    ref = None if args.no_compare else _vendor(task, threads)
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
