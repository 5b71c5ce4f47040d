"""Relay ops that move data: reshape, batch_flatten, transpose, concatenate, pad, strided_slice, upsampling; and
TVM's functions that are these ops composed (split, squeeze, expand_dims, stack, repeat, reverse, zeros, full, ...),
written on the static shapes type inference gives."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched import te
from autosched.relay.ir.expr import Constant, Expr, RelayError, TensorType, Tuple, TupleType
from autosched.relay.ir.type_infer import infer_type
from autosched.relay.op import image as _image
from autosched.relay.op.common import (
    _bload,
    _ishape,
    _operands,
    _same_dtype,
    _tensor,
    broadcast_shape,
    clamped_index,
)
from autosched.relay.op.op import (
    INJECTIVE,
    OpDef,
    make_call,
    register_op,
)


def _ravel(idx: Sequence[Any], shape: Sequence[int]) -> Any:
    lin: Any = 0
    for i, d in zip(idx, shape):
        lin = lin * d + i
    return lin


def _unravel(lin: Any, shape: Sequence[int]) -> tuple:
    out = []
    stride = 1
    strides = []
    for d in reversed(shape):
        strides.append(stride)
        stride *= d
    for d, s in zip(shape, reversed(strides)):
        out.append((lin // s) % d if s > 1 else lin % d)
    return tuple(out)


def reshape_shape(ishape: Sequence[int], newshape: Sequence[int], op: str = "reshape") -> tuple[int, ...]:
    """Resolve 0 (copy the input dimension) and -1 (infer) in ``newshape``, as ONNX and TVM do."""
    out: list[int] = []
    infer = -1
    for k, d in enumerate(newshape):
        d = int(d)
        if d == 0:
            if k >= len(ishape):
                raise RelayError(f"{op}: newshape {tuple(newshape)} copies dimension {k} of shape {tuple(ishape)}, "
                                 "which it does not have")
            out.append(ishape[k])
        elif d == -1:
            if infer >= 0:
                raise RelayError(f"{op}: newshape {tuple(newshape)} has more than one -1")
            infer = k
            out.append(1)
        elif d < 0:
            raise RelayError(f"{op}: newshape {tuple(newshape)}: only 0 and -1 are special values")
        else:
            out.append(d)
    size = math.prod(ishape)
    if infer >= 0:
        rest = math.prod(out)
        if rest == 0 or size % rest:
            raise RelayError(f"{op}: cannot reshape {tuple(ishape)} ({size} elements) to {tuple(newshape)}")
        out[infer] = size // rest
    if math.prod(out) != size:
        raise RelayError(f"{op}: cannot reshape {tuple(ishape)} ({size} elements) to {tuple(newshape)} "
                         f"({math.prod(out)} elements)")
    return tuple(out)


def _reshape_rel(types, attrs):
    (x,) = _operands(types, "reshape", "data")
    return TensorType(reshape_shape(x.shape, attrs["newshape"]), x.dtype)


def _reshape_compute(inputs, attrs, out_type):
    (x,) = inputs
    ishape = _ishape(x)
    oshape = out_type.shape
    return te.compute(oshape, lambda *i: x[_unravel(_ravel(i, oshape), ishape)], name="reshape")


register_op(OpDef("reshape", _reshape_rel, _reshape_compute, INJECTIVE, attrs={"newshape": None}, num_inputs=1,
                  doc="reshape (0 copies a dimension, -1 is inferred)"))


def _batch_flatten_rel(types, attrs):
    (x,) = _operands(types, "nn.batch_flatten", "data")
    if not x.shape:
        raise RelayError("nn.batch_flatten: data must have at least one dimension")
    return TensorType((x.shape[0], math.prod(x.shape[1:])), x.dtype)


register_op(OpDef("nn.batch_flatten", _batch_flatten_rel, _reshape_compute, INJECTIVE, num_inputs=1,
                  doc="flatten all but the first axis"))


def _transpose_axes(ndim: int, axes: Any, op: str = "transpose") -> tuple[int, ...]:
    if axes is None:
        return tuple(range(ndim - 1, -1, -1))
    ax = tuple(int(a) % ndim for a in axes) if ndim else ()
    if sorted(ax) != list(range(ndim)):
        raise RelayError(f"{op}: axes {tuple(axes)} are not a permutation of {ndim} dimensions")
    return ax


def _transpose_rel(types, attrs):
    (x,) = _operands(types, "transpose", "data")
    ax = _transpose_axes(len(x.shape), attrs["axes"])
    return TensorType(tuple(x.shape[a] for a in ax), x.dtype)


def _transpose_compute(inputs, attrs, out_type):
    (x,) = inputs
    ax = _transpose_axes(len(x.shape), attrs["axes"])

    def f(*i):
        src = [None] * len(ax)
        for k, a in enumerate(ax):
            src[a] = i[k]
        return x[tuple(src)]

    return te.compute(out_type.shape, f, name="transpose")


register_op(OpDef("transpose", _transpose_rel, _transpose_compute, INJECTIVE, attrs={"axes": None}, num_inputs=1,
                  doc="permute axes (reverse them by default)"))


def _concat_rel(types, attrs):
    op = "concatenate"
    if len(types) == 1 and isinstance(types[0], TupleType):
        types = list(types[0].fields)
    if not types:
        raise RelayError(f"{op}: needs at least one tensor")
    ts = [_tensor(types, k, op) for k in range(len(types))]
    nd = len(ts[0].shape)
    if nd == 0:
        raise RelayError(f"{op}: cannot concatenate 0-d tensors")
    axis = attrs["axis"] % nd
    for t in ts:
        if len(t.shape) != nd or any(a != b for k, (a, b) in enumerate(zip(t.shape, ts[0].shape)) if k != axis):
            raise RelayError(f"{op}: shapes {', '.join(str(t.shape) for t in ts)} differ outside axis {attrs['axis']}")
    _same_dtype(op, *ts)
    shape = list(ts[0].shape)
    shape[axis] = sum(t.shape[axis] for t in ts)
    return TensorType(shape, ts[0].dtype)


def _concat_compute(inputs, attrs, out_type):
    axis = attrs["axis"] % len(out_type.shape)
    offsets = []
    off = 0
    for t in inputs:
        offsets.append(off)
        off += int(t.shape[axis])

    def g(*i):  # first input whose range holds the index, tested from the last one down
        val = inputs[0][i]
        for t, o in zip(inputs[1:], offsets[1:]):
            idx = tuple(i[:axis]) + (i[axis] - o,) + tuple(i[axis + 1:])
            val = te.if_then_else(i[axis] >= o, t[idx], val)
        return val

    return te.compute(out_type.shape, g, name="concatenate")


register_op(OpDef("concatenate", _concat_rel, _concat_compute, INJECTIVE, attrs={"axis": 0},
                  doc="join a tuple of tensors along an axis"))


def _pad_rel(types, attrs):
    (x,) = _operands(types, "nn.pad", "data")
    pw = attrs["pad_width"]
    if pw is None or len(pw) != len(x.shape) or any(len(p) != 2 or min(p) < 0 for p in pw):
        raise RelayError(f"nn.pad: pad_width {pw} must give (before, after) >= 0 for each of the "
                         f"{len(x.shape)} dimensions of shape {x.shape}")
    if attrs["pad_mode"] != "constant":
        raise RelayError(f"nn.pad: only pad_mode 'constant' is supported, got {attrs['pad_mode']!r}")
    return TensorType(tuple(d + int(p[0]) + int(p[1]) for d, p in zip(x.shape, pw)), x.dtype)


def _pad_compute(inputs, attrs, out_type):
    (x,) = inputs
    pw = [(int(a), int(b)) for a, b in attrs["pad_width"]]
    shape = _ishape(x)

    def f(*i):
        conds = []
        for k, (d, (a, _)) in enumerate(zip(shape, pw)):
            if a or pw[k][1]:
                conds += [i[k] >= a, i[k] < d + a]
        src = tuple(ik - a for ik, (a, _) in zip(i, pw))
        if not conds:
            return x[src]
        return te.if_then_else(te.all(*conds), x[src], te.const(float(attrs["pad_value"]), x.dtype))

    return te.compute(out_type.shape, f, name="pad")


register_op(OpDef("nn.pad", _pad_rel, _pad_compute, INJECTIVE,
                  attrs={"pad_width": None, "pad_value": 0.0, "pad_mode": "constant"}, num_inputs=1,
                  doc="constant padding of every axis"))


def slice_range(dim: int, begin: int, end: int, step: int) -> tuple[int, int]:
    """ONNX Slice's (and numpy's) rules for one axis: negative indices count from the end, out-of-range ones are
    clamped (to [0, dim - 1] / [-1, dim - 1] for a negative step). Returns (first index, number of elements)."""
    begin = begin + dim if begin < 0 else begin
    end = end + dim if end < 0 else end
    if step > 0:
        begin, end = min(max(begin, 0), dim), min(max(end, 0), dim)
    else:
        begin, end = min(max(begin, 0), dim - 1), min(max(end, -1), dim - 1)
    return begin, max(0, -(-(end - begin) // step))


def _slice_axes(ndim: int, attrs: dict, op: str) -> list[tuple[int, int, int, int]]:
    """(axis, begin, end, step) for every sliced axis, checked."""
    begin, end = [int(v) for v in attrs["begin"]], [int(v) for v in attrs["end"]]
    strides = [int(v) for v in attrs["strides"]] if attrs["strides"] is not None else [1] * len(begin)
    axes = [int(a) for a in attrs["axes"]] if attrs["axes"] is not None else list(range(len(begin)))
    if not len(begin) == len(end) == len(strides) == len(axes):
        raise RelayError(f"{op}: begin {begin}, end {end}, strides {strides} and axes {axes} differ in length")
    if any(not -ndim <= a < ndim for a in axes) or len({a % ndim for a in axes}) != len(axes):
        raise RelayError(f"{op}: axes {axes} must be distinct axes of a {ndim}-D tensor")
    if 0 in strides:
        raise RelayError(f"{op}: strides {strides} must not be 0")
    return [(a % ndim, b, e, s) for a, b, e, s in zip(axes, begin, end, strides)]


def _strided_slice_rel(types, attrs):
    op = "strided_slice"
    (x,) = _operands(types, op, "data")
    shape = list(x.shape)
    for a, b, e, s in _slice_axes(len(shape), attrs, op):
        _, n = slice_range(shape[a], b, e, s)
        if n == 0:
            raise RelayError(f"{op}: begin {b}, end {e}, stride {s} select nothing of axis {a} (size {shape[a]}) "
                             f"of shape {x.shape}; empty tensors are not supported")
        shape[a] = n
    return TensorType(tuple(shape), x.dtype)


def _strided_slice_compute(inputs, attrs, out_type):
    (x,) = inputs
    shape = _ishape(x)
    first = {a: (slice_range(shape[a], b, e, s)[0], s) for a, b, e, s in _slice_axes(len(shape), attrs, "")}

    def f(*i):
        return x[tuple(first[k][0] + ik * first[k][1] if k in first else ik for k, ik in enumerate(i))]

    return te.compute(out_type.shape, f, name="strided_slice")


register_op(OpDef("strided_slice", _strided_slice_rel, _strided_slice_compute, INJECTIVE, num_inputs=1,
                  attrs={"begin": None, "end": None, "strides": None, "axes": None},
                  doc="x[begin:end:stride] on the given axes (the first len(begin) axes by default), numpy's rules"))


def _upsampling_rel(types, attrs):
    op = "nn.upsampling"
    (x,) = _operands(types, op, "data")
    if attrs["layout"] != "NCHW" or len(x.shape) != 4:
        raise RelayError(f"{op}: only 4-D NCHW data is supported, got layout {attrs['layout']} and shape {x.shape}")
    if attrs["method"] != "nearest_neighbor":
        raise RelayError(f"{op}: only method 'nearest_neighbor' is supported, got {attrs['method']!r}")
    sh, sw = attrs["scale_h"], attrs["scale_w"]
    if any(float(v) != int(v) or int(v) < 1 for v in (sh, sw)):
        raise RelayError(f"{op}: scale_h {sh} and scale_w {sw} must be positive integers")
    N, C, H, W = x.shape
    return TensorType((N, C, H * int(sh), W * int(sw)), x.dtype)


def _upsampling_compute(inputs, attrs, out_type):
    (x,) = inputs
    sh, sw = int(attrs["scale_h"]), int(attrs["scale_w"])
    return te.compute(out_type.shape, lambda n, c, y, w: x[n, c, y // sh if sh > 1 else y, w // sw if sw > 1 else w],
                      name="upsampling")


register_op(OpDef("nn.upsampling", _upsampling_rel, _upsampling_compute, INJECTIVE, num_inputs=1,
                  attrs={"scale_h": 1, "scale_w": 1, "layout": "NCHW", "method": "nearest_neighbor",
                         "align_corners": False},
                  doc="nearest-neighbour upsampling of NCHW data by integer factors (each pixel repeated)"))


def strided_slice(data: Any, begin: Sequence[int], end: Sequence[int], strides: Sequence[int] | None = None,
                  axes: Sequence[int] | None = None) -> Any:
    """data[begin:end:strides] on ``axes`` (default: the first len(begin) axes); negative indices count from the
    end and out-of-range ones are clamped, as in numpy and ONNX."""
    def ints(v: Any) -> tuple[int, ...] | None:
        return None if v is None else tuple(int(x) for x in v)

    return make_call("strided_slice", [data], begin=ints(begin), end=ints(end), strides=ints(strides),
                     axes=ints(axes))


def upsampling(data: Any, scale_h: float = 1, scale_w: float = 1, layout: str = "NCHW",
               method: str = "nearest_neighbor", align_corners: bool = False) -> Any:
    """``data`` (NCHW or NHWC) scaled by ``scale_h`` and ``scale_w`` to round(extent * scale), as TVM does:
    nearest-neighbour replication by integer factors is ``nn.upsampling`` (each pixel repeated); other scales and
    methods (bilinear, bicubic) are ``image.resize2d`` in asymmetric coordinates (align_corners: the corners')."""
    op = "nn.upsampling"
    if float(scale_h) <= 0 or float(scale_w) <= 0:
        raise RelayError(f"{op}: scale_h {scale_h} and scale_w {scale_w} must be positive")
    if (layout == "NCHW" and method == "nearest_neighbor" and not align_corners
            and all(float(v) == int(v) for v in (scale_h, scale_w))):
        return make_call(op, [data], scale_h=int(scale_h), scale_w=int(scale_w), layout=layout, method=method,
                         align_corners=False)
    return _upsampled(data, (scale_h, scale_w), layout, method, align_corners, op)


def upsampling3d(data: Any, scale_d: float, scale_h: float, scale_w: float, layout: str = "NCDHW",
                 method: str = "nearest_neighbor", coordinate_transformation_mode: str = "half_pixel") -> Any:
    """``data`` (NCDHW or NDHWC) scaled to round(extent * scale) on D, H and W: ``image.resize3d`` (TVM's)."""
    return _upsampled(data, (scale_d, scale_h, scale_w), layout, method, coordinate_transformation_mode,
                      "nn.upsampling3d")


def _upsampled(data: Any, scales: Sequence[float], layout: str, method: str, mode: Any, op: str) -> Any:
    """TVM's upsampling as a resize: sizes round(extent * scale); ``mode`` a coordinate mode, or align_corners."""
    shape = _shape_of(data, op)
    if len(shape) != len(scales) + 2 or any(ch not in layout for ch in "DHW"[3 - len(scales):]):
        raise RelayError(f"{op}: layout {layout!r} does not fit data of shape {shape}")
    size = [int(round(shape[layout.index(ch)] * float(s))) for ch, s in zip("DHW"[3 - len(scales):], scales)]
    if isinstance(mode, bool):
        mode = "align_corners" if mode else "asymmetric"
    resize = _image.resize2d if len(scales) == 2 else _image.resize3d
    return resize(data, size, layout=layout, method=method, coordinate_transformation_mode=mode)


def reshape(data: Any, newshape: Sequence[int] | int) -> Any:
    """Reshape; 0 copies the input's dimension at that position and -1 is inferred (as ONNX and TVM)."""
    if isinstance(newshape, int):
        newshape = (newshape,)
    return make_call("reshape", [data], newshape=tuple(int(d) for d in newshape))


def transpose(data: Any, axes: Sequence[int] | None = None) -> Any:
    """Permute the axes (reversed by default)."""
    return make_call("transpose", [data], axes=None if axes is None else tuple(int(a) for a in axes))


def concatenate(data: Sequence[Any] | Tuple, axis: int) -> Any:
    """Join tensors along ``axis``."""
    tup = data if isinstance(data, Tuple) else Tuple(list(data))
    return make_call("concatenate", [tup], axis=int(axis))


# ------------------------------------------------------------------ broadcast_to, take, trilu (transformer exports)
def _broadcast_to_rel(types, attrs):
    (x,) = _operands(types, "broadcast_to", "data")
    return TensorType(broadcast_shape(x.shape, tuple(int(d) for d in attrs["shape"]), "broadcast_to"), x.dtype)


def _broadcast_to_compute(inputs, attrs, out_type):
    (x,) = inputs
    return te.compute(out_type.shape, lambda *i: _bload(x, i), name="broadcast_to")


register_op(OpDef("broadcast_to", _broadcast_to_rel, _broadcast_to_compute, INJECTIVE, attrs={"shape": None},
                  num_inputs=1, doc="numpy broadcasting of data to a shape (ONNX Expand: the two shapes broadcast)"))


def _tile_rel(types, attrs):
    (x,) = _operands(types, "tile", "data")
    reps = tuple(int(r) for r in attrs["reps"])
    if any(r < 1 for r in reps):
        raise RelayError(f"tile: reps {reps} must be positive (an empty result is not supported)")
    shape = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
    reps = (1,) * (len(shape) - len(reps)) + reps
    return TensorType(tuple(d * r for d, r in zip(shape, reps)), x.dtype)


def _tile_compute(inputs, attrs, out_type):
    (x,) = inputs
    nd, lead = len(x.shape), len(out_type.shape) - len(x.shape)
    return te.compute(out_type.shape, lambda *i: x[tuple(te.floormod(v, x.shape[k]) if int(x.shape[k]) != 1 else 0
                                                        for k, v in enumerate(i[lead:lead + nd]))], name="tile")


register_op(OpDef("tile", _tile_rel, _tile_compute, INJECTIVE, attrs={"reps": None}, num_inputs=1,
                  doc="data repeated reps[k] times along axis k (numpy's tile: reps and shape aligned at the end)"))


def _take_rel(types, attrs):
    op = "take"
    x, idx = _operands(types, op, "data", "indices")
    if not x.shape or not -len(x.shape) <= attrs["axis"] < len(x.shape):
        raise RelayError(f"{op}: axis {attrs['axis']} is out of range for data shape {x.shape}")
    if idx.dtype not in ("int32", "int64"):
        raise RelayError(f"{op}: indices must be int32 or int64, got {idx.shape} {idx.dtype}")
    axis = attrs["axis"] % len(x.shape)
    return TensorType(tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1:]), x.dtype)


def _take_compute(inputs, attrs, out_type):
    x, idx = inputs
    shape = _ishape(x)
    axis = attrs["axis"] % len(shape)
    nidx = len(idx.shape)
    dim = shape[axis]

    def f(*i):
        k = clamped_index(idx[tuple(i[axis:axis + nidx])] if nidx else idx[()], dim)
        return x[tuple(i[:axis]) + (k,) + tuple(i[axis + nidx:])]

    return te.compute(out_type.shape, f, name="take")


register_op(OpDef("take", _take_rel, _take_compute, INJECTIVE, attrs={"axis": 0}, num_inputs=2,
                  doc="gather slices of data along an axis at integer indices (ONNX Gather; embeddings)"))


def _trilu_rel(types, attrs):
    (x,) = _operands(types, "trilu", "data")
    if len(x.shape) < 2:
        raise RelayError(f"trilu: data must have at least 2 dimensions, got shape {x.shape}")
    return x


def _trilu_compute(inputs, attrs, out_type):
    (x,) = inputs
    k, upper = int(attrs["k"]), bool(attrs["upper"])

    def f(*i):
        r, c = i[-2], i[-1]
        keep = (c - r >= k) if upper else (c - r <= k)
        return te.if_then_else(keep, x[i], te.const(0, x.dtype))

    return te.compute(out_type.shape, f, name="trilu")


register_op(OpDef("trilu", _trilu_rel, _trilu_compute, INJECTIVE, attrs={"k": 0, "upper": 1}, num_inputs=1,
                  doc="the upper (or lower) triangle of the last two axes from diagonal k, zeros elsewhere"))


def broadcast_to(data: Any, shape: Sequence[int]) -> Any:
    """``data`` broadcast (numpy's rules) with ``shape``."""
    return make_call("broadcast_to", [data], shape=tuple(int(d) for d in shape))


def tile(data: Any, reps: Sequence[int]) -> Any:
    """``data`` repeated ``reps[k]`` times along each axis ``k`` (numpy's ``tile``)."""
    return make_call("tile", [data], reps=tuple(int(r) for r in reps))


def take(data: Any, indices: Any, axis: int = 0) -> Any:
    """``data`` gathered along ``axis`` at integer ``indices`` (negative ones count from the end)."""
    return make_call("take", [data, indices], axis=int(axis))


def trilu(data: Any, k: int = 0, upper: bool = True) -> Any:
    """The upper (``upper``) or lower triangle of the last two axes from diagonal ``k``."""
    return make_call("trilu", [data], k=int(k), upper=int(bool(upper)))


# ------------------------------------------------------- TVM's functions composed of the ops above
def _shape_of(data: Any, op: str) -> tuple[int, ...]:
    t = infer_type(data)
    if not isinstance(t, TensorType):
        raise RelayError(f"{op}: the data must be a tensor, got {t!r}")
    return tuple(int(d) for d in t.shape)


def _axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= int(axis) < ndim:
        raise RelayError(f"{op}: axis {axis} is out of range for {ndim} axes")
    return int(axis) % ndim


def split(data: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> Tuple:
    """``data`` cut along ``axis`` into that many equal parts, or at those indices (numpy's ``split``): a tuple
    whose items are the parts (``split(x, 2)[0]``; ``.astuple()`` as TVM's TupleWrapper)."""
    shape = _shape_of(data, "split")
    axis = _axis(axis, len(shape), "split")
    dim = shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        n = int(indices_or_sections)
        if n < 1 or dim % n:
            raise RelayError(f"split: axis {axis} of size {dim} does not divide into {n} equal parts")
        cuts = [dim // n * k for k in range(1, n)]
    else:
        cuts = [int(c) for c in indices_or_sections]
        if any(not 0 <= a < b <= dim for a, b in zip([0] + cuts, cuts + [dim])):
            raise RelayError(f"split: indices {cuts} must rise strictly within (0, {dim}) (the size of axis {axis}): "
                             "tensors here are never empty")
    return Tuple([strided_slice(data, [lo], [hi], axes=[axis]) for lo, hi in zip([0] + cuts, cuts + [dim])])


def squeeze(data: Any, axis: Sequence[int] | None = None) -> Any:
    """``data`` without its axes of size 1 (only those in ``axis`` if given, each of which must be 1)."""
    shape = _shape_of(data, "squeeze")
    drop = {k for k, d in enumerate(shape) if d == 1} if axis is None else \
        {_axis(a, len(shape), "squeeze") for a in axis}
    wrong = [k for k in sorted(drop) if shape[k] != 1]
    if wrong:
        raise RelayError(f"squeeze: axes {wrong} of shape {list(shape)} are not of size 1")
    return reshape(data, [d for k, d in enumerate(shape) if k not in drop])


def expand_dims(data: Any, axis: int, num_newaxis: int = 1) -> Any:
    """``data`` with ``num_newaxis`` axes of size 1 inserted at ``axis`` (counted in the input's axes + 1)."""
    shape = list(_shape_of(data, "expand_dims"))
    axis = _axis(axis, len(shape) + 1, "expand_dims")
    return reshape(data, shape[:axis] + [1] * int(num_newaxis) + shape[axis:])


def stack(data: Sequence[Any] | Tuple, axis: int) -> Any:
    """Tensors of one shape joined along a new axis ``axis``."""
    fields = list(data.fields if isinstance(data, Tuple) else data)
    if not fields:
        raise RelayError("stack: no tensors given")
    ndim = len(_shape_of(fields[0], "stack"))
    axis = _axis(axis, ndim + 1, "stack")
    return concatenate([expand_dims(f, axis) for f in fields], axis)


def reshape_like(data: Any, shape_like: Any) -> Any:
    """``data`` reshaped to the shape of ``shape_like``."""
    return reshape(data, _shape_of(shape_like, "reshape_like"))


def repeat(data: Any, repeats: int, axis: int) -> Any:
    """Each element repeated ``repeats`` times along ``axis`` (numpy's ``repeat``)."""
    shape = list(_shape_of(data, "repeat"))
    axis = _axis(axis, len(shape), "repeat")
    if int(repeats) < 1:
        raise RelayError(f"repeat: repeats must be at least 1, got {repeats}")
    wide = broadcast_to(expand_dims(data, axis + 1), shape[:axis + 1] + [int(repeats)] + shape[axis + 1:])
    return reshape(wide, shape[:axis] + [shape[axis] * int(repeats)] + shape[axis + 1:])


def reverse(data: Any, axis: int) -> Any:
    """``data`` in reverse order along ``axis``."""
    shape = _shape_of(data, "reverse")
    axis = _axis(axis, len(shape), "reverse")
    return strided_slice(data, [shape[axis] - 1], [-shape[axis] - 1], [-1], axes=[axis])


def full(fill_value: Any, shape: Sequence[int] = (), dtype: str = "") -> Any:
    """A tensor of ``shape`` filled with ``fill_value`` (a number or a scalar relay expression), of ``dtype``
    (the value's own when empty)."""
    if not isinstance(fill_value, Expr):
        fill_value = Constant(np.array(fill_value, dtype=dtype or "float32"))
    elif dtype:
        fill_value = make_call("cast", [fill_value], dtype=str(dtype))
    return broadcast_to(fill_value, tuple(int(d) for d in shape))


def zeros(shape: Sequence[int], dtype: str = "float32") -> Any:
    """A tensor of zeros."""
    return full(0, shape, dtype)


def ones(shape: Sequence[int], dtype: str = "float32") -> Any:
    """A tensor of ones."""
    return full(1, shape, dtype)


def full_like(data: Any, fill_value: Any) -> Any:
    """A tensor of ``data``'s shape and type filled with ``fill_value``."""
    t = infer_type(data)
    return full(fill_value, _shape_of(data, "full_like"), t.dtype)


def zeros_like(data: Any) -> Any:
    """Zeros of ``data``'s shape and type."""
    return full_like(data, 0)


def ones_like(data: Any) -> Any:
    """Ones of ``data``'s shape and type."""
    return full_like(data, 1)


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: str = "float32") -> Any:
    """``[start, stop)`` by ``step`` (numpy's ``arange``; numbers or scalar constants): a constant."""
    def number(v: Any) -> Any:
        if isinstance(v, Constant) and v.data.ndim == 0:
            return v.data.item()
        if isinstance(v, Expr):
            raise RelayError("arange: start, stop and step must be numbers or scalar constants (shapes are static)")
        return v

    start, stop, step = number(start), number(stop), number(step)
    values = np.arange(start, step=step, dtype=dtype) if stop is None else np.arange(start, stop, step, dtype=dtype)
    return Constant(values)


def shape_of(data: Any, dtype: str = "int32") -> Any:
    """The shape of ``data`` as a 1-D constant (shapes are static)."""
    return Constant(np.array(_shape_of(data, "shape_of"), dtype=dtype))
