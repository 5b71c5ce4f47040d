"""ONNX converters of the element-wise ops: arithmetic, activations, clipping, variadic max/min/sum/mean."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import Converter, register
from autosched.relay.ir.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    import onnx


def _binary(name: str) -> Converter:
    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
        a, b = g.tensor(node.input[0]), g.tensor(node.input[1])
        if attrs.get("broadcast", 0) and "axis" in attrs:  # opset < 7: b aligned to a from ``axis``
            ra, sb = len(g.shape(node.input[0])), g.shape(node.input[1])
            axis = attrs["axis"] % ra
            b = relay_op.reshape(b, tuple(sb) + (1,) * (ra - axis - len(sb)))
        return getattr(relay_op, name)(a, b)

    convert.__name__ = f"_{name}"
    return convert


for _op, _fn in (("Add", "add"), ("Sub", "subtract"), ("Mul", "multiply"), ("Div", "divide")):
    register(_op)(_binary(_fn))


@register("Relu")
def _relu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    return relay_op.nn.relu(g.tensor(node.input[0]))


@register("Sigmoid")
def _sigmoid(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    return relay_op.sigmoid(g.tensor(node.input[0]))


@register("Tanh")
def _tanh(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    return relay_op.tanh(g.tensor(node.input[0]))


def _unary(name: str) -> Converter:
    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
        return getattr(relay_op, name)(g.tensor(node.input[0]))

    convert.__name__ = f"_{name}"
    return convert


for _op, _fn in (("Exp", "exp"), ("Sqrt", "sqrt"), ("Neg", "negative")):
    register(_op)(_unary(_fn))


def _variadic(name: str) -> Converter:
    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
        out = g.tensor(node.input[0])
        for n in node.input[1:]:
            out = getattr(relay_op, name)(out, g.tensor(n))
        return out

    convert.__name__ = f"_{name}_all"
    return convert


for _op, _fn in (("Max", "maximum"), ("Min", "minimum"), ("Sum", "add")):
    register(_op)(_variadic(_fn))


def _scalar(g: _GraphConverter, name: str, value: float) -> Expr:
    """A scalar constant of ``name``'s dtype."""
    dtype = g.initializers[name].dtype if name in g.initializers else None
    if dtype is None:
        t = g.tensor(name)
        dtype = getattr(getattr(t, "type_annotation", None), "dtype", None) or "float32"
    return relay_ir.const(np.array(value, dtype=dtype))


@register("LeakyRelu")
def _leaky_relu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """relu(x) + alpha * min(x, 0): exact for any alpha (one branch is always zero)."""
    x = g.tensor(node.input[0])
    alpha = float(attrs.get("alpha", 0.01))
    zero, a = _scalar(g, node.input[0], 0.0), _scalar(g, node.input[0], alpha)
    return relay_op.add(relay_op.nn.relu(x), relay_op.multiply(relay_op.minimum(x, zero), a))


@register("HardSigmoid")
def _hard_sigmoid(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    x = g.tensor(node.input[0])
    alpha, beta = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    lin = relay_op.add(relay_op.multiply(x, _scalar(g, node.input[0], alpha)), _scalar(g, node.input[0], beta))
    return relay_op.clip(lin, 0.0, 1.0)


@register("HardSwish")
def _hard_swish(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x * HardSigmoid(x) with alpha 1/6, beta 1/2 (MobileNetV3)."""
    x = g.tensor(node.input[0])
    lin = relay_op.add(relay_op.multiply(x, _scalar(g, node.input[0], 1.0 / 6.0)), _scalar(g, node.input[0], 0.5))
    return relay_op.multiply(x, relay_op.clip(lin, 0.0, 1.0))


@register("Clip")
def _clip(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Clip: bounds are attributes before opset 11 and optional (constant) inputs from 11 on; ReLU6 is Clip 0..6."""
    big = float(np.finfo(np.float32).max)
    if g.opset < 11:
        lo, hi = float(attrs.get("min", -big)), float(attrs.get("max", big))
    else:
        lo_name, hi_name = g.optional(node, 1), g.optional(node, 2)
        lo = float(np.asarray(g.value(lo_name, "min")).reshape(-1)[0]) if lo_name else -big
        hi = float(np.asarray(g.value(hi_name, "max")).reshape(-1)[0]) if hi_name else big
    return relay_op.clip(g.tensor(node.input[0]), lo, hi)


@register("Mean")
def _mean(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The inputs added (numpy broadcasting), divided by their count."""
    out = g.tensor(node.input[0])
    for n in node.input[1:]:
        out = relay_op.add(out, g.tensor(n))
    return out if len(node.input) == 1 else relay_op.divide(out, _scalar(g, node.input[0], float(len(node.input))))


@register("PRelu")
def _prelu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """A slope that varies along one axis (per channel: [C, 1, 1], or [C] on a 2-D input) or not at all is
    ``nn.prelu`` on that axis (it fuses into a conv's epilogue); any other broadcastable slope is
    relu(x) + slope * min(x, 0). Before opset 7 a 1-D slope of C values is per channel (axis 1)."""
    xs, ss = g.shape(node.input[0]), g.shape(node.input[1])
    x, slope = g.tensor(node.input[0]), g.tensor(node.input[1])
    rank = len(xs)
    if g.opset < 7 and len(ss) == 1 and rank >= 2 and ss[0] == xs[1]:
        return relay_op.prelu(x, slope, axis=1)
    aligned = (1,) * (rank - len(ss)) + tuple(ss)
    if len(ss) > rank or any(s not in (1, d) for s, d in zip(aligned, xs)):
        g._fail(f"slope shape {list(ss)} does not broadcast to the input's shape {list(xs)}")
    varying = [k for k, s in enumerate(aligned) if s != 1]
    if len(varying) <= 1:
        axis = varying[0] if varying else rank - 1
        size = aligned[axis] if varying else 1
        return relay_op.prelu(x, slope if tuple(ss) == (size,) else relay_op.reshape(slope, (size,)), axis=axis)
    zero = _scalar(g, node.input[0], 0.0)
    return relay_op.add(relay_op.nn.relu(x), relay_op.multiply(relay_op.minimum(x, zero), slope))
