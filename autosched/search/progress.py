"""Progress of a tuning run for a person watching it: a live panel on a terminal, a line per batch elsewhere.

``TuneProgress`` is a :func:`~autosched.search.tune` callback (``callbacks=[TuneProgress()]``); the
``autosched tune`` command uses it. It shows trials done of those asked, trials per second, the best
GFLOPS and its share of the machine's fp32 peak (when one is given, see :mod:`autosched.measure.peak`),
and the failed candidates so far by kind. On a terminal it draws with rich; when the output is a pipe or
a file (CI, ``| tee``) it prints one plain line per batch instead, so logs stay readable.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import IO, Any

from autosched.measure.peak import PeakWatch, share_of_peak
from autosched.result import ResultFlag, count_summary


class TuneProgress:
    """A ``tune`` callback that shows how the run goes. ``peak``: the machine's fp32 peak for the threads the
    kernels use (for the "% of peak" figure), a number or a :class:`~autosched.measure.peak.PeakWatch` (then
    re-measured between batches when a kernel beats it); ``live``: force (True) or forbid (False) the live
    panel (default: live when ``stream`` is a terminal); ``label``: what is being tuned (default: the task);
    ``cutoff_factor``: the measurer's ``timeout_factor``, to name cut-off candidates."""

    def __init__(self, peak: float | PeakWatch | None = None, *, stream: IO[str] | None = None,
                 live: bool | None = None, label: str | None = None, cutoff_factor: float | None = None):
        self.stream = stream or sys.stderr
        self.peak = peak
        self.live = self.stream.isatty() if live is None else live
        self.label = label
        self.cutoff_factor = cutoff_factor
        self.errors: Counter = Counter()  # results by kind (cut-offs included)
        self.noisy = 0
        self._live: Any = None
        self._console: Any = None
        self._state: Any = None
        self._t0 = time.time()

    # ---------------------------------------------------------------- tune's hooks
    def on_start(self, state: Any) -> None:
        """Called by ``tune`` once the database's records are read, before the first batch (of each task of a
        model: the counts and the rate are the task's)."""
        self._state, self._t0 = state, time.time()
        self.errors, self.noisy = Counter(), 0
        label = self.label or getattr(state.task, "label", str(state.task))
        if state.resumed:
            self._say(f"resuming {label}: {state.resumed} records in the database warm the model and are "
                      f"not measured again (best so far {self._gflops_text(state)})")
        else:
            self._say(f"tuning {label}: no earlier records")
        origin = getattr(state.context.cost_model, "origin", None)
        if origin:
            self._say(f"cost model: {origin}")
        if self.live:
            self._start_live()

    def __call__(self, state: Any, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        self._state = state
        self.errors.update(r.error_kind for r in results if r.error_kind is not None)
        self.noisy += sum(1 for r in results if ResultFlag.NOISY in r.flags)
        if isinstance(self.peak, PeakWatch) and math.isfinite(state.best_cost) and not fewer_flops(state.task):
            self.peak.observe(state.best_gflops)  # between batches: no kernel is being timed
        if self._live is not None:
            self._live.refresh()
        else:
            print(self._line(state), file=self.stream, flush=True)

    def on_end(self, state: Any) -> None:
        """Called by ``tune`` when the loop ends (also when it ends by an exception)."""
        self._state = state
        if self._live is not None:
            self._live.stop()  # draws the last frame
            self._live = None

    def on_remeasured(self, state: Any) -> None:
        """Called by ``tune`` once the best candidates are re-measured: the best as everyone shows it from now
        on (the summary, ``db best``, ``report``), and, when the run's figure was another, why."""
        line = f"[{state.trials_done}/{state.trials}] re-measured: best {self._gflops_text(state)}"
        if state.remeasure_note and math.isfinite(state.best_in_run) and state.best_in_run > 0:
            during = state.task.flop / state.best_in_run / 1e9
            if f"{during:.1f}" != f"{state.best_gflops:.1f}":
                line += f" ({during:.1f} during the run; {state.remeasure_note})"
            else:
                line += f" (not confirmed: {state.remeasure_note})"
        print(line, file=self.stream, flush=True)

    # ---------------------------------------------------------------- figures
    def _rate(self, state: Any) -> float:
        dt = max(time.time() - self._t0, 1e-9)
        return state.trials_done / dt

    def _gflops_text(self, state: Any) -> str:
        if not math.isfinite(state.best_cost):
            return "-"
        g = state.best_gflops
        if fewer_flops(state.task):  # against the direct computation's flops: may pass the peak, and says so
            return f"{g:.1f} effective GFLOPS"
        peak = self.peak.gflops if isinstance(self.peak, PeakWatch) else self.peak
        share = f" ({share_of_peak(g, peak)} of peak)" if peak else ""
        return f"{g:.1f} GFLOPS{share}"

    def _outcomes(self) -> str:
        return count_summary(self._state.trials_done if self._state is not None else 0, self.errors, self.noisy,
                             self.cutoff_factor).split(": ", 1)[-1]

    def _line(self, state: Any) -> str:
        shared = f"  {_shared_text(state)}" if _shared_text(state) else ""
        return (f"[{state.trials_done}/{state.trials}] {self._rate(state):.2f} trials/s  "
                f"best {self._gflops_text(state)}  {self._outcomes()}{shared}")

    # ---------------------------------------------------------------- the live panel (rich)
    def _start_live(self) -> None:
        try:
            from rich.console import Console
            from rich.live import Live
        except ImportError:  # rich is a dependency; a stripped install still gets the plain lines
            self.live = False
            return
        self._console = Console(file=self.stream)
        # redrawn when a batch ends (and once a second, for the clock) from the refresh thread only
        self._live = Live(console=self._console, refresh_per_second=1, transient=False, get_renderable=self._panel)
        self._live.start()

    def _panel(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        state = self._state
        done, asked = (state.trials_done, state.trials) if state is not None else (0, 0)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        bar = Table.grid(padding=(0, 1))
        bar.add_row(ProgressBar(total=max(asked, 1), completed=done, width=40), f"{done}/{asked} trials")
        what = getattr(state.task, "label", str(state.task)) if state is not None else ""
        grid.add_row("tuning", self.label or what)
        grid.add_row("progress", bar)
        if state is not None:
            elapsed = time.time() - self._t0
            rate = self._rate(state)
            eta = (asked - done) / rate if rate > 0 else math.inf
            grid.add_row("speed", f"{rate:.2f} trials/s   elapsed {elapsed:,.0f} s"
                         + (f"   left ~{eta:,.0f} s" if math.isfinite(eta) else ""))
            best = self._gflops_text(state)
            if math.isfinite(state.best_cost):
                best += f"   {state.best_cost * 1e6:,.1f} us"
                if state.best_elsewhere:
                    best += "   measured by another run"
                elif state.best_trial:
                    best += f"   found at trial {state.best_trial}"
                else:
                    best += "   from an earlier run"
            grid.add_row("best", best)
            grid.add_row("results", self._outcomes())
            if state.resumed:
                grid.add_row("resumed", f"{state.resumed} records from the database")
            if _shared_text(state):
                grid.add_row("shared", _shared_text(state))
        return grid

    def _say(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text)
        else:
            print(text, file=self.stream, flush=True)


def fewer_flops(task: Any) -> bool:
    """Whether ``task``'s kernel does fewer multiplications than the computation it stands for (a Winograd
    convolution): its GFLOPS are effective ones, the direct computation's flops over its time, and may pass
    the machine's peak without saying anything about that peak."""
    text = f"{getattr(task, 'name', '')} {getattr(task, 'label', '')}".lower()
    return "winograd" in text


def _shared_text(state: Any) -> str:
    """What other tuners on the same database did for this run ("" when nothing)."""
    parts = []
    if state.shared:
        parts.append(f"{state.shared} measured by another run")
    if state.raced:
        parts.append(f"{state.raced} also measured by another run at the same moment")
    return ", ".join(parts)
