"""``autosched report``: how tuning went for one task, as a table and (``--plot``) a picture.

    autosched report --workload conv2d --plot conv2d.png
    autosched report --workload matmul --param M=512 --param N=512 --param K=512 --db tuning.db

The table has one row per tuning run (policy, seed, trials, best GFLOPS, the trial at which the run first
reached 90% of its own best). The plot has two panels: the tuning curve of each run (best GFLOPS so far
against trials) and a roofline-style bar of the best kernel against the machine's measured fp32 peak
(:mod:`autosched.measure.peak`) and numpy's GFLOPS for the same computation, timed now on this machine.
"""

from __future__ import annotations

import argparse
import math
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


def numpy_gflops(task: Any, repeat: int = 5) -> float | None:
    """GFLOPS of the workload's numpy reference on float32 inputs (best of ``repeat``), or None if it has none."""
    from autosched.measure.data import make_inputs
    from autosched.workloads.reference import get_reference

    ref = get_reference(task.name)
    if ref is None:
        return None
    inputs = make_inputs(task, seed=0)[:-1]  # the last array is the output
    ref(inputs, **task.args)  # warm up (BLAS threads, page faults)
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        ref(inputs, **task.args)
        best = min(best, time.perf_counter() - t0)
    return task.flop / best / 1e9


def plot(path: str, task: Any, curves: list[RunCurve], best_gflops: float, peak: float | None,
         numpy: float | None, size: tuple[float, float] = (12.0, 4.5), dpi: int = 100) -> None:
    """Write the two-panel report figure (tuning curves | best vs peak and numpy) to ``path``."""
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
        names.append("numpy")
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
    fig.suptitle(str(task), fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ------------------------------------------------------------------------------- the command
def add_parser(sub: Any) -> argparse.ArgumentParser:
    from autosched.search.cli import add_verbosity

    p = sub.add_parser("report", help="tuning curves and the best kernel against the machine's peak and numpy",
                       description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n", 1)[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", required=True, help="workload name, e.g. conv2d")
    p.add_argument("--param", "--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="a workload parameter (repeatable; defaults for the others)")
    p.add_argument("--target", default="llvm", help="target whose records to report (default: this host)")
    p.add_argument("--db", default=None, metavar="URL_OR_PATH", help="tuning database (default: $AUTOSCHED_DB, "
                                                                     "else the user data directory)")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="also draw the report to this PNG")
    p.add_argument("--no-numpy", action="store_true", help="do not time numpy for the comparison")
    p.add_argument("--threads", type=int, default=None, help="threads for the peak figure (default: all cores)")
    add_verbosity(p)
    return p


def run(args: argparse.Namespace) -> int:
    from autosched.search.cli import UsageError, first_line, make_task, parse_params, setup_logging

    setup_logging(args)
    try:
        task = make_task(args.workload, parse_params(args.param), args.target)
        from autosched.database import Database, DatabaseError

        try:
            db = Database(args.db, create=False)
        except (DatabaseError, FileNotFoundError, ValueError) as e:
            raise UsageError(f"cannot open the tuning database: {first_line(e)}") from None
        with db:
            return _report(args, task, db)
    except UsageError as e:
        print(f"autosched report: error: {e}", file=sys.stderr)
        return EXIT_USAGE


def _report(args: argparse.Namespace, task: Any, db: Any) -> int:
    from autosched.measure.peak import PeakWatch, share_of_peak
    from autosched.measure.result import ResultFlag, outcome_summary
    from autosched.search.cli import UsageError

    curves = run_curves(db, task)
    best = db.best(task, k=1)
    if not best:
        print(f"no successful record of {task} (key {task.workload_key[:16]}) in {db}; "
              f"tune it first: autosched tune --workload {task.name} ...", file=sys.stderr)
        return EXIT_NOT_FOUND
    best_g = best[0].gflops(task.flop)
    watch = PeakWatch(args.threads)
    watch.observe(best_g)  # a record faster than the cached peak means the peak is stale: measured again
    peak = watch.gflops
    npg = None if args.no_numpy else numpy_gflops(task)
    print(f"{task}")
    print(f"{'run':<44} {'trials':>7} {'best GFLOPS':>12} {'90% at trial':>13}")
    for c in curves:
        t90 = c.trials_to(0.9)
        print(f"{c.label:<44} {len(c.gflops):>7} {c.best:>12.1f} {t90 if t90 else '-':>13}")
    print(f"best kernel: {best_g:.1f} GFLOPS ({best[0].cost * 1e6:,.1f} us, record #{best[0].id}) = "
          f"{share_of_peak(best_g, peak)} of this machine's fp32 peak ({peak:.0f} GFLOPS, {watch.peak.describe()})")
    row = next((r for r in db.stats() if r["key"] == task.workload_key and r["target"] == task.target.key), None)
    if row is not None:
        print(f"{row['records']} records: {row['ok']} ok; "
              f"{outcome_summary(row['errors'], row['flags'].get(ResultFlag.NOISY, 0))}")
    if npg is not None:
        print(f"numpy, same computation, timed now: {npg:.1f} GFLOPS (best kernel / numpy = {best_g / npg:.2f}x)")
    if args.plot:
        try:
            plot(args.plot, task, curves, best_g, peak, npg)
        except ImportError as e:
            raise UsageError(f"--plot needs matplotlib ({e}): pip install 'autosched[plot]'") from None
        except OSError as e:
            raise UsageError(f"cannot write the plot {args.plot}: {e.strerror or e}") from None
        print(f"plot written to {args.plot}")
    return EXIT_OK
