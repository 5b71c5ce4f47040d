"""ONNX converters of onnxruntime's fused transformer ops, as ``onnxruntime.transformers.optimizer`` writes them
into BERT- and GPT-style models: com.microsoft SkipLayerNormalization, SkipSimplifiedLayerNormalization,
BiasGelu, FastGelu, Gelu and QuickGelu, and SimplifiedLayerNormalization (onnxruntime's, in the default domain).
Each is the composition of default-domain ops it fuses, converted by their converters, so it fuses as they do."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import register
from autosched.relay.ir.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    import onnx

_MS = "com.microsoft."


def _biased(g: _GraphConverter, node: onnx.NodeProto, i: int) -> Expr:
    """Input 0 plus the optional bias at input ``i``."""
    x = g.tensor(node.input[0])
    bias = g.optional(node, i)
    return x if bias is None else relay_op.add(x, g.tensor(bias))


def _skip_norm(simplified: bool):
    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Expr | None]:
        for i in (1, 2):
            if len(node.output) > i and node.output[i] and node.output[i] in g.used:
                g._fail(f"output {i} ({node.output[i]!r}, a training statistic) is used; it is not supported")
        total = relay_op.add(g.tensor(node.input[0]), g.tensor(node.input[1]))
        bias = g.optional(node, 3 if simplified else 4)
        if bias is not None:
            total = relay_op.add(total, g.tensor(bias))
        eps = {"epsilon": float(attrs.get("epsilon", 1e-12))}
        if simplified:
            out = g.convert_as(node, "RMSNormalization", [total, node.input[2]], {"axis": -1, **eps})
        else:
            beta = g.optional(node, 3)
            out = g.convert_as(node, "LayerNormalization", [total, node.input[2]] + ([beta] if beta else []),
                               {"axis": -1, **eps})
        return [out, None, None, total]

    name = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
    convert.__name__ = f"_{name}"
    convert.__doc__ = (f"{name}: {'RMS' if simplified else 'layer'} normalisation of input + skip (+ bias) over the "
                       "last axis; the sum is output 3, the training statistics (outputs 1, 2) are refused if used.")
    return convert


register(_MS + "SkipLayerNormalization")(_skip_norm(simplified=False))
register(_MS + "SkipSimplifiedLayerNormalization")(_skip_norm(simplified=True))


@register("SimplifiedLayerNormalization")
def _simplified_layer_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """onnxruntime's RMS normalisation (in the default domain): RMSNormalization over the axes from ``axis``."""
    if len(node.output) > 1 and node.output[1] and node.output[1] in g.used:
        g._fail(f"output 1 ({node.output[1]!r}, inv_std_var) is used; it is not supported")
    return g.convert_as(node, "RMSNormalization", list(node.input[:2]),
                        {"axis": int(attrs.get("axis", -1)), "epsilon": float(attrs.get("epsilon", 1e-5))})


@register(_MS + "Gelu", _MS + "BiasGelu")
def _gelu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """GELU by erf of input 0 (plus BiasGelu's bias)."""
    return g.convert_as(node, "Gelu", [_biased(g, node, 1)], {"approximate": "none"})


@register(_MS + "FastGelu")
def _fast_gelu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """GELU's tanh approximation of input 0 plus the optional bias."""
    return g.convert_as(node, "Gelu", [_biased(g, node, 1)], {"approximate": "tanh"})


@register(_MS + "QuickGelu")
def _quick_gelu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x sigmoid(alpha x), alpha 1.702 by default (CLIP's activation)."""
    x = g.tensor(node.input[0])
    alpha = relay_ir.const(np.array(attrs.get("alpha", 1.702), dtype=g.dtype(node.input[0])))
    return relay_op.multiply(x, relay_op.sigmoid(relay_op.multiply(x, alpha)))
