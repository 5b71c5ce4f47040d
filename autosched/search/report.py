"""How tuning went for one task, read from the database: each tuning run's curve of best GFLOPS against
trials (:func:`run_curves`) and a picture of them beside the best kernel, the vendor library and the peak
(:func:`plot`). ``autosched report`` (:mod:`autosched.cli.report`) is the command.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


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
