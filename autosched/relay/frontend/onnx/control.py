"""ONNX control flow whose course is known when the model is imported: ``If`` on a condition computed from
shapes and constants (exporters write shape checks as If) becomes its taken branch, ``Loop`` with a known
trip count (or a condition known at each step) is unrolled, its scan outputs stacked, and ``Scan`` (a loop over
slices of its inputs, as tf2onnx writes recurrent layers) is unrolled over their static length. A condition or
trip count computed from the inputs at run time is refused: relay's graphs have no branches. Sequences
(SequenceConstruct, SequenceInsert, SplitToSequence, ConcatFromSequence, ...) are lists known at import, of tensors
that may be computed at run time: a list built in a loop is a list of the unrolled steps' tensors."""

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


def _stack(g: _GraphConverter, values: list[Any], axis: int) -> Any:
    """Tensors of one shape (arrays or expressions) stacked on a new axis ``axis``."""
    if all(isinstance(v, np.ndarray) for v in values):
        return np.stack(values, axis=axis)
    exprs = [_expr(v) for v in values]
    shape = list(g._relay_shape(exprs[0]))
    return relay_op.concatenate([relay_op.reshape(e, shape[:axis] + [1] + shape[axis:]) for e in exprs], axis=axis)


def _slice(g: _GraphConverter, value: Any, index: int, axis: int) -> Any:
    """``value[..., index, ...]`` along ``axis``, that axis removed."""
    if isinstance(value, np.ndarray):
        return np.take(value, index, axis=axis)
    shape = list(g._relay_shape(value))
    cut = relay_op.strided_slice(value, [index], [index + 1], axes=[axis])
    return relay_op.reshape(cut, shape[:axis] + shape[axis + 1:])


@register("Scan")
def _scan(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Any]:
    """The body unrolled over the scan inputs' static length: step t reads slice t of each scan input along its
    axis (from the end where its direction is 1), threads the state variables through, and each scan output is
    the steps' values stacked on its axis (in reverse order where its direction is 1)."""
    if g.opset < 9:
        g._fail("Scan before opset 9 (with a batch axis and sequence_lens) is not supported")
    body = attrs["body"]
    m = int(attrs["num_scan_inputs"])
    n = len(node.input) - m
    if n < 0 or len(body.input) != n + m:
        g._fail(f"its body takes {len(body.input)} inputs for {n} state variables and {m} scan inputs")
    k = len(body.output) - n
    scanned = [_value(g, name) for name in node.input[n:]]

    def per_input(key: str, count: int, default: int) -> list[int]:
        values = [int(v) for v in attrs.get(key, [default] * count)]
        if len(values) != count:
            g._fail(f"{key} has {len(values)} values for {count} {'inputs' if 'input' in key else 'outputs'}")
        return values

    in_axes, in_dirs = per_input("scan_input_axes", m, 0), per_input("scan_input_directions", m, 0)
    out_axes, out_dirs = per_input("scan_output_axes", k, 0), per_input("scan_output_directions", k, 0)
    lengths = set()
    for j, value in enumerate(scanned):
        shape = value.shape if isinstance(value, np.ndarray) else g._relay_shape(value)
        if not -len(shape) <= in_axes[j] < len(shape):
            g._fail(f"scan_input_axes[{j}] = {in_axes[j]} is out of range for shape {list(shape)}")
        in_axes[j] %= len(shape)
        lengths.add(int(shape[in_axes[j]]))
    if len(lengths) != 1:
        g._fail(f"the scan inputs have different lengths along their scan axes: {sorted(lengths)}")
    steps = lengths.pop()
    if steps > MAX_UNROLL:
        g._fail(f"it runs {steps} steps, more than autosched unrolls ({MAX_UNROLL})")
    if steps == 0 and k:
        g._fail("a Scan of no steps has no shape to give its scan outputs")
    state = [_value(g, name) for name in node.input[:n]]
    formal = [i.name for i in body.input]
    outputs: list[list[Any]] = [[] for _ in range(k)]
    for t in range(steps):
        bound = dict(zip(formal[:n], state))
        for j, value in enumerate(scanned):
            bound[formal[n + j]] = _slice(g, value, steps - 1 - t if in_dirs[j] else t, in_axes[j])
        outs = g.convert_subgraph(body, bound)
        state = outs[:n]
        for i, v in enumerate(outs[n:]):
            outputs[i].append(v)
    stacked = []
    for i, values in enumerate(outputs):
        rank = len(values[0].shape if isinstance(values[0], np.ndarray) else g._relay_shape(_expr(values[0])))
        if not -(rank + 1) <= out_axes[i] <= rank:
            g._fail(f"scan_output_axes[{i}] = {out_axes[i]} is out of range for outputs of rank {rank}")
        stacked.append(_stack(g, values[::-1] if out_dirs[i] else values, out_axes[i] % (rank + 1)))
    return state + stacked


# ------------------------------------------------------------------ sequences, as lists known at import
class OnnxSequence:
    """An ONNX sequence value: a list, known at import, of tensors (relay expressions, or arrays when known)."""

    def __init__(self, items: list[Any]):
        self.items = list(items)

    def __repr__(self) -> str:
        return f"OnnxSequence({len(self.items)} tensors)"


def _sequence(g: _GraphConverter, name: str) -> list[Any]:
    value = g.exprs.get(name)
    if not isinstance(value, OnnxSequence):
        g._fail(f"input {name!r} is not a sequence")
    return value.items


def _value(g: _GraphConverter, name: str) -> Any:
    """A tensor input as it is known: its array when known at import, else its expression."""
    return g.consts[name] if name in g.consts else (g.initializers[name] if name in g.initializers else
                                                     g.tensor(name))


def _position(g: _GraphConverter, node: onnx.NodeProto, i: int, length: int, default: int, insert: bool) -> int:
    name = g.optional(node, i)
    if name is None:
        return default
    p = int(np.asarray(g.value(name, "the position")).reshape(-1)[0])
    if not -length <= p <= (length if insert else length - 1):
        g._fail(f"position {p} is outside a sequence of {length} tensors")
    return p + length if p < 0 else p


def _expr(v: Any) -> Any:
    return relay_ir.const(v) if isinstance(v, np.ndarray) else v


@register("SequenceEmpty")
def _sequence_empty(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> OnnxSequence:
    return OnnxSequence([])


@register("SequenceConstruct")
def _sequence_construct(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> OnnxSequence:
    return OnnxSequence([_value(g, n) for n in node.input])


@register("SequenceInsert")
def _sequence_insert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> OnnxSequence:
    items = _sequence(g, node.input[0])
    p = _position(g, node, 2, len(items), len(items), insert=True)
    return OnnxSequence(items[:p] + [_value(g, node.input[1])] + items[p:])


@register("SequenceErase")
def _sequence_erase(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> OnnxSequence:
    items = _sequence(g, node.input[0])
    if not items:
        g._fail("erasing from an empty sequence")
    p = _position(g, node, 1, len(items), len(items) - 1, insert=False)
    return OnnxSequence(items[:p] + items[p + 1:])


@register("SequenceAt")
def _sequence_at(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Any:
    items = _sequence(g, node.input[0])
    return items[_position(g, node, 1, len(items), 0, insert=False)]


@register("SequenceLength")
def _sequence_length(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.ndarray:
    return np.array(len(_sequence(g, node.input[0])), np.int64)


@register("ConcatFromSequence")
def _concat_from_sequence(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Any:
    """The tensors joined along ``axis`` (stacked on a new axis there with ``new_axis=1``)."""
    items = _sequence(g, node.input[0])
    if not items:
        g._fail("concatenating an empty sequence")
    axis, new = int(attrs["axis"]), bool(int(attrs.get("new_axis", 0)))
    if all(isinstance(v, np.ndarray) for v in items):
        return np.stack(items, axis=axis) if new else np.concatenate(items, axis=axis)
    exprs = [_expr(v) for v in items]
    if new:
        shape = g._relay_shape(exprs[0])
        at = axis if axis >= 0 else axis + len(shape) + 1
        exprs = [relay_op.reshape(e, shape[:at] + (1,) + shape[at:]) for e in exprs]
        axis = at
    return relay_op.concatenate(exprs, axis=axis)


@register("SplitToSequence")
def _split_to_sequence(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> OnnxSequence:
    """Pieces along ``axis``: of the sizes in ``split`` (one size: pieces of it, the last shorter), or of one
    element each, that axis dropped unless ``keepdims``."""
    x = node.input[0]
    shape = tuple(g.shape(x))
    axis = int(attrs.get("axis", 0)) % len(shape)
    split = g.optional(node, 1)
    keep = True
    if split is None:
        sizes = [1] * shape[axis]
        keep = bool(int(attrs.get("keepdims", 1)))
    else:
        s = np.asarray(g.value(split, "split")).astype(np.int64)
        sizes = [int(v) for v in s.reshape(-1)] if s.ndim else [int(s)] * (shape[axis] // int(s)) + (
            [shape[axis] % int(s)] if shape[axis] % int(s) else [])
    if sum(sizes) != shape[axis]:
        g._fail(f"split sizes {sizes} do not add up to the {shape[axis]} elements of axis {axis}")
    starts = np.cumsum([0] + sizes)
    value = _value(g, x)
    pieces = []
    for begin, end in zip(starts[:-1], starts[1:]):
        if isinstance(value, np.ndarray):
            piece = np.take(value, np.arange(begin, end), axis=axis)
            pieces.append(piece if keep else np.squeeze(piece, axis))
            continue
        piece = relay_op.strided_slice(value, begin=[int(begin)], end=[int(end)], strides=[1], axes=[axis])
        pieces.append(piece if keep else relay_op.reshape(piece, shape[:axis] + shape[axis + 1:]))
    return OnnxSequence(pieces)
