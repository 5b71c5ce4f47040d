"""Reductions over axes (sum, mean, max, min, prod; ONNX's Reduce ops), argmax / argmin and layer normalisation,
the row-wise reduction every transformer layer runs; their default CPU schedules are in ``schedules``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType
from autosched.relay.op import schedules
from autosched.relay.op.common import _c, _ishape, _operands, _same_dtype, _tensor
from autosched.relay.op.op import COMM_REDUCE, OPAQUE, OpDef, make_call, register_op


def _reduce_axes(ndim: int, axis: Any, op: str) -> tuple[int, ...]:
    """The reduced axes, normalised and sorted (None: all of them)."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(sorted({int(a) % ndim for a in axis})) if ndim else ()
    if any(not -ndim <= int(a) < ndim for a in axis):
        raise RelayError(f"{op}: axes {tuple(axis)} are out of range for {ndim} dimensions")
    return axes


def _reduce_rel(name: str):
    def rel(types, attrs):
        (x,) = _operands(types, name, "data")
        axes = _reduce_axes(len(x.shape), attrs["axis"], name)
        if attrs["keepdims"]:
            shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape))
        else:
            shape = tuple(d for k, d in enumerate(x.shape) if k not in axes)
        return TensorType(shape, x.dtype)

    return rel


def source_index(out_index: Any, ndim: int, reduce_axes: dict, keepdims: bool) -> tuple:
    """The input index an output element of a reduction reads: the reduction variables at the reduced axes
    (``reduce_axes``: axis -> reduce_axis), the output's indices elsewhere (a kept axis's index skipped)."""
    it = iter(out_index)
    out = []
    for a in range(ndim):
        if a in reduce_axes:
            if keepdims:
                next(it)
            out.append(reduce_axes[a])
        else:
            out.append(next(it))
    return tuple(out)


def _reduce_compute(name: str):
    def compute(inputs, attrs, out_type):
        (x,) = inputs
        shape = _ishape(x)
        axes = _reduce_axes(len(shape), attrs["axis"], name)
        keep = bool(attrs["keepdims"])
        ks = {a: te.reduce_axis((0, shape[a]), name=f"k{a}") for a in axes}
        kl = list(ks.values())

        def src(i):
            return source_index(i, len(shape), ks, keep)

        if name in ("sum", "mean"):
            red = te.compute(out_type.shape, lambda *i: te.sum(x[src(i)], axis=kl), name=f"{name}_red", tag=name)
            if name == "sum":
                return red
            n = math.prod(shape[a] for a in axes)
            return te.compute(out_type.shape, lambda *i: red[i] / _c(float(n), x.dtype), name="mean")
        fn = {"max": te.max, "min": te.min, "prod": _product}[name]
        return te.compute(out_type.shape, lambda *i: fn(x[src(i)], axis=kl), name=name, tag=name)

    return compute


_product = te.comm_reducer(lambda a, b: a * b, lambda t: te.const(1, t), name="prod")


for _name in ("sum", "mean", "max", "min", "prod"):
    register_op(OpDef(_name, _reduce_rel(_name), _reduce_compute(_name), COMM_REDUCE,
                      attrs={"axis": None, "keepdims": False}, num_inputs=1, schedule=schedules.reduction,
                      doc=f"{_name} over axes (all by default), keeping them as size 1 with keepdims"))


def _arg_rel(name: str):
    def rel(types, attrs):
        (x,) = _operands(types, name, "data")
        if not x.shape or not -len(x.shape) <= attrs["axis"] < len(x.shape):
            raise RelayError(f"{name}: axis {attrs['axis']} is out of range for data shape {x.shape}")
        axis = attrs["axis"] % len(x.shape)
        keep = bool(attrs["keepdims"])
        return TensorType(tuple(1 if k == axis else d for k, d in enumerate(x.shape) if keep or k != axis), "int64")

    return rel


def _arg_compute(name: str):
    def compute(inputs, attrs, out_type):
        """The extremum along the axis, then the first (or last) index holding it: two plain reductions, which
        the default reduction schedule runs in parallel."""
        (x,) = inputs
        shape = _ishape(x)
        axis = attrs["axis"] % len(shape)
        keep = bool(attrs["keepdims"])
        n = shape[axis]

        def src(i, k):
            return tuple(i[:axis]) + (k,) + tuple(i[axis + (1 if keep else 0):])

        outer = out_type.shape
        k1 = te.reduce_axis((0, n), name="k")
        fn = te.max if name == "argmax" else te.min
        best = te.compute(outer, lambda *i: fn(x[src(i, k1)], axis=k1), name=f"{name}_value", tag=name)
        k2 = te.reduce_axis((0, n), name="k")
        last = bool(attrs["select_last_index"])

        def index(*i):
            hit = x[src(i, k2)] == best[i]
            k = te.cast("int64", k2)
            if last:
                return te.max(te.if_then_else(hit, k, _c(-1, "int64")), axis=k2)
            return te.min(te.if_then_else(hit, k, _c(n, "int64")), axis=k2)

        return te.compute(outer, index, name=name)

    return compute


for _name in ("argmax", "argmin"):
    register_op(OpDef(_name, _arg_rel(_name), _arg_compute(_name), OPAQUE,
                      attrs={"axis": 0, "keepdims": False, "select_last_index": False}, num_inputs=1,
                      schedule=schedules.reduction,
                      doc=f"the index (int64) of the {_name[3:]}imum along one axis; the first, or the last with "
                          "select_last_index"))


def _running_rel(name: str):
    def rel(types, attrs):
        (x,) = _operands(types, name, "data")
        if not x.shape or not -len(x.shape) <= attrs["axis"] < len(x.shape):
            raise RelayError(f"{name}: axis {attrs['axis']} is out of range for data shape {x.shape}")
        return x

    return rel


def _running_compute(name: str):
    def compute(inputs, attrs, out_type):
        """Each output the sum (product) of the inputs up to it along the axis (from the end with ``reverse``;
        itself left out with ``exclusive``): a reduction over the axis masked by position, so n^2 / 2 steps a
        row (rows of token positions: n in the hundreds), in parallel over the rows."""
        (x,) = inputs
        shape = _ishape(x)
        axis = attrs["axis"] % len(shape)
        k = te.reduce_axis((0, shape[axis]), name="k")
        exclusive, reverse = bool(attrs["exclusive"]), bool(attrs["reverse"])
        reducer, identity = (te.sum, 0) if name == "cumsum" else (_product, 1)

        def f(*i):
            j = i[axis]
            if reverse:
                take = k > j if exclusive else k >= j
            else:
                take = k < j if exclusive else k <= j
            v = x[tuple(i[:axis]) + (k,) + tuple(i[axis + 1:])]
            return reducer(te.if_then_else(take, v, _c(identity, x.dtype)), axis=k)

        return te.compute(out_type.shape, f, name=name, tag=name)

    return compute


for _name, _what in (("cumsum", "sum"), ("cumprod", "product")):
    register_op(OpDef(_name, _running_rel(_name), _running_compute(_name), OPAQUE,
                      attrs={"axis": 0, "exclusive": False, "reverse": False}, num_inputs=1,
                      schedule=schedules.reduction,
                      doc=f"the running {_what} along one axis (exclusive: without the element itself; reverse: from "
                          "the end)"))


def _layer_norm_rel(types, attrs):
    op = "nn.layer_norm"
    if len(types) not in (2, 3):
        raise RelayError(f"{op} takes 2 or 3 arguments (data, gamma[, beta]), got {len(types)}")
    x = _tensor(types, 0, op, "data")
    if not x.shape or not -len(x.shape) <= attrs["axis"] < len(x.shape):
        raise RelayError(f"{op}: axis {attrs['axis']} is out of range for data shape {x.shape}")
    axis = attrs["axis"] % len(x.shape)
    norm = tuple(x.shape[axis:])
    for k in range(1, len(types)):
        t = _tensor(types, k, op, "gamma" if k == 1 else "beta")
        aligned = (1,) * (len(norm) - len(t.shape)) + tuple(t.shape)
        if len(t.shape) > len(norm) or any(a not in (1, d) for a, d in zip(aligned, norm)):
            raise RelayError(f"{op}: {'gamma' if k == 1 else 'beta'} shape {t.shape} does not broadcast to the "
                             f"normalised axes {norm} of data shape {x.shape}")
        _same_dtype(op, x, t)
    return x


def _layer_norm_compute(inputs, attrs, out_type):
    """Mean and variance of the rows in one sweep (sums of x - x[0] and its square: shifting by a sample of the row
    keeps the single-pass variance exact to float rounding), then the normalised, scaled and shifted row."""
    x, gamma = inputs[0], inputs[1]
    beta = inputs[2] if len(inputs) > 2 else None
    shape = _ishape(x)
    axis = attrs["axis"] % len(shape)
    outer, inner = shape[:axis], shape[axis:]
    n = math.prod(inner)
    ks = [te.reduce_axis((0, d), name=f"k{a}") for a, d in enumerate(inner)]
    zeros = (0,) * len(inner)
    dt = x.dtype

    def shifted(i):
        return x[tuple(i) + tuple(ks)] - x[tuple(i) + zeros]

    s1 = te.compute(outer, lambda *i: te.sum(shifted(i), axis=ks), name="layer_norm_sum", tag="layer_norm")
    s2 = te.compute(outer, lambda *i: te.sum(shifted(i) * shifted(i), axis=ks), name="layer_norm_sqsum")
    eps, inv_n = _c(float(attrs["epsilon"]), dt), _c(1.0 / n, dt)

    def stats(o):
        m = s1[o] * inv_n  # mean of the shifted row
        return m + x[tuple(o) + zeros], _c(1.0, dt) / te.sqrt(s2[o] * inv_n - m * m + eps)

    def param(t, j):
        nd = len(t.shape)
        sub = j[len(j) - nd:] if nd else ()
        return t[tuple(0 if int(d) == 1 else jj for d, jj in zip(t.shape, sub))] if nd else t[()]

    def f(*i):
        o, j = i[:axis], i[axis:]
        mean, rstd = stats(o)
        y = (x[i] - mean) * rstd * param(gamma, j)
        return y + param(beta, j) if beta is not None else y

    return te.compute(out_type.shape, f, name="layer_norm")


register_op(OpDef("nn.layer_norm", _layer_norm_rel, _layer_norm_compute, OPAQUE, attrs={"axis": -1, "epsilon": 1e-5},
                  schedule=schedules.layer_norm,
                  doc="(x - mean) / sqrt(var + epsilon) * gamma + beta over the axes from axis on (ONNX)"))


def sum(data: Any, axis: Sequence[int] | None = None, keepdims: bool = False) -> Any:  # noqa: A001 - TVM's name
    """Sum over ``axis`` (all axes by default)."""
    return _reduce("sum", data, axis, keepdims)


def mean(data: Any, axis: Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """Mean over ``axis`` (all axes by default)."""
    return _reduce("mean", data, axis, keepdims)


def max(data: Any, axis: Sequence[int] | None = None, keepdims: bool = False) -> Any:  # noqa: A001 - TVM's name
    """Maximum over ``axis`` (all axes by default)."""
    return _reduce("max", data, axis, keepdims)


def min(data: Any, axis: Sequence[int] | None = None, keepdims: bool = False) -> Any:  # noqa: A001 - TVM's name
    """Minimum over ``axis`` (all axes by default)."""
    return _reduce("min", data, axis, keepdims)


def prod(data: Any, axis: Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """Product over ``axis`` (all axes by default)."""
    return _reduce("prod", data, axis, keepdims)


def argmax(data: Any, axis: int = 0, keepdims: bool = False, select_last_index: bool = False) -> Any:
    """The index (int64) of the largest value along ``axis``: the first one, or the last."""
    return make_call("argmax", [data], axis=int(axis), keepdims=bool(keepdims),
                     select_last_index=bool(select_last_index))


def argmin(data: Any, axis: int = 0, keepdims: bool = False, select_last_index: bool = False) -> Any:
    """The index (int64) of the smallest value along ``axis``: the first one, or the last."""
    return make_call("argmin", [data], axis=int(axis), keepdims=bool(keepdims),
                     select_last_index=bool(select_last_index))


def cumsum(data: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Any:
    """The running sum along ``axis`` (TVM's ``relay.cumsum``; ``reverse`` sums from the end, as ONNX's)."""
    return make_call("cumsum", [data], axis=int(axis), exclusive=bool(exclusive), reverse=bool(reverse))


def cumprod(data: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Any:
    """The running product along ``axis`` (TVM's ``relay.cumprod``; ``reverse`` from the end, as ONNX's)."""
    return make_call("cumprod", [data], axis=int(axis), exclusive=bool(exclusive), reverse=bool(reverse))


def _reduce(name: str, data: Any, axis: Any, keepdims: bool) -> Any:
    axis = None if axis is None else tuple(int(a) for a in ([axis] if isinstance(axis, int) else axis))
    return make_call(name, [data], axis=axis, keepdims=bool(keepdims))


def layer_norm(data: Any, gamma: Any, beta: Any | None = None, axis: int = -1, epsilon: float = 1e-5) -> Any:
    """Layer normalisation over the axes from ``axis`` to the last (ONNX LayerNormalization)."""
    args = [data, gamma] + ([beta] if beta is not None else [])
    return make_call("nn.layer_norm", args, axis=int(axis), epsilon=float(epsilon))
