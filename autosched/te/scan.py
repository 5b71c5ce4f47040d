"""``te.scan``: a recurrence over the first dimension (TVM's scan: cumulative sums, RNN cells).

``scan(init, update, state)`` computes ``state[0:k] = init`` and, for ``t`` from ``k`` to the end,
``state[t] = update[t]``, where ``update`` may read ``state`` at earlier steps (``state[t - 1, i]``). The result
is a new tensor per state. Scheduling works as for computes: the stages between the state and the update
(``create_schedule`` puts them inside the scan's time loop) can be split, bound, computed at one another or
inlined; lowering writes ``init`` and ``update`` straight into the scan's output buffer, which is also what
``state`` reads.
"""

from __future__ import annotations

from collections.abc import Sequence

from autosched.te.expr import Var
from autosched.te.tensor import IterVar, Operation, PlaceholderOp, Range, Tensor
from autosched.tir.arith import simplify


class ScanOp(Operation):
    """A scan: outputs shaped like ``state_placeholder``; ``scan_axis`` is the time loop (from the length of
    ``init`` to the length of the state)."""

    def __init__(self, name: str, init: Sequence[Tensor], update: Sequence[Tensor],
                 state_placeholder: Sequence[Tensor], inputs: Sequence[Tensor] = (), tag: str = "",
                 attrs: dict | None = None):
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.init = list(init)
        self.update = list(update)
        self.state_placeholder = list(state_placeholder)
        self.inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)  # TVM takes one tensor too
        self.shapes = [tuple(s.shape) for s in self.state_placeholder]
        self.shape = self.shapes[0]
        self.dtypes = [s.dtype for s in self.state_placeholder]
        self.dtype = self.dtypes[0]
        start = self.init[0].shape[0]
        self.scan_axis = IterVar(Range(start, simplify(self.shape[0] - start)), Var(name + ".idx"), "spatial")
        self.axis = [self.scan_axis]  # the one loop of the scan's own stage
        self.reduce_axis: list[IterVar] = []

    @property
    def num_outputs(self) -> int:
        return len(self.state_placeholder)

    @property
    def input_tensors(self) -> list[Tensor]:
        return self.init + self.update


def scan(init: Tensor | Sequence[Tensor], update: Tensor | Sequence[Tensor],
         state_placeholder: Tensor | Sequence[Tensor], inputs: Sequence[Tensor] | None = None,
         name: str = "scan", tag: str = "", attrs: dict | None = None) -> Tensor | list[Tensor]:
    """The scan of ``update`` over the first dimension, starting from ``init``; ``update`` reads the result of
    earlier steps through ``state_placeholder`` (a ``te.placeholder`` of the result's shape). Lists give a scan
    of several states at once (each update may read every state); the result is then a list of tensors."""
    single = isinstance(init, Tensor)
    init, update, state = ([x] if isinstance(x, Tensor) else list(x) for x in (init, update, state_placeholder))
    if not (len(init) == len(update) == len(state)) or not init:
        raise ValueError(f"scan {name}: give as many init, update and state tensors (got {len(init)}, "
                         f"{len(update)}, {len(state)})")
    for k, (i, u, s) in enumerate(zip(init, update, state)):
        if not isinstance(s.op, PlaceholderOp):
            raise ValueError(f"scan {name}: state {k} ('{s.name}') must be a te.placeholder")
        if len(i.shape) != len(s.shape) or len(u.shape) != len(s.shape):
            raise ValueError(f"scan {name}: init '{i.name}', update '{u.name}' and state '{s.name}' must have the "
                             f"same number of dimensions")
        if i.dtype != s.dtype or u.dtype != s.dtype:
            raise ValueError(f"scan {name}: init, update and state {k} must share a dtype "
                             f"({i.dtype}, {u.dtype}, {s.dtype})")
        for d in range(1, len(s.shape)):
            for t, what in ((i, "init"), (u, "update")):
                if str(simplify(t.shape[d] - s.shape[d])) != "0":
                    raise ValueError(f"scan {name}: dimension {d} of {what} '{t.name}' ({t.shape[d]}) differs "
                                     f"from the state's ({s.shape[d]})")
    if any(str(simplify(i.shape[0] - init[0].shape[0])) != "0" for i in init):
        raise ValueError(f"scan {name}: every init must have the same length in the scan dimension")
    op = ScanOp(name, init, update, state, inputs or [], tag, attrs)
    outs = [op.output(k) for k in range(op.num_outputs)]
    return outs[0] if single else outs


def scan_body(op: ScanOp) -> list[Operation]:
    """The operations inside the scan's time loop: those on a path from a state placeholder to an update."""
    states = {id(s.op) for s in op.state_placeholder}
    reads_state: dict[int, bool] = {}

    def reads(o: Operation) -> bool:
        key = id(o)
        if key not in reads_state:
            reads_state[key] = False
            reads_state[key] = any(id(t.op) in states or reads(t.op) for t in o.input_tensors)
        return reads_state[key]

    body: list[Operation] = []
    seen: set[int] = set()
    stack = [u.op for u in op.update]
    while stack:
        o = stack.pop()
        if id(o) in seen or id(o) in states:
            continue
        seen.add(id(o))
        if reads(o) or any(o is u.op for u in op.update):
            body.append(o)
            stack.extend(t.op for t in o.input_tensors)
    return body


def scan_state_index(op: ScanOp, tensor: Tensor) -> int | None:
    """Which state ``tensor`` (a state placeholder) is, or None."""
    for k, s in enumerate(op.state_placeholder):
        if s.op is tensor.op:
            return k
    return None


__all__ = ["ScanOp", "scan", "scan_body", "scan_state_index"]
