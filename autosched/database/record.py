"""A tuning record and its portable form, one JSON object per line of a tuning log.

This module has no SQL in it (and does not import SQLAlchemy): reading and
writing JSON-lines logs, and the record objects that ``Database`` queries
return, work on their own. The log format is documented in
``tuning_logs/README.md`` and ``docs/database.md``; ``LOG_VERSION`` is the
``"v"`` field of every line.

A line (wrapped here, one line in the file)::

    {"v":1,"workload":{"name":"matmul","args":{"M":64,...},"key":"e523...81"},
     "target":"llvm -mcpu=sapphirerapids","trace":[["split",0,0,32,null],...],
     "result":{"costs":[1.2e-05,1.21e-05],"error_kind":null,"error_msg":"",
               "build_seconds":0.021,"run_seconds":0.3,"timestamp":1790000000.5},
     "producer":{"autosched":"0.1.0","llvm":"22.1.0","host_cpu":"sapphirerapids"}}
"""

from __future__ import annotations

import functools
import hashlib
import json
import socket
import statistics
from dataclasses import dataclass, field
from typing import Any

from autosched.result import ErrorKind, MeasureResult
from autosched.target import host_cpu_name, llvm_version
from autosched.task import Task
from autosched.te.trace import Trace
from autosched.version import __version__
from autosched.workloads import get_workload

#: Version of the JSON-lines record format (the ``"v"`` of each line). Bump it when a field changes meaning
#: or a required field is added; readers accept every version up to theirs and name the newer ones.
LOG_VERSION = 1

#: Fields a line must have, by name, with what each must be.
_REQUIRED = ("v", "workload", "target", "trace", "result")


class LogFormatError(ValueError):
    """A tuning-log line that cannot be used; ``line`` is its 1-based number (0 when not from a file)."""

    def __init__(self, reason: str, line: int = 0, source: str = ""):
        self.reason = reason
        self.line = line
        self.source = source
        where = f"{source}:{line}: " if source and line else (f"line {line}: " if line else "")
        super().__init__(where + reason)


@functools.lru_cache(maxsize=1)
def producer_info() -> dict[str, str]:
    """The versions of autosched and LLVM in this process, and the host CPU (as :mod:`autosched.target` names
    them); 'unknown' where llvmlite is not installed (the runtime works without it)."""
    try:
        llvm, host_cpu = llvm_version(), host_cpu_name() or "unknown"
    except ImportError:  # the runtime works without llvmlite: the record is still worth keeping
        llvm = host_cpu = "unknown"
    return {"autosched": __version__, "llvm": llvm, "host_cpu": host_cpu, "host": socket.gethostname()}


def trace_text(trace: Trace | list | str) -> str:
    """The canonical compact JSON of a trace: the identity of a candidate."""
    if isinstance(trace, Trace):
        return trace.dumps()
    return Trace.from_json(trace).dumps()


def trace_digest(text: str) -> str:
    """A short fixed-size digest of canonical trace text (128 bits of sha256, hex), used in the unique index
    so that long traces do not make long index keys."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def canonical_args(args: dict) -> str:
    return json.dumps(args, sort_keys=True, separators=(",", ":"))


#: what ``MeasureResult.machine`` says of the machine (kept as the record's producer); its other keys describe
#: the device (a GPU's clocks) and go to ``TuningRecord.device``
_PRODUCER_KEYS = ("autosched", "llvm", "host_cpu", "host", "node_id")


@dataclass
class TuningRecord:
    """One measured candidate: which workload, on which target, scheduled how, and what it measured.

    ``trace`` and ``result`` are built on first access from the stored text, so listing many records
    stays cheap. ``cost`` is the median seconds per run (``None`` for a failed candidate).
    """

    workload_key: str
    workload_name: str
    workload_args: dict[str, Any]
    target: str  # the target key, CPU included: "llvm -mcpu=sapphirerapids"
    trace_json: str  # canonical compact JSON text of the trace
    costs: list[float] = field(default_factory=list)
    error_kind: str | None = None
    error_msg: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    timestamp: float = 0.0
    autosched_version: str = "unknown"
    llvm_version: str = "unknown"
    host_cpu: str = "unknown"
    version: int = LOG_VERSION  # the record-format version it was written under
    id: int | None = None  # the database row id, when it came from a database
    run_id: int | None = None
    flags: list[str] = field(default_factory=list)  # ResultFlag values: "unchecked", "noisy"
    host: str = "unknown"  # the machine that measured it
    node_id: str | None = None  # its Ray node id, when measured on a cluster
    #: the device's state while it timed: on a GPU its name, arch, SM and memory clocks and P-state
    #: (``gpu``, ``gpu_arch``, ``sm_clock_mhz``, ``mem_clock_mhz``, ``pstate``); empty on a CPU
    device: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ derived views
    @property
    def ok(self) -> bool:
        return self.error_kind is None and bool(self.costs)

    @property
    def cost(self) -> float | None:
        """Median seconds per run, or None for a failed candidate."""
        return statistics.median(self.costs) if self.ok else None

    @property
    def mean_cost(self) -> float | None:
        return sum(self.costs) / len(self.costs) if self.ok else None

    @property
    def spread(self) -> float:
        return self.result.spread

    @property
    def trace(self) -> Trace:
        cached = self.__dict__.get("_trace")
        if cached is None:
            cached = self.__dict__["_trace"] = Trace.from_json(self.trace_json)
        return cached

    @property
    def result(self) -> MeasureResult:
        return MeasureResult(costs=list(self.costs), error_kind=self.error_kind, error_msg=self.error_msg,
                             build_seconds=self.build_seconds, run_seconds=self.run_seconds,
                             timestamp=self.timestamp, flags=list(self.flags))

    def task(self):
        """The ``autosched.Task`` this record measured (its workload must be registered)."""
        return Task(self.workload_name, self.workload_args, self.target)

    def gflops(self, flop: int) -> float:
        return self.result.gflops(flop)

    def __repr__(self) -> str:
        what = f"cost={self.cost:.4g}s" if self.ok else f"error={self.error_kind}"
        return (f"TuningRecord({self.workload_name} key={self.workload_key[:12]}, target={self.target!r}, "
                f"{what}, steps={len(self.trace)})")

    # ------------------------------------------------------------------ construction
    @staticmethod
    def from_measurement(task: Any, trace: Trace | list | str, result: MeasureResult,
                         producer: dict[str, str] | None = None) -> TuningRecord:
        prod = {**(producer or producer_info()), **result.machine}  # the machine that timed it, when known
        return TuningRecord(
            workload_key=task.workload_key,
            workload_name=task.name,
            workload_args=dict(task.args),
            target=task.target.key,
            trace_json=trace_text(trace),
            costs=[float(c) for c in result.costs],
            error_kind=result.error_kind,
            error_msg=result.error_msg or "",
            build_seconds=float(result.build_seconds),
            run_seconds=float(result.run_seconds),
            timestamp=float(result.timestamp),
            autosched_version=prod.get("autosched", "unknown"),
            llvm_version=prod.get("llvm", "unknown"),
            host_cpu=prod.get("host_cpu", "unknown"),
            flags=list(result.flags),
            host=prod.get("host", "unknown"),
            node_id=prod.get("node_id") or None,
            device={k: str(v) for k, v in result.machine.items() if k not in _PRODUCER_KEYS},
        )

    # ------------------------------------------------------------------ the JSON-lines form
    def to_json(self) -> dict:
        """The log-line object (``json.dumps(..., separators=(",", ":"))`` of it is one line)."""
        return {
            "v": self.version,
            "workload": {"name": self.workload_name, "args": self.workload_args, "key": self.workload_key},
            "target": self.target,
            "trace": json.loads(self.trace_json),
            "result": {
                "costs": list(self.costs),
                "error_kind": self.error_kind,
                "error_msg": self.error_msg,
                "build_seconds": self.build_seconds,
                "run_seconds": self.run_seconds,
                "timestamp": self.timestamp,
                **({"flags": list(self.flags)} if self.flags else {}),
            },
            "producer": {"autosched": self.autosched_version, "llvm": self.llvm_version,
                         "host_cpu": self.host_cpu,
                         **({"host": self.host} if self.host != "unknown" else {}),
                         **({"node_id": self.node_id} if self.node_id else {}),
                         **({"device": dict(self.device)} if self.device else {})},
        }

    def dumps(self) -> str:
        """The record as one line of a tuning log (no newline)."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @staticmethod
    def from_json(obj: Any) -> TuningRecord:
        """Parse and check one log-line object; raises :class:`LogFormatError` naming what is wrong.

        Only the format is checked here; whether the workload is registered and its key still matches
        the computation is checked by :func:`check_workload`.
        """
        if not isinstance(obj, dict):
            raise LogFormatError(f"a record is a JSON object, got {type(obj).__name__}")
        missing = [k for k in _REQUIRED if k not in obj]
        if {"i", "r"} <= obj.keys() or {"input", "config", "result"} <= obj.keys():
            raise LogFormatError(f"a TVM {'auto_scheduler' if 'i' in obj else 'AutoTVM'} record: autosched's "
                                 f"records are its own (schedules as traces of its steps), so TVM's logs do not "
                                 f"load; tune again with autosched")
        if "v" in missing:
            raise LogFormatError("no record-format version ('v' field); not an autosched tuning record")
        v = obj["v"]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise LogFormatError(f"record-format version must be a positive integer, got {v!r}")
        if v > LOG_VERSION:
            raise LogFormatError(f"record-format version {v} is newer than this autosched reads "
                                 f"(up to {LOG_VERSION}); upgrade autosched to use this record")
        if missing:
            raise LogFormatError(f"missing field(s) {', '.join(missing)}")
        wl = obj["workload"]
        if not isinstance(wl, dict) or not isinstance(wl.get("name"), str) or not isinstance(
                wl.get("args", {}), dict):
            raise LogFormatError("'workload' must be an object with a 'name' string and an 'args' object")
        key = wl.get("key")
        if not (isinstance(key, str) and len(key) == 64 and all(c in "0123456789abcdef" for c in key)):
            raise LogFormatError(f"workload key must be 64 lowercase hex digits (sha256), got {key!r}")
        target = obj["target"]
        if not isinstance(target, str) or not target.strip():
            raise LogFormatError(f"'target' must be a non-empty string, got {target!r}")
        try:
            text = Trace.from_json(obj["trace"]).dumps()
        except (ValueError, TypeError) as e:
            raise LogFormatError(f"bad trace: {e}") from None
        res = obj["result"]
        if not isinstance(res, dict):
            raise LogFormatError("'result' must be an object")
        costs = res.get("costs", [])
        if not isinstance(costs, list) or not all(
                isinstance(c, (int, float)) and not isinstance(c, bool) and c >= 0 for c in costs):
            raise LogFormatError(f"'result.costs' must be a list of non-negative numbers, got {costs!r}")
        err = res.get("error_kind")
        if err is not None and not isinstance(err, str):
            raise LogFormatError(f"'result.error_kind' must be null or a string, got {err!r}")
        if err == "":
            err = ErrorKind.UNKNOWN  # a kind this autosched does not know is kept by name: still an error
        if err is None and not costs:
            raise LogFormatError("'result' has neither costs nor an error_kind")
        prod = obj.get("producer") or {}
        if not isinstance(prod, dict):
            raise LogFormatError("'producer' must be an object")
        device = prod.get("device", {})
        if not isinstance(device, dict):
            raise LogFormatError(f"'producer.device' must be an object, got {device!r}")
        flags = res.get("flags", [])
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise LogFormatError(f"'result.flags' must be a list of strings, got {flags!r}")
        try:
            return TuningRecord(
                workload_key=key,
                workload_name=wl["name"],
                workload_args=dict(wl.get("args", {})),
                target=target,
                trace_json=text,
                costs=[float(c) for c in costs],
                error_kind=err,
                error_msg=str(res.get("error_msg") or ""),
                build_seconds=float(res.get("build_seconds", 0.0)),
                run_seconds=float(res.get("run_seconds", 0.0)),
                timestamp=float(res.get("timestamp", 0.0)),
                autosched_version=str(prod.get("autosched", "unknown")),
                llvm_version=str(prod.get("llvm", "unknown")),
                host_cpu=str(prod.get("host_cpu", "unknown")),
                version=v,
                flags=list(flags),
                host=str(prod.get("host", "unknown")),
                node_id=str(prod["node_id"]) if prod.get("node_id") else None,
                device={str(k): str(v) for k, v in device.items()},
            )
        except (TypeError, ValueError) as e:
            raise LogFormatError(f"bad value in 'result': {e}") from None

    @staticmethod
    def loads(line: str) -> TuningRecord:
        """Parse one log line; a truncated or otherwise invalid line raises :class:`LogFormatError`."""
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            hint = " (truncated line?)" if "Unterminated" in e.msg or "Expecting" in e.msg else ""
            raise LogFormatError(f"not valid JSON{hint}: {e.msg} at column {e.colno}") from None
        return TuningRecord.from_json(obj)


class WorkloadChecker:
    """Checks that a record's workload is registered here and that its key still names the same computation.

    Keys are recomputed once per distinct (name, args); a record whose computation changed since it was tuned
    (a different key) is refused, so a stale log never silently applies to a new computation.
    """

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], str | LogFormatError] = {}

    def key_for(self, name: str, args: dict) -> str:
        ident = (name, canonical_args(args))
        got = self._keys.get(ident)
        if got is None:
            try:
                try:
                    get_workload(name)
                except KeyError:
                    raise LogFormatError(f"unknown workload {name!r}: not registered in this process "
                                         f"(register it, e.g. by importing its module, before importing)"
                                         ) from None
                got = Task(name, args, "llvm").workload_key
            except LogFormatError as e:
                got = e
            except Exception as e:  # a workload function that fails on these args
                got = LogFormatError(f"workload {name}({ident[1]}) cannot be built here: {e}")
            self._keys[ident] = got
        if isinstance(got, LogFormatError):
            raise LogFormatError(got.reason)
        return got

    def check(self, rec: TuningRecord) -> None:
        key = self.key_for(rec.workload_name, rec.workload_args)
        if key != rec.workload_key:
            raise LogFormatError(
                f"workload {rec.workload_name}({canonical_args(rec.workload_args)}) has key {key[:16]}... "
                f"here but {rec.workload_key[:16]}... in the record: the computation changed since it was "
                f"tuned, so the record does not apply")
