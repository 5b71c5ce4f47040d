"""Loss ops: ``nn.nll_loss``, the negative log-likelihood of class scores (TVM's op; ONNX's
NegativeLogLikelihoodLoss, and SoftmaxCrossEntropyLoss after a log_softmax), with PyTorch's and ONNX's reductions."""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType
from autosched.relay.op import schedules
from autosched.relay.op.common import _c, _ishape, _operands
from autosched.relay.op.op import OUT_ELEMWISE_FUSABLE, OpDef, make_call, register_op

REDUCTIONS = ("none", "mean", "sum")
FLOATS = ("float16", "float32", "float64")
_INT64 = np.iinfo(np.int64)


def _is_integer(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _nll_loss_rel(types, attrs):
    op = "nn.nll_loss"
    pred, tgt, weights = _operands(types, op, "predictions", "targets", "weights")
    if attrs["reduction"] not in REDUCTIONS:
        raise RelayError(f"{op}: reduction {attrs['reduction']!r} is not one of {', '.join(REDUCTIONS)}")
    ignore = attrs["ignore_index"]
    if ignore is not None and (isinstance(ignore, bool) or not isinstance(ignore, (int, np.integer))
                               or not _INT64.min <= int(ignore) <= _INT64.max):
        raise RelayError(f"{op}: ignore_index must be an int64 (or None: no class ignored), got {ignore!r}")
    if len(pred.shape) < 2:
        raise RelayError(f"{op}: predictions {pred.shape} must be [N, C] or [N, C, d1, ...]")
    if pred.dtype not in FLOATS:
        raise RelayError(f"{op}: predictions must be floating point, got {pred.dtype}")
    if not _is_integer(tgt.dtype):
        raise RelayError(f"{op}: targets must be integers (class indices), got {tgt.dtype}")
    want = (pred.shape[0],) + tuple(pred.shape[2:])
    if tuple(tgt.shape) != want:
        raise RelayError(f"{op}: targets {tgt.shape} must be {want} for predictions {pred.shape} (the class axis, "
                         "axis 1, left out)")
    if tuple(weights.shape) != (pred.shape[1],) or weights.dtype != pred.dtype:
        raise RelayError(f"{op}: weights {weights.shape} {weights.dtype} must be one {pred.dtype} per class: "
                         f"({pred.shape[1]},)")
    return TensorType(tuple(tgt.shape) if attrs["reduction"] == "none" else (), pred.dtype)


def _nll_loss_compute(inputs, attrs, out_type):
    """Per target element its class's weight (0 where the target is ignore_index or outside [0, C)) and loss
    -weight * prediction; then none, the sum, or the sum over the sum of the weights (mean), summed in float32
    for float16 predictions."""
    pred, tgt, weights = inputs
    classes = _ishape(pred)[1]
    dt = pred.dtype
    acc = "float32" if dt == "float16" else dt
    ignore = attrs["ignore_index"]

    def klass(i):
        return te.cast("int64", tgt[i])

    def counted(i):
        k = klass(i)
        ok = te.all(k >= _c(0, "int64"), k < _c(classes, "int64"))
        return ok if ignore is None else te.all(ok, k != _c(int(ignore), "int64"))

    def read(i):  # the class index clamped into the weights (a target not counted reads class 0, unused)
        return te.if_then_else(counted(i), klass(i), _c(0, "int64"))

    tshape = _ishape(tgt)
    weight = te.compute(tshape, lambda *i: te.if_then_else(counted(i), te.cast(acc, weights[read(i)]),
                                                           _c(0.0, acc)), name="nll_loss_weight")
    loss = te.compute(tshape, lambda *i: te.if_then_else(
        counted(i), -te.cast(acc, pred[(i[0], read(i)) + tuple(i[1:])]) * weight[i], _c(0.0, acc)),
        name="nll_loss_elem")
    if attrs["reduction"] == "none":
        return te.compute(tshape, lambda *i: te.cast(dt, loss[i]), name="nll_loss", tag="nll_loss")
    axes = [te.reduce_axis((0, d), name=f"k{a}") for a, d in enumerate(tshape)]
    total = te.compute((), lambda: te.sum(loss[tuple(axes)], axis=axes), name="nll_loss_sum")
    if attrs["reduction"] == "sum":
        return te.compute((), lambda: te.cast(dt, total[()]), name="nll_loss", tag="nll_loss")
    waxes = [te.reduce_axis((0, d), name=f"w{a}") for a, d in enumerate(tshape)]
    wsum = te.compute((), lambda: te.sum(weight[tuple(waxes)], axis=waxes), name="nll_loss_weight_sum")
    return te.compute((), lambda: te.cast(dt, total[()] / wsum[()]), name="nll_loss", tag="nll_loss")


register_op(OpDef("nn.nll_loss", _nll_loss_rel, _nll_loss_compute, OUT_ELEMWISE_FUSABLE,
                  attrs={"reduction": "mean", "ignore_index": -100}, num_inputs=3, schedule=schedules.reduction,
                  doc="negative log-likelihood of class scores, weighted per class; none, sum or mean"))


def nll_loss(predictions: Any, targets: Any, weights: Any, reduction: str = "mean",
             ignore_index: int | None = -100) -> Any:
    """TVM's ``relay.nn.nll_loss``: -weights[t] * predictions[n, t, d...] for each target t of ``targets`` [N, d...]
    (``predictions`` [N, C, d...], ``weights`` [C]); "none" keeps them, "sum" adds them, "mean" divides the sum by
    the targets' weights. Targets equal to ``ignore_index`` (None: none) or outside [0, C) count nothing."""
    return make_call("nn.nll_loss", [predictions, targets, weights], reduction=str(reduction),
                     ignore_index=None if ignore_index is None else int(ignore_index))


__all__ = ["nll_loss"]
