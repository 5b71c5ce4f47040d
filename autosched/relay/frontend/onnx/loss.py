"""ONNX converters of the loss ops: NegativeLogLikelihoodLoss (``relay.nn.nll_loss``) and SoftmaxCrossEntropyLoss
(a log_softmax over the classes, then the same loss; its log-probabilities are the second output)."""

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

REDUCTIONS = ("none", "mean", "sum")
FLOATS = ("float16", "float32", "float64")


def _nll(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, scores: Expr, what: str) -> Expr:
    """``nn.nll_loss`` of ``scores`` (log-probabilities, shaped as the node's input 0) against the node's targets
    (input 1), weighted by its input 2 (ones when absent); ignore_index absent ignores no class."""
    shape, tshape = g.shape(node.input[0]), g.shape(node.input[1])
    if len(shape) < 2:
        g._fail(f"the {what} {node.input[0]!r} must be [N, C] or [N, C, d1, ...], got shape {list(shape)}")
    dtype = g.dtype(node.input[0])
    if dtype not in FLOATS:
        g._fail(f"the {what} {node.input[0]!r} must be floating point, got {dtype}")
    if tuple(tshape) != (shape[0], *shape[2:]):
        g._fail(f"the targets {node.input[1]!r} have shape {list(tshape)}; the {what} of shape {list(shape)} need "
                f"{[shape[0], *shape[2:]]} (the class axis, axis 1, left out)")
    tdtype = g.dtype(node.input[1])
    if not tdtype.startswith(("int", "uint")):
        g._fail(f"the targets {node.input[1]!r} must be integer class indices, got {tdtype}")
    reduction = attrs.get("reduction", "mean")
    if reduction not in REDUCTIONS:
        g._fail(f"reduction {reduction!r} is not one of {', '.join(REDUCTIONS)}")
    weight = g.optional(node, 2)
    if weight is None:
        weights = relay_ir.const(np.ones(shape[1], dtype))
    else:
        if tuple(g.shape(weight)) != (shape[1],) or g.dtype(weight) != dtype:
            g._fail(f"the weight {weight!r} ({list(g.shape(weight))} {g.dtype(weight)}) must be one {dtype} per "
                    f"class: [{shape[1]}]")
        weights = g.tensor(weight)
    ignore = attrs.get("ignore_index")
    return relay_op.nn.nll_loss(scores, g.tensor(node.input[1]), weights, reduction=reduction,
                                ignore_index=None if ignore is None else int(ignore))


@register("NegativeLogLikelihoodLoss")
def _negative_log_likelihood_loss(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """-weight[t] * input[n, t, d...] per target t; none, sum, or mean (over the targets' weights), targets equal
    to ignore_index counting nothing (opsets 12, 13, 22)."""
    return _nll(g, node, attrs, g.tensor(node.input[0]), "input")


@register("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy_loss(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr | tuple[Expr, Expr]:
    """The log_softmax of the scores over the classes (axis 1), then NegativeLogLikelihoodLoss of it; the
    log-probabilities are the optional second output (opsets 12, 13)."""
    if len(g.shape(node.input[0])) < 2:
        g._fail(f"the scores {node.input[0]!r} must be [N, C] or [N, C, d1, ...], got shape "
                f"{list(g.shape(node.input[0]))}")
    log_prob = relay_op.nn.log_softmax(g.tensor(node.input[0]), axis=1)
    loss = _nll(g, node, attrs, log_prob, "scores")
    return (loss, log_prob) if len(node.output) > 1 and node.output[1] else loss
