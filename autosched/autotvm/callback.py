"""AutoTVM's tuning callbacks: ``log_to_file`` (the log is the run's database) and ``progress_bar``."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from autosched.database.location import LOG_SUFFIXES


class log_to_file:  # noqa: N801 - TVM's name
    """Keep the run's records in ``file_out``, a JSON-lines log that the run appends to (and resumes from)."""

    def __init__(self, file_out: str | os.PathLike, protocol: str = "json"):
        self.filename = os.fspath(file_out)
        if not self.filename.endswith(LOG_SUFFIXES):
            raise ValueError(f"log_to_file: {self.filename!r} must end in {', '.join(LOG_SUFFIXES)} (a JSON-lines "
                             f"tuning log)")


class progress_bar:  # noqa: N801 - TVM's name
    """Print ``prefix`` with the trials done out of ``total`` and the best GFLOPS so far, after each batch."""

    def __init__(self, total: int, prefix: str = "", si_prefix: str = "G", stream: Any = None):
        self.total, self.prefix = total, prefix
        self.scale = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(si_prefix, 1e9)
        self.unit = si_prefix
        self.stream = stream
        self.start = time.time()

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        best = state.best_cost
        flop = state.task.flop
        rate = flop / best / self.scale if best and best != float("inf") else 0.0
        out = self.stream or sys.stdout
        out.write(f"\r{self.prefix}Best: {rate:7.2f} {self.unit}FLOPS | Progress: ({state.trials_done}/{self.total}) "
                  f"| {time.time() - self.start:.2f} s")
        out.flush()

    def on_end(self, state: Any) -> None:
        (self.stream or sys.stdout).write(" Done.\n")


__all__ = ["log_to_file", "progress_bar"]
