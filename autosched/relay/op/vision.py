"""``relay.vision``: the region-of-interest ops of two-stage detectors under TVM's names. ``roi_align`` (ONNX
RoiAlign, torchvision's ``roi_align``) averages (or takes the largest of) bilinear samples on a grid in each bin
of a box; ``roi_pool`` (ONNX MaxRoiPool, Caffe's ROIPooling) takes the largest pixel of each bin. A box is a row
``[batch_index, x1, y1, x2, y2]`` in image coordinates, scaled to the feature map by ``spatial_scale``. A bin's
sample grid (adaptive ``roi_align``) and window (``roi_pool``) depend on the box, so their loops run to bounds
read from ``rois`` at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType
from autosched.relay.op import schedules
from autosched.relay.op.common import _c, _ishape, _operands, _pair, _same_dtype
from autosched.relay.op.op import OUT_ELEMWISE_FUSABLE, OpDef, make_call, register_op

LAYOUTS = ("NCHW", "NHWC")
#: ``avg`` the mean of a bin's bilinear samples; ``max`` the largest sample (TVM's); ``max_corner`` the largest
#: of each sample's four bilinear terms (weight x pixel), as ONNX's RoiAlign defines its max mode
ROI_ALIGN_MODES = ("avg", "max", "max_corner")
#: the bin side, in map pixels, that FLOP counts assume where the boxes decide a loop's length (an adaptive grid,
#: a pooling window): a feature pyramid's canonical box, 224 pixels at the level of stride 16, is 14 map pixels,
#: bins of 2 in a 7 x 7 output
TYPICAL_BIN = 2


def _pooled(v: Any, op: str) -> tuple[int, int]:
    """The output's bins per side, (height, width), each at least 1."""
    vals = _pair(v, op, "pooled_size")
    if min(vals) < 1:
        raise RelayError(f"{op}: pooled_size must be a positive int or two of them, got {v!r}")
    return vals


def _roi_rel(op: str):
    def rel(types, attrs):
        x, rois = _operands(types, op, "data", "rois")
        layout = attrs["layout"]
        if layout not in LAYOUTS:
            raise RelayError(f"{op}: layout {layout!r} is not supported (one of {', '.join(LAYOUTS)} is)")
        if len(x.shape) != 4:
            raise RelayError(f"{op}: data must be 4-D {layout}, got shape {x.shape}")
        if len(rois.shape) != 2 or rois.shape[1] != 5:
            raise RelayError(f"{op}: rois must be [num_rois, 5] rows of (batch_index, x1, y1, x2, y2), got shape "
                             f"{rois.shape}")
        dtype = _same_dtype(op, x, rois)
        if dtype not in ("float16", "float32", "float64"):
            raise RelayError(f"{op}: data and rois must be floating point, got {dtype}")
        if "mode" in attrs and attrs["mode"] not in ROI_ALIGN_MODES:
            raise RelayError(f"{op}: mode {attrs['mode']!r} is not one of {', '.join(ROI_ALIGN_MODES)}")
        ph, pw = _pooled(attrs["pooled_size"], op)
        chan = x.shape[1] if layout == "NCHW" else x.shape[3]
        shape = (rois.shape[0], chan, ph, pw) if layout == "NCHW" else (rois.shape[0], ph, pw, chan)
        return TensorType(shape, dtype)

    return rel


def _roi_axes(axes: Sequence[Any], layout: str) -> tuple[Any, Any, Any, Any]:
    """(box, channel, bin row, bin column) among an output's axes (or indices) in either layout."""
    r, a, b, c = axes
    return (r, a, b, c) if layout == "NCHW" else (r, c, a, b)


class _Image:
    """Reads of one box's image in either layout, the box's batch index clamped into the batch (an index out of
    range reads the nearest image, never outside the buffer)."""

    def __init__(self, data: te.Tensor, rois: te.Tensor, layout: str):
        self.data, self.rois, self.nchw = data, rois, layout == "NCHW"
        shape = _ishape(data)
        self.batch = shape[0]
        self.height, self.width = (shape[2], shape[3]) if self.nchw else (shape[1], shape[2])

    def index(self, out_axes: Sequence[Any]) -> tuple[Any, Any, Any, Any]:
        return _roi_axes(out_axes, "NCHW" if self.nchw else "NHWC")

    def batch_of(self, r: Any) -> Any:
        b = te.cast("int64", self.rois[r, 0])
        return te.minimum(te.maximum(b, _c(0, "int64")), _c(self.batch - 1, "int64"))

    def __call__(self, r: Any, c: Any, y: Any, x: Any) -> Any:
        n = self.batch_of(r)
        return self.data[n, c, y, x] if self.nchw else self.data[n, y, x, c]


def _roi_align_compute(inputs, attrs, out_type):
    """Each bin sums (or maximises) its grid of bilinear samples, the grid ``sample_ratio`` per side or, when
    that is not positive, ceil(bin size) per side (a loop bound read per box); the mean divides afterwards."""
    data, rois = inputs
    img = _Image(data, rois, attrs["layout"])
    dt, mode, ratio = data.dtype, attrs["mode"], int(attrs["sample_ratio"])
    ph_n, pw_n = _pooled(attrs["pooled_size"], "vision.roi_align")
    scale, aligned = float(attrs["spatial_scale"]), bool(attrs["aligned"])
    shift = 0.5 if aligned else 0.0

    def box(r):
        """(start y, start x, bin height, bin width, grid rows, grid columns) of box r."""
        y0 = rois[r, 2] * _c(scale, dt) - _c(shift, dt)
        x0 = rois[r, 1] * _c(scale, dt) - _c(shift, dt)
        h = rois[r, 4] * _c(scale, dt) - _c(shift, dt) - y0
        w = rois[r, 3] * _c(scale, dt) - _c(shift, dt) - x0
        if not aligned:  # a malformed box counts as one pixel
            h, w = te.maximum(h, _c(1.0, dt)), te.maximum(w, _c(1.0, dt))
        bh, bw = h / _c(ph_n, dt), w / _c(pw_n, dt)
        if ratio > 0:
            gh = gw = _c(ratio, "int32")
        else:
            gh, gw = te.cast("int32", te.ceil(bh)), te.cast("int32", te.ceil(bw))
        return y0, x0, bh, bw, gh, gw

    def sample(r, c, y, x):
        """The bilinear sample at (y, x), zero outside [-1, size]: its value, or its four terms (max_corner)."""
        height, width = img.height, img.width
        outside = te.any(y < _c(-1.0, dt), y > _c(height, dt), x < _c(-1.0, dt), x > _c(width, dt))
        y = te.minimum(te.maximum(y, _c(0.0, dt)), _c(height - 1, dt))
        x = te.minimum(te.maximum(x, _c(0.0, dt)), _c(width - 1, dt))
        yl, xl = te.cast("int64", te.floor(y)), te.cast("int64", te.floor(x))
        yh = te.minimum(yl + _c(1, "int64"), _c(height - 1, "int64"))
        xh = te.minimum(xl + _c(1, "int64"), _c(width - 1, "int64"))
        ly, lx = y - te.cast(dt, yl), x - te.cast(dt, xl)
        hy, hx = _c(1.0, dt) - ly, _c(1.0, dt) - lx
        terms = [hy * hx * img(r, c, yl, xl), hy * lx * img(r, c, yl, xh),
                 ly * hx * img(r, c, yh, xl), ly * lx * img(r, c, yh, xh)]
        if mode == "max_corner":
            val = te.maximum(te.maximum(terms[0], terms[1]), te.maximum(terms[2], terms[3]))
        else:
            val = (terms[0] + terms[1]) + (terms[2] + terms[3])
        return te.if_then_else(outside, _c(0.0, dt), val)

    def bin_value(*axes):
        r, c, ph, pw = img.index(axes)
        y0, x0, bh, bw, gh, gw = box(r)
        iy = te.reduce_axis((0, gh), name="iy")
        ix = te.reduce_axis((0, gw), name="ix")
        y = y0 + te.cast(dt, ph) * bh + (te.cast(dt, iy) + _c(0.5, dt)) * bh / te.cast(dt, gh)
        x = x0 + te.cast(dt, pw) * bw + (te.cast(dt, ix) + _c(0.5, dt)) * bw / te.cast(dt, gw)
        v = sample(r, c, y, x)
        return te.sum(v, axis=[iy, ix]) if mode == "avg" else te.max(v, axis=[iy, ix])

    red = te.compute(out_type.shape, bin_value, name="roi_align_bins",
                     attrs={"mean_extent": {"iy": TYPICAL_BIN, "ix": TYPICAL_BIN}} if ratio <= 0 else None)

    def finish(*axes):
        r = img.index(axes)[0]
        *_, gh, gw = box(r)
        count = gh * gw
        if mode == "avg":
            return red(*axes) / te.cast(dt, te.maximum(count, _c(1, "int32")))
        return te.if_then_else(count > 0, red(*axes), _c(0.0, dt))  # an empty grid (a box of no size) gives 0

    return te.compute(out_type.shape, finish, name="roi_align")


def _round_half_away(v: Any) -> Any:
    """``v`` rounded to the nearest integer, halves away from zero (C's ``round``, which Caffe's boxes use)."""
    half = _c(0.5, v.dtype)
    return te.if_then_else(v >= _c(0.0, v.dtype), te.floor(v + half), te.ceil(v - half))


def _roi_pool_compute(inputs, attrs, out_type):
    """Each bin's largest pixel: the box rounded to pixels (at least one), bin edges floor / ceil of its
    multiples, clipped to the image; an empty bin gives 0. The window's loops run to bounds read per bin."""
    data, rois = inputs
    img = _Image(data, rois, attrs["layout"])
    dt = data.dtype
    ph_n, pw_n = _pooled(attrs["pooled_size"], "vision.roi_pool")
    scale = float(attrs["spatial_scale"])

    def window(r, p, lo_col, hi_col, bins, size):
        """[start, end) of bin p along one axis of box r."""
        lo = te.cast("int64", _round_half_away(rois[r, lo_col] * _c(scale, dt)))
        hi = te.cast("int64", _round_half_away(rois[r, hi_col] * _c(scale, dt)))
        length = te.maximum(hi - lo + _c(1, "int64"), _c(1, "int64"))
        step = te.cast(dt, length) / _c(bins, dt)
        start = te.cast("int64", te.floor(te.cast(dt, p) * step)) + lo
        end = te.cast("int64", te.ceil(te.cast(dt, p + 1) * step)) + lo
        clip = (lambda v: te.minimum(te.maximum(v, _c(0, "int64")), _c(size, "int64")))
        return clip(start), clip(end)

    def bins(*axes):
        r, c, ph, pw = img.index(axes)
        ys, ye = window(r, ph, 2, 4, ph_n, img.height)
        xs, xe = window(r, pw, 1, 3, pw_n, img.width)
        ky = te.reduce_axis((0, ye - ys), name="ky")
        kx = te.reduce_axis((0, xe - xs), name="kx")
        return te.max(img(r, c, ys + ky, xs + kx), axis=[ky, kx])

    red = te.compute(out_type.shape, bins, name="roi_pool_bins",
                     attrs={"mean_extent": {"ky": TYPICAL_BIN + 1, "kx": TYPICAL_BIN + 1}})

    def finish(*axes):
        r, _, ph, pw = img.index(axes)
        ys, ye = window(r, ph, 2, 4, ph_n, img.height)
        xs, xe = window(r, pw, 1, 3, pw_n, img.width)
        return te.if_then_else(te.all(ye > ys, xe > xs), red(*axes), _c(0.0, dt))

    return te.compute(out_type.shape, finish, name="roi_pool")


def _roi_schedule(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """Boxes x bin rows in parallel; per bin the reduction computed for all channels at once, channels innermost,
    so a sample's position, corners and weights (the same for every channel) are computed once per sample."""
    red = next(t for t in schedules.compute_stages(out) if schedules.is_reduction(t))
    schedules.inline_injective(sch, out, keep=(red,))
    r, c, ph, pw = _roi_axes(sch[out].op.axis, attrs["layout"])
    sch[out].reorder(r, ph, pw, c)
    sch[out].parallel(sch[out].fuse(r, ph))
    sch[red].compute_at(sch[out], pw)
    rr, rc, rph, rpw = _roi_axes(sch[red].op.axis, attrs["layout"])
    sch[red].reorder(rr, rph, rpw, *sch[red].op.reduce_axis, rc)  # (a bin's window bounds depend on rph, rpw)


_ROI_DOC = "the bins of each box [batch_index, x1, y1, x2, y2] of rois, pooled"

register_op(OpDef("vision.roi_align", _roi_rel("vision.roi_align"), _roi_align_compute, OUT_ELEMWISE_FUSABLE,
                  attrs={"pooled_size": (1, 1), "spatial_scale": 1.0, "sample_ratio": -1, "layout": "NCHW",
                         "mode": "avg", "aligned": False},
                  num_inputs=2, schedule=_roi_schedule, doc=_ROI_DOC + " from bilinear samples"))
register_op(OpDef("vision.roi_pool", _roi_rel("vision.roi_pool"), _roi_pool_compute, OUT_ELEMWISE_FUSABLE,
                  attrs={"pooled_size": (1, 1), "spatial_scale": 1.0, "layout": "NCHW"},
                  num_inputs=2, schedule=_roi_schedule, doc=_ROI_DOC + " by their largest pixel"))


def roi_align(data: Any, rois: Any, pooled_size: Any, spatial_scale: float, sample_ratio: int = -1,
              layout: str = "NCHW", mode: str = "avg", aligned: bool = False) -> Any:
    """RoIAlign: [num_rois, C, PH, PW] (NCHW) bins of ``data`` over each box of ``rois`` [num_rois, 5], each bin
    the mean of a grid of bilinear samples (``sample_ratio`` per side; not positive: ceil of the bin's size).
    ``aligned`` shifts boxes by half a pixel and keeps boxes under a pixel (torchvision's ``aligned=True``,
    ONNX's half_pixel); ``mode`` avg, max (TVM's) or max_corner (ONNX's max). TVM's arguments otherwise."""
    return make_call("vision.roi_align", [data, rois], pooled_size=_pooled(pooled_size, "vision.roi_align"),
                     spatial_scale=float(spatial_scale), sample_ratio=int(sample_ratio), layout=str(layout),
                     mode=str(mode.decode() if isinstance(mode, bytes) else mode), aligned=bool(aligned))


def roi_pool(data: Any, rois: Any, pooled_size: Any, spatial_scale: float, layout: str = "NCHW") -> Any:
    """RoIPool: [num_rois, C, PH, PW] (NCHW), each bin of each box of ``rois`` [num_rois, 5] its largest pixel
    (the box rounded to whole pixels; an empty bin 0), as Caffe's ROIPooling and ONNX's MaxRoiPool."""
    return make_call("vision.roi_pool", [data, rois], pooled_size=_pooled(pooled_size, "vision.roi_pool"),
                     spatial_scale=float(spatial_scale), layout=str(layout))


__all__ = ["roi_align", "roi_pool"]
