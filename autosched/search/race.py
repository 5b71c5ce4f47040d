"""Search policies side by side on one task, against a reference that does not move: :func:`race` runs each
(policy, seed) from an empty database of its own, one after another on the same workers, noting after each
batch the best GFLOPS so far against trials and against seconds. The reference (:func:`reference`) is the
fastest installed vendor library on the same computation (:mod:`autosched.search.vendor`), else the
machine's fp32 peak: a policy's figure is its share of it, so runs that stall are not flattered by
comparing them with their own best. The figure a user feels is the time to quality
(:meth:`RaceRun.seconds_to`): seconds of wall clock from the shell, start-up included, until the best kernel
found is within 0.9x (and 1.0x) of the reference. :func:`table` and :func:`plot` show the runs;
``autosched race`` (:mod:`autosched.cli.race`) is the command.
"""

from __future__ import annotations

import logging
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autosched.measure.measurer import Measurer
from autosched.measure.peak import get_peak
from autosched.search.tune import tune
from autosched.search.vendor import vendor_reference


@dataclass
class RaceRun:
    """One policy and seed: ``curve`` holds (trials, seconds since the run started, best GFLOPS so far)
    after each batch; the run's clock starts before its workers do. ``startup``: the seconds a command
    pays before that (the interpreter and autosched's imports), so ``startup`` + a curve's seconds is the
    wall clock from the shell."""

    policy: str
    seed: int
    curve: list[tuple[int, float, float]] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    startup: float = 0.0

    def seconds_to(self, gflops: float) -> float | None:
        """Seconds from the shell until the best so far reached ``gflops`` (None: never in this run)."""
        for _, t, g in self.curve:
            if g >= gflops:
                return self.startup + t
        return None

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


#: what an ``autosched tune`` command imports before its first measurement (its lazy imports included): in a
#: race only the first run would pay for them, so every run counts them through :func:`command_startup`
COMMAND_IMPORTS = ("autosched.cli.tune", "autosched.database.database", "autosched.cost_model", "sqlalchemy",
                   "xgboost", "llvmlite.binding")


def command_startup(repeats: int = 3) -> float:
    """Seconds a fresh ``autosched`` command takes to start and import what tuning needs (the best of
    ``repeats`` launches of this interpreter): what each run of a race would pay from the shell."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import " + ", ".join(COMMAND_IMPORTS)], check=True)
        best = min(best, time.perf_counter() - t0)
    return best


def race(task: Any, policies: Sequence[str], trials: int, seeds: Sequence[int], *, backend: str | None = None,
         batch_size: int = 16, workdir: str | None = None,
         progress: Callable[[RaceRun, int], None] | None = None, startup: float | None = None,
         cost_models: Mapping[str, Any] | None = None, measure_default: bool = True) -> list[RaceRun]:
    """Run every policy with every seed on ``task`` for ``trials`` trials, each from an empty database in
    ``workdir`` (default: a temporary directory) and, as ``autosched tune`` does, from the workload's
    default schedule measured first (``measure_default=False``: from the search alone, which is how to judge
    what a cost model adds); seeds outermost, so a drift of the machine touches every entrant alike. A run
    that fails keeps its curve so far and its error. ``startup``: the seconds each run counts for a command's
    start-up (default: :func:`command_startup`, measured now). ``cost_models``: race each policy with each of
    these models too, by label (a name ``tune`` takes, e.g. ``"xgb"``, or a function of the seed returning a
    fresh model); the runs are then labelled "policy (label)"."""
    startup = command_startup() if startup is None else startup
    models = dict(cost_models or {"": None})
    for label, model in models.items():
        if not (model is None or isinstance(model, str) or callable(model)):
            raise TypeError(f"race: cost model {label!r} must be a name or a function of the seed returning a fresh "
                            f"model (a model instance would learn across runs), got {type(model).__name__}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="autosched-race-") as tmp:
        where = Path(workdir or tmp)
        where.mkdir(parents=True, exist_ok=True)
        for seed, policy, label in ((s, p, m) for s in seeds for p in policies for m in models):
            model = models[label]
            run = RaceRun(f"{policy} ({label})" if label else policy, seed, startup=startup)
            db = where / f"{task.name}-{policy}{'-' + label if label else ''}-{seed}.db"
            for old in where.glob(db.name + "*"):
                old.unlink()
            # workers of their own per run: the measurer's adaptive cut-off learns the best time so far,
            # which must be this run's own; their start-up counts, as it does for a command
            t0 = time.perf_counter()
            with Measurer(backend=backend, seed=seed) as measurer:

                def note(state: Any, inputs: Any, results: Any, run: RaceRun = run, t0: float = t0) -> None:
                    run.curve.append((state.trials_done, time.perf_counter() - t0, state.best_gflops))
                    if progress is not None:
                        progress(run, trials)

                try:
                    tune(task, trials, policy=policy, database=str(db), measurer=measurer,
                         batch_size=batch_size, seed=seed, remeasure=0, callbacks=[note],
                         measure_default=measure_default,
                         cost_model=model(seed) if callable(model) else model)
                except Exception as e:  # noqa: BLE001 - one policy's failure is a result of the race
                    run.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            run.seconds = time.perf_counter() - t0
            runs.append(run)
    return runs


def reference(task: Any, threads: int) -> Reference | None:
    """The fastest vendor library on ``task`` timed now, else this machine's cached (or measured) peak."""
    ref = vendor_reference(task, threads)
    if ref is not None:
        return Reference(ref.library, ref.gflops)
    try:
        peak = get_peak(threads)
        return Reference(f"fp32 peak of {threads} thread(s)", peak.gflops)
    except Exception as e:  # noqa: BLE001 - without a reference the table shows GFLOPS only
        logging.getLogger("autosched.search").warning("no reference for the race (no vendor library for %s, "
                                                      "and the peak failed: %s): GFLOPS only", task.label, e)
        return None


def checkpoints(trials: int) -> list[int]:
    return sorted({max(1, trials // 4), max(1, trials // 2), trials})


#: the shares of the reference whose time to quality the table shows
QUALITY = (0.9, 1.0)


def seconds_to_quality(runs: Sequence[RaceRun], gflops: float) -> tuple[float, float, float]:
    """(median, fastest, slowest) over ``runs`` of the seconds from the shell to ``gflops``; a run that never
    got there counts as infinitely long."""
    secs = sorted(math.inf if (s := r.seconds_to(gflops)) is None else s for r in runs)
    return statistics.median(secs), secs[0], secs[-1]


def _secs(s: float) -> str:
    return "never" if math.isinf(s) else f"{s:.0f}"


def table(runs: Sequence[RaceRun], trials: int, ref: Reference | None) -> str:
    """Per policy: the median best over seeds at a quarter, half and all the trials (as a share of the
    reference when there is one), the worst and best seed at the end, seconds and trials per second; with a
    reference, a second block with the time to quality: seconds from the shell to 0.9x and 1.0x of it."""
    unit = "share of the reference" if ref else "GFLOPS"
    cols = checkpoints(trials)
    lines = [f"median best over seeds ({unit}); [worst seed, best seed] at {trials} trials"]
    policies = list(dict.fromkeys(r.policy for r in runs))
    w = max([16, *(len(p) + 2 for p in policies)])  # the label column fits "evolutionary (pretrained)"
    head = f"{'policy':<{w}}" + "".join(f"{'@' + str(n):>9}" for n in cols)
    lines.append(head + f"  {'spread':<17} {'seconds':>8} {'trials/s':>9}  failed")

    def fmt(g: float) -> str:
        return f"{g / ref.gflops:.2f}" if ref else f"{g:.1f}"

    for policy in policies:
        rs = [r for r in runs if r.policy == policy]
        meds = [statistics.median(r.best_at(n) for r in rs) for n in cols]
        finals = [r.best_at(trials) for r in rs]
        secs = statistics.median(r.seconds for r in rs)
        done = statistics.median(r.curve[-1][0] if r.curve else 0 for r in rs)
        failed = sum(1 for r in rs if r.error)
        lines.append(f"{policy:<{w}}" + "".join(f"{fmt(m):>9}" for m in meds)
                     + f"  {'[' + fmt(min(finals)) + ', ' + fmt(max(finals)) + ']':<17} {secs:>8.1f}"
                     f" {done / max(secs, 1e-9):>9.2f}  {failed or ''}")
    if ref:
        startup = statistics.median(r.startup for r in runs) if runs else 0.0
        lines.append(f"time to quality: seconds from the shell (start-up {startup:.1f} s included) until the best "
                     "is within the share of the reference; median [fastest seed, slowest seed]")
        lines.append(f"{'policy':<{w}}" + "".join(f"{'to ' + format(q, '.1f') + 'x':>22}" for q in QUALITY))
        for policy in policies:
            rs = [r for r in runs if r.policy == policy]
            cells = []
            for q in QUALITY:
                med, lo, hi = seconds_to_quality(rs, q * ref.gflops)
                cells.append(f"{_secs(med) + ' [' + _secs(lo) + ', ' + _secs(hi) + ']':>22}")
            lines.append(f"{policy:<{w}}" + "".join(cells))
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
    horizon = max((r.startup + r.curve[-1][1] for r in runs if r.curve), default=1.0)
    for policy in dict.fromkeys(r.policy for r in runs):
        rs = [r for r in runs if r.policy == policy]
        for ax, xs, at in ((axes[0], np.arange(1, trials + 1), "trials"),
                           (axes[1], np.linspace(0, horizon, 200), "seconds")):
            shift = (lambda r: r.startup) if at == "seconds" else (lambda r: 0)  # seconds from the shell
            ys = np.array([[r.best_at(**{at: x - shift(r)}) / scale for x in xs] for r in rs])
            (line,) = ax.plot(xs, np.median(ys, axis=0), label=f"{policy} (median of {len(rs)})", linewidth=1.8)
            ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=line.get_color(), alpha=0.15)
    for ax, xlabel in zip(axes, ("trials", "seconds from the shell (start-up included)")):
        if ref:
            ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label=ref.name)
            ax.axhline(0.9, color="gray", linestyle=":", linewidth=1, label=f"0.9x {ref.name}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"best so far / {ref.name}" if ref else "best GFLOPS so far")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(title + " (band: worst to best seed)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


__all__ = ["QUALITY", "RaceRun", "Reference", "command_startup", "race", "reference", "seconds_to_quality", "table"]
