"""A tuning task: one workload with concrete parameters on one target.

Its ``workload_key`` identifies it everywhere (database, logs, other
processes): a sha256 over the workload name, its canonical parameters and the
structural form of its computation, so a harmless rename keeps the key and a
changed computation gets a new one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from autosched.space import make_space
from autosched.target import Target
from autosched.te.analysis import ComputeDAG, flop_count, structural_hash
from autosched.te.schedule import Schedule, create_schedule
from autosched.te.tensor import Tensor
from autosched.te.trace import Trace
from autosched.workloads import Workload, get_workload

log = logging.getLogger("autosched")
_bad_labels: set[str] = set()  # workloads whose label function failed (said once each)

#: what answers Task.apply_best: the database layer, which sits above tasks (its records hold tasks). The
#: autosched package installs it (autosched/__init__.py), so this module imports nothing above it.
_apply_best_source: Callable[..., tuple] | None = None


def set_apply_best_source(fn: Callable[..., tuple]) -> None:
    """Install the function :meth:`Task.apply_best` calls: ``fn(task, db_or_log, allow_other_cpus=...)``."""
    global _apply_best_source
    _apply_best_source = fn


class Task:
    """``Task("conv2d", args={"CI": 128}, target="llvm")``: what to tune, with what, for where."""

    def __init__(self, workload: str | Workload | Any, args: Any = None, target: Any = "llvm"):
        if isinstance(workload, Workload):
            wl = workload
        elif callable(workload) and hasattr(workload, "workload_name"):
            wl = get_workload(workload.workload_name)
        elif isinstance(workload, str):
            wl = get_workload(workload)
        else:
            raise TypeError(f"Task expects a registered workload name, got {workload!r}")
        self.workload = wl
        self.name = wl.name
        self.target = Target(target)
        self.args: dict[str, Any] = wl.canonical_args(args)
        if wl.fill is not None:
            with self.target:
                self.args = wl.fill(dict(self.args))
        self._tensors: list[Tensor] | None = None
        self._key: str | None = None

    # tensors hold Python closures (reducers), so a task travels as (name, args, target)
    def __getstate__(self) -> dict:
        return {"name": self.name, "args": self.args, "target": str(self.target)}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["name"], state["args"], state["target"])

    def to_json(self) -> dict:
        return {"name": self.name, "args": self.args, "target": str(self.target)}

    @staticmethod
    def from_json(data: dict) -> Task:
        return Task(data["name"], data.get("args"), data.get("target", "llvm"))

    def tensors(self) -> list[Tensor]:
        """The workload's tensors (inputs first, outputs last), built once."""
        if self._tensors is None:
            out = self.workload.func(**self.args)
            if not isinstance(out, (list, tuple)) or not all(isinstance(t, Tensor) for t in out):
                raise TypeError(f"workload {self.name} must return a list of te tensors, got {out!r}")
            self._tensors = list(out)
        return self._tensors

    @property
    def outputs(self) -> list[Tensor]:
        return [self.tensors()[-1]]

    @property
    def workload_key(self) -> str:
        if self._key is None:
            canon = json.dumps([self.name, self.args, structural_hash(self.outputs)], sort_keys=True,
                               separators=(",", ":"))
            self._key = hashlib.sha256(canon.encode()).hexdigest()
        return self._key

    @property
    def compute_dag(self) -> ComputeDAG:
        """The computation, one stage a line (TVM's ``print(task.compute_dag)``)."""
        return ComputeDAG(self.tensors())

    @property
    def flop(self) -> int:
        return flop_count(self.outputs)

    def schedule(self) -> tuple[Schedule, list[Tensor]]:
        """A fresh default (untransformed) schedule and the argument tensors."""
        return create_schedule([t.op for t in self.outputs]), self.tensors()

    def apply(self, trace: Trace | list | str) -> tuple[Schedule, list[Tensor]]:
        """Replay ``trace`` on a fresh schedule; returns ``(schedule, args)`` ready for ``autosched.build``."""
        if not isinstance(trace, Trace):
            trace = Trace.from_json(trace)
        sch, args = self.schedule()
        trace.replay(sch)
        return sch, args

    def space(self, kind: str = "generated", **options: Any) -> Any:
        """The schedule space of this task: ``"generated"`` (Ansor-style sketches, for any computation) or
        ``"template"`` (the workload's AutoTVM-style template for this target kind). See
        :mod:`autosched.space`; the same space object is returned while no options are given."""
        if options:
            return make_space(self, kind, **options)
        spaces = self.__dict__.setdefault("_spaces", {})
        if kind not in spaces:
            spaces[kind] = make_space(self, kind)
        return spaces[kind]

    def default_schedule(self) -> tuple[Schedule, list[Tensor]]:
        """The workload's expert schedule for this target kind, or the untransformed one if it has none."""
        sch, args = self.schedule()
        fn = self.workload.schedules.get(self.target.kind)
        if fn is not None:
            with self.target:  # the schedule sizes its blocks from Target.current().cpu
                fn(sch, args, **self.args)
        return sch, args

    def default_trace(self) -> Trace:
        return self.default_schedule()[0].trace

    def apply_best(self, db_or_log: Any = None, *,
                   allow_other_cpus: bool = False) -> tuple[Schedule, list[Tensor]]:
        """``(schedule, args)`` of the best tuning record for this task on its target, ready for
        ``autosched.build``; the default schedule (with a log line naming the workload key and target
        looked for) when there is none. ``db_or_log``: a Database, URL, path or ``.jsonl`` log; None
        uses the active ``apply_history_best`` contexts, else the default database (if it exists).
        ``allow_other_cpus=True`` reuses records tuned on another CPU when this one has none."""
        if _apply_best_source is None:
            raise RuntimeError("Task.apply_best has no record source; the autosched package installs "
                               "autosched.database.apply's when it is imported")
        return _apply_best_source(self, db_or_log, allow_other_cpus=allow_other_cpus)

    @property
    def label(self) -> str:
        """A short name for people: the workload's own ``label`` when it has one (a fused relay kernel
        says its ops and shapes), else ``name(args)`` without the default dtype."""
        if self.workload.label is not None:
            try:
                return self.workload.label(**self.args)
            except Exception as e:  # noqa: BLE001 - a label is cosmetic: fall back to the plain form, and say so
                if self.name not in _bad_labels:
                    _bad_labels.add(self.name)
                    log.warning("the label function of workload %s fails (%s: %s); tasks show as name(args)",
                                self.name, type(e).__name__, e)
        args = ", ".join(f"{k}={v}" for k, v in self.args.items() if not (k == "dtype" and v == "float32"))
        return f"{self.name}({args})"

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"Task({self.name}({args}), target={self.target})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Task) and self.workload_key == other.workload_key and self.target == other.target

    def __hash__(self) -> int:
        return hash((self.workload_key, str(self.target)))
