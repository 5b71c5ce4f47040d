"""Neural-network relay ops: conv2d, dense, matmul, batch_matmul, pooling, batch_norm, softmax, log_softmax, lrn,
dilate."""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType, TupleType
from autosched.relay.op import schedules
from autosched.relay.op.common import _c, _ishape, _nargs, _operands, _pair, _same_dtype, _tensor, pad4
from autosched.relay.op.op import (
    INJECTIVE,
    OPAQUE,
    OUT_ELEMWISE_FUSABLE,
    OpDef,
    make_call,
    register_op,
)


def _conv2d_geometry(dshape, wshape, attrs):
    sh, sw = _pair(attrs["strides"], "nn.conv2d", "strides")
    dh, dw = _pair(attrs["dilation"], "nn.conv2d", "dilation")
    pt, pl, pb, pr = pad4(attrs["padding"], "nn.conv2d")
    N, C, H, W = dshape
    O, I, KH, KW = wshape
    OH = (H + pt + pb - ((KH - 1) * dh + 1)) // sh + 1
    OW = (W + pl + pr - ((KW - 1) * dw + 1)) // sw + 1
    return N, C, H, W, O, I, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW


def _conv2d_rel(types, attrs):
    op = "nn.conv2d"
    d, w = _operands(types, op, "data", "weight")
    if attrs["data_layout"] != "NCHW" or attrs["kernel_layout"] != "OIHW":
        raise RelayError(f"{op}: only data_layout NCHW with kernel_layout OIHW is supported, got "
                         f"{attrs['data_layout']}/{attrs['kernel_layout']}")
    if len(d.shape) != 4 or len(w.shape) != 4:
        raise RelayError(f"{op}: data {d.shape} and weight {w.shape} must both be 4-D (NCHW, OIHW)")
    g = int(attrs["groups"])
    N, C, H, W, O, I, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW = _conv2d_geometry(d.shape, w.shape, attrs)
    if g < 1 or C != I * g or O % g:
        raise RelayError(f"{op}: data shape {d.shape} has {C} channels but weight shape {w.shape} expects "
                         f"{I} x groups={g} = {I * g} (and {O} output channels must divide by groups)")
    if attrs.get("channels") is not None and int(attrs["channels"]) != O:
        raise RelayError(f"{op}: channels={attrs['channels']} but weight shape {w.shape} has {O} output channels")
    if attrs.get("kernel_size") is not None and tuple(_pair(attrs["kernel_size"], op, "kernel_size")) != (KH, KW):
        raise RelayError(f"{op}: kernel_size={attrs['kernel_size']} but weight shape {w.shape} is {KH}x{KW}")
    if OH <= 0 or OW <= 0 or min(sh, sw, dh, dw) <= 0:
        raise RelayError(f"{op}: data shape {d.shape} with weight {w.shape}, strides {(sh, sw)}, padding "
                         f"{(pt, pl, pb, pr)}, dilation {(dh, dw)} gives an empty output {OH}x{OW}")
    return TensorType((N, O, OH, OW), _sum_dtype(op, d, w, attrs))


def _sum_dtype(op: str, d: TensorType, w: TensorType, attrs: dict) -> str:
    """The dtype a product of ``d`` and ``w`` is summed in: theirs, or ``out_dtype``, the operands cast to it
    (TVM's meaning: uint8/int8 operands summed in int32 are a quantized model's products)."""
    out = attrs.get("out_dtype") or ""
    if not out:
        return _same_dtype(op, d, w)
    try:
        np.dtype(out)
    except TypeError:
        raise RelayError(f"{op}: out_dtype={out!r} is not a dtype") from None
    return out


def pad_nchw(data: te.Tensor, pt: int, pl: int, pb: int, pr: int, value: Any = 0.0, name: str = "pad") -> te.Tensor:
    """Pad the last two axes of a 4-D tensor (a stage schedules usually keep at root or inline)."""
    if pt == pl == pb == pr == 0:
        return data
    N, C, H, W = _ishape(data)

    def f(n, c, y, x):
        inside = te.all(y >= pt, y < H + pt, x >= pl, x < W + pl)
        return te.if_then_else(inside, data[n, c, y - pt, x - pl], te.const(value, data.dtype))

    return te.compute((N, C, H + pt + pb, W + pl + pr), f, name=name)


def _conv2d_compute(inputs, attrs, out_type):
    data, weight = inputs
    N, C, H, W, O, I, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW = _conv2d_geometry(
        _ishape(data), _ishape(weight), attrs)
    g = int(attrs["groups"])
    pad = pad_nchw(data, pt, pl, pb, pr)
    wide = (lambda v: v.astype(out_type.dtype)) if attrs.get("out_dtype") else (lambda v: v)
    rc = te.reduce_axis((0, I), name="rc")
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")
    og = O // g
    if g == 1:
        def f(n, o, y, x):
            return te.sum(wide(pad[n, rc, y * sh + rh * dh, x * sw + rw * dw]) * wide(weight[o, rc, rh, rw]),
                          axis=[rc, rh, rw])
    else:
        def f(n, o, y, x):
            return te.sum(wide(pad[n, (o // og) * I + rc, y * sh + rh * dh, x * sw + rw * dw])
                          * wide(weight[o, rc, rh, rw]), axis=[rc, rh, rw])
    return te.compute((N, O, OH, OW), f, name="conv2d", tag="conv2d")


def _canon_spatial(attrs: dict) -> dict:
    """Padding as 4 ints, strides/dilation/pool_size as 2; informational attributes dropped."""
    out = {k: v for k, v in attrs.items() if k not in ("channels", "kernel_size", "units")}
    if "padding" in out:
        out["padding"] = list(pad4(out["padding"], "canonical"))
    for k in ("strides", "dilation", "pool_size"):
        if k in out:
            out[k] = list(_pair(out[k], "canonical", k))
    return out


def _canon_conv2d(attrs: dict) -> dict:
    """:func:`_canon_spatial`, and no ``out_dtype`` when it is the operands' own: task keys (and tuning records)
    of convolutions are what they were before it was an attribute."""
    out = _canon_spatial(attrs)
    if not out.get("out_dtype", "x"):
        del out["out_dtype"]
    return out


register_op(OpDef(
    "nn.conv2d", _conv2d_rel, _conv2d_compute, OUT_ELEMWISE_FUSABLE, num_inputs=2,
    attrs={"strides": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1, "channels": None,
           "kernel_size": None, "data_layout": "NCHW", "kernel_layout": "OIHW", "out_dtype": ""},
    schedule=schedules.conv2d_nchw, doc="2-D convolution, NCHW data and OIHW weights (with out_dtype, the operands' "
                                         "products summed in it)",
    canonical_attrs=_canon_conv2d))


def _dense_rel(types, attrs):
    op = "nn.dense"
    d, w = _operands(types, op, "data", "weight")
    if len(d.shape) < 1 or len(w.shape) != 2 or d.shape[-1] != w.shape[1]:
        raise RelayError(f"{op}: data shape {d.shape} and weight shape {w.shape} (units, in) do not match: "
                         f"{d.shape[-1] if d.shape else '?'} != {w.shape[1] if len(w.shape) == 2 else '?'}")
    if attrs.get("units") is not None and int(attrs["units"]) != w.shape[0]:
        raise RelayError(f"{op}: units={attrs['units']} but weight shape {w.shape} has {w.shape[0]} rows")
    return TensorType(d.shape[:-1] + (w.shape[0],), _sum_dtype(op, d, w, attrs))


def _dense_compute(inputs, attrs, out_type):
    """data @ weight.T; with ``out_dtype`` the operands' products summed in it."""
    data, weight = inputs
    k = te.reduce_axis((0, int(weight.shape[1])), name="k")
    out = attrs.get("out_dtype") or ""
    wide = (lambda x: x.astype(out)) if out else (lambda x: x)
    return te.compute(out_type.shape, lambda *i: te.sum(wide(data[i[:-1] + (k,)]) * wide(weight[i[-1], k]), axis=k),
                      name="dense", tag="dense")


register_op(OpDef("nn.dense", _dense_rel, _dense_compute, OUT_ELEMWISE_FUSABLE, attrs={"units": None, "out_dtype": ""},
                  num_inputs=2, schedule=schedules.dense, doc="data @ weight.T (weight is [units, in])",
                  canonical_attrs=_canon_spatial))


def _matmul_rel(types, attrs):
    op = "nn.matmul"
    a, b = _operands(types, op, "a", "b")
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise RelayError(f"{op}: operands must be 2-D, got {a.shape} and {b.shape}")
    M, K = a.shape[::-1] if attrs["transpose_a"] else a.shape
    K2, N = b.shape[::-1] if attrs["transpose_b"] else b.shape
    if K != K2:
        raise RelayError(f"{op}: inner dimensions differ: {a.shape}{'^T' if attrs['transpose_a'] else ''} @ "
                         f"{b.shape}{'^T' if attrs['transpose_b'] else ''}")
    return TensorType((M, N), _same_dtype(op, a, b))


def _matmul_compute(inputs, attrs, out_type):
    a, b = inputs
    ta, tb = attrs["transpose_a"], attrs["transpose_b"]
    K = int(a.shape[0 if ta else 1])
    k = te.reduce_axis((0, K), name="k")

    def f(i, j):
        av = a[k, i] if ta else a[i, k]
        bv = b[j, k] if tb else b[k, j]
        return te.sum(av * bv, axis=k)

    return te.compute(out_type.shape, f, name="matmul", tag="matmul")


register_op(OpDef("nn.matmul", _matmul_rel, _matmul_compute, OUT_ELEMWISE_FUSABLE,
                  attrs={"transpose_a": False, "transpose_b": False}, num_inputs=2, schedule=schedules.matmul,
                  doc="a @ b with optional transposes"))


def _batch_matmul_rel(types, attrs):
    op = "nn.batch_matmul"
    x, y = _operands(types, op, "x", "y")
    if len(x.shape) < 3 or len(y.shape) != len(x.shape):
        raise RelayError(f"{op}: operands must have the same rank, 3 or more, got {x.shape} and {y.shape}")
    M, K = (x.shape[-1], x.shape[-2]) if attrs["transpose_a"] else x.shape[-2:]
    K2, N = (y.shape[-1], y.shape[-2]) if attrs["transpose_b"] else y.shape[-2:]
    batch = []
    for b1, b2 in zip(x.shape[:-2], y.shape[:-2]):
        if b1 != b2 and 1 not in (b1, b2):
            K2 = -1
        batch.append(max(b1, b2))
    if K != K2:
        raise RelayError(f"{op}: shapes {x.shape} and {y.shape} (transpose_a={attrs['transpose_a']}, "
                         f"transpose_b={attrs['transpose_b']}) do not multiply")
    return TensorType(tuple(batch) + (M, N), _same_dtype(op, x, y))


def _batch_matmul_compute(inputs, attrs, out_type):
    """Over any number of batch axes (attention's [batch, heads, rows, cols] as it is), a batch of 1 broadcast."""
    x, y = inputs
    ta, tb = attrs["transpose_a"], attrs["transpose_b"]
    K = int(x.shape[-2 if ta else -1])
    k = te.reduce_axis((0, K), name="k")
    nb = len(out_type.shape) - 2

    def f(*idx):
        bb, i, j = idx[:nb], idx[nb], idx[nb + 1]
        b1 = tuple(0 if int(d) == 1 else b for d, b in zip(x.shape[:nb], bb))
        b2 = tuple(0 if int(d) == 1 else b for d, b in zip(y.shape[:nb], bb))
        xv = x[b1 + (k, i)] if ta else x[b1 + (i, k)]
        yv = y[b2 + (j, k)] if tb else y[b2 + (k, j)]
        return te.sum(xv * yv, axis=k)

    return te.compute(out_type.shape, f, name="batch_matmul", tag="batch_matmul")


register_op(OpDef("nn.batch_matmul", _batch_matmul_rel, _batch_matmul_compute, OUT_ELEMWISE_FUSABLE,
                  attrs={"transpose_a": False, "transpose_b": True}, num_inputs=2, schedule=schedules.batch_matmul,
                  doc="batched matmul over one or more batch axes (y transposed by default, as in TVM)"))


def _pool_geometry(shape, attrs, op):
    N, C, H, W = shape
    KH, KW = _pair(attrs["pool_size"], op, "pool_size")
    sh, sw = _pair(attrs["strides"], op, "strides")
    dh, dw = _pair(attrs.get("dilation", (1, 1)), op, "dilation")
    pt, pl, pb, pr = pad4(attrs["padding"], op)
    ekh, ekw = (KH - 1) * dh + 1, (KW - 1) * dw + 1
    if attrs["ceil_mode"]:
        OH = -(-(H + pt + pb - ekh) // sh) + 1
        OW = -(-(W + pl + pr - ekw) // sw) + 1
        if (OH - 1) * sh >= H + pt:  # the last window must start inside the input or the leading pad
            OH -= 1
        if (OW - 1) * sw >= W + pl:
            OW -= 1
    else:
        OH = (H + pt + pb - ekh) // sh + 1
        OW = (W + pl + pr - ekw) // sw + 1
    return N, C, H, W, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW


def channel_block_of(layout: str, op: str) -> int | None:
    """The block of a layout: None for ``NCHW``, ``x`` for ``NCHW[x]c`` (a block of x channels innermost)."""
    if layout == "NCHW":
        return None
    if layout.startswith("NCHW") and layout.endswith("c") and layout[4:-1].isdigit() and int(layout[4:-1]) > 0:
        return int(layout[4:-1])
    raise RelayError(f"{op}: layout must be NCHW or NCHW[x]c (NCHW16c), got {layout!r}")


def _spatial_input(x: TensorType, layout: str, op: str) -> tuple[tuple[int, int, int, int], tuple[int, ...]]:
    """``((N, C, H, W), trailing block dims)`` of a data type in ``layout``, checked."""
    block = channel_block_of(layout, op)
    if block is None:
        if len(x.shape) != 4:
            raise RelayError(f"{op}: data must be 4-D NCHW, got shape {x.shape}")
        return x.shape, ()
    if len(x.shape) != 5 or x.shape[4] != block:
        raise RelayError(f"{op}: data in layout {layout} must be 5-D [N, C/{block}, H, W, {block}], "
                         f"got shape {x.shape}")
    N, CB, H, W, B = x.shape
    return (N, CB * B, H, W), (B,)


def _pool_rel(op):
    def rel(types, attrs):
        (x,) = _operands(types, op, "data")
        nchw, block = _spatial_input(x, attrs["layout"], op)
        N, C, H, W, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW = _pool_geometry(nchw, attrs, op)
        if OH <= 0 or OW <= 0:
            raise RelayError(f"{op}: data shape {x.shape} with pool_size {(KH, KW)}, strides {(sh, sw)}, "
                             f"padding {(pt, pl, pb, pr)} gives an empty output {OH}x{OW}")
        return TensorType((N, x.shape[1], OH, OW) + block, x.dtype)

    return rel


def _pool_index(x: te.Tensor) -> Any:
    """``at(n, c, h, w, rest)``: the element of 4-D (NCHW) or 5-D (NCHW[x]c, ``rest`` the block index) data."""
    return lambda n, c, h, w, rest: x[(n, c, h, w) + tuple(rest)]


def _logical_nchw(x: te.Tensor) -> tuple[int, int, int, int]:
    s = _ishape(x)
    return s if len(s) == 4 else (s[0], s[1] * s[4], s[2], s[3])


def _pool_window(x: te.Tensor, attrs: dict, out_type, op_name: str, reduce, outside, name: str) -> tuple:
    """The pooling window's reduction (``reduce``: te.max or te.sum) over the in-bounds taps, ``outside`` where a
    tap falls in the padding; returns the compute and the window geometry."""
    geometry = _pool_geometry(_logical_nchw(x), attrs, op_name)
    N, C, H, W, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW = geometry
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")
    at = _pool_index(x)

    # a window that never leaves the input (no padding, no overhang) reads it without a bounds test
    within = pt == 0 and pl == 0 and (OH - 1) * sh + (KH - 1) * dh < H and (OW - 1) * sw + (KW - 1) * dw < W

    def f(n, c, y, xx, *rest):
        if within:  # the taps without their unit terms (the form TVM's pooling has)
            h = (y * sh if sh != 1 else y) + (rh * dh if dh != 1 else rh)
            w = (xx * sw if sw != 1 else xx) + (rw * dw if dw != 1 else rw)
            return reduce(at(n, c, h, w, rest), axis=[rh, rw])
        # (written as it always was: tuning records name the computation by its structure)
        h = y * sh + rh * dh - pt
        w = xx * sw + rw * dw - pl
        inside = te.all(h >= 0, h < H, w >= 0, w < W)
        return reduce(te.if_then_else(inside, at(n, c, h, w, rest), outside), axis=[rh, rw])

    return te.compute(out_type.shape, f, name=name, tag=op_name.removeprefix("nn.")), geometry


def _max_pool_compute(inputs, attrs, out_type):
    (x,) = inputs
    return _pool_window(x, attrs, out_type, "nn.max_pool2d", te.max, te.min_value(x.dtype), "max_pool2d")[0]


def _avg_pool_compute(inputs, attrs, out_type):
    (x,) = inputs
    s, (N, C, H, W, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW) = _pool_window(
        x, attrs, out_type, "nn.avg_pool2d", te.sum, te.const(0.0, x.dtype), "pool_sum")
    if dh == 1 and dw == 1:
        lo_h, hi_h = (-pt, H + pb) if attrs["count_include_pad"] else (0, H)
        lo_w, hi_w = (-pl, W + pr) if attrs["count_include_pad"] else (0, W)

        def count(y, xx):
            h0 = te.maximum(y * sh - pt, lo_h)
            h1 = te.minimum(y * sh - pt + KH, hi_h)
            w0 = te.maximum(xx * sw - pl, lo_w)
            w1 = te.minimum(xx * sw - pl + KW, hi_w)
            return te.maximum((h1 - h0) * (w1 - w0), 1).astype(x.dtype)

    else:  # dilated taps: count those of ``start + r * d`` (r < K) inside [lo, hi) along each axis
        lo_h, hi_h = (-pt, H + pb) if attrs["count_include_pad"] else (0, H)
        lo_w, hi_w = (-pl, W + pr) if attrs["count_include_pad"] else (0, W)

        def taps(start, lo, hi, K, d):
            first = te.maximum(te.floordiv(lo - start + (d - 1), d), 0)
            last = te.minimum(te.floordiv(hi - 1 - start, d), K - 1)
            return te.maximum(last - first + 1, 0)

        def count(y, xx):
            n_h = taps(y * sh - pt, lo_h, hi_h, KH, dh)
            n_w = taps(xx * sw - pl, lo_w, hi_w, KW, dw)
            return te.maximum(n_h * n_w, 1).astype(x.dtype)

    return te.compute(out_type.shape, lambda n, c, y, xx, *rest: s[(n, c, y, xx) + rest] / count(y, xx),
                      name="avg_pool2d")


_POOL_ATTRS = {"pool_size": (1, 1), "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0), "layout": "NCHW",
               "ceil_mode": False}


register_op(OpDef("nn.max_pool2d", _pool_rel("nn.max_pool2d"), _max_pool_compute, OPAQUE, attrs=dict(_POOL_ATTRS),
                  num_inputs=1, schedule=schedules.pool, doc="2-D max pooling (NCHW or NCHW[x]c)",
                  canonical_attrs=_canon_spatial))


register_op(OpDef("nn.avg_pool2d", _pool_rel("nn.avg_pool2d"), _avg_pool_compute, OPAQUE,
                  attrs={**_POOL_ATTRS, "count_include_pad": False}, num_inputs=1, schedule=schedules.pool,
                  doc="2-D average pooling (NCHW or NCHW[x]c)", canonical_attrs=_canon_spatial))


def _gap_rel(types, attrs):
    (x,) = _operands(types, "nn.global_avg_pool2d", "data")
    _, block = _spatial_input(x, attrs["layout"], "nn.global_avg_pool2d")
    return TensorType(x.shape[:2] + (1, 1) + block, x.dtype)


def _gap_compute(inputs, attrs, out_type):
    (x,) = inputs
    H, W = _ishape(x)[2:4]
    rh = te.reduce_axis((0, H), name="rh")
    rw = te.reduce_axis((0, W), name="rw")
    s = te.compute(out_type.shape, lambda n, c, y, xx, *rest: te.sum(x[(n, c, rh, rw) + rest], axis=[rh, rw]),
                   name="pool_sum", tag="global_avg_pool2d")
    return te.compute(out_type.shape, lambda n, c, y, xx, *rest: s[(n, c, y, xx) + rest] / te.const(
        float(H * W), x.dtype), name="global_avg_pool2d")


register_op(OpDef("nn.global_avg_pool2d", _gap_rel, _gap_compute, OPAQUE, attrs={"layout": "NCHW"}, num_inputs=1,
                  schedule=schedules.global_pool, doc="mean over H and W (NCHW or NCHW[x]c)"))


def _batch_norm_rel(types, attrs):
    op = "nn.batch_norm"
    _nargs(types, 5, op)
    x = _tensor(types, 0, op, "data")
    axis = attrs["axis"] % len(x.shape)
    for k, what in enumerate(("gamma", "beta", "moving_mean", "moving_var"), 1):
        t = _tensor(types, k, op, what)
        if t.shape != (x.shape[axis],):
            raise RelayError(f"{op}: {what} shape {t.shape} must be ({x.shape[axis]},) for data shape {x.shape} "
                             f"on axis {attrs['axis']}")
    vec = TensorType((x.shape[axis],), x.dtype)
    return TupleType([x, vec, vec])


def _batch_norm_compute(inputs, attrs, out_type):
    x, gamma, beta, mean, var = inputs
    axis = attrs["axis"] % len(x.shape)
    eps = te.const(float(attrs["epsilon"]), x.dtype)

    def f(*i):
        c = i[axis]
        v = (x[i] - mean[c]) / te.sqrt(var[c] + eps)
        if attrs["scale"]:
            v = v * gamma[c]
        return v + beta[c] if attrs["center"] else v

    return te.compute(out_type.fields[0].shape, f, name="batch_norm")


register_op(OpDef("nn.batch_norm", _batch_norm_rel, _batch_norm_compute, OPAQUE, num_inputs=5,
                  attrs={"axis": 1, "epsilon": 1e-5, "center": True, "scale": True},
                  doc="inference batch norm; returns (out, mean, var) like TVM; SimplifyInference rewrites it"))


def _one_axis_rel(op: str):
    def rel(types, attrs):
        (x,) = _operands(types, op, "data")
        if not x.shape or not -len(x.shape) <= attrs["axis"] < len(x.shape):
            raise RelayError(f"{op}: axis {attrs['axis']} is out of range for shape {x.shape}")
        return x

    return rel


def _along_axis(x, axis_attr: int):
    """What a reduction along one axis of ``x`` needs (softmax, log_softmax): the shape, the reduced shape,
    two reduction axes over it, ``at(i, k)`` (index i of the reduced tensor with k put back on the axis) and
    ``red(i)`` (index i of the full tensor without the axis)."""
    shape = _ishape(x)
    axis = axis_attr % len(shape)
    red_shape = shape[:axis] + shape[axis + 1:]
    k1 = te.reduce_axis((0, shape[axis]), name="k1")
    k2 = te.reduce_axis((0, shape[axis]), name="k2")

    def at(i, k):
        return tuple(i[:axis]) + (k,) + tuple(i[axis:])

    def red(i):
        return tuple(i[:axis]) + tuple(i[axis + 1:])

    return shape, red_shape, k1, k2, at, red


def _softmax_compute(inputs, attrs, out_type):
    (x,) = inputs
    shape, red_shape, k1, k2, at, red = _along_axis(x, attrs["axis"])
    mx = te.compute(red_shape, lambda *i: te.max(x[at(i, k1)], axis=k1), name="softmax_max", tag="softmax")
    ex = te.compute(shape, lambda *i: te.exp(x[i] - mx[red(i)]), name="softmax_exp")
    sm = te.compute(red_shape, lambda *i: te.sum(ex[at(i, k2)], axis=k2), name="softmax_sum")
    # one division per row, a product per element (as onnxruntime's): the result moves by at most an ulp
    return te.compute(shape, lambda *i: ex[i] * (1.0 / sm[red(i)]), name="softmax")


register_op(OpDef("nn.softmax", _one_axis_rel("nn.softmax"), _softmax_compute, OPAQUE, attrs={"axis": -1}, num_inputs=1,
                  schedule=schedules.softmax, doc="softmax along one axis"))


def _log_softmax_compute(inputs, attrs, out_type):
    (x,) = inputs
    shape, red_shape, k1, k2, at, red = _along_axis(x, attrs["axis"])
    mx = te.compute(red_shape, lambda *i: te.max(x[at(i, k1)], axis=k1), name="log_softmax_max", tag="log_softmax")
    sm = te.compute(red_shape, lambda *i: te.sum(te.exp(x[at(i, k2)] - mx[i]), axis=k2), name="log_softmax_sum")
    return te.compute(shape, lambda *i: x[i] - mx[red(i)] - te.log(sm[red(i)]), name="log_softmax")


register_op(OpDef("nn.log_softmax", _one_axis_rel("nn.log_softmax"), _log_softmax_compute, OPAQUE,
                  attrs={"axis": -1}, num_inputs=1, schedule=schedules.reduction,
                  doc="log of softmax along one axis (x - max - log sum exp)"))


def _lrn_rel(types, attrs):
    op = "nn.lrn"
    x = _one_axis_rel(op)(types, attrs)
    if int(attrs["size"]) < 1:
        raise RelayError(f"{op}: size must be at least 1, got {attrs['size']}")
    return x


def _lrn_compute(inputs, attrs, out_type):
    """ONNX's window: channels c - (size - 1) // 2 .. c + size // 2 (clipped), alpha divided by size (as TVM)."""
    (x,) = inputs
    shape = _ishape(x)
    axis = attrs["axis"] % len(shape)
    size, C = int(attrs["size"]), shape[axis]
    lo = (size - 1) // 2
    r = te.reduce_axis((0, size), name="rc")
    zero = te.const(0.0, x.dtype)

    def sqr_sum(*i):
        c = i[axis] + r - lo
        v = x[tuple(i[:axis]) + (c,) + tuple(i[axis + 1:])]
        return te.sum(te.if_then_else(te.all(c >= 0, c < C), v * v, zero), axis=r)

    s = te.compute(shape, sqr_sum, name="lrn_sqr_sum", tag="lrn")
    bias, scale = _c(float(attrs["bias"]), x.dtype), _c(float(attrs["alpha"]) / size, x.dtype)
    beta = _c(float(attrs["beta"]), x.dtype)
    return te.compute(shape, lambda *i: x[i] / te.power(bias + scale * s[i], beta), name="lrn")


register_op(OpDef("nn.lrn", _lrn_rel, _lrn_compute, OPAQUE, num_inputs=1, schedule=schedules.reduction,
                  attrs={"size": 5, "axis": 1, "bias": 2.0, "alpha": 1e-5, "beta": 0.75},
                  doc="local response normalisation across an axis: x / (bias + alpha / size * sum x^2) ^ beta"))


def log_softmax(data: Any, axis: int = -1) -> Any:
    return make_call("nn.log_softmax", [data], axis=int(axis))


def lrn(data: Any, size: int = 5, axis: int = 1, bias: float = 2.0, alpha: float = 1e-5, beta: float = 0.75) -> Any:
    """Local response normalisation (TVM's arguments; alpha is divided by size, as ONNX's LRN does)."""
    return make_call("nn.lrn", [data], size=int(size), axis=int(axis), bias=float(bias), alpha=float(alpha),
                     beta=float(beta))


def _dilate_rel(types, attrs):
    op = "nn.dilate"
    (x,) = _operands(types, op, "data")
    strides = attrs["strides"]
    if strides is None or len(strides) != len(x.shape) or any(int(s) < 1 for s in strides):
        raise RelayError(f"{op}: strides {strides} must give one positive int per dimension of shape {x.shape}")
    return TensorType(tuple((d - 1) * int(s) + 1 for d, s in zip(x.shape, strides)), x.dtype)


def _dilate_compute(inputs, attrs, out_type):
    """Element i of the input lands at i * stride on each axis; the positions between hold ``dilation_value``."""
    (x,) = inputs
    strides = [int(s) for s in attrs["strides"]]

    def f(*i):
        src = tuple(ik // s if s > 1 else ik for ik, s in zip(i, strides))
        on_grid = [ik % s == 0 for ik, s in zip(i, strides) if s > 1]
        if not on_grid:
            return x[src]
        return te.if_then_else(te.all(*on_grid), x[src], te.const(float(attrs["dilation_value"]), x.dtype))

    return te.compute(out_type.shape, f, name="dilate")


register_op(OpDef("nn.dilate", _dilate_rel, _dilate_compute, INJECTIVE, num_inputs=1,
                  attrs={"strides": None, "dilation_value": 0.0},
                  doc="stride - 1 copies of dilation_value between neighbouring elements of each axis (TVM's "
                      "topi.nn.dilate): a transposed convolution is a stride-1 convolution of its dilated input"))


def dilate(data: Any, strides: Any, dilation_value: float = 0.0) -> Any:
    """TVM's ``relay.nn.dilate``: ``strides`` has one int per axis of ``data`` (1: that axis unchanged)."""
    return make_call("nn.dilate", [data], strides=tuple(int(s) for s in strides),
                     dilation_value=float(dilation_value))
