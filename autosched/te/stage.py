"""Schedules: one Stage per operation, changed only by replayable steps (TVM's ``te.schedule``; that module,
:mod:`autosched.te.schedule`, re-exports these names beside InferBound and ScheduleOps, which run the lowering).

Each public primitive (``split``, ``reorder``, ...) validates its arguments,
turns them into a :class:`~autosched.te.trace.Step`, and hands the step to
:meth:`Schedule.apply`, which is also what a trace replay calls. So a schedule
written by hand and one produced by search go through exactly the same code.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from typing import Any

from autosched.errors import LoweringError, ScheduleError
from autosched.te.dataflow import (
    layout_dims,
    predicate_from_json,
    predicate_to_json,
    relayout_cache,
    rename_reducer,
    rfactor_ops,
    transform_layout_op,
)
from autosched.te.expr import Expr, IntImm, Reduce, TensorLoad, Var, convert, substitute, transform
from autosched.te.extern import ExternOp
from autosched.te.intrin import TensorIntrin, get_intrin
from autosched.te.scan import ScanOp, scan_body
from autosched.te.tensor import THREAD_TAGS, ComputeOp, IterVar, Operation, PlaceholderOp, Range, Tensor
from autosched.te.trace import (
    Annotate,
    Bind,
    CacheRead,
    CacheWrite,
    ComputeAt,
    ComputeInline,
    ComputeRoot,
    CreateGroup,
    DoubleBuffer,
    GroupComputeAt,
    GroupComputeRoot,
    Pragma,
    Prefetch,
    Reorder,
    RFactor,
    SetScope,
    Step,
    StorageAlign,
    StorePredicate,
    Tensorize,
    Trace,
    TransformLayout,
)
from autosched.te.trace import Fuse as FuseStep
from autosched.te.trace import Split as SplitStep
from autosched.tir.stmt import Buffer as TirBuffer

ANNOTATIONS = ("parallel", "vectorize", "unroll")
SCOPES = ("global", "local", "shared", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")


class SplitRel:
    """parent = outer * inner_extent + inner."""

    __slots__ = ("parent", "outer", "inner", "factor", "nparts")

    def __init__(self, parent: IterVar, outer: IterVar, inner: IterVar, factor: int | None, nparts: int | None):
        self.parent, self.outer, self.inner, self.factor, self.nparts = parent, outer, inner, factor, nparts


class FuseRel:
    """fused enumerates ``axes`` in row-major order."""

    __slots__ = ("axes", "fused")

    def __init__(self, axes: Sequence[IterVar], fused: IterVar):
        self.axes = list(axes)
        self.fused = fused


class Singleton(FuseRel):
    """A new loop of one iteration (``fuse()`` of no axes): TVM's Singleton relation."""

    __slots__ = ()


#: TVM's names for the relations a stage's ``relations`` holds (``te.schedule.Split``, ``Fuse``, ``Singleton``)
Split = SplitRel
Fuse = FuseRel
#: TVM's ``te.schedule.Buffer``: the buffers te.extern and decl_tensor_intrin hand to their bodies
Buffer = TirBuffer


class IterVarAttr:
    """What TVM's ``Stage.iter_var_attrs[axis]`` says of a loop: its ``iter_type`` (an ``IterVar`` constant:
    ``IterVar.Unrolled``, ``Vectorized``, ``Parallelized``, ``ThreadIndex``, ``Tensorized``), its pragmas
    (``pragma_keys[k].value``, ``pragma_values``), the thread it is bound to, the tensor intrinsic."""

    def __init__(self, iter_type: int, pragma_keys: list, pragma_values: list, bind_thread: str | None,
                 tensor_intrin: Any = None):
        self.iter_type = iter_type
        self.pragma_keys = pragma_keys
        self.pragma_values = pragma_values
        self.bind_thread = bind_thread
        self.tensor_intrin = tensor_intrin

    def __repr__(self) -> str:
        return f"IterVarAttr(iter_type={self.iter_type}, pragmas={[k.value for k in self.pragma_keys]})"


class _Str:
    """A string constant as TVM's StringImm shows it (``.value``)."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return self.value == (other.value if isinstance(other, _Str) else other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


class Stage:
    """The schedule of one operation: its loop axes, their relations and annotations, and where it is computed."""

    def __init__(self, sch: Schedule, op: Operation):
        self.sch = sch
        self.op = op
        self.origin_op = op
        self.all_iter_vars: list[IterVar] = list(op.axis) + list(op.reduce_axis)
        self.leaf_iter_vars: list[IterVar] = list(self.all_iter_vars)
        self.relations: list[SplitRel | FuseRel] = []
        self.iter_attrs: dict[IterVar, str] = {}
        self.attach_type = "root"  # 'root' | 'inline' | 'scope'
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.group: StageGroup | None = None  # the innermost group holding this stage (s.create_group, a scan's)
        self.at_group_root = True  # placed where its group is (attach_* follow the group) until compute_at/inline
        self.scope = "global"
        self.is_output = False
        # set by the primitives beyond loop structure (issue 42); each is recorded as a step
        self.store_predicate: Expr | None = None  # stores happen only where it holds
        self.thread_vars: dict[Var, str] = {}  # thread-index variables in store_predicate -> their tags
        self.pragmas: dict[IterVar, list[tuple[str, Any]]] = {}
        self.aligned: dict[int, tuple[int, int]] = {}  # buffer dimension -> (factor, offset)
        self.double_buffered = False
        self.prefetches: list[tuple[Tensor, IterVar, int]] = []
        self.tensorized: tuple[IterVar, Any] | None = None  # (leaf, TensorIntrin) of tensorize
        # a cache_write stage's reduce axes by the original stage's (TVM users split the original ``k`` on it)
        self.axis_aliases: dict[int, IterVar] = {}
        call = getattr(op, "tensor_intrin_call", None)
        if call is not None:  # a compute of a tensor intrinsic on regions: tensorized by definition
            intrin, n_outer, n_red = call
            red = list(op.reduce_axis)
            self.leaf_iter_vars = list(op.axis[:n_outer]) + red[:n_red] + list(op.axis[n_outer:]) + red[n_red:]
            self.tensorized = (op.axis[n_outer], intrin)

    # ------------------------------------------------------------------ info
    @property
    def name(self) -> str:
        return self.op.name

    @property
    def index(self) -> int:
        for i, s in enumerate(self.sch.stages):
            if s is self:
                return i
        raise ScheduleError(f"stage {self.name} is no longer part of its schedule")

    @property
    def iter_var_attrs(self) -> dict[IterVar, IterVarAttr]:
        """TVM's view of the loops' annotations: every annotated, bound, tensorized or pragma'd loop -> its
        :class:`IterVarAttr` (read-only; the schedule's own record is ``iter_attrs`` and ``pragmas``)."""
        kinds = {"unroll": IterVar.Unrolled, "vectorize": IterVar.Vectorized, "parallel": IterVar.Parallelized,
                 "tensorize": IterVar.Tensorized}
        pragmas = getattr(self, "pragmas", {})
        intrins = {self.tensorized[0]: self.tensorized[1]} if self.tensorized is not None else {}
        out = {}
        for iv in self.all_iter_vars:
            ann, prs, intrin = self.iter_attrs.get(iv), pragmas.get(iv, []), intrins.get(iv)
            if ann is None and not prs and intrin is None:
                continue
            thread = ann.split(":", 1)[1] if ann and ann.startswith("thread:") else None
            if intrin is not None:
                kind = IterVar.Tensorized
            elif thread is not None:
                kind = IterVar.ThreadIndex
            elif ann is not None:
                kind = kinds.get(ann, IterVar.DataPar)
            else:
                kind = IterVar.CommReduce if iv.kind == "reduce" else IterVar.DataPar
            out[iv] = IterVarAttr(kind, [_Str(k) for k, _ in prs], [v for _, v in prs], thread, intrin)
        return out

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.op, ComputeOp) and bool(self.op.reduce_axis)

    def __repr__(self) -> str:
        return f"Stage({self.name}, leaves=[{', '.join(iv.name for iv in self.leaf_iter_vars)}])"

    def _leaf_index(self, iv: Any, primitive: str) -> int:
        if not isinstance(iv, IterVar):
            raise ScheduleError(
                f"{primitive} on stage '{self.name}': expected an axis (IterVar), got {iv!r}"
            )
        if all(x is not iv for x in self.all_iter_vars):
            iv = self.axis_aliases.get(id(iv), iv)
        for i, x in enumerate(self.leaf_iter_vars):
            if x is iv:
                return i
        if any(x is iv for x in self.all_iter_vars):
            raise ScheduleError(
                f"{primitive} on stage '{self.name}': axis '{iv.name}' was already split or fused away; "
                f"use one of its current axes ({', '.join(x.name for x in self.leaf_iter_vars)})"
            )
        for other in self.sch.stages:
            if other is not self and any(x is iv for x in other.all_iter_vars):
                raise ScheduleError(
                    f"{primitive} on stage '{self.name}': axis '{iv.name}' belongs to stage '{other.name}', "
                    f"not to '{self.name}'"
                )
        raise ScheduleError(
            f"{primitive} on stage '{self.name}': axis '{iv.name}' is not an axis of this stage "
            f"(its axes are {', '.join(x.name for x in self.leaf_iter_vars)})"
        )

    def _apply(self, step: Step) -> Any:
        return self.sch.apply(step)

    # ------------------------------------------------------------ primitives
    def split(self, parent: IterVar, factor: Any = None, nparts: Any = None) -> tuple[IterVar, IterVar]:
        """Split ``parent`` into (outer, inner) with inner extent ``factor`` or outer extent ``nparts``."""
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split on stage '{self.name}': give exactly one of factor= or nparts=")
        idx = self._leaf_index(parent, "split")
        factor = _positive_int(factor, "factor", self, parent) if factor is not None else None
        nparts = _positive_int(nparts, "nparts", self, parent) if nparts is not None else None
        return self._apply(SplitStep(self.index, idx, factor, nparts))

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor: Any, y_factor: Any):
        """Split two axes and order them (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def reorder(self, *axes: IterVar) -> None:
        """Put these axes, in this order, into the loop positions they occupy."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        idx = [self._leaf_index(a, "reorder") for a in axes]
        if len(set(idx)) != len(idx):
            dup = next(a for i, a in zip(idx, axes) if idx.count(i) > 1)
            raise ScheduleError(
                f"reorder on stage '{self.name}' is not a permutation: axis '{dup.name}' appears more than once"
            )
        self._apply(Reorder(self.index, tuple(idx)))

    def fuse(self, *axes: IterVar) -> IterVar:
        """Fuse adjacent axes (outermost first) into one loop. ``fuse()`` of no axes (a rank-0 tensor's
        ``fuse(*T.op.axis)``) adds a new outermost loop of one iteration, as TVM's does, to split or bind."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        idx = [self._leaf_index(a, "fuse") for a in axes]
        return self._apply(FuseStep(self.index, tuple(idx)))

    def vectorize(self, axis: IterVar) -> None:
        self._apply(Annotate(self.index, self._leaf_index(axis, "vectorize"), "vectorize"))

    def unroll(self, axis: IterVar) -> None:
        self._apply(Annotate(self.index, self._leaf_index(axis, "unroll"), "unroll"))

    def parallel(self, axis: IterVar) -> None:
        self._apply(Annotate(self.index, self._leaf_index(axis, "parallel"), "parallel"))

    def bind(self, axis: IterVar, thread: IterVar | str) -> None:
        """Map a loop to a GPU block/thread index (recorded here; checked by the target's lowering)."""
        tag = thread.thread_tag if isinstance(thread, IterVar) else str(thread)
        self._apply(Bind(self.index, self._leaf_index(axis, "bind"), tag))
        if isinstance(thread, IterVar):  # its variable may appear in a store predicate
            self.sch.thread_tags[thread.var] = tag

    def set_store_predicate(self, predicate: Any) -> None:
        """Store this stage's results only where ``predicate`` holds: an integer condition on this stage's loops
        and on thread indices bound with ``bind`` (``tx.var.equal(0)`` after a cross-thread reduction, so that
        one thread of the group writes the result)."""
        pred = convert(predicate)
        leaves = {iv.var: k for k, iv in enumerate(self.leaf_iter_vars)}
        roots = {iv.var: k for k, iv in enumerate(self.op.axis)}

        def name_var(v: Var) -> list:
            if v in leaves:
                return ["leaf", leaves[v]]
            if v in roots:
                return ["root", roots[v]]
            tag = self.sch.thread_tags.get(v)
            if tag is not None:
                return ["thread", tag]
            raise ScheduleError(
                f"set_store_predicate on stage '{self.name}': variable '{v.name}' is neither a loop of this stage "
                f"nor a thread index bound with bind() (bind the thread axis first)")

        self._apply(StorePredicate(self.index, json.dumps(predicate_to_json(pred, name_var))))

    def compute_at(self, parent: Stage, axis: IterVar) -> None:
        """Compute this stage inside ``parent``'s loop ``axis``, just the region that loop needs."""
        if not isinstance(parent, Stage):
            raise ScheduleError(f"compute_at of stage '{self.name}': parent must be a Stage (s[T]), got {parent!r}")
        idx = parent._leaf_index(axis, "compute_at")
        self._apply(ComputeAt(self.index, parent.index, idx))

    def set_scope(self, scope: str) -> None:
        """Keep this stage's buffer in ``scope``: 'global', 'shared' (one per GPU block, filled by its threads
        together), 'local' (private to a thread) or a tensor-core fragment ('wmma.matrix_a', 'wmma.matrix_b',
        'wmma.accumulator': held by a warp, filled through tensorize). On the CPU every scope is an ordinary
        allocation."""
        self._apply(SetScope(self.index, str(scope)))

    def pragma(self, axis: IterVar, key: str, value: Any = None) -> None:
        """Annotate loop ``axis`` with pragma ``key`` (and ``value``), as TVM's ``Stage.pragma``:

        - ``"unroll"`` / ``"vectorize"`` / ``"parallel"``: the same as ``unroll(axis)`` etc.;
        - ``"auto_unroll_max_step", n``: inside the loop (itself included), every loop of constant extent whose
          unrolled body would run at most ``n`` steps is unrolled; ``"unroll_explicit", False`` on the same loop
          leaves them to LLVM instead (TVM's meaning: a hint instead of an explicit unroll);
        - ``"debug_skip_region"``: the loop's body is not run (TVM's profiling aid: time the rest);
        - ``"parallel_launch_point"``, ``"parallel_stride_pattern"``, ``"parallel_barrier_when_finish"``:
          TVM's thread-pool controls; recorded. autosched's parallel loops are one OpenMP region each that
          every thread leaves together (TVM's barrier when finished), over contiguous chunks, so results are
          the same;
        - any other key is recorded (TVM passes unknown pragmas through to its code generators).
        """
        if key in ("unroll", "vectorize", "parallel"):
            getattr(self, key)(axis)
            return
        if value is not None and not isinstance(value, (bool, int, float, str)):
            value = getattr(value, "value", value)  # a te constant
            if not isinstance(value, (bool, int, float, str)):
                raise ScheduleError(f"pragma on stage '{self.name}', axis '{axis.name}': the value of {key!r} must "
                                    f"be a number or a string, got {value!r}")
        self._apply(Pragma(self.index, self._leaf_index(axis, "pragma"), str(key), value))

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Pad the buffer of this stage so that the stride of dimension ``axis`` (a root axis of the stage) is
        ``factor * k + offset`` elements (TVM: spread the rows of a shared buffer over memory banks)."""
        dims = [k for k, a in enumerate(self.op.axis) if a is axis]
        if not dims:
            raise ScheduleError(f"storage_align on stage '{self.name}': '{getattr(axis, 'name', axis)}' is not one "
                                f"of its root axes ({', '.join(a.name for a in self.op.axis)})")
        self._apply(StorageAlign(self.index, dims[0], int(factor), int(offset)))

    def double_buffer(self) -> None:
        """Give this stage's buffer two copies that alternate between iterations of the loop it is computed at
        (TVM: while one iteration reads one copy, the next fills the other, so a GPU block needs no barrier
        between filling and the previous iteration's reads). The stage must be computed at a loop."""
        self._apply(DoubleBuffer(self.index))

    def prefetch(self, tensor: Tensor, var: IterVar, offset: int) -> None:
        """At the start of each iteration of loop ``var``, prefetch into the cache what iteration
        ``var + offset`` will read of ``tensor`` (``llvm.prefetch``; a hint: results do not change)."""
        if not isinstance(tensor, Tensor):
            raise ScheduleError(f"prefetch on stage '{self.name}': expected the tensor to prefetch, got {tensor!r}")
        src = self.sch[tensor]
        try:
            off = int(offset)
        except (TypeError, ValueError):
            raise ScheduleError(f"prefetch on stage '{self.name}': the offset must be an integer number of "
                                f"iterations, got {offset!r}") from None
        self._apply(Prefetch(self.index, src.index, self._leaf_index(var, "prefetch"), off))

    def tensorize(self, var: IterVar, tensor_intrin: TensorIntrin) -> None:
        """Compute the loops from ``var`` inward with ``tensor_intrin`` (``te.decl_tensor_intrin``): its
        statement runs on the regions of this stage's inputs and output that those loops cover. The intrinsic's
        compute must have the same form as this stage's (checked when lowering), and the regions its shapes."""
        if not isinstance(tensor_intrin, TensorIntrin):
            raise ScheduleError(f"tensorize on stage '{self.name}': expected a te.decl_tensor_intrin, got "
                                f"{tensor_intrin!r}")
        self._apply(Tensorize(self.index, self._leaf_index(var, "tensorize"), tensor_intrin.name))

    def transform_layout(self, mapping: Any) -> list[IterVar]:
        """Store this stage's tensor in another layout: ``mapping`` takes its indices and returns the new ones,
        each an index, ``index // b`` or ``index % b`` (``lambda n, c, y, x: [n, c // 8, y, x, c % 8]``: blocks
        of 8 channels innermost, NCHW8c). The stage then computes over the new dimensions (its loops, which
        are returned) and every reader reads the new layout at the same logical element. Call it before the
        stage's other primitives; an input is given a layout through a ``cache_read`` copy, a reduction
        through ``cache_write`` after reordering its loops."""
        op = self.op
        if self.is_placeholder or not isinstance(op, ComputeOp):
            raise ScheduleError(f"transform_layout of '{self.name}': only a computed stage has a layout of its own; "
                                f"give an input one through s.cache_read(tensor, 'global', readers)")
        self.sch.apply(TransformLayout(self.index, layout_dims(op, mapping)))
        return list(self.op.axis)

    def compute_inline(self) -> None:
        """Substitute this stage's expression into every reader; no buffer, no loop."""
        self._apply(ComputeInline(self.index))

    def compute_root(self) -> None:
        """Compute this stage in full at the top level (the default)."""
        self._apply(ComputeRoot(self.index))


class StageGroup:
    """TVM's stage group (``s.create_group``): stages placed as one. ``compute_at`` of the group computes every
    member that is not computed at another member's loop inside the target's loop; a member may be computed
    at loops of its own group only. A scan's body stages form a group placed in the scan's time loop."""

    def __init__(self, sch: Schedule, members: str):
        self.sch = sch
        self.name = f"group({members})"
        self.group: StageGroup | None = None  # the group holding this one
        self.attach_type = "root"  # 'root': where its own group places it (the top level without one) | 'scope'
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None

    @property
    def index(self) -> int:
        return next(i for i, g in enumerate(self.sch.groups) if g is self)

    @property
    def num_child_stages(self) -> int:
        """How many stages and groups this group holds directly."""
        return sum(x.group is self for x in [*self.sch.stages, *self.sch.groups])

    def stages(self) -> list[Stage]:
        """Every stage inside this group, through the groups it holds too."""
        return [st for st in self.sch.stages if _ancestor(self, st.group)]

    def compute_at(self, parent: Stage, axis: IterVar) -> None:
        """Compute the group's members that are not computed at another member inside ``parent``'s loop ``axis``."""
        if not isinstance(parent, Stage):
            raise ScheduleError(f"compute_at of {self.name}: parent must be a Stage (s[T]), got {parent!r}")
        idx = parent._leaf_index(axis, "compute_at")
        self.sch.apply(GroupComputeAt(self.index, parent.index, idx))

    def compute_root(self) -> None:
        """Compute the group where its own group computes its members (at the top level when it has none)."""
        self.sch.apply(GroupComputeRoot(self.index))

    def __repr__(self) -> str:
        return f"StageGroup({self.name}, stages=[{', '.join(st.name for st in self.stages())}])"


def _ancestor(group: StageGroup, inner: StageGroup | None) -> bool:
    """Whether ``inner`` is ``group`` or lies inside it."""
    while inner is not None and inner is not group:
        inner = inner.group
    return inner is group


def _common_group(a: StageGroup | None, b: StageGroup | None) -> StageGroup | None:
    """The innermost group holding both (None: the top level)."""
    while a is not None and not _ancestor(a, b):
        a = a.group
    return a


def leaf_pos(stage: Stage, iv: IterVar) -> int:
    """Where ``iv`` is among the stage's leaf loops, outermost first (lowering places attached stages and
    guards by it)."""
    for k, x in enumerate(stage.leaf_iter_vars):
        if x is iv:
            return k
    raise LoweringError(f"axis '{iv.name}' is not a loop of stage '{stage.name}'")


def _positive_int(v: Any, what: str, stage: Stage, axis: IterVar) -> int:
    if isinstance(v, IntImm):  # tvm.runtime.convert(3), tir.const(3)
        v = v.value
    try:
        iv = int(v)
    except (TypeError, ValueError):
        iv = None
    if iv is None or iv != v or iv <= 0:
        raise ScheduleError(
            f"split on stage '{stage.name}', axis '{axis.name}': {what} must be a positive integer, got {v!r}"
        )
    return iv


class Schedule:
    """The stages of a computation, in producer-before-consumer order, and the trace that made them."""

    def __init__(self, outputs: Sequence[Operation]):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self.stage_map: dict[Operation, Stage] = {}
        self.trace = Trace()
        self.thread_tags: dict[Var, str] = {}  # variables of thread axes passed to bind -> their tags
        self.groups: list[StageGroup] = []
        for op in _post_order(self.outputs):
            st = Stage(self, op)
            self.stages.append(st)
            self.stage_map[op] = st
        for op in self.outputs:
            self.stage_map[op].is_output = True
        for st in self.stages:  # the stages of a scan's step form a group run inside its time loop
            if isinstance(st.op, ScanOp):
                group = StageGroup(self, st.name)
                group.attach_type, group.attach_stage, group.attach_ivar = "scope", st, st.leaf_iter_vars[0]
                self.groups.append(group)
                for op in scan_body(st.op):
                    self.stage_map[op].group = group
        self._place_group_roots()

    def __getitem__(self, x: Tensor | Operation) -> Stage:
        op = x.op if isinstance(x, Tensor) else x
        st = self.stage_map.get(op)
        if st is None:
            name = getattr(op, "name", repr(op))
            raise ScheduleError(f"'{name}' is not part of this schedule (its stages: {self.stage_names()})")
        return st

    def stage_names(self) -> str:
        return ", ".join(s.name for s in self.stages)

    def stage_of(self, tensor: Tensor) -> Stage:
        return self[tensor]

    # ------------------------------------------------------------- caching
    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Tensor | Operation | Stage]) -> Tensor:
        """Add a stage that copies ``tensor`` into ``scope``; the ``readers`` read the copy instead."""
        if isinstance(readers, (Tensor, Operation, Stage)):
            readers = [readers]
        reader_idx = []
        for r in readers:
            st = r if isinstance(r, Stage) else self[r]
            reader_idx.append(st.index)
        self.apply(CacheRead(self[tensor].index, scope, tuple(reader_idx)))
        return self.stages[self[tensor].index + 1].op.output(0)

    def cache_write(self, tensor: Tensor | Sequence[Tensor], scope: str) -> Tensor | list[Tensor]:
        """Compute ``tensor`` into a new ``scope`` stage; the original stage then copies it out. The outputs of
        a multi-output compute are cached together: pass them all, as a list, and get the list of caches."""
        tensors = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
        if not tensors:
            raise ScheduleError("cache_write of an empty list of tensors")
        st = self[tensors[0]]
        op = st.op
        if any(self[t] is not st for t in tensors):
            raise ScheduleError(f"cache_write of {[t.name for t in tensors]}: the tensors of one call must be the "
                                "outputs of one operation")
        n = getattr(op, "num_outputs", 1)
        if sorted(getattr(t, "value_index", 0) for t in tensors) != list(range(n)) and n > 1:
            raise ScheduleError(f"cache_write of '{st.name}': its {n} outputs are cached together; pass all of "
                                f"them (s.cache_write([{', '.join(op.output(k).name for k in range(n))}], scope))")
        idx = st.index
        self.apply(CacheWrite(idx, scope))
        cache_op = self.stages[idx].op
        if isinstance(tensor, (list, tuple)):
            return [cache_op.output(getattr(t, "value_index", 0)) for t in tensors]
        return cache_op.output(0)

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Factor the reduction loop ``axis`` of ``tensor``'s stage out into a new stage ``<name>.rf`` whose
        output keeps it as dimension ``factor_axis`` (a partial result per value of ``axis``, reduced over
        the other loops); the stage then reduces that output over the new reduction axis
        ``s[tensor].op.reduce_axis[0]``. Each partial result can then run in parallel (a parallel or
        thread-bound loop of the ``.rf`` stage). Returns the ``.rf`` tensor."""
        st = self[tensor]
        self.apply(RFactor(st.index, st._leaf_index(axis, "rfactor"), int(factor_axis)))
        return self.stages[st.index - 1].op.output(0)

    def create_group(self, outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
                     include_inputs: bool = False) -> StageGroup:
        """Group the stages on a path from ``inputs`` to ``outputs`` (``inputs`` too with ``include_inputs``), to
        place them as one with the group's ``compute_at``; groups nest, and a group may not cut through another."""
        outs = [outputs] if isinstance(outputs, (Tensor, Operation)) else list(outputs)
        ins = [inputs] if isinstance(inputs, (Tensor, Operation)) else list(inputs)
        self.apply(CreateGroup(len(self.groups), tuple(self[t].index for t in outs),
                               tuple(self[t].index for t in ins), bool(include_inputs)))
        return self.groups[-1]

    # -------------------------------------------------------- applying steps
    def apply(self, step: Step) -> Any:
        """Apply one step (validating it) and record it in the trace."""
        if step.subject == "group":
            last = len(self.groups) + (step.kind == "create_group")
            if not 0 <= step.stage < last:
                raise ScheduleError(f"{step.describe()}: no group {step.stage} (the schedule has {len(self.groups)})")
            stage = self.groups[step.stage] if step.stage < len(self.groups) else None
        elif not 0 <= step.stage < len(self.stages):
            raise ScheduleError(f"{step.describe()}: no stage {step.stage} (the schedule has {len(self.stages)})")
        else:
            stage = self.stages[step.stage]
        handler = getattr(self, "_apply_" + step.kind)
        result = handler(stage, step)
        self.trace.append(step)
        return result

    def _leaf(self, stage: Stage, i: int, step: Step) -> IterVar:
        if not 0 <= i < len(stage.leaf_iter_vars):
            raise ScheduleError(
                f"{step.describe()}: stage '{stage.name}' has {len(stage.leaf_iter_vars)} axes, no axis {i}"
            )
        return stage.leaf_iter_vars[i]

    def _check_mutable(self, stage: Stage, step: Step) -> None:
        if stage.is_placeholder:
            raise ScheduleError(f"{step.kind} on stage '{stage.name}': it is an input placeholder, it has no loops")
        if isinstance(stage.op, ScanOp):
            raise ScheduleError(f"{step.kind} on stage '{stage.name}': it is a scan, whose time loop runs in order; "
                                f"schedule the stages of its step (its update) instead")
        if isinstance(stage.op, ExternOp):
            raise ScheduleError(f"{step.kind} on stage '{stage.name}': it is a te.extern, whose body is written by "
                                f"hand; it has no loops to schedule")

    def _replace_attach(self, old: IterVar, new: IterVar) -> None:
        for s in [*self.stages, *self.groups]:
            if s.attach_ivar is old:
                s.attach_ivar = new

    def _apply_split(self, stage: Stage, step: SplitStep):
        self._check_mutable(stage, step)
        iv = self._leaf(stage, step.axis, step)
        if (step.factor is None) == (step.nparts is None):
            raise ScheduleError(f"{step.describe()}: exactly one of factor and nparts must be set")
        for v in (step.factor, step.nparts):
            if v is not None and (not isinstance(v, int) or v <= 0):
                raise ScheduleError(
                    f"split on stage '{stage.name}', axis '{iv.name}': factor must be a positive integer, got {v!r}"
                )
        outer = IterVar(None, Var(iv.name + ".outer"), iv.kind)
        inner = IterVar(None, Var(iv.name + ".inner"), iv.kind)
        stage.relations.append(SplitRel(iv, outer, inner, step.factor, step.nparts))
        stage.all_iter_vars += [outer, inner]
        stage.leaf_iter_vars[step.axis : step.axis + 1] = [outer, inner]
        ann = stage.iter_attrs.pop(iv, None)
        if ann is not None:
            stage.iter_attrs[outer] = ann
        if iv in stage.pragmas:
            stage.pragmas[outer] = stage.pragmas.pop(iv)
        self._replace_attach(iv, inner)
        return outer, inner

    def _apply_reorder(self, stage: Stage, step: Reorder):
        self._check_mutable(stage, step)
        axes = [self._leaf(stage, i, step) for i in step.order]
        if len(set(step.order)) != len(step.order):
            dup = next(a for i, a in zip(step.order, axes) if step.order.count(i) > 1)
            raise ScheduleError(
                f"reorder on stage '{stage.name}' is not a permutation: axis '{dup.name}' appears more than once"
            )
        positions = sorted(step.order)
        leaves = list(stage.leaf_iter_vars)
        for pos, iv in zip(positions, axes):
            leaves[pos] = iv
        stage.leaf_iter_vars = leaves

    def _apply_fuse(self, stage: Stage, step: FuseStep):
        self._check_mutable(stage, step)
        axes = [self._leaf(stage, i, step) for i in step.axes]
        if not axes:  # a unit loop, outermost (TVM's Singleton relation)
            unit = IterVar(None, Var("singleton"), "spatial")
            stage.relations.append(Singleton([], unit))
            stage.all_iter_vars.append(unit)
            stage.leaf_iter_vars.insert(0, unit)
            return unit
        if len(axes) == 1:
            return axes[0]
        for a, b, ia, ib in zip(axes, axes[1:], step.axes, step.axes[1:]):
            if ib != ia + 1:
                raise ScheduleError(
                    f"fuse on stage '{stage.name}': axes '{a.name}' and '{b.name}' are not adjacent "
                    f"(positions {ia} and {ib} of {', '.join(x.name for x in stage.leaf_iter_vars)}); "
                    "reorder them first, outermost first"
                )
        kinds = {a.kind for a in axes}
        if len(kinds) > 1:
            raise ScheduleError(
                f"fuse on stage '{stage.name}': cannot fuse reduction and spatial axes together "
                f"({', '.join(f'{a.name}:{a.kind}' for a in axes)})"
            )
        fused = IterVar(None, Var(".".join(a.name for a in axes) + ".fused"), axes[0].kind)
        stage.relations.append(FuseRel(axes, fused))
        stage.all_iter_vars.append(fused)
        stage.leaf_iter_vars[step.axes[0] : step.axes[-1] + 1] = [fused]
        for a in axes:
            ann = stage.iter_attrs.pop(a, None)
            if ann is not None and a is axes[0]:
                stage.iter_attrs[fused] = ann
            for pr in stage.pragmas.pop(a, []):
                stage.pragmas.setdefault(fused, []).append(pr)
            self._replace_attach(a, fused)
        return fused

    def _apply_annotate(self, stage: Stage, step: Annotate):
        self._check_mutable(stage, step)
        iv = self._leaf(stage, step.axis, step)
        if step.annotation not in ANNOTATIONS:
            raise ScheduleError(f"{step.describe()}: unknown annotation, expected one of {ANNOTATIONS}")
        if iv.kind == "reduce" and step.annotation == "parallel":
            raise ScheduleError(
                f"parallel on stage '{stage.name}': axis '{iv.name}' is a reduction axis, which carries a "
                "dependence from one iteration to the next; parallelize a spatial axis (a vectorized reduction "
                "axis is fine: each lane keeps a partial result)"
            )
        prev = stage.iter_attrs.get(iv)
        if prev is not None and prev != step.annotation:
            raise ScheduleError(
                f"{step.annotation} on stage '{stage.name}': axis '{iv.name}' is already marked {prev}"
            )
        stage.iter_attrs[iv] = step.annotation

    def _apply_bind(self, stage: Stage, step: Bind):
        self._check_mutable(stage, step)
        iv = self._leaf(stage, step.axis, step)
        if step.thread not in THREAD_TAGS:
            raise ScheduleError(f"bind on stage '{stage.name}', axis '{iv.name}': unknown thread {step.thread!r}")
        if iv.kind == "reduce" and not step.thread.startswith("threadIdx"):
            raise ScheduleError(
                f"bind on stage '{stage.name}': axis '{iv.name}' is a reduction axis; it can be bound to a "
                f"threadIdx (a cross-thread reduction), not to {step.thread}"
            )
        stage.iter_attrs[iv] = "thread:" + step.thread

    def _apply_store_predicate(self, stage: Stage, step: StorePredicate):
        self._check_mutable(stage, step)
        thread_vars: dict[str, Var] = {}

        def var_of(ref: list) -> Var:
            if ref[0] == "leaf":
                return self._leaf(stage, ref[1], step).var
            if ref[0] == "root":
                return stage.op.axis[ref[1]].var
            if ref[0] == "thread":
                return thread_vars.setdefault(ref[1], Var(ref[1]))
            raise ScheduleError(f"{step.describe()}: unknown variable reference {ref!r}")

        try:
            pred = predicate_from_json(json.loads(step.predicate), var_of)
        except (ValueError, TypeError, IndexError, KeyError) as e:
            raise ScheduleError(f"{step.describe()}: not a predicate ({e})") from None
        stage.store_predicate = pred
        stage.thread_vars = {v: tag for tag, v in thread_vars.items()}

    def _apply_compute_at(self, stage: Stage, step: ComputeAt):
        self._check_mutable(stage, step)
        if not 0 <= step.target < len(self.stages):
            raise ScheduleError(f"{step.describe()}: no stage {step.target}")
        target = self.stages[step.target]
        iv = self._leaf(target, step.axis, step)
        if target is stage:
            raise ScheduleError(f"compute_at of stage '{stage.name}' at its own axis '{iv.name}'")
        if target.attach_type == "inline":
            raise ScheduleError(
                f"compute_at of stage '{stage.name}' at axis '{iv.name}' of '{target.name}': "
                f"'{target.name}' is inlined and has no loops"
            )
        self._check_in_group(stage, target, iv)
        if not self.consumes(target, stage):
            raise ScheduleError(
                f"compute_at of stage '{stage.name}' at axis '{iv.name}' of stage '{target.name}': "
                f"'{target.name}' does not read '{stage.name}', so this is outside the consumer's loop nest "
                f"(readers of '{stage.name}': {', '.join(s.name for s in self.readers(stage)) or 'none'})"
            )
        stage.attach_type = "scope"
        stage.attach_stage = target
        stage.attach_ivar = iv
        stage.at_group_root = False

    def _check_in_group(self, x: Stage | StageGroup, target: Stage, iv: IterVar) -> None:
        """A member of a group is computed at loops of its group's stages only."""
        if x.group is not None and not _ancestor(x.group, target.group):
            raise ScheduleError(f"compute_at of '{x.name}' at axis '{iv.name}' of stage '{target.name}': "
                                f"'{x.name}' is in {x.group.name} and '{target.name}' is not; a member of a group is "
                                f"computed at the loops of its group's stages (or compute_at the group itself)")

    def _group_place(self, group: StageGroup | None) -> tuple[str, Stage | None, IterVar | None]:
        """Where a member at its group's root is computed: where the innermost placed group around it is."""
        while group is not None and group.attach_type == "root":
            group = group.group
        return ("root", None, None) if group is None else (group.attach_type, group.attach_stage, group.attach_ivar)

    def _place_group_roots(self) -> None:
        """Give every stage at its group's root the group's place (after a group moved or a stage joined one)."""
        for st in self.stages:
            if st.group is not None and st.at_group_root:
                st.attach_type, st.attach_stage, st.attach_ivar = self._group_place(st.group)

    def _apply_create_group(self, _: None, step: CreateGroup):
        ends = [*step.outputs, *step.inputs]
        if any(not 0 <= i < len(self.stages) for i in ends):
            raise ScheduleError(f"{step.describe()}: no stage {next(i for i in ends if not 0 <= i < len(self.stages))}")
        members = _between(self, [self.stages[i] for i in step.outputs], [self.stages[i] for i in step.inputs],
                           step.include_inputs)
        where = (f"create_group(outputs=[{', '.join(self.stages[i].name for i in step.outputs)}], "
                 f"inputs=[{', '.join(self.stages[i].name for i in step.inputs)}])")
        if not members:
            raise ScheduleError(f"{where}: no stage lies on a path from the inputs to the outputs")
        chosen = {id(st) for st in members}
        parent = members[0].group
        for st in members[1:]:
            parent = _common_group(parent, st.group)
        group = StageGroup(self, ", ".join(st.name for st in members))
        group.group = parent
        for g in self.groups:  # a group inside the region moves in whole; one that only overlaps it is refused
            inside = [st for st in g.stages() if id(st) in chosen]
            if inside and not _ancestor(g, parent):  # then g lies inside parent
                if len(inside) != len(g.stages()):
                    raise ScheduleError(f"{where}: it would cut {g.name} in two (its stages "
                                        f"{', '.join(st.name for st in g.stages() if id(st) not in chosen)} are "
                                        f"not in the region); a group holds other groups whole")
                if g.group is parent:
                    g.group = group
        for st in members:
            if st.group is parent:
                st.group = group
        for st in members:  # a member computed at a loop outside the group now goes where the group goes
            if st.attach_type == "scope" and not st.at_group_root and not _ancestor(group, st.attach_stage.group):
                warnings.warn(f"{where}: '{st.name}' was computed at a loop of '{st.attach_stage.name}', outside "
                              f"the group; it is now computed where the group is", stacklevel=4)
                st.at_group_root = True
        self.groups.append(group)
        self._place_group_roots()

    def _join_group(self, new: Stage, origin: Stage) -> None:
        """A stage made from another (cache, rfactor) is in its group, placed at the group's root."""
        new.group = origin.group
        new.attach_type, new.attach_stage, new.attach_ivar = self._group_place(new.group)

    def _apply_group_compute_at(self, group: StageGroup, step: GroupComputeAt):
        if not 0 <= step.target < len(self.stages):
            raise ScheduleError(f"{step.describe()}: no stage {step.target}")
        target = self.stages[step.target]
        iv = self._leaf(target, step.axis, step)
        if _ancestor(group, target.group):
            raise ScheduleError(f"compute_at of {group.name} at axis '{iv.name}' of stage '{target.name}': "
                                f"'{target.name}' is inside the group")
        if target.attach_type == "inline":
            raise ScheduleError(f"compute_at of {group.name} at axis '{iv.name}' of '{target.name}': "
                                f"'{target.name}' is inlined and has no loops")
        if not any(self.consumes(target, st) for st in group.stages()):
            raise ScheduleError(f"compute_at of {group.name} at axis '{iv.name}' of stage '{target.name}': "
                                f"'{target.name}' reads none of the group's stages")
        self._check_in_group(group, target, iv)
        group.attach_type, group.attach_stage, group.attach_ivar = "scope", target, iv
        self._place_group_roots()

    def _apply_group_compute_root(self, group: StageGroup, step: GroupComputeRoot):
        group.attach_type, group.attach_stage, group.attach_ivar = "root", None, None
        self._place_group_roots()

    def _apply_double_buffer(self, stage: Stage, step: DoubleBuffer):
        self._check_mutable(stage, step)
        stage.double_buffered = True

    def _apply_prefetch(self, stage: Stage, step: Prefetch):
        self._check_mutable(stage, step)
        iv = self._leaf(stage, step.axis, step)
        if not 0 <= step.tensor < len(self.stages):
            raise ScheduleError(f"{step.describe()}: no stage {step.tensor}")
        src = self.stages[step.tensor]
        if not any(self.stage_map.get(t.op) is src for t in _reads(stage.op)):
            raise ScheduleError(f"prefetch on stage '{stage.name}', axis '{iv.name}': the stage does not read "
                                f"'{src.name}'")
        stage.prefetches.append((src.op.output(0), iv, step.offset))

    def _apply_tensorize(self, stage: Stage, step: Tensorize):
        self._check_mutable(stage, step)
        iv = self._leaf(stage, step.axis, step)
        intrin = get_intrin(step.intrin)
        if not isinstance(stage.op, ComputeOp):
            raise ScheduleError(f"tensorize on stage '{stage.name}': only a te.compute can be tensorized")
        for other in stage.leaf_iter_vars[step.axis:]:
            if other in stage.iter_attrs:
                raise ScheduleError(f"tensorize on stage '{stage.name}' at axis '{iv.name}': loop '{other.name}' "
                                    f"inside it is marked {stage.iter_attrs[other]}; the intrinsic replaces it")
        stage.tensorized = (iv, intrin)

    def _apply_set_scope(self, stage: Stage, step: SetScope):
        self._check_mutable(stage, step)
        if step.scope not in SCOPES:
            raise ScheduleError(f"set_scope of stage '{stage.name}': unknown scope {step.scope!r}, expected {SCOPES}")
        stage.scope = step.scope

    def _apply_pragma(self, stage: Stage, step: Pragma):
        self._check_mutable(stage, step)
        iv = self._leaf(stage, step.axis, step)
        if step.key == "auto_unroll_max_step" and not (isinstance(step.value, int) and step.value >= 0):
            raise ScheduleError(f"pragma auto_unroll_max_step on stage '{stage.name}', axis '{iv.name}': the value "
                                f"must be a non-negative integer, got {step.value!r}")
        stage.pragmas.setdefault(iv, []).append((step.key, step.value))

    def _apply_storage_align(self, stage: Stage, step: StorageAlign):
        self._check_mutable(stage, step)
        if not 0 <= step.axis < len(stage.op.axis):
            raise ScheduleError(f"{step.describe()}: stage '{stage.name}' has {len(stage.op.axis)} dimensions")
        if step.factor <= 0 or not 0 <= step.offset < step.factor:
            raise ScheduleError(f"storage_align on stage '{stage.name}', axis '{stage.op.axis[step.axis].name}': "
                                f"need factor > 0 and 0 <= offset < factor, got {step.factor}, {step.offset}")
        stage.aligned[step.axis] = (step.factor, step.offset)

    def _apply_compute_inline(self, stage: Stage, step: ComputeInline):
        self._check_mutable(stage, step)
        if stage.is_reduction:
            raise ScheduleError(
                f"compute_inline of stage '{stage.name}': it is a reduction (over "
                f"{', '.join(a.name for a in stage.op.reduce_axis)}); only elementwise stages can be inlined"
            )
        if stage.is_output:
            raise ScheduleError(f"compute_inline of stage '{stage.name}': it is an output of the schedule")
        for s in [*self.stages, *self.groups]:
            if s.attach_stage is stage:
                raise ScheduleError(
                    f"compute_inline of stage '{stage.name}': '{s.name}' is computed at its axis "
                    f"'{s.attach_ivar.name}'"
                )
        stage.attach_type = "inline"
        stage.attach_stage = stage.attach_ivar = None
        stage.at_group_root = False

    def _apply_compute_root(self, stage: Stage, step: ComputeRoot):
        self._check_mutable(stage, step)
        stage.at_group_root = True  # in a group (a scan's too), the root is where the group is computed
        stage.attach_type, stage.attach_stage, stage.attach_ivar = self._group_place(stage.group)

    def _apply_cache_read(self, stage: Stage, step: CacheRead):
        if step.scope not in SCOPES:
            raise ScheduleError(f"cache_read of '{stage.name}': unknown scope {step.scope!r}, expected {SCOPES}")
        readers = []
        for i in step.readers:
            if not 0 <= i < len(self.stages):
                raise ScheduleError(f"{step.describe()}: no stage {i}")
            r = self.stages[i]
            if not any(self.stage_map.get(t.op) is stage for t in _reads(r.op)):
                raise ScheduleError(f"cache_read of '{stage.name}': stage '{r.name}' does not read it")
            readers.append(r)
        shape = stage.op.shape
        axes = [IterVar(Range(0, d), Var(f"ax{i}"), "spatial") for i, d in enumerate(shape)]
        src = stage.origin_op.output(0)
        cache_op = ComputeOp(f"{stage.name}.{step.scope}", axes, TensorLoad(src, [a.var for a in axes]))
        cache_tensor = cache_op.output(0)
        for r in readers:
            new_op = _replace_reads(r.op, lambda t: t.op is not None and self.stage_map.get(t.op) is stage,
                                    cache_tensor)
            self.stage_map[new_op] = r
            r.op = new_op
        cst = Stage(self, cache_op)
        cst.scope = step.scope
        self._join_group(cst, stage)
        self.stages.insert(stage.index + 1, cst)
        self.stage_map[cache_op] = cst
        return cache_tensor

    def _apply_cache_write(self, stage: Stage, step: CacheWrite):
        self._check_mutable(stage, step)
        if step.scope not in SCOPES:
            raise ScheduleError(f"cache_write of '{stage.name}': unknown scope {step.scope!r}, expected {SCOPES}")
        from_op = getattr(stage.op, "tensor_intrin_call", None) is not None and not stage.relations
        if stage.iter_attrs or stage.attach_type != "root" or stage.pragmas or (stage.tensorized and not from_op):
            raise ScheduleError(
                f"cache_write of '{stage.name}': call it before annotating, binding or computing the stage at "
                f"another's loop (split, fuse and reorder may come first: the cache is then laid out by them)"
            )
        op = stage.op
        assert isinstance(op, ComputeOp)
        if stage.relations or any(a is not b for a, b in zip(stage.leaf_iter_vars, stage.all_iter_vars)):
            cache_op, copy_op = relayout_cache(stage, step.scope)
            return self._install_cache(stage, step, cache_op, copy_op)
        new_axis = [IterVar(Range(0, a.dom.extent), Var(a.name + ".c"), "spatial") for a in op.axis]
        vmap: dict[Var, Any] = {a.var: b.var for a, b in zip(op.axis, new_axis)}
        bodies = list(op.bodies)  # every output of a multi-output compute (a tuple reduction's values too)
        if isinstance(bodies[0], Reduce):
            # a reduce range may depend on a spatial axis (a triangular sum): rename it there too
            new_raxis = [IterVar(Range(substitute(a.dom.min, vmap), substitute(a.dom.extent, vmap)),
                                 Var(a.name + ".c"), "reduce") for a in bodies[0].axis]
            vmap.update({a.var: b.var for a, b in zip(bodies[0].axis, new_raxis)})
            combiner = rename_reducer(bodies[0].combiner, {a.var: b.var for a, b in zip(op.axis, new_axis)})
            sources = [substitute(x, vmap) for x in bodies[0].sources]
            cond = bodies[0].condition
            cond = substitute(cond, vmap) if cond is not None else None
            bodies = [Reduce(combiner, sources[b.value_index], new_raxis, cond,
                             sources if len(sources) > 1 else None, b.value_index) for b in bodies]
        else:
            bodies = [substitute(b, vmap) for b in bodies]
        multi = len(bodies) > 1
        cache_op = ComputeOp(f"{op.name}.{step.scope}", new_axis, bodies if multi else bodies[0], op.tag, op.attrs)
        copies = [TensorLoad(cache_op.output(k), [a.var for a in op.axis]) for k in range(len(bodies))]
        copy_op = ComputeOp(op.name, op.axis, copies if multi else copies[0], op.tag, op.attrs)
        if from_op:  # a compute of a tensor intrinsic: the cache computes it, the stage copies
            cache_op.tensor_intrin_call = op.tensor_intrin_call
        out = self._install_cache(stage, step, cache_op, copy_op)
        self.stage_map[cache_op].axis_aliases = {id(a): b for a, b in zip(op.reduce_axis, cache_op.reduce_axis)}
        return out

    def _install_cache(self, stage: Stage, step: CacheWrite, cache_op: ComputeOp, copy_op: ComputeOp) -> Tensor:
        """The stage now copies from ``cache_op``'s stage, inserted before it; its loops start afresh."""
        self.stage_map[copy_op] = stage
        stage.op = copy_op
        stage.all_iter_vars = list(copy_op.axis)
        stage.leaf_iter_vars = list(copy_op.axis)
        stage.relations = []
        stage.tensorized = None
        cst = Stage(self, cache_op)
        cst.scope = step.scope
        self._join_group(cst, stage)
        self.stages.insert(stage.index, cst)
        self.stage_map[cache_op] = cst
        return cache_op.output(0)

    def _apply_transform_layout(self, stage: Stage, step: TransformLayout):
        self._check_mutable(stage, step)
        where = f"transform_layout of '{stage.name}'"
        if stage.is_output:
            raise ScheduleError(f"{where}: it is an output of the schedule, whose layout its caller sees; "
                                f"cache_write it and lay out the cache by its loops instead")
        if (stage.relations or stage.iter_attrs or stage.attach_type != "root" or stage.pragmas
                or any(s.attach_stage is stage for s in self.stages)):
            raise ScheduleError(f"{where}: call it before splitting, annotating or attaching the stage, or "
                                f"computing another stage at its loops")
        new_op, remap = transform_layout_op(stage.op, tuple(step.dims))
        new_tensor = new_op.output(0)

        def reads(e):
            if isinstance(e, TensorLoad) and e.tensor.op is not None and self.stage_map.get(e.tensor.op) is stage:
                return TensorLoad(new_tensor, remap([convert(i) for i in e.indices]))
            return None

        for r in self.readers(stage):
            old = r.op
            bodies = [transform(b, reads) for b in old.bodies]
            new = ComputeOp(old.name, old.axis, bodies if len(bodies) > 1 else bodies[0], old.tag, old.attrs)
            if getattr(old, "tensor_intrin_call", None) is not None:
                new.tensor_intrin_call = old.tensor_intrin_call
            self.stage_map[new] = r
            r.op = new
        self.stage_map[new_op] = stage
        stage.op = stage.origin_op = new_op
        stage.all_iter_vars = list(new_op.axis)
        stage.leaf_iter_vars = list(new_op.axis)
        return new_tensor

    def _apply_rfactor(self, stage: Stage, step: RFactor):
        self._check_mutable(stage, step)
        iv = self._leaf(stage, step.axis, step)
        if stage.attach_type == "inline":
            raise ScheduleError(f"rfactor of stage '{stage.name}': it is inlined")
        for s in self.stages:
            if s.attach_stage is stage:
                raise ScheduleError(
                    f"rfactor of stage '{stage.name}' at axis '{iv.name}': stage '{s.name}' is computed at its "
                    f"axis '{s.attach_ivar.name}'; call rfactor before compute_at into this stage")
        rf_op, repl = rfactor_ops(stage, iv, step.factor_axis)
        self.stage_map[repl] = stage
        stage.op = repl
        stage.all_iter_vars = list(repl.axis) + list(repl.reduce_axis)
        stage.leaf_iter_vars = list(stage.all_iter_vars)
        stage.relations = []
        stage.iter_attrs = {}
        rst = Stage(self, rf_op)
        self._join_group(rst, stage)
        self.stages.insert(stage.index, rst)
        self.stage_map[rf_op] = rst
        return rf_op.output(0)

    # ---------------------------------------------------------- dataflow
    def readers(self, stage: Stage) -> list[Stage]:
        """Stages whose current expression reads ``stage``'s output."""
        out = []
        for s in self.stages:
            if s is stage or s.is_placeholder:
                continue
            if any(self.stage_map.get(t.op) is stage for t in _reads(s.op)):
                out.append(s)
        return out

    def consumes(self, consumer: Stage, producer: Stage) -> bool:
        """Whether ``consumer`` reads ``producer``, directly or through intermediate stages."""
        seen = set()
        todo = [producer]
        while todo:
            p = todo.pop()
            for r in self.readers(p):
                if r is consumer:
                    return True
                if id(r) not in seen:
                    seen.add(id(r))
                    todo.append(r)
        return False

    def normalize(self) -> Schedule:
        """TVM's ``normalize`` (rebase every loop to start at 0): autosched's loops always start at 0, so the
        schedule is returned as it is."""
        return self

    def __repr__(self) -> str:
        return f"Schedule(stages=[{self.stage_names()}], steps={len(self.trace)})"


def _reads(op: Operation) -> list[Tensor]:
    return op.input_tensors if isinstance(op, ComputeOp) else []


def _replace_reads(op: ComputeOp, pred, new_tensor: Tensor) -> ComputeOp:
    def fn(e):
        if isinstance(e, TensorLoad) and pred(e.tensor):
            return TensorLoad(new_tensor, e.indices)
        return None

    bodies = [transform(b, fn) for b in op.bodies]  # every output of a multi-output compute
    new = ComputeOp(op.name, op.axis, bodies if len(bodies) > 1 else bodies[0], op.tag, op.attrs)
    if getattr(op, "tensor_intrin_call", None) is not None:  # still a compute of a tensor intrinsic
        new.tensor_intrin_call = op.tensor_intrin_call
    return new


def _between(sch: Schedule, outputs: list[Stage], inputs: list[Stage], include_inputs: bool) -> list[Stage]:
    """The stages on a path from an ``inputs`` stage to an ``outputs`` stage (TVM's ``GetSubGraph``), in the
    schedule's order; the inputs themselves with ``include_inputs``."""
    bounds = {id(st) for st in inputs}
    reaches: dict[int, bool] = {}

    def reach(st: Stage) -> bool:
        if id(st) not in reaches:
            reaches[id(st)] = id(st) in bounds
            if id(st) not in bounds:
                producers = [sch.stage_map[t.op] for t in _reads(st.op) if t.op in sch.stage_map]
                reaches[id(st)] = any([reach(p) for p in producers])
        return reaches[id(st)]

    for st in outputs:
        reach(st)
    return [st for st in sch.stages if reaches.get(id(st)) and (include_inputs or id(st) not in bounds)]


def _post_order(outputs: Sequence[Operation]) -> list[Operation]:
    order: list[Operation] = []
    seen: set[int] = set()
    for root in outputs:
        stack: list[tuple[Operation, bool]] = [(root, False)]
        while stack:
            op, done = stack.pop()
            if done:
                order.append(op)
                continue
            if id(op) in seen:
                continue
            seen.add(id(op))
            stack.append((op, True))
            for t in reversed(op.input_tensors):
                if id(t.op) not in seen:
                    stack.append((t.op, False))
    return order


def create_schedule(ops: Operation | Tensor | Sequence[Operation | Tensor]) -> Schedule:
    """A default schedule (every stage computed at the root in its natural loop order)."""
    if not isinstance(ops, (list, tuple)):
        ops = [ops]
    out = []
    for o in ops:
        if isinstance(o, Tensor):
            o = o.op
        if not isinstance(o, Operation):
            raise TypeError(f"create_schedule expects operations or tensors, got {o!r}")
        out.append(o)
    return Schedule(out)
