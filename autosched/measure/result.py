"""What a measurement takes and gives: MeasureInput (task + trace) and MeasureResult (times or an error)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from autosched.te.trace import Trace


class ErrorKind:
    """Why a candidate has no time. Stored as these strings in results, the database and logs."""

    INVALID_SCHEDULE = "invalid_schedule"  # a step of the trace does not apply
    LOWERING_ERROR = "lowering_error"  # the steps apply but the loops cannot be formed
    COMPILE_ERROR = "compile_error"  # LLVM or the linker failed
    BUILD_TIMEOUT = "build_timeout"
    RUNTIME_CRASH = "runtime_crash"  # the kernel killed its worker (segfault, abort)
    RUN_TIMEOUT = "run_timeout"  # slower than the time limit (absolute or relative to the best)
    WRONG_RESULT = "wrong_result"  # output differs from the reference
    UNKNOWN = "unknown"

    ALL = (INVALID_SCHEDULE, LOWERING_ERROR, COMPILE_ERROR, BUILD_TIMEOUT, RUNTIME_CRASH, RUN_TIMEOUT,
           WRONG_RESULT, UNKNOWN)


@dataclass
class MeasureInput:
    """A candidate: a task and the trace that schedules it."""

    task: Any  # autosched.Task
    trace: Trace

    def __post_init__(self) -> None:
        if not isinstance(self.trace, Trace):
            self.trace = Trace.from_json(self.trace)


@dataclass
class MeasureResult:
    """Seconds per run for each repeat (``costs``), or an ``error_kind`` with a message."""

    costs: list[float] = field(default_factory=list)
    error_kind: str | None = None
    error_msg: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    timestamp: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.error_kind is None and bool(self.costs)

    @property
    def cost(self) -> float:
        """Median seconds per run; infinity for an error."""
        return statistics.median(self.costs) if self.ok else float("inf")

    @property
    def spread(self) -> float:
        """(max - min) / median of the repeats; 0 for one repeat or an error."""
        if not self.ok or len(self.costs) < 2:
            return 0.0
        med = statistics.median(self.costs)
        return (max(self.costs) - min(self.costs)) / med if med > 0 else 0.0

    def gflops(self, flop: int) -> float:
        return flop / self.cost / 1e9 if self.ok and self.cost > 0 else 0.0

    def to_json(self) -> dict:
        return {
            "costs": list(self.costs),
            "error_kind": self.error_kind,
            "error_msg": self.error_msg,
            "build_seconds": self.build_seconds,
            "run_seconds": self.run_seconds,
            "timestamp": self.timestamp,
        }

    @staticmethod
    def from_json(d: dict) -> MeasureResult:
        return MeasureResult(
            costs=[float(c) for c in d.get("costs", [])],
            error_kind=d.get("error_kind"),
            error_msg=d.get("error_msg", ""),
            build_seconds=float(d.get("build_seconds", 0.0)),
            run_seconds=float(d.get("run_seconds", 0.0)),
            timestamp=float(d.get("timestamp", time.time())),
        )
