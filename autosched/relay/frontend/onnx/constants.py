"""ONNX ops on values known at import time: Constant, Identity, Shape, Size and the fold-only ops (evaluated by
the importer, an error on a computed tensor)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import FOLD_ONLY, register

if TYPE_CHECKING:  # pragma: no cover
    import onnx


@register("Constant")
def _constant(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.ndarray:
    """A Constant's value stays a numpy array: ops that need it at import time read it; others get relay_ir.const."""
    if "value" in attrs:
        return np.asarray(attrs["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    g._fail(f"only tensor and numeric values are supported (attributes: {sorted(attrs)})")
    raise AssertionError  # unreachable


@register("Identity")
def _identity(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Any:
    name = node.input[0]
    if name in g.consts:  # keep a constant a constant, so Reshape(x, Identity(shape)) still converts
        return g.consts[name]
    return g.tensor(name)


@register("Shape")
def _shape(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.ndarray:
    """The static shape (``start``/``end`` from opset 15) as an int64 constant."""
    shape = g.shape(node.input[0])
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    return np.array(shape[start:end], np.int64)


@register("Size")
def _size(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.ndarray:
    return np.array(math.prod(g.shape(node.input[0])), np.int64)


def _fold_only(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Any:
    computed = [n for n in node.input if n and not g.is_const(n)]
    g._fail(f"supported only on values known at import time (shapes, constants); input {computed[0]!r} is "
            "computed from the graph inputs")


for _op in sorted(FOLD_ONLY - {"Shape", "Size", "Slice"}):  # Slice also converts on tensors
    register(_op)(_fold_only)


@register("EyeLike")
def _eye_like(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.ndarray:
    """Ones on diagonal ``k`` of a 2-D tensor of the input's shape, a constant (it depends on the shape only)."""
    from onnx import helper

    shape = g.shape(node.input[0])
    if len(shape) != 2:
        g._fail(f"the input must be 2-D, got shape {list(shape)}")
    dtype = (np.dtype(helper.tensor_dtype_to_np_dtype(int(attrs["dtype"]))) if "dtype" in attrs
             else np.dtype(g.dtype(node.input[0])))
    return np.eye(shape[0], shape[1], k=int(attrs.get("k", 0)), dtype=dtype)
