"""TOPI's ``topi.vision``: the region-of-interest operators of two-stage detectors (``roi_align_nchw``,
``roi_pool_nchw``, also under ``topi.vision.rcnn``), computed as relay's ``vision.roi_align`` / ``roi_pool``."""

from __future__ import annotations

import types
from typing import Any

from autosched import relay, te
from autosched.errors import AutoschedError
from autosched.topi._relay import lower_call

_MODES = {b"avg": "avg", 0: "avg", "avg": "avg", b"max": "max", 1: "max", "max": "max"}


def roi_align_nchw(data: te.Tensor, rois: te.Tensor, pooled_size: Any, spatial_scale: float, mode: Any,
                   sample_ratio: int = -1) -> te.Tensor:
    """RoIAlign of NCHW ``data`` over ``rois`` [num_rois, 5] (batch_index, x1, y1, x2, y2): [num_rois, C, PH, PW];
    ``mode`` average (b"avg" or 0) or max (b"max" or 1), ``sample_ratio`` < 1 an adaptive grid (TVM's)."""
    if mode not in _MODES:
        raise AutoschedError(f"topi.vision.roi_align_nchw: mode {mode!r} is not b'avg' / 0 or b'max' / 1")
    return lower_call("vision.roi_align_nchw", [data, rois], lambda d, r: relay.vision.roi_align(
        d, r, pooled_size, spatial_scale, sample_ratio=sample_ratio, layout="NCHW", mode=_MODES[mode]))


def roi_align_nhwc(data: te.Tensor, rois: te.Tensor, pooled_size: Any, spatial_scale: float, mode: Any,
                   sample_ratio: int = -1) -> te.Tensor:
    """RoIAlign of NHWC ``data``: [num_rois, PH, PW, C] (see ``roi_align_nchw``)."""
    if mode not in _MODES:
        raise AutoschedError(f"topi.vision.roi_align_nhwc: mode {mode!r} is not b'avg' / 0 or b'max' / 1")
    return lower_call("vision.roi_align_nhwc", [data, rois], lambda d, r: relay.vision.roi_align(
        d, r, pooled_size, spatial_scale, sample_ratio=sample_ratio, layout="NHWC", mode=_MODES[mode]))


def roi_pool_nchw(data: te.Tensor, rois: te.Tensor, pooled_size: Any, spatial_scale: float) -> te.Tensor:
    """RoIPool of NCHW ``data`` over ``rois`` [num_rois, 5]: each bin's largest pixel, [num_rois, C, PH, PW]."""
    return lower_call("vision.roi_pool_nchw", [data, rois], lambda d, r: relay.vision.roi_pool(
        d, r, pooled_size, spatial_scale, layout="NCHW"))


#: ``topi.vision.rcnn``: TVM's module of the R-CNN operators
rcnn = types.SimpleNamespace(roi_align_nchw=roi_align_nchw, roi_align_nhwc=roi_align_nhwc,
                             roi_pool_nchw=roi_pool_nchw)

__all__ = ["rcnn", "roi_align_nchw", "roi_align_nhwc", "roi_pool_nchw"]
