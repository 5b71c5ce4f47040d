"""TVM's ``te.schedule``: stages and schedules (defined in :mod:`autosched.te.stage`, re-exported here) and the
two-step view of lowering, ``InferBound(s)`` then ``ScheduleOps(s, bounds)``, which run autosched's lowering
(:mod:`autosched.tir.bounds`), so this module stands above the loop IR's lowering and the stage module below it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched.container import Map
from autosched.te.expr import IntImm, TensorLoad, walk
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
    _post_order,
    create_schedule,
)
from autosched.te.tensor import ComputeOp, IterVar, Operation
from autosched.tir.bounds import infer_bound, schedule_ops


def InferBound(sch: Schedule) -> dict:  # noqa: N802 - TVM's name
    """TVM's ``te.schedule.InferBound``: every loop axis of every computed stage -> its Range. autosched
    infers bounds inside :func:`autosched.lower`; this runs that inference and returns what it found."""
    return infer_bound(sch)


def ScheduleOps(sch: Schedule, bounds: dict | None = None) -> Any:  # noqa: N802 - TVM's name
    """TVM's ``te.schedule.ScheduleOps``: the loop nest of the schedule (its placeholders and outputs as the
    buffers), as :func:`autosched.lower` builds it."""
    return schedule_ops(sch, bounds)


def CreateReadGraph(roots: Sequence[Operation]) -> Map:  # noqa: N802 - TVM's name
    """TVM's ``te.schedule.CreateReadGraph``: every operation ``roots`` depend on -> the tensors it reads."""
    return Map((op, list(op.input_tensors)) for op in _post_order(list(roots)))


def PostDFSOrder(roots: Sequence[Operation], graph: Map) -> list[Operation]:  # noqa: N802 - TVM's name
    """TVM's ``te.schedule.PostDFSOrder``: the operations of ``graph`` below ``roots``, producers first."""
    out: list[Operation] = []
    seen: set[int] = set()

    def visit(op: Operation) -> None:
        if id(op) not in seen:
            seen.add(id(op))
            for t in graph.get(op, []):
                visit(t.op)
            out.append(op)

    for op in roots:
        visit(op)
    return out


def _inlinable(st: Stage) -> bool:
    """A non-output compute without a reduction that nobody has scheduled yet: no loop changed, not computed
    elsewhere, no stage computed at its loops (TVM's auto-inline candidates)."""
    sch = st.sch
    return (isinstance(st.op, ComputeOp) and not st.op.reduce_axis and not st.is_output and not st.relations
            and not st.iter_attrs and st.at_group_root and getattr(st.op, "tensor_intrin_call", None) is None
            and not any(x.attach_stage is st for x in [*sch.stages, *sch.groups]))


def _loads(op: ComputeOp) -> list[TensorLoad]:
    return [x for b in op.bodies for x in walk(b) if isinstance(x, TensorLoad)]


def _elementwise(op: ComputeOp) -> bool:
    """Every read indexes its tensor by the compute's own axes, in order."""
    axes = [a.var for a in op.axis]
    return all(len(ld.indices) == len(axes) and all(i is v for i, v in zip(ld.indices, axes)) for ld in _loads(op))


def _broadcast(op: ComputeOp) -> bool:
    """Every read indexes its tensor by constants and the compute's own axes, those in order."""
    order = {id(a.var): k for k, a in enumerate(op.axis)}
    for ld in _loads(op):
        pos = [order.get(id(i), -1) if not isinstance(i, IntImm) else None for i in ld.indices]
        used = [p for p in pos if p is not None]
        if -1 in used or used != sorted(set(used)):
            return False
    return True


def _auto_inline(sch: Schedule, keep: Any) -> None:
    for st in list(sch.stages):
        if _inlinable(st) and keep(st.op):
            st.compute_inline()


def AutoInlineElemWise(sch: Schedule) -> None:  # noqa: N802 - TVM's name
    """Inline every unscheduled, non-output stage that reads its inputs at its own index (``T1(i, j)``); each
    inlining is a step of the trace."""
    _auto_inline(sch, _elementwise)


def AutoInlineBroadcast(sch: Schedule) -> None:  # noqa: N802 - TVM's name
    """Inline every unscheduled, non-output stage whose reads are elementwise or broadcast (``A(0) * B(i, j)``,
    ``A(j)``)."""
    _auto_inline(sch, _broadcast)


def AutoInlineInjective(sch: Schedule) -> None:  # noqa: N802 - TVM's name
    """Inline every unscheduled, non-output stage that is not a reduction."""
    _auto_inline(sch, lambda op: True)


__all__ = ["ANNOTATIONS", "SCOPES", "AutoInlineBroadcast", "AutoInlineElemWise", "AutoInlineInjective", "Buffer",
           "CreateReadGraph", "Fuse", "FuseRel", "InferBound", "IterVar", "IterVarAttr", "PostDFSOrder", "Schedule",
           "ScheduleOps", "Singleton", "Split", "SplitRel", "Stage", "StageGroup", "create_schedule"]
