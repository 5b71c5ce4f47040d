"""Facts about a schedule that rules and templates ask: extents, effective readers, reuse, fusibility.

All of it reads the live :class:`~autosched.te.Schedule` (stages, relations,
attach points) and the te expressions; nothing here changes a schedule.
"""

from __future__ import annotations

from typing import Any

from autosched.te import expr as E
from autosched.te.expr import IntImm
from autosched.te.schedule import FuseRel, Schedule, SplitRel, Stage
from autosched.te.tensor import IterVar


def const_int(e: Any) -> int | None:
    if isinstance(e, int):
        return e
    if isinstance(e, IntImm):
        return e.value
    return None


def leaf_extents(stage: Stage) -> dict[IterVar, int | None]:
    """Extents of every axis of ``stage`` derived from its full domain (exact for root-attached stages)."""
    ext: dict[IterVar, int | None] = {}
    for ax in list(stage.op.axis) + list(stage.op.reduce_axis):
        ext[ax] = const_int(ax.dom.extent) if ax.dom is not None else None
    for rel in stage.relations:
        if isinstance(rel, SplitRel):
            e = ext.get(rel.parent)
            if rel.factor is not None:
                ext[rel.inner] = rel.factor if e is None else min(rel.factor, e)
                ext[rel.outer] = None if e is None else -(-e // rel.factor)
            else:
                inner = None if e is None else -(-e // rel.nparts)
                ext[rel.inner] = inner
                ext[rel.outer] = None if e is None or inner is None else -(-e // inner)
        elif isinstance(rel, FuseRel):
            prod: int | None = 1
            for a in rel.axes:
                v = ext.get(a)
                prod = None if prod is None or v is None else prod * v
            ext[rel.fused] = prod
    return ext


def axis_extent(sch: Schedule, axis: IterVar) -> int | None:
    """The extent of ``axis`` (a root axis or one made by split/fuse) in whichever stage owns it."""
    if axis.dom is not None:
        n = const_int(axis.dom.extent)
        if n is not None:
            return n
    for st in sch.stages:
        if any(x is axis for x in st.all_iter_vars):
            return leaf_extents(st).get(axis)
    return None


def leaf_roots(stage: Stage) -> dict[IterVar, set[IterVar]]:
    """For each axis of ``stage``, the root axes it iterates over."""
    roots: dict[IterVar, set[IterVar]] = {ax: {ax} for ax in list(stage.op.axis) + list(stage.op.reduce_axis)}
    for rel in stage.relations:
        if isinstance(rel, SplitRel):
            r = roots.get(rel.parent, set())
            roots[rel.outer] = set(r)
            roots[rel.inner] = set(r)
        else:
            u: set[IterVar] = set()
            for a in rel.axes:
                u |= roots.get(a, set())
            roots[rel.fused] = u
    return roots


def compute_stages(sch: Schedule) -> list[Stage]:
    return [s for s in sch.stages if not s.is_placeholder]


class Dataflow:
    """Effective bodies and readers of a schedule's stages, with inlined stages substituted away.

    Build one after the structure (cache stages, inlining) is settled; it does
    not follow later changes to attach points or loops (those are read live).
    """

    def __init__(self, sch: Schedule):
        self.sch = sch
        self._body: dict[int, E.Expr] = {}
        self.live = [s for s in compute_stages(sch) if s.attach_type != "inline"]
        self._reads: dict[int, list[Stage]] = {}
        for s in self.live:
            seen: dict[int, Stage] = {}
            for node in E.walk(self.body(s)):
                if isinstance(node, E.TensorLoad):
                    p = sch.stage_map.get(node.tensor.op)
                    if p is not None:
                        seen.setdefault(id(p), p)
            self._reads[id(s)] = list(seen.values())

    def body(self, st: Stage) -> E.Expr:
        key = id(st)
        got = self._body.get(key)
        if got is not None:
            return got
        sch = self.sch

        def fn(e):
            if isinstance(e, E.TensorLoad):
                src = sch.stage_map.get(e.tensor.op)
                if src is not None and not src.is_placeholder and src.attach_type == "inline":
                    body = self.body(src)
                    return E.substitute(body, {ax.var: i for ax, i in zip(src.op.axis, e.indices)})
            return None

        out = E.transform(st.op.bodies[0], fn)
        self._body[key] = out
        return out

    def reads(self, st: Stage) -> list[Stage]:
        """Stages (placeholders included) whose output ``st`` reads once inlined stages are substituted."""
        return self._reads.get(id(st), [])

    def readers(self, st: Stage) -> list[Stage]:
        """Non-inlined stages that read ``st``'s output (through inlined stages too)."""
        return [r for r in self.live if any(p is st for p in self._reads[id(r)])]

    def loads(self, reader: Stage, producer: Stage) -> list[tuple[E.Expr, ...]]:
        """The index tuples with which ``reader`` loads ``producer``."""
        out = []
        for node in E.walk(self.body(reader)):
            if isinstance(node, E.TensorLoad) and self.sch.stage_map.get(node.tensor.op) is producer:
                out.append(node.indices)
        return out

    def read_as_dot_operand(self, st: Stage) -> bool:
        """Whether a reader loads ``st``'s output as an operand of a packed dot product
        (``te.expr.PACKED_DOTS``): such a load reads a word of memory, so ``st`` must not be inlined."""
        return any(isinstance(c, E.Call) and c.name in E.PACKED_DOTS and any(
            isinstance(a, E.TensorLoad) and self.sch.stage_map.get(a.tensor.op) is st for a in c.args[1:])
            for r in self.readers(st) for c in E.walk(self.body(r)))

    def has_reuse(self, st: Stage) -> bool:
        """Whether some input of ``st`` is read the same way for different values of a spatial axis
        (a tensor index misses a spatial axis): the data reuse that makes multi-level tiling pay."""
        spatial = {ax.var for ax in st.op.axis}
        for node in E.walk(self.body(st)):
            if isinstance(node, E.TensorLoad):
                used: set = set()
                for i in node.indices:
                    used |= E.free_vars(i)
                if spatial - used:
                    return True
        return False

    def identity_reader(self, producer: Stage, consumer: Stage) -> bool:
        """Whether ``consumer`` has the producer's shape and reads it only at its own axes, in order."""
        if consumer.is_reduction or len(consumer.op.axis) != len(producer.op.axis):
            return False
        for a, b in zip(consumer.op.axis, producer.op.axis):
            if const_int(a.dom.extent) is None or const_int(a.dom.extent) != const_int(b.dom.extent):
                return False
        loads = self.loads(consumer, producer)
        if not loads:
            return False
        own = [ax.var for ax in consumer.op.axis]
        return all(len(idx) == len(own) and all(i is v for i, v in zip(idx, own)) for idx in loads)


def within(reader: Stage, target: Stage, pos: int) -> bool:
    """Whether ``reader`` runs inside ``target``'s loop number ``pos`` (the lowering's compute_at rule)."""
    cur = reader
    while True:
        if cur is target:
            return True
        if cur.attach_type != "scope":
            return False
        if cur.attach_stage is target:
            return leaf_pos(target, cur.attach_ivar) >= pos
        cur = cur.attach_stage


def leaf_pos(stage: Stage, iv: IterVar) -> int:
    for k, x in enumerate(stage.leaf_iter_vars):
        if x is iv:
            return k
    return -1


def consumes(sch: Schedule, consumer: Stage, producer: Stage) -> bool:
    return sch.consumes(consumer, producer)
