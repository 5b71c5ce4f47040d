"""ONNX converters of the ops that move or reshape data: reshape, transpose, concat, pad, split, slice, resize,
and reductions over axes."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import register
from autosched.relay.ir.expr import Expr, RelayError

if TYPE_CHECKING:  # pragma: no cover
    import onnx


@register("Reshape")
def _reshape(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    if g.opset < 5:
        newshape = [int(d) for d in attrs["shape"]]
    else:
        newshape = [int(d) for d in np.asarray(g.value(node.input[1], "the target shape")).reshape(-1)]
    if attrs.get("allowzero", 0) and 0 in newshape:
        g._fail(f"allowzero=1 with a 0 in the shape {newshape} (an empty tensor) is not supported")
    return relay_op.reshape(g.tensor(node.input[0]), tuple(newshape))


@register("Flatten")
def _flatten(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    shape = g.shape(node.input[0])
    axis = int(attrs.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    x = g.tensor(node.input[0])
    if axis == 1 and len(shape) >= 2:
        return relay_op.nn.batch_flatten(x)
    return relay_op.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))


def _axes(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, since: int) -> list[int] | None:
    """The ``axes`` of Squeeze/Unsqueeze/ReduceMean: an attribute before opset ``since``, a constant input from it."""
    if g.opset < since:
        return [int(a) for a in attrs["axes"]] if "axes" in attrs else None
    name = g.optional(node, 1)
    return [int(a) for a in np.asarray(g.value(name, "axes")).reshape(-1)] if name else None


@register("Unsqueeze")
def _unsqueeze(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """A reshape to the static shape with the new unit axes (constant inputs are evaluated at import instead)."""
    shape = list(g.shape(node.input[0]))
    axes = _axes(g, node, attrs, 13)
    if axes is None:
        g._fail("the axes are required")
    rank = len(shape) + len(axes)
    for a in sorted(a % rank for a in axes):
        shape.insert(a, 1)
    return relay_op.reshape(g.tensor(node.input[0]), tuple(shape))


@register("Squeeze")
def _squeeze(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    shape = g.shape(node.input[0])
    axes = _axes(g, node, attrs, 13)
    drop = {a % len(shape) for a in axes} if axes is not None else {i for i, d in enumerate(shape) if d == 1}
    if any(shape[a] != 1 for a in drop):
        g._fail(f"cannot squeeze axes {sorted(drop)} of shape {shape}: not all of size 1")
    return relay_op.reshape(g.tensor(node.input[0]), tuple(d for i, d in enumerate(shape) if i not in drop))


_REDUCE = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod"}
#: the reductions of a function of x (a square, an absolute value) or followed by one (a root, a logarithm)
_COMPOSED = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")


@register(*_REDUCE, *_COMPOSED)
def _reduce(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The Reduce ops over ``axes`` (an attribute, or an input from opset 13 for ReduceSum and 18 for the others;
    none: all axes, or the input itself with noop_with_empty_axes), ``keepdims`` (default 1). The mean over H and
    W of an NCHW tensor is global average pooling (it keeps a blocked layout); L1, L2, SumSquare, LogSum and
    LogSumExp (by the maximum, so that exp cannot overflow) are sums with element-wise ops around them."""
    op = node.op_type
    shape = g.shape(node.input[0])
    axes = _axes(g, node, attrs, 13 if op == "ReduceSum" else 18)
    keep = bool(attrs.get("keepdims", 1))
    x = g.tensor(node.input[0])
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return x
        axes = list(range(len(shape)))
    if any(not -len(shape) <= a < len(shape) for a in axes):
        g._fail(f"axes {axes} are out of range for shape {list(shape)}")
    axes = sorted({a % len(shape) for a in axes})

    def total(v: Expr, keepdims: bool = keep) -> Expr:
        return relay_op.make_call("sum", [v], axis=tuple(axes), keepdims=keepdims)

    if op == "ReduceMean" and len(shape) == 4 and axes == [2, 3]:
        out = relay_op.nn.global_avg_pool2d(x)
        return out if keep else relay_op.reshape(out, tuple(shape[:2]))
    if op in _REDUCE:
        return relay_op.make_call(_REDUCE[op], [x], axis=tuple(axes), keepdims=keep)
    if op == "ReduceL1":
        return total(relay_op.abs(x))
    if op in ("ReduceL2", "ReduceSumSquare"):
        squares = total(relay_op.multiply(x, x))
        return relay_op.sqrt(squares) if op == "ReduceL2" else squares
    if op == "ReduceLogSum":
        return relay_op.log(total(x))
    peak = relay_op.make_call("max", [x], axis=tuple(axes), keepdims=True)
    out = relay_op.log(total(relay_op.exp(relay_op.subtract(x, peak))))
    kept = tuple(1 if k in axes else d for k, d in enumerate(shape) if keep or k not in axes)
    return relay_op.add(out, relay_op.reshape(peak, kept))


@register("CumSum", "CumProd")
def _cumsum(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The running sum (product) along a constant ``axis`` input (RoBERTa's position ids: the count of real
    tokens so far), ``exclusive`` and ``reverse`` as ONNX defines them."""
    rank = len(g.shape(node.input[0]))
    axis = int(np.asarray(g.value(node.input[1], "the axis")).reshape(-1)[0])
    if not -rank <= axis < rank:
        g._fail(f"axis {axis} is out of range for rank {rank}")
    running = relay_op.reduce.cumsum if node.op_type == "CumSum" else relay_op.reduce.cumprod
    return running(g.tensor(node.input[0]), axis=axis % rank, exclusive=bool(attrs.get("exclusive", 0)),
                   reverse=bool(attrs.get("reverse", 0)))


@register("ArgMax", "ArgMin")
def _arg_extreme(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The index (int64) of the first extremum along ``axis`` (default 0), the last with select_last_index."""
    rank = len(g.shape(node.input[0]))
    axis = int(attrs.get("axis", 0))
    if not -rank <= axis < rank:
        g._fail(f"axis {axis} is out of range for rank {rank}")
    builder = relay_op.reduce.argmax if node.op_type == "ArgMax" else relay_op.reduce.argmin
    return builder(g.tensor(node.input[0]), axis=axis % rank, keepdims=bool(attrs.get("keepdims", 1)),
                   select_last_index=bool(attrs.get("select_last_index", 0)))


@register("Transpose")
def _transpose(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    perm = attrs.get("perm")
    return relay_op.transpose(g.tensor(node.input[0]), axes=tuple(perm) if perm is not None else None)


@register("Concat")
def _concat(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    if "axis" not in attrs:
        g._fail("the axis attribute is required")
    rank = len(g.shape(node.input[0]))
    parts = [n for n in node.input if not (n in g.consts and g.consts[n].size == 0)]  # empty parts add nothing
    if not parts:
        return g.consts[node.input[0]]
    if len(parts) == 1:
        return g.tensor(parts[0])
    return relay_op.concatenate([g.tensor(n) for n in parts], axis=int(attrs["axis"]) % rank)


@register("Pad")
def _pad(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    mode = attrs.get("mode", "constant")
    if mode != "constant":
        g._fail(f"mode {mode!r} is not supported (only 'constant')")
    rank = len(g.shape(node.input[0]))
    if g.opset < 11:
        pads = [int(p) for p in attrs.get("pads", attrs.get("paddings", []))]
        pad_value = float(attrs.get("value", 0.0))
        axes = list(range(rank))
    else:
        pads = [int(p) for p in np.asarray(g.value(node.input[1], "pads")).reshape(-1)]
        cv = g.optional(node, 2)
        pad_value = float(np.asarray(g.value(cv, "constant_value")).reshape(-1)[0]) if cv else 0.0
        ax = g.optional(node, 3)
        axes = [int(a) % rank for a in np.asarray(g.value(ax, "axes")).reshape(-1)] if ax else list(range(rank))
    if len(pads) != 2 * len(axes):
        g._fail(f"pads {pads} must have 2 x {len(axes)} entries")
    width = [[0, 0] for _ in range(rank)]
    for i, a in enumerate(axes):
        width[a] = [pads[i], pads[i + len(axes)]]
    return _padded_or_cropped(g.tensor(node.input[0]), g.shape(node.input[0]), width, pad_value)


def _padded_or_cropped(x: Expr, shape: Sequence[int], width: Sequence[Sequence[int]], value: float = 0.0) -> Expr:
    """``x`` with ``width[a] = (before, after)`` elements added along each axis a (at ``value``), or taken off
    where negative (cropping)."""
    crops = [(a, -min(b, 0), shape[a] + min(e, 0)) for a, (b, e) in enumerate(width) if min(b, e) < 0]
    if crops:
        x = relay_op.strided_slice(x, [c[1] for c in crops], [c[2] for c in crops], axes=[c[0] for c in crops])
    if any(max(b, e) > 0 for b, e in width):
        x = relay_op.nn.pad(x, pad_width=tuple((max(b, 0), max(e, 0)) for b, e in width), pad_value=value)
    return x


@register("CenterCropPad")
def _center_crop_pad(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Each of ``axes`` (all by default) cropped or zero-padded to the constant ``shape``, centred (the odd
    element at the end)."""
    xshape = g.shape(node.input[0])
    rank = len(xshape)
    target = [int(v) for v in np.asarray(g.value(node.input[1], "the shape")).reshape(-1)]
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    if len(target) != len(axes):
        g._fail(f"shape {target} must give one size for each of the axes {axes}")
    width = [[0, 0] for _ in range(rank)]
    for a, n in zip(axes, target):
        diff = n - xshape[a]
        before = diff // 2 if diff >= 0 else -((-diff) // 2)
        width[a] = [before, diff - before]
    return _padded_or_cropped(g.tensor(node.input[0]), xshape, width)


@register("ReverseSequence")
def _reverse_sequence(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Each batch entry's first ``sequence_lens[b]`` steps along the time axis reversed, the rest kept: one
    gather along the time axis at index ``lens[b] - 1 - t`` where ``t < lens[b]``, else ``t`` (the lengths may be
    computed)."""
    shape = g.shape(node.input[0])
    time, batch = int(attrs.get("time_axis", 0)), int(attrs.get("batch_axis", 1))
    if len(shape) < 2 or {time, batch} != {0, 1}:
        g._fail(f"time_axis {time} and batch_axis {batch} must be 0 and 1 (either way) of a tensor of rank >= 2")
    steps, n = shape[time], shape[batch]
    t = np.arange(steps, dtype=np.int64).reshape((steps, 1) if time == 0 else (1, steps))
    lens = relay_op.reshape(relay_op.cast(g.tensor(node.input[1]), "int64"), (1, n) if time == 0 else (n, 1))
    t_const = relay_ir.const(t)
    last = relay_op.subtract(lens, relay_ir.const(np.array(1, np.int64)))
    index = relay_op.where(relay_op.compare("less", t_const, lens), relay_op.subtract(last, t_const), t_const)
    per_step = (steps, n) if time == 0 else (n, steps)
    index = relay_op.broadcast_to(relay_op.reshape(index, (*per_step, *(1,) * (len(shape) - 2))), shape)
    return relay_op.gather(g.tensor(node.input[0]), time, index)


@register("Split")
def _split(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> tuple:
    """One ``strided_slice`` per output: sizes from ``split`` (an attribute before opset 13, a constant input
    from it), else equal parts (from opset 18 ``num_outputs`` parts, the last one smaller when they do not divide).
    """
    shape = g.shape(node.input[0])
    axis = int(attrs.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        g._fail(f"axis {axis} is out of range for shape {list(shape)}")
    axis %= len(shape)
    dim, n = shape[axis], len(node.output)
    if g.opset < 13:
        sizes = [int(s) for s in attrs["split"]] if "split" in attrs else None
    else:
        name = g.optional(node, 1)
        sizes = [int(s) for s in np.asarray(g.value(name, "split")).reshape(-1)] if name else None
    if sizes is None:
        parts = int(attrs.get("num_outputs", n))
        if parts != n:
            g._fail(f"num_outputs={parts} but the node has {n} outputs")
        if g.opset < 18 and dim % n:
            g._fail(f"axis {axis} of size {dim} does not split into {n} equal parts (give the split sizes)")
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    if len(sizes) != n or sum(sizes) != dim or min(sizes) <= 0:
        g._fail(f"split sizes {sizes} must be {n} positive sizes adding up to {dim}, the size of axis {axis} "
                f"(empty outputs are not supported)")
    outs, start = [], 0
    x = g.tensor(node.input[0])
    for s in sizes:
        outs.append(relay_op.strided_slice(x, begin=[start], end=[start + s], strides=[1], axes=[axis]))
        start += s
    return tuple(outs)


@register("Slice")
def _slice(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """``strided_slice`` with constant starts/ends/axes/steps (attributes before opset 10, inputs from it), any
    non-zero steps; negative and out-of-range indices follow ONNX's clamping (values known at import time are
    evaluated instead)."""
    shape = g.shape(node.input[0])
    rank = len(shape)
    if g.opset < 10:
        starts, ends = [int(v) for v in attrs.get("starts", [])], [int(v) for v in attrs.get("ends", [])]
        axes = [int(a) for a in attrs["axes"]] if "axes" in attrs else list(range(len(starts)))
        steps = [1] * len(starts)
    else:
        def ints(i: int, what: str) -> list[int] | None:
            name = g.optional(node, i)
            return [int(v) for v in np.asarray(g.value(name, what)).reshape(-1)] if name else None

        starts, ends = ints(1, "starts"), ints(2, "ends")
        axes = ints(3, "axes") or list(range(len(starts or [])))
        steps = ints(4, "steps") or [1] * len(starts or [])
    if starts is None or ends is None or not len(starts) == len(ends) == len(axes) == len(steps):
        g._fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have the same length")
    if any(not -rank <= a < rank for a in axes) or len({a % rank for a in axes}) != len(axes):
        g._fail(f"axes {axes} must be distinct axes of the {rank}-D input")
    if 0 in steps:
        g._fail(f"steps {steps} must not be 0")
    axes = [a % rank for a in axes]
    for a, b, e, s in zip(axes, starts, ends, steps):
        if relay_op.slice_range(shape[a], b, e, s)[1] == 0:  # an empty part (phi-3's rotary slice past the end)
            empty = list(shape)
            empty[a] = 0
            return np.zeros(empty, g.dtype(node.input[0]))  # known at import: a Concat takes it as nothing
    # indices past -dim - 1 .. dim + 1 clamp the same way as those bounds (keeps INT64_MAX out of the attributes)
    starts = [min(max(b, -shape[a] - 1), shape[a] + 1) for a, b in zip(axes, starts)]
    ends = [min(max(e, -shape[a] - 1), shape[a] + 1) for a, e in zip(axes, ends)]
    return relay_op.strided_slice(g.tensor(node.input[0]), begin=starts, end=ends, strides=steps, axes=axes)


def _source_coords(out_size: int, in_size: int, scale: float, transform: str) -> np.ndarray:
    """The input coordinate ONNX's Resize samples for each output pixel of one axis (float32, as onnxruntime)."""
    return relay_op.image.source_coordinate(np.arange(out_size, dtype=np.float32), in_size, out_size, scale,
                                            transform, np.float32)


def _nearest_source(out_size: int, in_size: int, scale: float, transform: str, rounding: str) -> list[int]:
    """The input pixel ONNX's nearest Resize reads for each output pixel of one axis."""
    x = _source_coords(out_size, in_size, scale, transform)
    half = x - np.floor(x) == np.float32(0.5)
    if rounding == "round_prefer_floor":
        idx = np.where(half, np.floor(x), np.round(x))
    elif rounding == "round_prefer_ceil":
        idx = np.where(half, np.ceil(x), np.round(x))
    elif rounding == "floor":
        idx = np.floor(x)
    elif rounding == "ceil":
        idx = np.ceil(x)
    else:
        raise ValueError(rounding)
    return [int(v) for v in np.clip(idx, 0, in_size - 1)]


def _nearest_resize(x: Expr, shape: Sequence[int], sizes: Sequence[int], scales: Sequence[float], transform: str,
                    rounding: str) -> Expr:
    """Nearest resize as one gather (``take`` at import-time indices) per resized axis, chained: each read once,
    so they fuse into one kernel; identity mappings are skipped."""
    for a in range(len(shape)):
        src = _nearest_source(sizes[a], shape[a], scales[a], transform, rounding)
        if src != list(range(shape[a])):
            x = relay_op.take(x, relay_ir.const(np.array(src, np.int64)), axis=a)
    return x


def _interpolating_resize(x: Expr, shape: Sequence[int], sizes: Sequence[int], scales: Sequence[float],
                          transform: str, cubic: tuple[float, bool] | None = None) -> Expr:
    """(Bi/tri)linear resize, or cubic with ``cubic`` = (its coefficient a, exclude_outside), as one sum over the
    taps of the m resized axes (2^m or 4^m corners): a corner is the input gathered along each axis at a neighbour
    (import-time indices, clamped at the edges as onnxruntime clamps the coordinate), times its weights: the last
    resized axis in one kernel, the other axes in another (it was a pass per axis, each a few kernels writing the
    whole tensor)."""
    rank = len(shape)
    offsets = (-1, 0, 1, 2) if cubic else (0, 1)
    axes = []
    for a in range(rank):
        coords = _source_coords(sizes[a], shape[a], scales[a], transform)
        low = np.floor(coords)
        frac = (coords - low).astype(np.float32)
        if sizes[a] == shape[a] and np.array_equal(low, np.arange(shape[a])) and not frac.any():
            continue
        ends = [np.clip(low + k, 0, shape[a] - 1).astype(np.int64) for k in offsets]
        if cubic:
            ws = relay_op.image.cubic_weights(frac.astype(np.float64), cubic[0], np.float64)
            if cubic[1]:  # exclude_outside: taps off the image weigh nothing, the others renormalised
                ws = [np.where((low + k >= 0) & (low + k <= shape[a] - 1), w, 0.0) for k, w in zip(offsets, ws)]
                total = sum(ws)
                ws = [w / total for w in ws]
        else:
            ws = [np.float32(1) - frac, frac]
        weights = [np.asarray(w, np.float32).reshape((sizes[a],) + (1,) * (rank - a - 1)) for w in ws]
        axes.append((a, ends, weights))
    # the last axis first, on its own (a kernel of the input's rows, gathering across the row), then the others:
    # whole rows of that result, read contiguously (gathering across rows at every output, LRASPP's upsampling
    # to 224x224 took 2.4 ms instead of 0.5 on a Zen 3)
    for part in ([axes[-1]], axes[:-1]) if len(axes) > 1 else (axes,):
        total = None
        for corner in itertools.product(range(len(offsets)), repeat=len(part)):
            term = x
            for (a, ends, _), c in zip(part, corner):
                term = relay_op.take(term, relay_ir.const(ends[c]), axis=a)
            for (_, _, weights), c in zip(part, corner):  # an axis at a time: a product of the weight vectors
                term = relay_op.multiply(term, relay_ir.const(weights[c]))  # would fold into an output-size table
            total = term if total is None else relay_op.add(total, term)
        x = x if total is None else total
    return x


def _replication(shape: Sequence[int], sizes: Sequence[int], scales: Sequence[float], transform: str,
                 rounding: str) -> list[int] | None:
    """The integer factors of H and W when a nearest resize of NCHW data repeats each input pixel that many times
    (``nn.upsampling``), else None."""
    if len(shape) != 4 or list(sizes[:2]) != list(shape[:2]):
        return None
    factors = [sizes[a] // shape[a] for a in (2, 3)]
    for a, f in zip((2, 3), factors):
        if f < 1 or sizes[a] != f * shape[a]:
            return None
        if _nearest_source(sizes[a], shape[a], scales[a], transform, rounding) != [o // f for o in range(sizes[a])]:
            return None
    return factors


@register("Resize", "Upsample")
def _resize(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Resizing with constant scales or sizes, nearest, (bi)linear or cubic, on any axes: nearest-neighbour
    replication of NCHW data by integer factors on H and W (each input pixel repeated: the default modes, and
    asymmetric/floor) is ``nn.upsampling``; any other resize is gathers (``take``) at indices and weights computed
    at import by ONNX's coordinate transformation, fused into one kernel. Upsample (opset < 10) and Resize-10 use
    asymmetric coordinates and floor."""
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear", "cubic"):
        g._fail(f"mode {mode!r} is not supported (nearest, linear and cubic are)")
    if attrs.get("antialias", 0) and mode != "nearest":
        g._fail("antialias=1 (a filter wider than two pixels when downsampling) is not supported")
    shape = g.shape(node.input[0])
    rank = len(shape)
    if node.op_type == "Upsample" or g.opset < 11:
        transform, rounding = "asymmetric", "floor"
        if node.op_type == "Upsample" and g.opset < 9:
            scales = [float(s) for s in attrs.get("scales", [])]
        else:
            scales = [float(s) for s in np.asarray(g.value(node.input[1], "scales")).reshape(-1)]
        sizes = None
    else:
        transform = attrs.get("coordinate_transformation_mode", "half_pixel")
        rounding = attrs.get("nearest_mode", "round_prefer_floor")
        if transform not in relay_op.image.COORDINATE_MODES:
            g._fail(f"coordinate_transformation_mode {transform!r} is not supported (only "
                    f"{', '.join(relay_op.image.COORDINATE_MODES)})")
        if rounding not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
            g._fail(f"unknown nearest_mode {rounding!r}")
        sc, sz = g.optional(node, 2), g.optional(node, 3)
        scales = [float(s) for s in np.asarray(g.value(sc, "scales")).reshape(-1)] if sc else []
        sizes = [int(s) for s in np.asarray(g.value(sz, "sizes")).reshape(-1)] if sz else None
        if scales and sizes:
            g._fail("scales and sizes are both given; ONNX allows only one")
        if sizes and attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            g._fail(f"keep_aspect_ratio_policy {attrs['keep_aspect_ratio_policy']!r} is not supported (only "
                    "'stretch')")
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    given = scales if not sizes else sizes
    if len(given) != len(axes):
        g._fail(f"{'scales' if not sizes else 'sizes'} {given} must have one value per axis {axes}")
    full_scales, full_sizes = [1.0] * rank, list(shape)
    for a, v in zip(axes, given):
        if sizes:
            full_sizes[a], full_scales[a] = int(v), int(v) / shape[a]
        else:
            full_sizes[a], full_scales[a] = int(math.floor(shape[a] * v)), float(v)
    if any(n < 1 for n in full_sizes):
        g._fail(f"the output shape {full_sizes} would be empty")
    x = g.tensor(node.input[0])
    factors = _replication(shape, full_sizes, full_scales, transform, rounding) if mode == "nearest" else None
    if factors is not None:
        return x if factors == [1, 1] else relay_op.upsampling(x, scale_h=factors[0], scale_w=factors[1])
    if mode == "nearest":
        return _nearest_resize(x, shape, full_sizes, full_scales, transform, rounding)
    cubic = (float(attrs.get("cubic_coeff_a", -0.75)), bool(attrs.get("exclude_outside", 0))) if mode == "cubic" \
        else None
    return _interpolating_resize(x, shape, full_sizes, full_scales, transform, cubic)


@register("Expand")
def _expand(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Broadcast to a constant shape (numpy's rules between the input's shape and the given one)."""
    shape = g.shape(node.input[0])
    target = [int(d) for d in np.asarray(g.value(node.input[1], "the shape")).reshape(-1)]
    try:
        out = tuple(np.broadcast_shapes(tuple(shape), tuple(target)))
    except ValueError:
        g._fail(f"shape {target} does not broadcast with the input's shape {list(shape)}")
    x = g.tensor(node.input[0])
    return x if out == tuple(shape) else relay_op.broadcast_to(x, out)


@register("Trilu")
def _trilu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The upper (upper=1, default) or lower triangle of the last two axes from diagonal k (a constant input)."""
    k_name = g.optional(node, 1)
    k = int(np.asarray(g.value(k_name, "k")).reshape(-1)[0]) if k_name else 0
    return relay_op.trilu(g.tensor(node.input[0]), k=k, upper=bool(attrs.get("upper", 1)))


@register("Gather")
def _gather(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Slices of the data along ``axis`` at integer indices: an embedding lookup of token ids (``take``), or one
    constant index (a slice, its axis dropped), or constant indices (``take`` of a constant)."""
    shape = g.shape(node.input[0])
    axis = int(attrs.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        g._fail(f"axis {axis} is out of range for shape {list(shape)}")
    axis %= len(shape)
    x = g.tensor(node.input[0])
    if g.is_const(node.input[1]):
        idx = np.asarray(g.value(node.input[1], "indices")).astype(np.int64)
        if np.any(idx < -shape[axis]) or np.any(idx >= shape[axis]):
            g._fail(f"indices {idx.reshape(-1)[:8].tolist()} are out of range for axis {axis} of size {shape[axis]}")
        idx = np.where(idx < 0, idx + shape[axis], idx)
        if idx.ndim == 0:
            i = int(idx)
            part = relay_op.strided_slice(x, begin=[i], end=[i + 1], strides=[1], axes=[axis])
            return relay_op.reshape(part, tuple(d for k, d in enumerate(shape) if k != axis))
        return relay_op.take(x, relay_ir.const(idx), axis=axis)
    return relay_op.take(x, g.tensor(node.input[1]), axis=axis)


def _index_tuples_first(g: _GraphConverter, name: str) -> Expr:
    """ONNX's index tuples ([..., M], the tuple last) in TVM's layout (M first), as int64."""
    rank = len(g.shape(name))
    idx = g.tensor(name)
    if g.dtype(name) != "int64":
        idx = relay_op.cast(idx, "int64")
    return relay_op.transpose(idx, [rank - 1, *range(rank - 1)]) if rank > 1 else idx


def _scatter_mode(g: _GraphConverter, attrs: dict) -> str:
    reduction = attrs.get("reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else str(reduction)
    if reduction not in ("none", "add"):
        g._fail(f"reduction={reduction!r} is not supported (none and add are)")
    return "update" if reduction == "none" else "add"


@register("GatherElements")
def _gather_elements(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """``out[i][j] = data[i][indices[i][j]]`` along ``axis`` (torch.gather): relay's ``gather``."""
    return relay_op.gather(g.tensor(node.input[0]), int(attrs.get("axis", 0)), g.tensor(node.input[1]))


@register("GatherND")
def _gather_nd(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Slices of the data at the index tuples of the indices' last axis (after ``batch_dims`` shared axes)."""
    return relay_op.gather_nd(g.tensor(node.input[0]), _index_tuples_first(g, node.input[1]),
                              batch_dims=int(attrs.get("batch_dims", 0)))


@register("ScatterND")
def _scatter_nd(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The data with the updates written (or added) at the index tuples of the indices' last axis; on values
    known at import (Swin's shifted-window masks) it is evaluated then."""
    return relay_op.scatter_nd(g.tensor(node.input[0]), _index_tuples_first(g, node.input[1]),
                               g.tensor(node.input[2]), mode=_scatter_mode(g, attrs))


@register("ScatterElements", "Scatter")
def _scatter_elements(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The data with each update written (or added) where its index points along ``axis`` (torch.scatter);
    Scatter is its name before opset 11."""
    return relay_op.scatter_elements(g.tensor(node.input[0]), g.tensor(node.input[1]), g.tensor(node.input[2]),
                                     axis=int(attrs.get("axis", 0)), reduction=_scatter_mode(g, attrs))


@register("OneHot")
def _one_hot(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """A new axis of ``depth`` (a constant) at ``axis``: values[1] where it equals the index, values[0]
    elsewhere; indices of any numeric type (a float that is not a whole number hits nothing, as in
    onnxruntime)."""
    depth = np.asarray(g.value(node.input[1], "the depth")).reshape(-1)
    if depth.size != 1 or int(depth[0]) < 1:
        g._fail(f"depth {depth.tolist()} must be one positive number")
    values = g.value(node.input[2], "the values (off, on)")
    if values.shape != (2,):
        g._fail(f"values must be [off_value, on_value], got shape {list(values.shape)}")
    idx = g.tensor(node.input[0])
    off, on = (relay_ir.const(np.asarray(v, values.dtype)) for v in values)
    return relay_op.one_hot(idx, on, off, int(depth[0]), axis=int(attrs.get("axis", -1)), dtype=str(values.dtype))


@register("TopK")
def _topk(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> tuple[Expr, Expr]:
    """The k (a constant) largest or smallest elements along ``axis`` and their int64 positions, sorted, ties in
    position order as onnxruntime gives them."""
    if g.opset < 10:
        k = int(attrs["k"])
    else:
        kv = np.asarray(g.value(node.input[1], "K")).reshape(-1)
        if kv.size != 1:
            g._fail(f"K must be one number, got {kv.tolist()}")
        k = int(kv[0])
    axis = int(attrs.get("axis", -1))
    shape = g.shape(node.input[0])
    if not -len(shape) <= axis < len(shape) or not 1 <= k <= shape[axis]:
        g._fail(f"k={k} along axis {axis} does not fit the input of shape {list(shape)}")
    x = g.tensor(node.input[0])
    ascend = not int(attrs.get("largest", 1))
    return (relay_op.topk(x, k, axis, "values", ascend), relay_op.topk(x, k, axis, "indices", ascend, "int64"))


@register("Tile")
def _tile(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """``repeats`` (a constant, one per axis) copies along each axis."""
    rank = len(g.shape(node.input[0]))
    reps = [int(r) for r in np.asarray(g.value(node.input[1], "the repeats")).reshape(-1)]
    if len(reps) != rank:
        g._fail(f"repeats {reps} must have one entry per axis of the rank-{rank} input")
    if any(r < 1 for r in reps):
        g._fail(f"repeats {reps} must be positive (an empty result is not supported)")
    return relay_op.tile(g.tensor(node.input[0]), reps)


@register("DepthToSpace", "SpaceToDepth")
def _depth_space(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Channels to blocks of pixels and back (super-resolution models' pixel shuffle): ``relay.nn.depth_to_space``
    (DCR, the default, or CRD) and ``space_to_depth`` of 4-D NCHW data."""
    shape = g.shape(node.input[0])
    if len(shape) != 4:
        g._fail(f"only 4-D (NCHW) inputs are supported, got shape {list(shape)}")
    if "blocksize" not in attrs or int(attrs["blocksize"]) < 1:
        g._fail("a positive blocksize attribute is required")
    b, x = int(attrs["blocksize"]), g.tensor(node.input[0])
    try:
        if node.op_type == "SpaceToDepth":
            return relay_op.nn.space_to_depth(x, b)
        return relay_op.nn.depth_to_space(x, b, mode=attrs.get("mode", "DCR"))
    except RelayError as e:
        g._fail(str(e))
        raise


_GRID_SAMPLE_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest", "bicubic": "bicubic",
                      "cubic": "bicubic"}  # (opset 16's names, then opset 20's)


@register("AffineGrid")
def _affine_grid(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The sampling grid of affine matrices ``theta`` [N, 2, 3] (or [N, 3, 4]) over a constant ``size`` [N, C, H, W]
    (or [N, C, D, H, W]): each output pixel's normalised coordinates (x, y[, z], 1), -1 to 1 at the corner pixels'
    centres with align_corners, else at their outer edges, times theta: [N, H, W, 2] (or [N, D, H, W, 3]), what
    GridSample reads. One batch_matmul of the constant coordinates by theta."""
    size = [int(v) for v in np.asarray(g.value(node.input[1], "the size")).reshape(-1)]
    spatial = size[2:]
    nd = len(spatial)
    tshape = g.shape(node.input[0])
    if nd not in (2, 3) or tuple(tshape) != (size[0], nd, nd + 1):
        g._fail(f"theta must be [N, {nd}, {nd + 1}] for size {size}, got {list(tshape)}")
    align = bool(attrs.get("align_corners", 0))

    def steps(n: int) -> np.ndarray:
        if align:
            return np.linspace(-1, 1, n) if n > 1 else np.zeros(1)
        return (np.arange(n) * 2 + 1) / n - 1

    axes = np.meshgrid(*(steps(n) for n in spatial), indexing="ij")  # (D,) H, W
    coords = np.stack([*reversed(axes), np.ones(spatial)], axis=-1).reshape(1, -1, nd + 1)  # x first
    base = relay_ir.const(np.ascontiguousarray(np.broadcast_to(coords, (size[0], *coords.shape[1:])), np.float32))
    grid = relay_op.nn.batch_matmul(base, relay_op.cast(g.tensor(node.input[0]), "float32"), transpose_b=True)
    return relay_op.reshape(grid, (size[0], *spatial, nd))


@register("GridSample")
def _grid_sample(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """``relay.image.grid_sample`` of 4-D data, its [N, H_out, W_out, 2] grid transposed to TVM's [N, 2, H_out,
    W_out]; modes of opsets 16 and 20, all padding modes, align_corners."""
    xshape, gshape = g.shape(node.input[0]), g.shape(node.input[1])
    if len(xshape) != 4:
        g._fail(f"{len(xshape) - 2}-D sampling is not supported (the data {node.input[0]!r} has rank {len(xshape)}; "
                f"4-D NCHW data is)")
    mode = attrs.get("mode", "bilinear" if g.opset < 20 else "linear")
    if mode not in _GRID_SAMPLE_MODES:
        g._fail(f"mode {mode!r} is not one of {', '.join(_GRID_SAMPLE_MODES)}")
    padding = attrs.get("padding_mode", "zeros")
    if padding not in ("zeros", "border", "reflection"):
        g._fail(f"padding_mode {padding!r} is not one of zeros, border, reflection")
    if len(gshape) != 4 or gshape[-1] != 2 or gshape[0] != xshape[0]:
        g._fail(f"the grid {node.input[1]!r} must be [N, H_out, W_out, 2] for data {list(xshape)}, got {list(gshape)}")
    grid = relay_op.transpose(g.tensor(node.input[1]), (0, 3, 1, 2))
    return relay_op.image.grid_sample(g.tensor(node.input[0]), grid, method=_GRID_SAMPLE_MODES[mode],
                                      padding_mode=padding, align_corners=bool(attrs.get("align_corners", 0)))
