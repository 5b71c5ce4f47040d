"""ONNX control flow whose course is known when the model is imported: ``If`` on a condition computed from
shapes and constants (exporters write shape checks as If) becomes its taken branch, and ``Loop`` with a known
trip count (or a condition known at each step) is unrolled, its scan outputs stacked. A condition or trip count
computed from the inputs at run time is refused: relay's graphs have no branches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import register

if TYPE_CHECKING:  # pragma: no cover
    import onnx

#: the most iterations a Loop is unrolled to
MAX_UNROLL = 1024


def _known_bool(g: _GraphConverter, name: str, what: str) -> bool:
    if not g.is_const(name):
        g._fail(f"{what} ({name!r}) is computed from the inputs at run time; only control flow decided at import "
                f"(shape checks, constant trip counts) is supported")
    return bool(np.asarray(g.value(name, what)).reshape(-1)[0])


@register("If")
def _if(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Any]:
    """The branch the import-time condition takes, converted in place."""
    taken = _known_bool(g, node.input[0], "the condition")
    return g.convert_subgraph(attrs["then_branch" if taken else "else_branch"])


@register("Loop")
def _loop(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Any]:
    """The body repeated for the known trip count ``M`` (or while its condition, known at each step, holds), the
    loop-carried values threaded through; each scan output is the iterations' values stacked on a new axis 0."""
    body = attrs["body"]
    trips = g.optional(node, 0)
    limit = int(np.asarray(g.value(trips, "the trip count M")).reshape(-1)[0]) if trips is not None else None
    cond = g.optional(node, 1)
    going = _known_bool(g, cond, "the loop condition") if cond is not None else True
    if limit is None and cond is None:
        g._fail("a Loop with neither a trip count nor a condition runs forever")
    carried: list[Any] = [g.consts[n] if n in g.consts else g.tensor(n) for n in node.input[2:]]
    n_carried = len(carried)
    formal = [i.name for i in body.input]
    if len(formal) != 2 + n_carried or len(body.output) < 1 + n_carried:
        g._fail(f"its body takes {len(formal)} inputs and gives {len(body.output)} outputs for {n_carried} "
                f"loop-carried values")
    scans: list[list[Any]] = [[] for _ in range(len(body.output) - 1 - n_carried)]
    i = 0
    while going and (limit is None or i < limit):
        if i >= MAX_UNROLL:
            g._fail(f"it runs more than {MAX_UNROLL} iterations, more than autosched unrolls")
        bound = {formal[0]: np.array(i, np.int64), formal[1]: np.array(True)}
        bound.update(zip(formal[2:], carried))
        outs = g.convert_subgraph(body, bound)
        going = _known_bool(g, body.output[0].name, "the body's condition output")
        carried = outs[1:1 + n_carried]
        for k, v in enumerate(outs[1 + n_carried:]):
            scans[k].append(v)
        i += 1
    stacked = []
    for k, values in enumerate(scans):
        if not values:
            g._fail(f"scan output {k} of a loop that ran no iteration has no shape to give")
        if all(isinstance(v, np.ndarray) for v in values):
            stacked.append(np.stack(values))
            continue
        exprs = [relay_ir.const(v) if isinstance(v, np.ndarray) else v for v in values]
        shape = g._relay_shape(exprs[0])
        stacked.append(relay_op.concatenate([relay_op.reshape(e, (1, *shape)) for e in exprs], axis=0))
    return carried + stacked
