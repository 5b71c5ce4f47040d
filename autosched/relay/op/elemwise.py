"""Element-wise relay ops: binary arithmetic and comparisons, unary math and activations, clip, bias_add, prelu."""

from __future__ import annotations

from typing import Any

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType
from autosched.relay.op.common import _bload, _c, _nargs, _same_dtype, _tensor, broadcast_shape
from autosched.relay.op.op import (
    BROADCAST,
    ELEMWISE,
    OpDef,
    make_call,
    register_op,
)


def _binary_rel(name: str):
    def rel(types, attrs):
        _nargs(types, 2, name)
        a, b = _tensor(types, 0, name, "lhs"), _tensor(types, 1, name, "rhs")
        return TensorType(broadcast_shape(a.shape, b.shape, name), _same_dtype(name, a, b))

    return rel


_BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": lambda a, b: te.maximum(a, b),
    "minimum": lambda a, b: te.minimum(a, b),
}


def _binary_compute(name: str):
    fn = _BINARY[name]

    def compute(inputs, attrs, out_type):
        a, b = inputs
        return te.compute(out_type.shape, lambda *i: fn(_bload(a, i), _bload(b, i)), name=name.replace("nn.", ""))

    return compute


for _name in _BINARY:
    register_op(OpDef(_name, _binary_rel(_name), _binary_compute(_name), BROADCAST, num_inputs=2,
                      doc=f"{_name} with numpy broadcasting"))


def _unary_rel(name: str):
    def rel(types, attrs):
        _nargs(types, 1, name)
        return _tensor(types, 0, name)

    return rel


_UNARY = {
    "nn.relu": lambda x, a: te.maximum(x, _c(0, x.dtype)),
    "sigmoid": lambda x, a: te.sigmoid(x),
    "tanh": lambda x, a: te.tanh(x),
    "exp": lambda x, a: te.exp(x),
    "sqrt": lambda x, a: te.sqrt(x),
    "negative": lambda x, a: _c(0, x.dtype) - x,
    "clip": lambda x, a: te.minimum(te.maximum(x, _c(a["a_min"], x.dtype)), _c(a["a_max"], x.dtype)),
}


_UNARY_ATTRS = {"clip": {"a_min": None, "a_max": None}}


def _unary_compute(name: str):
    fn = _UNARY[name]

    def compute(inputs, attrs, out_type):
        (x,) = inputs
        return te.compute(out_type.shape, lambda *i: fn(x[i], attrs), name=name.replace("nn.", ""))

    return compute


def _clip_rel(types, attrs):
    if attrs.get("a_min") is None or attrs.get("a_max") is None:
        raise RelayError("clip needs a_min and a_max")
    return _unary_rel("clip")(types, attrs)


for _name in _UNARY:
    register_op(OpDef(_name, _clip_rel if _name == "clip" else _unary_rel(_name), _unary_compute(_name), ELEMWISE,
                      attrs=_UNARY_ATTRS.get(_name, {}), num_inputs=1, doc=f"elementwise {_name}"))


def _bias_add_rel(types, attrs):
    _nargs(types, 2, "nn.bias_add")
    x, b = _tensor(types, 0, "nn.bias_add", "data"), _tensor(types, 1, "nn.bias_add", "bias")
    axis = attrs["axis"] % len(x.shape) if x.shape else 0
    if len(b.shape) != 1 or not x.shape or b.shape[0] != x.shape[axis]:
        raise RelayError(f"nn.bias_add: bias shape {b.shape} must be ({x.shape[axis] if x.shape else '?'},) "
                         f"to match axis {attrs['axis']} of data shape {x.shape}")
    _same_dtype("nn.bias_add", x, b)
    return x


def _bias_add_compute(inputs, attrs, out_type):
    x, b = inputs
    axis = attrs["axis"] % len(out_type.shape)
    return te.compute(out_type.shape, lambda *i: x[i] + b[i[axis]], name="bias_add")


register_op(OpDef("nn.bias_add", _bias_add_rel, _bias_add_compute, BROADCAST, attrs={"axis": 1}, num_inputs=2))


# (prelu, log_softmax, lrn, strided_slice, upsampling; the builders at the end of the file make their calls)
def _prelu_rel(types, attrs):
    op = "nn.prelu"
    _nargs(types, 2, op)
    x, a = _tensor(types, 0, op, "data"), _tensor(types, 1, op, "alpha")
    if not x.shape or not -len(x.shape) <= attrs["axis"] < len(x.shape):
        raise RelayError(f"{op}: axis {attrs['axis']} is out of range for data shape {x.shape}")
    axis = attrs["axis"] % len(x.shape)
    if len(a.shape) != 1 or a.shape[0] not in (1, x.shape[axis]):
        raise RelayError(f"{op}: alpha shape {a.shape} must be ({x.shape[axis]},) or (1,) to match axis "
                         f"{attrs['axis']} of data shape {x.shape}")
    _same_dtype(op, x, a)
    return x


def _prelu_compute(inputs, attrs, out_type):
    x, a = inputs
    axis = attrs["axis"] % len(out_type.shape)
    shared = int(a.shape[0]) == 1

    def f(*i):
        v = x[i]
        return te.if_then_else(v < _c(0, x.dtype), v * a[0 if shared else i[axis]], v)

    return te.compute(out_type.shape, f, name="prelu")


register_op(OpDef("nn.prelu", _prelu_rel, _prelu_compute, BROADCAST, attrs={"axis": 1}, num_inputs=2,
                  doc="x if x >= 0 else alpha[c] * x, alpha per index c of one axis (or one alpha for all)"))


# TVM's calls for the ops above (relay.nn.prelu, relay.strided_slice, ...); the frontend uses them
def prelu(data: Any, alpha: Any, axis: int = 1) -> Any:
    """x if x >= 0 else alpha * x, with ``alpha`` of shape (data.shape[axis],) or (1,)."""
    return make_call("nn.prelu", [data, alpha], axis=int(axis))


def sigmoid(data: Any) -> Any:
    """1 / (1 + exp(-x))."""
    return make_call("sigmoid", [data])


def tanh(data: Any) -> Any:
    """Hyperbolic tangent."""
    return make_call("tanh", [data])


def exp(data: Any) -> Any:
    """e ** x."""
    return make_call("exp", [data])


def sqrt(data: Any) -> Any:
    """Square root."""
    return make_call("sqrt", [data])


def negative(data: Any) -> Any:
    """-x."""
    return make_call("negative", [data])


def maximum(lhs: Any, rhs: Any) -> Any:
    """Elementwise max with numpy broadcasting."""
    return make_call("maximum", [lhs, rhs])


def minimum(lhs: Any, rhs: Any) -> Any:
    """Elementwise min with numpy broadcasting."""
    return make_call("minimum", [lhs, rhs])


def clip(data: Any, a_min: float, a_max: float) -> Any:
    """Clamp to [a_min, a_max]."""
    return make_call("clip", [data], a_min=float(a_min), a_max=float(a_max))
