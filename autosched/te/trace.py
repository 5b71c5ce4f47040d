"""Schedule steps and traces: the one representation of a schedule.

Every primitive a user calls on a Stage becomes a Step that names its stage and
axes by position (the stage's index in ``Schedule.stages``, the axis's index in
that stage's current leaf axes). Positions are deterministic, so a trace is
plain data: it serialises to compact JSON (a list of ``[kind, field...]``
lists), is stored in the database, and replays on a fresh schedule of the same
computation to give the same loop nest.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

TRACE_VERSION = 1


@dataclass(frozen=True)
class Step:
    """One schedule primitive applied to one stage."""

    kind: ClassVar[str] = ""
    #: what ``stage`` indexes: ``Schedule.stages`` ("stage") or ``Schedule.groups`` ("group")
    subject: ClassVar[str] = "stage"
    stage: int

    def to_json(self) -> list:
        return [self.kind] + [_plain(getattr(self, f.name)) for f in dataclasses.fields(self)]

    def describe(self) -> str:
        fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self))
        return f"{self.kind}({fields})"


def _plain(x: Any) -> Any:
    return list(x) if isinstance(x, tuple) else x


@dataclass(frozen=True)
class Split(Step):
    """Split leaf ``axis`` into (outer, inner) by an inner ``factor`` or an outer ``nparts``."""

    kind: ClassVar[str] = "split"
    axis: int
    factor: int | None = None
    nparts: int | None = None


@dataclass(frozen=True)
class Reorder(Step):
    """Put the listed leaf axes, in this order, into the positions they occupy."""

    kind: ClassVar[str] = "reorder"
    order: tuple[int, ...]


@dataclass(frozen=True)
class Fuse(Step):
    """Fuse adjacent leaf axes (outermost first) into one."""

    kind: ClassVar[str] = "fuse"
    axes: tuple[int, ...]


@dataclass(frozen=True)
class Annotate(Step):
    """Mark a leaf axis 'parallel', 'vectorize' or 'unroll'."""

    kind: ClassVar[str] = "annotate"
    axis: int
    annotation: str


@dataclass(frozen=True)
class Bind(Step):
    """Bind a leaf axis to a GPU thread index such as 'threadIdx.x'."""

    kind: ClassVar[str] = "bind"
    axis: int
    thread: str


@dataclass(frozen=True)
class ComputeAt(Step):
    """Compute this stage inside ``target``'s loop over its leaf axis ``axis``."""

    kind: ClassVar[str] = "compute_at"
    target: int
    axis: int


@dataclass(frozen=True)
class ComputeInline(Step):
    kind: ClassVar[str] = "compute_inline"


@dataclass(frozen=True)
class ComputeRoot(Step):
    kind: ClassVar[str] = "compute_root"


@dataclass(frozen=True)
class CacheRead(Step):
    """Add a stage copying this stage's output into ``scope`` for the ``readers`` stages."""

    kind: ClassVar[str] = "cache_read"
    scope: str
    readers: tuple[int, ...]


@dataclass(frozen=True)
class CacheWrite(Step):
    """Compute this stage into a new ``scope`` stage and copy it out."""

    kind: ClassVar[str] = "cache_write"
    scope: str


@dataclass(frozen=True)
class TransformLayout(Step):
    """Store this stage's tensor in the layout whose dimensions are ``dims``: ``"i"`` (axis i), ``"i//b"`` and
    ``"i%b"`` (its blocks of b); its readers read the new layout."""

    kind: ClassVar[str] = "transform_layout"
    dims: tuple[str, ...]


@dataclass(frozen=True)
class RFactor(Step):
    """Factor leaf reduction ``axis`` out into a new stage (inserted before this one) whose output has it as
    dimension ``factor_axis``; this stage then reduces that output over it."""

    kind: ClassVar[str] = "rfactor"
    axis: int
    factor_axis: int = 0


@dataclass(frozen=True)
class StorePredicate(Step):
    """Store this stage's results only where ``predicate`` holds (the expression as JSON text:
    :func:`autosched.te.dataflow.predicate_to_json`)."""

    kind: ClassVar[str] = "store_predicate"
    predicate: str


@dataclass(frozen=True)
class SetScope(Step):
    """Keep this stage's buffer in memory ``scope`` ('global', 'shared' or 'local')."""

    kind: ClassVar[str] = "set_scope"
    scope: str


@dataclass(frozen=True)
class Pragma(Step):
    """Attach pragma ``key`` (with ``value``) to leaf ``axis``."""

    kind: ClassVar[str] = "pragma"
    axis: int
    key: str
    value: Any = None


@dataclass(frozen=True)
class StorageAlign(Step):
    """Pad the stride of dimension ``axis`` of this stage's buffer to ``factor * k + offset`` elements."""

    kind: ClassVar[str] = "storage_align"
    axis: int
    factor: int
    offset: int


@dataclass(frozen=True)
class DoubleBuffer(Step):
    """Give this stage's buffer two copies, alternating between iterations of the loop it is computed at."""

    kind: ClassVar[str] = "double_buffer"


@dataclass(frozen=True)
class Prefetch(Step):
    """At the start of each iteration of leaf ``axis``, prefetch what iteration ``axis + offset`` reads of the
    output of stage ``tensor``."""

    kind: ClassVar[str] = "prefetch"
    tensor: int
    axis: int
    offset: int


@dataclass(frozen=True)
class Tensorize(Step):
    """Replace the loops from leaf ``axis`` inward by the tensor intrinsic named ``intrin``."""

    kind: ClassVar[str] = "tensorize"
    axis: int
    intrin: str


@dataclass(frozen=True)
class CreateGroup(Step):
    """Make group ``stage`` (its index in ``Schedule.groups``) of the stages on a path from the ``inputs`` stages
    to the ``outputs`` stages (the inputs too with ``include_inputs``): TVM's ``s.create_group``."""

    kind: ClassVar[str] = "create_group"
    subject: ClassVar[str] = "group"
    outputs: tuple[int, ...]
    inputs: tuple[int, ...]
    include_inputs: bool = False


@dataclass(frozen=True)
class GroupComputeAt(Step):
    """Compute group ``stage`` (every member not computed at another member) inside ``target``'s leaf ``axis``."""

    kind: ClassVar[str] = "group_compute_at"
    subject: ClassVar[str] = "group"
    target: int
    axis: int


@dataclass(frozen=True)
class GroupComputeRoot(Step):
    """Compute group ``stage`` where its own group computes its members (at the top level when it has none)."""

    kind: ClassVar[str] = "group_compute_root"
    subject: ClassVar[str] = "group"


STEP_KINDS: dict[str, type[Step]] = {
    cls.kind: cls
    for cls in (Split, Reorder, Fuse, Annotate, Bind, ComputeAt, ComputeInline, ComputeRoot, CacheRead, CacheWrite,
                RFactor, StorePredicate, SetScope, Pragma, StorageAlign, DoubleBuffer, Prefetch, Tensorize,
                TransformLayout, CreateGroup, GroupComputeAt, GroupComputeRoot)
}


def step_from_json(data: Any) -> Step:
    if not isinstance(data, (list, tuple)) or not data or data[0] not in STEP_KINDS:
        raise ValueError(f"not a schedule step: {data!r} (expected [kind, ...] with kind in {sorted(STEP_KINDS)})")
    cls = STEP_KINDS[data[0]]
    fields = dataclasses.fields(cls)
    values = list(data[1:])
    if len(values) != len(fields):
        raise ValueError(f"step {data!r}: {cls.kind} takes {len(fields)} fields, got {len(values)}")
    args = [tuple(v) if isinstance(v, list) else v for v in values]
    return cls(*args)


class Trace:
    """An ordered list of steps; JSON-serialisable and replayable."""

    __slots__ = ("steps",)

    def __init__(self, steps: Iterable[Step] = ()):
        self.steps: list[Step] = list(steps)

    def append(self, step: Step) -> None:
        self.steps.append(step)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Trace(self.steps[i])
        return self.steps[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Trace) and self.steps == other.steps

    def __hash__(self) -> int:
        return hash(tuple(self.steps))

    def to_json(self) -> list:
        return [s.to_json() for s in self.steps]

    def dumps(self) -> str:
        """Compact canonical JSON text (used as the identity of a candidate)."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @staticmethod
    def from_json(data: Any) -> Trace:
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, list):
            raise ValueError(f"a trace is a JSON list of steps, got {type(data).__name__}")
        return Trace(step_from_json(s) for s in data)

    loads = from_json

    def replay(self, sch: Any) -> Any:
        """Apply every step to ``sch`` (a fresh schedule of the same computation); returns it."""
        for step in self.steps:
            sch.apply(step)
        return sch

    def __repr__(self) -> str:
        return "Trace([\n" + "".join(f"  {s.describe()},\n" for s in self.steps) + "])"
