"""``relay.image``: image ops under TVM's names. ``grid_sample`` (ONNX GridSample, PyTorch's ``grid_sample``) reads
each output pixel at a position a grid gives, interpolated from its neighbours (nearest, bilinear, bicubic), with
positions outside the image read as zeros, clamped to the border or reflected, as PyTorch and ONNX define them.
"""

from __future__ import annotations

from typing import Any

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType
from autosched.relay.op import schedules
from autosched.relay.op.common import _c, _ishape, _operands, _same_dtype
from autosched.relay.op.op import OUT_ELEMWISE_FUSABLE, OpDef, make_call, register_op

METHODS = ("nearest", "bilinear", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")
CUBIC_A = -0.75  # the cubic convolution's parameter (PyTorch's and ONNX's)


def _grid_sample_rel(types, attrs):
    op = "image.grid_sample"
    x, grid = _operands(types, op, "data", "grid")
    if attrs["layout"] != "NCHW":
        raise RelayError(f"{op}: layout {attrs['layout']!r} is not supported (NCHW is)")
    if attrs["method"] not in METHODS or attrs["padding_mode"] not in PADDING_MODES:
        raise RelayError(f"{op}: method {attrs['method']!r} and padding_mode {attrs['padding_mode']!r} must be "
                         f"one of {METHODS} and one of {PADDING_MODES}")
    if len(x.shape) != 4 or len(grid.shape) != 4 or grid.shape[1] != 2 or grid.shape[0] != x.shape[0]:
        raise RelayError(f"{op}: data {x.shape} must be NCHW and grid {grid.shape} [N, 2, H_out, W_out] (x, y) with "
                         "the same N")
    dtype = _same_dtype(op, x, grid)
    if dtype not in ("float16", "float32", "float64"):
        raise RelayError(f"{op}: data and grid must be floating point, got {dtype}")
    return TensorType((x.shape[0], x.shape[1], grid.shape[2], grid.shape[3]), dtype)


def _unnormalized(v: Any, size: int, align_corners: bool) -> Any:
    """A grid coordinate in [-1, 1] as a pixel position: -1 and 1 the corner pixels' centres (align_corners) or
    their outer edges."""
    dt = v.dtype
    if align_corners:
        return (v + _c(1.0, dt)) * _c((size - 1) / 2, dt)
    return ((v + _c(1.0, dt)) * _c(size, dt) - _c(1.0, dt)) * _c(0.5, dt)


def _reflected(x: Any, lo: float, hi: float) -> Any:
    """``x`` reflected off ``lo`` and ``hi`` until it lies between them."""
    dt = x.dtype
    span = hi - lo
    if span <= 0:
        return _c(lo, dt) + x * _c(0.0, dt)
    below = x < _c(lo, dt)
    dist = te.if_then_else(below, _c(lo, dt) - x, x - _c(hi, dt))
    turns = te.floor(dist / _c(span, dt))
    rest = dist - turns * _c(span, dt)
    even = turns - te.floor(turns * _c(0.5, dt)) * _c(2.0, dt) < _c(0.5, dt)
    from_lo, from_hi = _c(lo, dt) + rest, _c(hi, dt) - rest
    out = te.if_then_else(below, te.if_then_else(even, from_lo, from_hi), te.if_then_else(even, from_hi, from_lo))
    return te.if_then_else(te.any(below, x > _c(hi, dt)), out, x)


def _cubic_weights(t: Any) -> list[Any]:
    """The four taps' weights at fraction ``t`` of the way from tap 1 to tap 2."""
    dt, a = t.dtype, CUBIC_A

    def near(d):  # |d| <= 1
        return ((_c(a + 2, dt) * d - _c(a + 3, dt)) * d) * d + _c(1.0, dt)

    def far(d):  # 1 < |d| < 2
        return ((_c(a, dt) * d - _c(5 * a, dt)) * d + _c(8 * a, dt)) * d - _c(4 * a, dt)

    one = _c(1.0, dt)
    return [far(t + one), near(t), near(one - t), far(_c(2.0, dt) - t)]


TAPS = {"nearest": (0,), "bilinear": (0, 1), "bicubic": (-1, 0, 1, 2)}  # each tap's offset from floor(position)
STAGE = "grid_sample_"  # the prefix of the per-pixel stages kept at root (see _grid_sample_schedule)


def _grid_sample_compute(inputs, attrs, out_type):
    """Per output pixel and axis, stages (each once per pixel, not per channel) give the position, then each
    tap's index (padding applied: clamped into the image) and weight (zero for a tap outside the image in zeros
    mode); the output sums weight_y * weight_x * data[index_y, index_x] over the taps."""
    data, grid = inputs
    batch, _, height, width = _ishape(data)
    out_h, out_w = int(out_type.shape[2]), int(out_type.shape[3])
    method, padding, align = attrs["method"], attrs["padding_mode"], bool(attrs["align_corners"])
    dt, taps = data.dtype, TAPS[attrs["method"]]
    # the positions inside which no padding rule applies (pixel centres, or their outer edges)
    limits = [(0.0, size - 1.0) if align else (-0.5, size - 0.5) for size in (height, width)]

    def axis_stages(axis: int, size: int) -> tuple[te.Tensor, te.Tensor]:
        def at(n, h, w):
            p = _unnormalized(grid[n, 1 - axis, h, w], size, align)
            if method == "nearest":
                p = te.round(p)
            if padding == "border" and method != "bicubic":  # (bicubic taps are clamped one by one, as in PyTorch)
                return te.minimum(te.maximum(p, _c(0.0, dt)), _c(size - 1.0, dt))
            return _reflected(p, *limits[axis]) if padding == "reflection" else p

        pos = te.compute((batch, out_h, out_w), at, name=f"{STAGE}position_{'yx'[axis]}")

        def tap_index(n, h, w, t):
            k = te.cast("int64", te.floor(pos[n, h, w])) + te.cast("int64", t) + _c(taps[0], "int64")
            if padding == "reflection":  # a tap near a reflected position: one reflection off the near end places it
                lo = limits[axis][0]
                k = te.if_then_else(k < 0, _c(-1 if lo < 0 else 0, "int64") - k, k)
                k = te.if_then_else(k > _c(size - 1, "int64"),
                                    _c(2 * size - 1 if lo < 0 else 2 * size - 2, "int64") - k, k)
            return k

        index = te.compute((batch, out_h, out_w, len(taps)), lambda n, h, w, t: te.minimum(te.maximum(
            tap_index(n, h, w, t), _c(0, "int64")), _c(size - 1, "int64")), name=f"{STAGE}index_{'yx'[axis]}")

        def tap_weight(n, h, w, t):
            p = pos[n, h, w]
            frac = p - te.floor(p)
            if method == "nearest":
                weights = [_c(1.0, dt)]
            elif method == "bilinear":
                weights = [_c(1.0, dt) - frac, frac]
            else:
                weights = _cubic_weights(frac)
            weight = weights[-1]
            for k in range(len(weights) - 2, -1, -1):
                weight = te.if_then_else(t == k, weights[k], weight)
            if padding == "zeros":
                k = tap_index(n, h, w, t)
                weight = te.if_then_else(te.all(k >= 0, k < size), weight, _c(0.0, dt))
            return weight

        weight = te.compute((batch, out_h, out_w, len(taps)), tap_weight, name=f"{STAGE}weight_{'yx'[axis]}")
        return index, weight

    (iy, wy), (ix, wx) = axis_stages(0, height), axis_stages(1, width)

    def sample(n, c, h, w):
        total = None
        for a in range(len(taps)):
            row = None
            for b in range(len(taps)):
                term = wx[n, h, w, b] * data[n, c, iy[n, h, w, a], ix[n, h, w, b]]
                row = term if row is None else row + term
            total = wy[n, h, w, a] * row if total is None else total + wy[n, h, w, a] * row
        return total

    return te.compute(out_type.shape, sample, name="grid_sample")


def _grid_sample_schedule(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """The per-pixel stages (positions, tap indices and weights) at root, each computed once per output pixel (not
    per channel and tap); then the output (and what fused after it) in parallel, vectorized."""
    kept = tuple(t for t in schedules.compute_stages(out) if t.op.name.startswith(STAGE))
    schedules.inline_injective(sch, out, keep=kept)
    for t in kept:
        schedules.flat_parallel_vector(sch, t)
    schedules.flat_parallel_vector(sch, out)


register_op(OpDef("image.grid_sample", _grid_sample_rel, _grid_sample_compute, OUT_ELEMWISE_FUSABLE,
                  attrs={"method": "bilinear", "layout": "NCHW", "padding_mode": "zeros", "align_corners": True},
                  num_inputs=2, schedule=_grid_sample_schedule,
                  doc="data sampled at the grid's (x, y) positions in [-1, 1], interpolated"))


def grid_sample(data: Any, grid: Any, method: str = "bilinear", layout: str = "NCHW", padding_mode: str = "zeros",
                align_corners: bool = True) -> Any:
    """``data`` [N, C, H, W] sampled at ``grid`` [N, 2, H_out, W_out] (x then y, -1 and 1 the image's ends):
    [N, C, H_out, W_out]. ``method`` nearest (halves to even), bilinear or bicubic; ``padding_mode`` zeros,
    border or reflection (TVM's arguments and defaults; PyTorch's grid is [N, H_out, W_out, 2])."""
    return make_call("image.grid_sample", [data, grid], method=str(method), layout=str(layout),
                     padding_mode=str(padding_mode), align_corners=bool(align_corners))


__all__ = ["grid_sample"]
