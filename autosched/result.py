"""What a measurement takes and gives: MeasureInput (task + trace) and MeasureResult (times or an error).

A neutral module below measure, database and cost_model (each uses these types; none imports another);
``autosched.measure.result`` re-exports them.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autosched.te.trace import Trace


class ErrorKind:
    """Why a candidate has no time. Stored as these strings in results, the database and logs."""

    INVALID_SCHEDULE = "invalid_schedule"  # a step of the trace does not apply
    LOWERING_ERROR = "lowering_error"  # the steps apply but the loops cannot be formed
    COMPILE_ERROR = "compile_error"  # LLVM or the linker failed
    BUILD_TIMEOUT = "build_timeout"  # building took longer than the builder's timeout
    BUILD_CUT_OFF = "build_cut_off"  # stopped on purpose: building took over build_cutoff_factor x the task's median
    RUNTIME_CRASH = "runtime_crash"  # the kernel killed its worker (segfault, abort)
    RUN_TIMEOUT = "run_timeout"  # one run took longer than the absolute time limit (RunConfig.timeout)
    CUT_OFF = "cut_off"  # stopped on purpose: one run took over timeout_factor x the task's best (slow, not broken)
    WRONG_RESULT = "wrong_result"  # output differs from the reference
    UNKNOWN = "unknown"

    ALL = (INVALID_SCHEDULE, LOWERING_ERROR, COMPILE_ERROR, BUILD_TIMEOUT, BUILD_CUT_OFF, RUNTIME_CRASH,
           RUN_TIMEOUT, CUT_OFF, WRONG_RESULT, UNKNOWN)

    #: kinds that are not faults: the candidate was too slow to run, or to build, to be worth finishing
    NOT_FAULTS = (CUT_OFF, BUILD_CUT_OFF)

    BUILD = (INVALID_SCHEDULE, LOWERING_ERROR, COMPILE_ERROR, BUILD_TIMEOUT, BUILD_CUT_OFF)  # before anything runs


class ResultFlag:
    """Marks on a result that has times but deserves less trust. Stored in ``MeasureResult.flags``."""

    UNCHECKED = "unchecked"  # the output was not compared with a reference (none could be computed)
    NOISY = "noisy"  # the timing was disturbed (spread far above usual, or a re-measure disagreed)
    # the build did not do all its schedule asked (autosched.codegen.llvm logs why, once, at WARNING):
    SERIAL = "serial"  # a parallel loop ran serial (no libgomp where it was built)
    SCALAR = "scalar"  # a vectorized loop ran as a scalar loop (its body cannot be vectorised)
    NOT_UNROLLED = "not_unrolled"  # an unrolled loop stayed a loop (past the unroll limit, or not constant)
    # not a doubt but how it was timed: with cold caches (its arguments evicted before each run), as a kernel
    # finds them inside a model; such a time is longer than a warm one and is compared with its kind only
    COLD = "cold_cache"

    ALL = (UNCHECKED, NOISY, SERIAL, SCALAR, NOT_UNROLLED, COLD)


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
    build_seconds: float = 0.0  # compiling it (in the builder)
    run_seconds: float = 0.0  # loading, checking and timing it (in the runner; for an error: until known)
    timestamp: float = field(default_factory=time.time)
    flags: list[str] = field(default_factory=list)  # ResultFlag values: how far to trust the times
    #: the machine that timed it: ``host`` (name), ``host_cpu`` (LLVM's CPU name), ``node_id`` (on Ray), and
    #: for a GPU kernel ``gpu``, ``gpu_arch``, ``sm_clock_mhz``, ``mem_clock_mhz``, ``pstate`` (its clocks
    #: when timed, "unknown" without NVML; kept as the record's ``device``); empty when not known (the
    #: database then names the tuning process's machine)
    machine: dict[str, str] = field(default_factory=dict)

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
            **({"flags": list(self.flags)} if self.flags else {}),
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
            flags=[str(f) for f in d.get("flags", [])],
        )


@dataclass
class BuildResult:
    """What a Builder gives for one candidate: a shared library's path, or an error.

    ``artifact`` carries the library's bytes when the runner may be on another
    machine (a Ray cluster); the runner writes them to its own disk when
    ``artifact_path`` does not exist there. ``cached`` says the library was
    already built (an identical candidate, by content hash of its LLVM IR).
    ``flags`` (ResultFlag values) name schedule annotations the build did not honour.
    """

    artifact_path: str | None = None
    error_kind: str | None = None
    error_msg: str = ""
    build_seconds: float = 0.0
    cached: bool = False
    artifact: bytes | None = None
    flags: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error_kind is None and self.artifact_path is not None

    def as_measure_result(self) -> MeasureResult:
        """The MeasureResult of a candidate that failed to build."""
        return MeasureResult(error_kind=self.error_kind or ErrorKind.UNKNOWN, error_msg=self.error_msg,
                             build_seconds=self.build_seconds)


def summarize_errors(results: Iterable[MeasureResult], top: int = 3, width: int = 240) -> str:
    """``'12 of 16 failed: 8 x compile_error (e.g. ...); 4 x runtime_crash (e.g. ...)'``: the most common
    error kinds of a batch, each with the first message seen, so a failing run says why."""
    results = list(results)
    failed = [r for r in results if not r.ok and r.error_kind not in ErrorKind.NOT_FAULTS]
    if not failed:
        cut = sum(1 for r in results if not r.ok)
        if not cut:
            return f"all {len(results)} candidates measured"
        if cut == len(results):
            return f"all {len(results)} candidates were cut off (far slower than the best)"
        return f"{len(results) - cut} of {len(results)} candidates timed, {cut} cut off (far slower than the best)"
    counts = Counter(r.error_kind or ErrorKind.UNKNOWN for r in failed)
    example: dict[str, str] = {}
    for r in failed:
        example.setdefault(r.error_kind or ErrorKind.UNKNOWN, r.error_msg)
    parts = []
    for kind, n in counts.most_common(top):
        msg = " ".join(example[kind].split())
        if len(msg) > width:
            msg = msg[: width - 3] + "..."
        parts.append(f"{n} x {kind} (e.g. {msg!r})" if msg else f"{n} x {kind}")
    rest = len(counts) - top
    if rest > 0:
        parts.append(f"{rest} more kind{'s' if rest > 1 else ''}")
    return f"{len(failed)} of {len(results)} candidates failed: " + "; ".join(parts)


def kind_label(kind: str, cutoff_factor: float | None = None) -> str:
    """How a result kind is named to a person: the error kinds by name; a cut-off as what it is."""
    if kind == ErrorKind.CUT_OFF:
        return f"cut off (> {cutoff_factor:g}x best)" if cutoff_factor else "cut off (slower than the best allows)"
    if kind == ErrorKind.BUILD_CUT_OFF:
        return "build cut off (slow to build)"
    return kind


def count_summary(measured: int, kinds: Mapping[str | None, int], noisy: int = 0,
                  cutoff_factor: float | None = None) -> str:
    """``'16 measured: 3 kept, 12 cut off (> 10x best), 1 failed (compile_error 1)'``: what happened to the
    candidates, each count named for what it is (a cut-off is a candidate timed long enough to know it is far
    slower than the best, not a failure). ``kinds``: error kind -> count (None or absent: successful)."""
    errors = {k: n for k, n in kinds.items() if k is not None and n}
    parts = [f"{measured - sum(errors.values())} kept"]
    for kind in ErrorKind.NOT_FAULTS:
        if errors.get(kind):
            parts.append(f"{errors[kind]} {kind_label(kind, cutoff_factor)}")
    faults = Counter({k: n for k, n in errors.items() if k not in ErrorKind.NOT_FAULTS})
    if faults:
        parts.append(f"{sum(faults.values())} failed ({', '.join(f'{k} {n}' for k, n in faults.most_common())})")
    if noisy:
        parts.append(f"{noisy} noisy (timing disturbed)")
    return f"{measured} measured: " + ", ".join(parts)


def outcome_summary(kinds: Mapping[str | None, int], noisy: int = 0, cutoff_factor: float | None = None) -> str:
    """``'errors: compile_error 2, run_timeout 1  cut off (> 10x best): 109  noisy: 3'``: faults apart from
    candidates that were only too slow to time fully, and from timings another process disturbed. The
    progress line, the summary of ``autosched tune``, ``autosched db`` and ``autosched report`` use it."""
    faults = Counter({k: n for k, n in kinds.items() if k is not None and k not in ErrorKind.NOT_FAULTS and n})
    text = "errors: " + (", ".join(f"{k} {n}" for k, n in faults.most_common()) or "none")
    for kind in ErrorKind.NOT_FAULTS:
        if kinds.get(kind, 0):
            text += f"  {kind_label(kind, cutoff_factor)}: {kinds[kind]}"
    if noisy:
        text += f"  noisy: {noisy}"
    return text
