"""``relay.image``: image ops under TVM's names. ``resize1d`` / ``resize2d`` / ``resize3d`` (nearest neighbour,
linear, cubic; ONNX Resize's coordinate modes), TensorFlow's ``crop_and_resize``, and a spatial transformer's
``affine_grid`` and ``grid_sample`` (ONNX GridSample, PyTorch's ``grid_sample``), which reads each output pixel at a
position a grid gives, interpolated from its neighbours (nearest, bilinear, bicubic), with positions outside the
image read as zeros, clamped to the border or reflected, as PyTorch and ONNX define them.
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


def _stages_at_root(prefix: str, what: str) -> Any:
    """A default schedule keeping the stages named ``prefix``... at root (``what``: each computed once per output
    pixel or position, not per channel and tap), each and then the output (and what fused after it) in parallel,
    vectorized."""
    def schedule(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
        kept = tuple(t for t in schedules.compute_stages(out) if t.op.name.startswith(prefix))
        schedules.inline_injective(sch, out, keep=kept)
        for t in kept:
            schedules.flat_parallel_vector(sch, t)
        schedules.flat_parallel_vector(sch, out)

    schedule.__doc__ = f"{what} at root, then the output in parallel, vectorized."
    return schedule


_grid_sample_schedule = _stages_at_root(STAGE, "The per-pixel positions, tap indices and weights")


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




# ------------------------------------------------------------------------------------------------ resize
RESIZE_METHODS = ("nearest_neighbor", "linear", "cubic")
_METHOD_ALIASES = {"nearest": "nearest_neighbor", "bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_half_pixel_for_nn")
ROUNDING_METHODS = ("round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
RESIZE_LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}
RESIZE_STAGE = "resize_"  # the prefix of the per-axis index and weight stages kept at root
_RESIZE_TAPS = {"nearest_neighbor": (0,), "linear": (0, 1), "cubic": (-1, 0, 1, 2)}


def source_coordinate(o: Any, in_size: int, out_size: int, scale: float, mode: str, const: Any) -> Any:
    """The input coordinate that output position ``o`` of one axis reads under a coordinate transformation mode
    (ONNX Resize's, which include TVM's); ``scale`` is output / input size. ``o`` is a float numpy array (ONNX's
    import-time tables) or a te expression (``image.resize``), ``const(v)`` a constant of its type."""
    s = const(scale)
    if mode == "asymmetric":
        return o / s
    if mode in ("half_pixel", "half_pixel_symmetric"):
        x = (o + const(0.5)) / s - const(0.5)
        if mode == "half_pixel_symmetric":
            adjustment = const(out_size) / (s * const(in_size))
            x = x + const(in_size) / const(2) * (const(1) - adjustment)
        return x
    if mode == "pytorch_half_pixel":
        return (o + const(0.5)) / s - const(0.5) if out_size > 1 else o * const(0.0)
    if mode == "align_corners":
        return o * const(in_size - 1) / const(out_size - 1) if out_size > 1 else o * const(0.0)
    if mode == "tf_half_pixel_for_nn":
        return (o + const(0.5)) / s
    raise ValueError(f"unknown coordinate transformation mode {mode!r} (one of {', '.join(COORDINATE_MODES)})")


def cubic_weights(t: Any, alpha: float, const: Any) -> list[Any]:
    """The four taps' weights (at floor - 1 .. floor + 2) of the cubic convolution kernel with parameter ``alpha``
    at fraction ``t`` past the floor; ``t`` a numpy array or te expression, ``const(v)`` a constant of its type."""
    def near(d):  # |d| <= 1
        return ((const(alpha + 2) * d - const(alpha + 3)) * d) * d + const(1.0)

    def far(d):  # 1 < |d| < 2
        return ((const(alpha) * d - const(5 * alpha)) * d + const(8 * alpha)) * d - const(4 * alpha)

    one = const(1.0)
    return [far(t + one), near(t), near(one - t), far(const(2.0) - t)]


def _resize_method(method: str) -> str:
    return _METHOD_ALIASES.get(method, method)


def _resize_rel(types, attrs):
    op = "image.resize"
    (x,) = _operands(types, op, "data")
    layout, size = attrs["layout"], tuple(attrs["size"])
    if layout not in RESIZE_LAYOUTS.get(len(x.shape) - 2, ()):
        raise RelayError(f"{op}: layout {layout!r} does not fit data of shape {x.shape} (supported: "
                         f"{', '.join(f'{lay} ({n + 2}-D)' for n, lays in RESIZE_LAYOUTS.items() for lay in lays)})")
    if len(size) != len(x.shape) - 2 or any(int(s) < 1 for s in size):
        raise RelayError(f"{op}: size {list(size)} must give {len(x.shape) - 2} positive output extent(s) for "
                         f"layout {layout}")
    method = _resize_method(attrs["method"])
    if method not in RESIZE_METHODS:
        raise RelayError(f"{op}: method {attrs['method']!r} is not one of {', '.join(RESIZE_METHODS)}")
    if attrs["coordinate_transformation_mode"] not in COORDINATE_MODES:
        raise RelayError(f"{op}: coordinate_transformation_mode {attrs['coordinate_transformation_mode']!r} is not "
                         f"one of {', '.join(COORDINATE_MODES)}")
    if attrs["rounding_method"] and attrs["rounding_method"] not in ROUNDING_METHODS:
        raise RelayError(f"{op}: rounding_method {attrs['rounding_method']!r} is not one of "
                         f"{', '.join(ROUNDING_METHODS)} (or '' for TVM's default)")
    shape = list(x.shape)
    for a, s in zip(_spatial_axes(layout), size):
        shape[a] = int(s)
    return TensorType(tuple(shape), attrs["out_dtype"] or x.dtype)


def _spatial_axes(layout: str) -> list[int]:
    return [layout.index(ch) for ch in "DHW" if ch in layout]


def _rounded(x: Any, rounding: str) -> Any:
    """The nearest neighbour's position: ``x`` rounded by one of ``ROUNDING_METHODS`` (round: halves to even)."""
    dt = x.dtype
    if rounding == "round":
        return te.round(x)
    if rounding == "round_prefer_floor":
        return te.ceil(x - _c(0.5, dt))
    if rounding == "round_prefer_ceil":
        return te.floor(x + _c(0.5, dt))
    return te.floor(x) if rounding == "floor" else te.ceil(x)


def _resize_compute(inputs, attrs, out_type):
    """Per resized axis, two small stages over that axis's output positions give each tap's input index (clamped
    into the image) and weight; nearest is one gather, interpolation one weighted pass per axis."""
    (data,) = inputs
    in_shape, out_shape = _ishape(data), [int(d) for d in out_type.shape]
    method = _resize_method(attrs["method"])
    mode = attrs["coordinate_transformation_mode"]
    rounding = attrs["rounding_method"] or ("round" if mode == "align_corners" else "floor")  # TVM's default
    alpha, exclude = float(attrs["cubic_alpha"]), bool(attrs["cubic_exclude"])
    dt = "float64" if data.dtype == "float64" else "float32"
    taps = _RESIZE_TAPS[method]
    stages = []  # per resized axis: (axis, index stage, weight stage or None)
    for a in _spatial_axes(attrs["layout"]):
        n_in, n_out, name = in_shape[a], out_shape[a], attrs["layout"][a].lower()
        if n_in == n_out and mode in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"):
            continue  # the identity: every output reads its own pixel with weight one

        def position(o, n_in=n_in, n_out=n_out):
            return source_coordinate(te.cast(dt, o), n_in, n_out, n_out / n_in, mode, lambda v: _c(v, dt))

        def index(o, t, n_in=n_in, position=position):
            x = position(o)
            base = _rounded(x, rounding) if method == "nearest_neighbor" else te.floor(x)
            k = te.cast("int32", base) + te.cast("int32", t) + _c(taps[0], "int32")
            return te.minimum(te.maximum(k, _c(0, "int32")), _c(n_in - 1, "int32"))

        def weight(o, t, n_in=n_in, position=position):
            x = position(o)
            frac = x - te.floor(x)
            const = lambda v: _c(v, dt)  # noqa: E731
            ws = [const(1.0) - frac, frac] if method == "linear" else cubic_weights(frac, alpha, const)
            if exclude and method == "cubic":  # taps outside the image weigh nothing; the rest are renormalised
                k0 = te.floor(x)
                ws = [te.if_then_else(te.all(k0 + const(taps[j]) >= const(0.0),
                                             k0 + const(taps[j]) <= const(n_in - 1.0)), w, const(0.0))
                      for j, w in enumerate(ws)]
                total = ws[0] + ws[1] + ws[2] + ws[3]
                ws = [w / total for w in ws]
            out = ws[-1]
            for j in range(len(ws) - 2, -1, -1):
                out = te.if_then_else(t == j, ws[j], out)
            return out

        idx = te.compute((n_out, len(taps)), index, name=f"{RESIZE_STAGE}index_{name}")
        wgt = None if method == "nearest_neighbor" else te.compute((n_out, len(taps)), weight,
                                                                   name=f"{RESIZE_STAGE}weight_{name}")
        stages.append((a, idx, wgt))
    out_dtype = out_type.dtype

    def finish(v):
        if v.dtype == out_dtype:
            return v
        return te.cast(out_dtype, te.round(v) if "int" in out_dtype and "float" in v.dtype else v)

    if method == "nearest_neighbor" or not stages:  # one gather (or a copy)
        def pick(*i):
            at = list(i)
            for a, idx, _ in stages:
                at[a] = idx[i[a], 0]
            return finish(data[tuple(at)])

        return te.compute(out_type.shape, pick, name="resize")
    # separable: one pass per resized axis, the last axis first (whole rows read contiguously), each pass's taps
    # weighted once (4 + 4 taps for a bicubic image, not 16); the passes before the last are kept at root
    cur = te.compute(in_shape, lambda *i: te.cast(dt, data[i]), name=f"{RESIZE_STAGE}input") \
        if data.dtype != dt else data
    for k, (a, idx, wgt) in enumerate(reversed(stages)):
        shape = [out_shape[a] if b == a else int(d) for b, d in enumerate(cur.shape)]

        def one_axis(*i, a=a, idx=idx, wgt=wgt, src=cur):
            total = None
            for t in range(len(taps)):
                at = list(i)
                at[a] = idx[i[a], t]
                term = wgt[i[a], t] * src[tuple(at)]
                total = term if total is None else total + term
            return total

        if k == len(stages) - 1:
            return te.compute(out_type.shape, lambda *i, f=one_axis: finish(f(*i)), name="resize")
        cur = te.compute(tuple(shape), one_axis, name=f"{RESIZE_STAGE}pass_{attrs['layout'][a].lower()}")
    raise AssertionError  # (the loop returns at its last pass)


_resize_schedule = _stages_at_root(RESIZE_STAGE, "The per-axis tap indices and weights (and the passes before the "
                                                "last)")


register_op(OpDef("image.resize", _resize_rel, _resize_compute, OUT_ELEMWISE_FUSABLE,
                  attrs={"size": (), "layout": "NCHW", "method": "linear",
                         "coordinate_transformation_mode": "half_pixel", "rounding_method": "",
                         "cubic_alpha": -0.5, "cubic_exclude": 0, "out_dtype": ""},
                  num_inputs=1, schedule=_resize_schedule,
                  doc="1-, 2- or 3-D resize: nearest neighbour, (bi/tri)linear or cubic interpolation"))


def _resize(data: Any, size: Any, layout: str, method: str, coordinate_transformation_mode: str,
            rounding_method: str, cubic_alpha: float, cubic_exclude: int, out_dtype: Any, what: str) -> Any:
    if isinstance(size, int):
        size = (size,)
    try:
        size = tuple(int(s) for s in size)
    except (TypeError, ValueError):
        raise RelayError(f"relay.image.{what}: size must be constant integers, got {size!r} (shapes are static "
                         "here; a size computed at run time is not supported)") from None
    return make_call("image.resize", [data], size=size, layout=str(layout), method=str(method),
                     coordinate_transformation_mode=str(coordinate_transformation_mode),
                     rounding_method=str(rounding_method or ""), cubic_alpha=float(cubic_alpha),
                     cubic_exclude=int(cubic_exclude), out_dtype=str(out_dtype or ""))


def resize1d(data: Any, size: Any, layout: str = "NCW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "", cubic_alpha: float = -0.5,
             cubic_exclude: int = 0, out_dtype: Any = None) -> Any:
    """``data`` (NCW or NWC) resized to ``size`` [W_out] (TVM's arguments: methods nearest_neighbor, linear,
    cubic; ONNX Resize's coordinate transformation modes; nearest rounding ``rounding_method``, by default round
    under align_corners, else floor; the cubic kernel's ``cubic_alpha``, ``cubic_exclude`` taps off the image)."""
    return _resize(data, size, layout, method, coordinate_transformation_mode, rounding_method, cubic_alpha,
                   cubic_exclude, out_dtype, "resize1d")


def resize2d(data: Any, size: Any, layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "", cubic_alpha: float = -0.5,
             cubic_exclude: int = 0, out_dtype: Any = None) -> Any:
    """``data`` (NCHW or NHWC) resized to ``size`` (H_out, W_out); the arguments as :func:`resize1d`'s."""
    return _resize(data, size, layout, method, coordinate_transformation_mode, rounding_method, cubic_alpha,
                   cubic_exclude, out_dtype, "resize2d")


def resize3d(data: Any, size: Any, layout: str = "NCDHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "", cubic_alpha: float = -0.5,
             cubic_exclude: int = 0, out_dtype: Any = None) -> Any:
    """``data`` (NCDHW or NDHWC) resized to ``size`` (D_out, H_out, W_out); the arguments as :func:`resize1d`'s."""
    return _resize(data, size, layout, method, coordinate_transformation_mode, rounding_method, cubic_alpha,
                   cubic_exclude, out_dtype, "resize3d")


# ------------------------------------------------------------------------------------------------ crop_and_resize
def _crop_rel(types, attrs):
    op = "image.crop_and_resize"
    x, boxes, index = _operands(types, op, "data", "boxes", "box_indices")
    layout = attrs["layout"]
    if layout not in ("NCHW", "NHWC") or len(x.shape) != 4:
        raise RelayError(f"{op}: data {x.shape} must be 4-D NCHW or NHWC, got layout {layout!r}")
    if len(boxes.shape) != 2 or boxes.shape[1] != 4 or tuple(index.shape) != (boxes.shape[0],):
        raise RelayError(f"{op}: boxes {boxes.shape} must be [num_boxes, 4] (y1, x1, y2, x2) and box_indices "
                         f"{index.shape} [num_boxes]")
    if "int" not in index.dtype:
        raise RelayError(f"{op}: box_indices must be integers, got {index.dtype}")
    if _resize_method(attrs["method"]) not in ("linear", "nearest_neighbor"):
        raise RelayError(f"{op}: method {attrs['method']!r} is not bilinear or nearest_neighbor")
    size = tuple(attrs["crop_size"])
    if len(size) != 2 or any(int(s) < 1 for s in size):
        raise RelayError(f"{op}: crop_size {list(size)} must be two positive extents (height, width)")
    n, (h, w) = boxes.shape[0], size
    c = x.shape[1] if layout == "NCHW" else x.shape[3]
    shape = (n, c, h, w) if layout == "NCHW" else (n, h, w, c)
    return TensorType(shape, attrs["out_dtype"] or x.dtype)


def _crop_compute(inputs, attrs, out_type):
    """TensorFlow's crop_and_resize: per box and output row (column), a stage gives the image row (column) it
    samples, ``y1 * (H - 1) + y * (y2 - y1) * (H - 1) / (crop_h - 1)`` (the box's centre for one row); a sample
    off the image is ``extrapolation_value``, else bilinear between its floor and ceiling pixels, or the nearest.
    A box index outside the batch reads the nearest image (never memory outside the data)."""
    data, boxes, index = inputs
    nchw = attrs["layout"] == "NCHW"
    batch, height, width = (_ishape(data)[k] for k in ((0, 2, 3) if nchw else (0, 1, 2)))
    num, (crop_h, crop_w) = int(boxes.shape[0]), (int(s) for s in attrs["crop_size"])
    dt = "float64" if data.dtype == "float64" else "float32"
    bilinear = _resize_method(attrs["method"]) == "linear"

    def positions(size: int, crop: int, lo: int, name: str) -> te.Tensor:
        def at(b, o):
            a, z = te.cast(dt, boxes[b, lo]), te.cast(dt, boxes[b, lo + 2])
            if crop == 1:
                return _c(0.5, dt) * (a + z) * _c(size - 1, dt)
            return a * _c(size - 1, dt) + te.cast(dt, o) * ((z - a) * _c(size - 1, dt) / _c(crop - 1, dt))
        return te.compute((num, crop), at, name=f"{RESIZE_STAGE}position_{name}")

    py, px = positions(height, crop_h, 0, "y"), positions(width, crop_w, 1, "x")
    extrapolate = _c(float(attrs["extrapolation_value"]), dt)

    def value(b, ch, y, x):
        n = te.minimum(te.maximum(te.cast("int32", index[b]), _c(0, "int32")), _c(batch - 1, "int32"))  # (in bounds)
        ys, xs = py[b, y], px[b, x]

        def pixel(yy, xx):
            yy = te.minimum(te.maximum(te.cast("int32", yy), _c(0, "int32")), _c(height - 1, "int32"))
            xx = te.minimum(te.maximum(te.cast("int32", xx), _c(0, "int32")), _c(width - 1, "int32"))
            return te.cast(dt, data[n, ch, yy, xx] if nchw else data[n, yy, xx, ch])

        if bilinear:
            top, left = te.floor(ys), te.floor(xs)
            fy, fx = ys - top, xs - left
            upper = pixel(top, left) + (pixel(top, te.ceil(xs)) - pixel(top, left)) * fx
            lower = pixel(te.ceil(ys), left) + (pixel(te.ceil(ys), te.ceil(xs)) - pixel(te.ceil(ys), left)) * fx
            v = upper + (lower - upper) * fy
        else:
            v = pixel(te.round(ys), te.round(xs))
        inside = te.all(ys >= _c(0.0, dt), ys <= _c(height - 1.0, dt), xs >= _c(0.0, dt), xs <= _c(width - 1.0, dt))
        return te.cast(out_type.dtype, te.if_then_else(inside, v, extrapolate))

    if nchw:
        return te.compute(out_type.shape, value, name="crop_and_resize")
    return te.compute(out_type.shape, lambda b, y, x, ch: value(b, ch, y, x), name="crop_and_resize")


register_op(OpDef("image.crop_and_resize", _crop_rel, _crop_compute, OUT_ELEMWISE_FUSABLE,
                  attrs={"crop_size": (), "layout": "NCHW", "method": "bilinear", "extrapolation_value": 0.0,
                         "out_dtype": ""},
                  num_inputs=3, schedule=_resize_schedule,
                  doc="boxes of images cropped and resized to one size (TensorFlow's crop_and_resize)"))


def crop_and_resize(data: Any, boxes: Any, box_indices: Any, crop_size: Any, layout: str = "NCHW",
                    method: str = "bilinear", extrapolation_value: float = 0.0, out_dtype: Any = None) -> Any:
    """The ``boxes`` [num_boxes, 4] (y1, x1, y2, x2, normalised: 0 and 1 the first and last pixel) of images
    ``box_indices`` of ``data``, each resized to ``crop_size`` (height, width), bilinear or nearest_neighbor;
    samples off the image are ``extrapolation_value`` (TVM's arguments; TensorFlow's op)."""
    return make_call("image.crop_and_resize", [data, boxes, box_indices],
                     crop_size=tuple(int(s) for s in crop_size), layout=str(layout), method=str(method),
                     extrapolation_value=float(extrapolation_value), out_dtype=str(out_dtype or ""))


# ------------------------------------------------------------------------------------------------ affine_grid
def _affine_rel(types, attrs):
    op = "image.affine_grid"
    (theta,) = _operands(types, op, "data")
    size = tuple(attrs["target_shape"])
    if len(theta.shape) != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise RelayError(f"{op}: data {theta.shape} must be affine matrices [N, 2, 3]")
    if len(size) != 2 or any(int(s) < 1 for s in size):
        raise RelayError(f"{op}: target_shape {list(size)} must be two positive extents (height, width)")
    if "float" not in theta.dtype:
        raise RelayError(f"{op}: data must be floating point, got {theta.dtype}")
    return TensorType((theta.shape[0], 2, *(int(s) for s in size)), theta.dtype)


def _affine_compute(inputs, attrs, out_type):
    """``grid[n, k, y, x] = theta[n, k, 0] * x' + theta[n, k, 1] * y' + theta[n, k, 2]``, with x' and y' the
    pixel's coordinates from -1 to 1 (the corner pixels' centres)."""
    (theta,) = inputs
    h, w = (int(s) for s in attrs["target_shape"])
    dt = theta.dtype

    def coord(i, n):
        return _c(-1.0, dt) + te.cast(dt, i) * _c(2.0 / (n - 1), dt) if n > 1 else _c(0.0, dt)

    return te.compute(out_type.shape, lambda n, k, y, x: theta[n, k, 0] * coord(x, w) + theta[n, k, 1] * coord(y, h)
                      + theta[n, k, 2], name="affine_grid")


register_op(OpDef("image.affine_grid", _affine_rel, _affine_compute, OUT_ELEMWISE_FUSABLE,
                  attrs={"target_shape": ()}, num_inputs=1, schedule=schedules.injective,
                  doc="the sampling grid of affine matrices, what grid_sample reads"))


def affine_grid(data: Any, target_shape: Any) -> Any:
    """The sampling grid of affine matrices ``data`` [N, 2, 3] over an output of ``target_shape`` (H, W): [N, 2,
    H, W], x then y in [-1, 1] (the corner pixels' centres), what :func:`grid_sample` reads (TVM's op)."""
    return make_call("image.affine_grid", [data], target_shape=tuple(int(s) for s in target_shape))


__all__ = ["affine_grid", "crop_and_resize", "grid_sample", "resize1d", "resize2d", "resize3d"]
