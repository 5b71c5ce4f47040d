"""``autosched race``: search policies side by side on one workload, against references that do not move.

Each (policy, seed) run tunes the same task from an empty database of its own, one after another on the
same workers; after each batch it notes the best GFLOPS so far, against trials and against seconds. The
reference is the fastest installed vendor library on the same computation (:mod:`autosched.search.vendor`),
else the machine's fp32 peak, both timed in this process: a policy's figure is its share of it, so runs
that stall are not flattered by comparing them with their own best. Prints a table (median over seeds,
with the worst and best seed) and draws the curves::

    autosched race --policies random,evolutionary --workload matmul --param M=256 --trials 64 --seeds 0,1,2

Exit codes: 0 done, 1 every run failed (or the race crashed), 2 bad usage (found before anything starts).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass
class RaceRun:
    """One policy and seed: ``curve`` holds (trials, seconds since the run started, best GFLOPS so far)
    after each batch."""

    policy: str
    seed: int
    curve: list[tuple[int, float, float]] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    def best_at(self, trials: float | None = None, seconds: float | None = None) -> float:
        """Best GFLOPS within ``trials`` trials (or ``seconds`` seconds); 0 before the first success."""
        best = 0.0
        for n, t, g in self.curve:
            if (trials is not None and n > trials) or (seconds is not None and t > seconds):
                break
            best = g
        return best


@dataclass(frozen=True)
class Reference:
    """What shares are of: a vendor library's GFLOPS on the same computation, else the fp32 peak."""

    name: str
    gflops: float


def race(task: Any, policies: Sequence[str], trials: int, seeds: Sequence[int], *, backend: str | None = None,
         batch_size: int = 16, workdir: str | None = None,
         progress: Callable[[RaceRun, int], None] | None = None) -> list[RaceRun]:
    """Run every policy with every seed on ``task`` for ``trials`` trials, each from an empty database in
    ``workdir`` (default: a temporary directory); seeds outermost, so a drift of the machine touches
    every policy alike. A run that fails keeps its curve so far and its error."""
    from autosched.measure.measurer import Measurer
    from autosched.search.tune import tune

    runs = []
    with tempfile.TemporaryDirectory(prefix="autosched-race-") as tmp:
        where = Path(workdir or tmp)
        where.mkdir(parents=True, exist_ok=True)
        for seed in seeds:
            for policy in policies:
                run = RaceRun(policy, seed)
                db = where / f"{task.name}-{policy}-{seed}.db"
                for old in where.glob(db.name + "*"):
                    old.unlink()
                # workers of their own per run: the measurer's adaptive cut-off learns the best time so far,
                # which must be this run's own
                with Measurer(backend=backend, seed=seed) as measurer:
                    t0 = time.perf_counter()

                    def note(state: Any, inputs: Any, results: Any, run: RaceRun = run, t0: float = t0) -> None:
                        run.curve.append((state.trials_done, time.perf_counter() - t0, state.best_gflops))
                        if progress is not None:
                            progress(run, trials)

                    try:
                        tune(task, trials, policy=policy, database=str(db), measurer=measurer,
                             batch_size=batch_size, seed=seed, remeasure=0, callbacks=[note])
                    except Exception as e:  # noqa: BLE001 - one policy's failure is a result of the race
                        run.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                run.seconds = time.perf_counter() - t0
                runs.append(run)
    return runs


def reference(task: Any, threads: int) -> Reference | None:
    """The fastest vendor library on ``task`` timed now, else this machine's cached (or measured) peak."""
    from autosched.search.vendor import vendor_reference

    ref = vendor_reference(task, threads)
    if ref is not None:
        return Reference(ref.library, ref.gflops)
    try:
        from autosched.measure.peak import get_peak

        peak = get_peak(threads)
        return Reference(f"fp32 peak of {threads} thread(s)", peak.gflops)
    except Exception as e:  # noqa: BLE001 - without a reference the table shows GFLOPS only
        logging.getLogger("autosched.search").warning("no reference for the race (no vendor library for %s, "
                                                      "and the peak failed: %s): GFLOPS only", task.label, e)
        return None


def checkpoints(trials: int) -> list[int]:
    return sorted({max(1, trials // 4), max(1, trials // 2), trials})


def table(runs: Sequence[RaceRun], trials: int, ref: Reference | None) -> str:
    """Per policy: the median best over seeds at a quarter, half and all the trials (as a share of the
    reference when there is one), the worst and best seed at the end, seconds and trials per second."""
    unit = "share of the reference" if ref else "GFLOPS"
    cols = checkpoints(trials)
    lines = [f"median best over seeds ({unit}); [worst seed, best seed] at {trials} trials"]
    head = f"{'policy':<16}" + "".join(f"{'@' + str(n):>9}" for n in cols)
    lines.append(head + f"  {'spread':<17} {'seconds':>8} {'trials/s':>9}  failed")

    def fmt(g: float) -> str:
        return f"{g / ref.gflops:.2f}" if ref else f"{g:.1f}"

    for policy in dict.fromkeys(r.policy for r in runs):
        rs = [r for r in runs if r.policy == policy]
        meds = [statistics.median(r.best_at(n) for r in rs) for n in cols]
        finals = [r.best_at(trials) for r in rs]
        secs = statistics.median(r.seconds for r in rs)
        done = statistics.median(r.curve[-1][0] if r.curve else 0 for r in rs)
        failed = sum(1 for r in rs if r.error)
        lines.append(f"{policy:<16}" + "".join(f"{fmt(m):>9}" for m in meds)
                     + f"  {'[' + fmt(min(finals)) + ', ' + fmt(max(finals)) + ']':<17} {secs:>8.1f}"
                     f" {done / max(secs, 1e-9):>9.2f}  {failed or ''}")
    if ref:
        lines.append(f"reference: {ref.name}, {ref.gflops:.1f} GFLOPS on the same computation, timed in this run")
    return "\n".join(lines)


def plot(path: str, runs: Sequence[RaceRun], trials: int, ref: Reference | None, title: str) -> None:
    """Two panels, best so far against trials and against seconds: per policy the median over seeds and a
    band from the worst to the best seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale = ref.gflops if ref else 1.0
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), dpi=100)
    horizon = max((r.curve[-1][1] for r in runs if r.curve), default=1.0)
    for policy in dict.fromkeys(r.policy for r in runs):
        rs = [r for r in runs if r.policy == policy]
        for ax, xs, at in ((axes[0], np.arange(1, trials + 1), "trials"),
                           (axes[1], np.linspace(0, horizon, 200), "seconds")):
            ys = np.array([[r.best_at(**{at: x}) / scale for x in xs] for r in rs])
            (line,) = ax.plot(xs, np.median(ys, axis=0), label=f"{policy} (median of {len(rs)})", linewidth=1.8)
            ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=line.get_color(), alpha=0.15)
    for ax, xlabel in zip(axes, ("trials", "seconds")):
        if ref:
            ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label=ref.name)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"best so far / {ref.name}" if ref else "best GFLOPS so far")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(title + " (band: worst to best seed)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ------------------------------------------------------------------------------------------- command line


def add_parser(sub: Any) -> argparse.ArgumentParser:
    from autosched.search.cli import at_least

    p = sub.add_parser("race", help="compare search policies on one workload: a table and a PNG of their curves",
                       description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n", 1)[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policies", required=True, metavar="A,B,...",
                   help="registered policies, comma-separated (see the list in `autosched tune --help`)")
    p.add_argument("--workload", required=True, help="a registered workload (see `autosched workloads`)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="a workload parameter")
    p.add_argument("--trials", type=at_least(1), default=64, help="trials per run (default 64)")
    p.add_argument("--seeds", default="0,1,2", metavar="S,S,...", help="seeds, comma-separated (default 0,1,2)")
    p.add_argument("--batch-size", type=at_least(1), default=16, help="candidates per measured batch (default 16)")
    p.add_argument("--backend", choices=["ray", "local"], default=None, help="workers: ray (default) or local")
    p.add_argument("--target", default="llvm", help="target (default: this host)")
    p.add_argument("--plot", default="race.png", metavar="FILE.png", help="the curves (default race.png)")
    p.add_argument("--json", action="store_true",
                   help="every run's curve as JSON on standard output instead of the table (for scripts)")
    p.add_argument("--workdir", default=None, metavar="DIR",
                   help="keep each run's database here (default: a temporary directory)")
    from autosched.search.cli import add_verbosity

    add_verbosity(p)
    return p


def run(args: argparse.Namespace) -> int:
    from autosched.search.cli import UsageError, make_task, parse_params, setup_logging
    from autosched.search.policy import get_policy

    setup_logging(args)
    try:
        task = make_task(args.workload, parse_params(args.param), args.target)
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        for p in policies:
            try:
                get_policy(p)
            except (KeyError, ValueError) as e:
                raise UsageError(str(e).strip("'\"")) from None
        try:
            seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        except ValueError:
            raise UsageError(f"--seeds must be integers separated by commas, got {args.seeds!r}") from None
        if not policies or not seeds or args.trials < 1:
            raise UsageError("give at least one policy, one seed and --trials >= 1")
    except UsageError as e:
        print(f"autosched race: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    from autosched.search.cli import supervised

    # a local Ray: the race goes on in a watched child, so that a crash leaves no process behind
    return supervised(lambda: _race(args, task, policies, seeds), "race", enabled=args.backend in (None, "ray"))


def _race(args: argparse.Namespace, task: Any, policies: list[str], seeds: list[int]) -> int:
    threads = task.target.num_cores
    out = sys.stderr
    print(f"racing {', '.join(policies)} on {task.label}: {args.trials} trials x seeds {seeds}", file=out)
    ref = reference(task, threads)

    def progress(r: RaceRun, trials: int) -> None:
        n, t, g = r.curve[-1]
        share = f" = {g / ref.gflops:.2f} of the reference" if ref else ""
        print(f"  {r.policy} seed {r.seed}: [{n}/{trials}] {t:.0f} s  best {g:.1f} GFLOPS{share}", file=out,
              flush=True)

    runs = race(task, policies, args.trials, seeds, backend=args.backend, batch_size=args.batch_size,
                workdir=args.workdir, progress=None if args.quiet else progress)
    for r in runs:
        if r.error:
            print(f"  {r.policy} seed {r.seed} failed: {r.error}", file=out)
    if args.json:
        print(json.dumps({"task": task.label, "trials": args.trials, "reference": asdict(ref) if ref else None,
                          "runs": [asdict(r) for r in runs]}, indent=1))
    else:
        print(table(runs, args.trials, ref))
    try:
        plot(args.plot, runs, args.trials, ref, f"autosched race: {task.label}")
        print(f"plot: {args.plot}", file=out)
    except ImportError:
        print("(no plot: matplotlib is not installed; pip install matplotlib)", file=out)
    return EXIT_FAILED if all(r.error for r in runs) else EXIT_OK


__all__ = ["RaceRun", "Reference", "race", "reference", "table"]
