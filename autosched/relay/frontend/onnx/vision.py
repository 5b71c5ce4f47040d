"""Converters of the region-of-interest ops of two-stage detectors (Faster / Mask R-CNN heads): RoiAlign and
MaxRoiPool, onto ``relay.vision``'s ops, whose boxes are rows ``[batch_index, x1, y1, x2, y2]``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import register
from autosched.relay.ir.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    import onnx

_ROI_ALIGN_MODES = {"avg": "avg", "max": "max_corner"}  # ONNX's max: the largest weighted corner of each sample
_COORDINATE_MODES = {"half_pixel": True, "output_half_pixel": False}


def _image(g: _GraphConverter, node: onnx.NodeProto) -> None:
    shape = g.shape(node.input[0])
    if len(shape) != 4:
        g._fail(f"the input {node.input[0]!r} must be 4-D NCHW, got shape {list(shape)}")
    if g.dtype(node.input[0]) not in ("float16", "float32", "float64"):
        g._fail(f"the input {node.input[0]!r} must be floating point, got {g.dtype(node.input[0])}")


@register("RoiAlign")
def _roi_align(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """``relay.vision.roi_align`` of the boxes with their batch indices joined in front; coordinate modes of
    opsets 10 (output_half_pixel, the only one) and 16 (half_pixel by default)."""
    _image(g, node)
    dtype = g.dtype(node.input[0])
    rshape, bshape = g.shape(node.input[1]), g.shape(node.input[2])
    if len(rshape) != 2 or rshape[1] != 4 or tuple(bshape) != (rshape[0],):
        g._fail(f"rois {node.input[1]!r} must be [num_rois, 4] and batch_indices {node.input[2]!r} [num_rois], got "
                f"{list(rshape)} and {list(bshape)}")
    mode = attrs.get("mode", "avg")
    if mode not in _ROI_ALIGN_MODES:
        g._fail(f"mode {mode!r} is not one of {', '.join(_ROI_ALIGN_MODES)}")
    coords = attrs.get("coordinate_transformation_mode", "half_pixel" if g.opset >= 16 else "output_half_pixel")
    if coords not in _COORDINATE_MODES:
        g._fail(f"coordinate_transformation_mode {coords!r} is not one of {', '.join(_COORDINATE_MODES)}")
    batch = relay_op.cast(relay_op.expand_dims(g.tensor(node.input[2]), 1), dtype)
    rois = relay_op.concatenate([batch, relay_op.cast(g.tensor(node.input[1]), dtype)], axis=1)
    return relay_op.vision.roi_align(
        g.tensor(node.input[0]), rois, (int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))),
        float(attrs.get("spatial_scale", 1.0)), sample_ratio=int(attrs.get("sampling_ratio", 0)),
        mode=_ROI_ALIGN_MODES[mode], aligned=_COORDINATE_MODES[coords])


@register("MaxRoiPool")
def _max_roi_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """``relay.vision.roi_pool``: ONNX's boxes are already rows of (batch_index, x1, y1, x2, y2)."""
    _image(g, node)
    rshape = g.shape(node.input[1])
    if len(rshape) != 2 or rshape[1] != 5:
        g._fail(f"rois {node.input[1]!r} must be [num_rois, 5] (batch_index, x1, y1, x2, y2), got {list(rshape)}")
    if "pooled_shape" not in attrs:
        g._fail("the attribute pooled_shape is required")
    rois = relay_op.cast(g.tensor(node.input[1]), g.dtype(node.input[0]))
    return relay_op.vision.roi_pool(g.tensor(node.input[0]), rois, tuple(int(v) for v in attrs["pooled_shape"]),
                                    float(attrs.get("spatial_scale", 1.0)))
