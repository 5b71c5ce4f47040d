"""TOPI's ``topi.image``: resizing (``resize1d`` / ``resize2d`` / ``resize3d``), ``crop_and_resize``,
``affine_grid`` and ``grid_sample``, computed as relay's ``image`` operators."""

from __future__ import annotations

from typing import Any

from autosched import relay, te
from autosched.errors import AutoschedError
from autosched.topi._relay import lower_call


def _resize(what: str, data: te.Tensor, size: Any, layout: str, method: str, coordinate_transformation_mode: str,
            rounding_method: str, bicubic_alpha: float, bicubic_exclude: int, out_dtype: Any,
            output_shape: Any) -> te.Tensor:
    if output_shape is not None:
        raise AutoschedError(f"topi.image.{what}: output_shape (a shape computed at run time) is not supported; "
                             "give size")
    build = getattr(relay.image, what)
    return lower_call(f"image.{what}", [data], lambda x: build(
        x, size, layout, method, coordinate_transformation_mode, rounding_method, bicubic_alpha, bicubic_exclude,
        out_dtype))


def resize1d(data: te.Tensor, size: Any, layout: str = "NCW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
             bicubic_alpha: float = -0.5, bicubic_exclude: int = 0, out_dtype: Any = None,
             output_shape: Any = None) -> te.Tensor:
    """``data`` (NCW or NWC) resized to ``size`` [W_out]: nearest_neighbor, linear or cubic (TVM's arguments)."""
    return _resize("resize1d", data, size, layout, method, coordinate_transformation_mode, rounding_method,
                   bicubic_alpha, bicubic_exclude, out_dtype, output_shape)


def resize2d(data: te.Tensor, size: Any, layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
             bicubic_alpha: float = -0.5, bicubic_exclude: int = 0, out_dtype: Any = None,
             output_shape: Any = None) -> te.Tensor:
    """``data`` (NCHW or NHWC) resized to ``size`` (H_out, W_out)."""
    return _resize("resize2d", data, size, layout, method, coordinate_transformation_mode, rounding_method,
                   bicubic_alpha, bicubic_exclude, out_dtype, output_shape)


def resize3d(data: te.Tensor, size: Any, layout: str = "NCDHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
             bicubic_alpha: float = -0.5, bicubic_exclude: int = 0, out_dtype: Any = None,
             output_shape: Any = None) -> te.Tensor:
    """``data`` (NCDHW or NDHWC) resized to ``size`` (D_out, H_out, W_out)."""
    return _resize("resize3d", data, size, layout, method, coordinate_transformation_mode, rounding_method,
                   bicubic_alpha, bicubic_exclude, out_dtype, output_shape)


def crop_and_resize(data: te.Tensor, boxes: te.Tensor, box_indices: te.Tensor, crop_size: Any,
                    layout: str = "NCHW", method: str = "bilinear", extrapolation_value: float = 0.0,
                    out_dtype: Any = None) -> te.Tensor:
    """Boxes (y1, x1, y2, x2, normalised) of images ``box_indices`` resized to ``crop_size`` (TensorFlow's op)."""
    return lower_call("image.crop_and_resize", [data, boxes, box_indices], lambda d, b, i: relay.image.crop_and_resize(
        d, b, i, crop_size, layout, method, extrapolation_value, out_dtype))


def affine_grid(data: te.Tensor, target_shape: Any) -> te.Tensor:
    """The sampling grid [N, 2, H, W] of affine matrices ``data`` [N, 2, 3] over ``target_shape`` (H, W)."""
    return lower_call("image.affine_grid", [data], lambda t: relay.image.affine_grid(t, target_shape))


def grid_sample(data: te.Tensor, grid: te.Tensor, method: str = "bilinear", layout: str = "NCHW",
                padding_mode: str = "zeros", align_corners: bool = True) -> te.Tensor:
    """``data`` [N, C, H, W] sampled at ``grid`` [N, 2, H_out, W_out] (x, y in [-1, 1])."""
    return lower_call("image.grid_sample", [data, grid], lambda d, g: relay.image.grid_sample(
        d, g, method, layout, padding_mode, align_corners))


__all__ = ["affine_grid", "crop_and_resize", "grid_sample", "resize1d", "resize2d", "resize3d"]
