"""TVM's two-step view of lowering, ``InferBound(s)`` then ``ScheduleOps(s, bounds)``, over autosched's
lowering (which does both in one pass): the loop ranges every stage gets, and the loop nest."""

from __future__ import annotations

from autosched.container import Map
from autosched.te.expr import IntImm, Var, free_vars
from autosched.te.stage import Schedule
from autosched.te.tensor import Range, Tensor
from autosched.tir import stmt as S
from autosched.tir.lower import _Lowerer


def _default_args(sch: Schedule) -> list[Tensor | Var]:
    """The kernel arguments TVM's ScheduleOps assumes: every input placeholder, then every output tensor (and
    the shape variables that only appear inside a dimension's expression)."""
    args: list[Tensor] = [st.op.output(0) for st in sch.stages if st.is_placeholder]
    seen: set[int] = set()
    for op in sch.outputs:
        st = sch[op]  # the outputs of a multi-output compute are listed once each, whichever op was given
        if id(st) not in seen:
            seen.add(id(st))
            args += [st.op.output(k) for k in range(st.op.num_outputs)]
    # a shape variable that no dimension is exactly (a (m * 4, n) input) is passed as a scalar argument
    bare = {id(d) for t in args for d in t.shape if isinstance(d, Var)}
    scalars: dict[int, Var] = {}
    for t in args:
        for d in t.shape:
            for v in free_vars(d):
                if id(v) not in bare:
                    scalars.setdefault(id(v), v)
    return args + list(scalars.values())


def infer_bound(sch: Schedule) -> Map:
    """Every loop axis of every computed stage (root, split, fused) -> its Range: a root spatial axis starts
    at the first index of the region its readers need, every other loop at 0."""
    lw = _Lowerer(sch, _default_args(sch), "main")
    lw.run(partition=False)
    out = Map()
    for st in lw.compute_stages:
        info = lw.infos[id(st)]
        starts = {ax: info.region[d][0] for d, ax in enumerate(st.op.axis)}
        for iv, ext in info.extent.items():
            out[iv] = Range(starts.get(iv, IntImm(0)), ext)
    return out


def schedule_ops(sch: Schedule, bounds: dict | None = None) -> S.Stmt:
    """The loop nest of the whole schedule (the body of the kernel whose arguments are the placeholders and
    the outputs). ``bounds`` is accepted for TVM's signature; lowering infers them again."""
    return _Lowerer(sch, _default_args(sch), "main").run().body


__all__ = ["infer_bound", "schedule_ops"]
