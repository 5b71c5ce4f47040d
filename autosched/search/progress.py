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


def _fmt_errors(errors: Counter) -> str:
    return ", ".join(f"{k} {n}" for k, n in errors.most_common()) if errors else "none"


class TuneProgress:
    """A ``tune`` callback that shows how the run goes. ``peak_gflops``: the machine's fp32 peak for the
    threads the kernels use (for the "% of peak" figure); ``live``: force (True) or forbid (False) the live
    panel (default: live when ``stream`` is a terminal); ``label``: what is being tuned (default: the task)."""

    def __init__(self, peak_gflops: float | None = None, *, stream: IO[str] | None = None,
                 live: bool | None = None, label: str | None = None):
        self.stream = stream or sys.stderr
        self.peak = peak_gflops
        self.live = self.stream.isatty() if live is None else live
        self.label = label
        self.errors: Counter = Counter()
        self._live: Any = None
        self._console: Any = None
        self._state: Any = None
        self._t0 = time.time()

    # ---------------------------------------------------------------- tune's hooks
    def on_start(self, state: Any) -> None:
        """Called by ``tune`` once the database's records are read, before the first batch."""
        self._state, self._t0 = state, time.time()
        label = self.label or getattr(state.task, "label", str(state.task))
        if state.resumed:
            self._say(f"resuming {label}: {state.resumed} records in the database warm the model and are "
                      f"not measured again (best so far {self._gflops_text(state)})")
        else:
            self._say(f"tuning {label}: no earlier records")
        if self.live:
            self._start_live()

    def __call__(self, state: Any, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        self._state = state
        self.errors.update(r.error_kind for r in results if r.error_kind is not None)
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

    # ---------------------------------------------------------------- figures
    def _rate(self, state: Any) -> float:
        dt = max(time.time() - self._t0, 1e-9)
        return state.trials_done / dt

    def _gflops_text(self, state: Any) -> str:
        if not math.isfinite(state.best_cost):
            return "-"
        g = state.best_gflops
        share = f" ({g / self.peak:.0%} of peak)" if self.peak else ""
        return f"{g:.1f} GFLOPS{share}"

    def _line(self, state: Any) -> str:
        return (f"[{state.trials_done}/{state.trials}] {self._rate(state):.2f} trials/s  "
                f"best {self._gflops_text(state)}  errors: {_fmt_errors(self.errors)}")

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
                if state.best_trial:
                    best += f"   found at trial {state.best_trial}"
                else:
                    best += "   from an earlier run"
            grid.add_row("best", best)
            grid.add_row("errors", _fmt_errors(self.errors))
            if state.resumed:
                grid.add_row("resumed", f"{state.resumed} records from the database")
        return grid

    def _say(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text)
        else:
            print(text, file=self.stream, flush=True)
