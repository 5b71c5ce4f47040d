"""TVM's ``te.schedule``: stages and schedules (defined in :mod:`autosched.te.stage`, re-exported here) and the
two-step view of lowering, ``InferBound(s)`` then ``ScheduleOps(s, bounds)``, which run autosched's lowering
(:mod:`autosched.tir.bounds`), so this module stands above the loop IR's lowering and the stage module below it.
"""

from __future__ import annotations

from typing import Any

from autosched.te.stage import (
    ANNOTATIONS,
    SCOPES,
    Buffer,
    Fuse,
    FuseRel,
    IterVarAttr,
    Schedule,
    Singleton,
    Split,
    SplitRel,
    Stage,
    StageGroup,
    create_schedule,
)
from autosched.te.tensor import IterVar
from autosched.tir.bounds import infer_bound, schedule_ops


def InferBound(sch: Schedule) -> dict:  # noqa: N802 - TVM's name
    """TVM's ``te.schedule.InferBound``: every loop axis of every computed stage -> its Range. autosched
    infers bounds inside :func:`autosched.lower`; this runs that inference and returns what it found."""
    return infer_bound(sch)


def ScheduleOps(sch: Schedule, bounds: dict | None = None) -> Any:  # noqa: N802 - TVM's name
    """TVM's ``te.schedule.ScheduleOps``: the loop nest of the schedule (its placeholders and outputs as the
    buffers), as :func:`autosched.lower` builds it."""
    return schedule_ops(sch, bounds)


__all__ = ["ANNOTATIONS", "SCOPES", "Buffer", "Fuse", "FuseRel", "InferBound", "IterVar", "IterVarAttr", "Schedule",
           "ScheduleOps", "Singleton", "Split", "SplitRel", "Stage", "StageGroup", "create_schedule"]
