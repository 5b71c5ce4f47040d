"""ONNX converters of the linear algebra ops: Det (``relay.det``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import register
from autosched.relay.ir.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    import onnx

FLOATS = ("float16", "float32", "float64")


@register("Det")
def _det(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The determinant of each square matrix of a [..., M, M] float input: [...] (opsets 11 and 22)."""
    shape = g.shape(node.input[0])
    if len(shape) < 2 or shape[-1] != shape[-2]:
        g._fail(f"the input {node.input[0]!r} must be [..., M, M] (square matrices), got shape {list(shape)}")
    dtype = g.dtype(node.input[0])
    if dtype not in FLOATS:
        g._fail(f"the input {node.input[0]!r} must be floating point, got {dtype}")
    return relay_op.det(g.tensor(node.input[0]))
