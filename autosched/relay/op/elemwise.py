"""Element-wise relay ops: binary arithmetic and comparisons, unary math and activations, clip, bias_add, prelu."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType
from autosched.relay.op.common import _bload, _c, _nargs, _operands, _same_dtype, _tensor, broadcast_shape
from autosched.relay.op.op import (
    BROADCAST,
    ELEMWISE,
    OpDef,
    _binary,
    make_call,
    register_op,
)


def _binary_rel(name: str):
    def rel(types, attrs):
        a, b = _operands(types, name, "lhs", "rhs")
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
    "tanh": lambda x, a: _tanh(x),
    "exp": lambda x, a: te.exp(x),
    "sqrt": lambda x, a: te.sqrt(x),
    "negative": lambda x, a: _c(0, x.dtype) - x,
    "clip": lambda x, a: te.minimum(te.maximum(x, _c(a["a_min"], x.dtype)), _c(a["a_max"], x.dtype)),
    "abs": lambda x, a: te.abs(x),
    "sign": lambda x, a: te.if_then_else(x > _c(0, x.dtype), _c(1, x.dtype), te.if_then_else(
        x < _c(0, x.dtype), _c(-1, x.dtype), te.if_then_else(te.isnan(x), x, _c(0, x.dtype)))),  # NaN stays NaN
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
    x, b = _operands(types, "nn.bias_add", "data", "bias")
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
    x, a = _operands(types, op, "data", "alpha")
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


# ------------------------------------------------------------------ transformer ops: math, comparisons, logic, where
def _float_unary(name: str, fn):
    def rel(types, attrs):
        (x,) = _operands(types, name, "")
        if x.dtype not in ("float16", "float32", "float64"):
            raise RelayError(f"{name}: needs a floating-point tensor, got {x.shape} {x.dtype}")
        return x

    def compute(inputs, attrs, out_type):
        (x,) = inputs
        return te.compute(out_type.shape, lambda *i: fn(x[i]), name=name)

    register_op(OpDef(name, rel, compute, ELEMWISE, num_inputs=1, doc=f"elementwise {name}"))


def _erf(x: Any) -> Any:
    """erf by Abramowitz and Stegun 7.1.26 (absolute error below 2e-7): exp and arithmetic, so a kernel's loop
    vectorizes (libm's erff is a scalar call per element, most of a BERT layer's GELU time)."""
    dt = x.dtype
    ax = te.abs(x)
    t = _c(1.0, dt) / (_c(1.0, dt) + _c(0.3275911, dt) * ax)
    poly = _c(1.061405429, dt)
    for a in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly = poly * t + _c(a, dt)
    y = _c(1.0, dt) - poly * t * te.exp(_c(0.0, dt) - ax * ax)
    return y * te.if_then_else(x < _c(0.0, dt), _c(-1.0, dt), _c(1.0, dt))


def _tanh(x: Any) -> Any:
    """tanh as 1 - 2 / (exp(2x) + 1) (absolute error below 1e-7; exp's overflow gives 1): a vectorizable loop,
    where libm's tanhf is a scalar call per element (GPT-2's GELU)."""
    dt = x.dtype
    if dt not in ("float32", "float64"):
        return te.tanh(x)
    return _c(1.0, dt) - _c(2.0, dt) / (te.exp(x * _c(2.0, dt)) + _c(1.0, dt))


def _atan(x: Any) -> Any:
    """atan by the range reduction of Cephes' atanf (|x| above tan(3pi/8) as pi/2 + atan(-1/|x|), above tan(pi/8)
    as pi/4 + atan((|x| - 1) / (|x| + 1))) and an odd polynomial of degree 9 (relative error below 3e-7 in float32, 3e-8
    in float64): arithmetic and selects, so a kernel's loop vectorizes. +-inf give +-pi/2."""
    dt = x.dtype
    ax = te.abs(x)
    big, mid = ax > _c(2.414213562373095, dt), ax > _c(0.41421356237309503, dt)
    r = te.if_then_else(big, _c(-1.0, dt) / ax, te.if_then_else(mid, (ax - _c(1.0, dt)) / (ax + _c(1.0, dt)), ax))
    base = te.if_then_else(big, _c(math.pi / 2, dt), te.if_then_else(mid, _c(math.pi / 4, dt), _c(0.0, dt)))
    z = r * r
    poly = _c(8.05374449538e-2, dt)
    for a in (-1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1):
        poly = poly * z + _c(a, dt)
    y = base + (poly * z * r + r)
    return te.if_then_else(x < _c(0.0, dt), _c(0.0, dt) - y, y)


def _asin(x: Any) -> Any:
    """atan(x / sqrt((1 - x)(1 + x))): +-1 give +-pi/2, |x| above 1 NaN."""
    one = _c(1.0, x.dtype)
    return _atan(x / te.sqrt((one - x) * (one + x)))


def _acos(x: Any) -> Any:
    """2 atan(sqrt((1 - x) / (1 + x))), exact near 1 where pi/2 - asin(x) would cancel: -1 gives pi."""
    one = _c(1.0, x.dtype)
    return _c(2.0, x.dtype) * _atan(te.sqrt((one - x) / (one + x)))


_float_unary("erf", _erf)
for _name, _fn in (("atan", _atan), ("asin", _asin), ("acos", _acos)):
    _float_unary(_name, _fn)
_float_unary("reciprocal", lambda v: _c(1.0, v.dtype) / v)
for _name, _fn in (("log", te.log), ("sin", te.sin), ("cos", te.cos), ("tan", lambda v: te.sin(v) / te.cos(v)),
                   ("floor", te.floor), ("ceil", te.ceil), ("round", te.round)):
    _float_unary(_name, _fn)


def _float_test(name: str, fn):
    """An elementwise test of a floating-point tensor, giving a bool tensor (isnan, isinf)."""
    def rel(types, attrs):
        (x,) = _operands(types, name, "")
        if x.dtype not in ("float16", "float32", "float64"):
            raise RelayError(f"{name}: needs a floating-point tensor, got {x.shape} {x.dtype}")
        return TensorType(x.shape, "bool")

    def compute(inputs, attrs, out_type):
        (x,) = inputs
        return te.compute(out_type.shape, lambda *i: fn(x[i]), name=name)

    register_op(OpDef(name, rel, compute, ELEMWISE, num_inputs=1, doc=f"elementwise {name}, a bool tensor"))


_float_test("isnan", te.isnan)
_float_test("isinf", te.isinf)


def _power_compute(inputs, attrs, out_type):
    a, b = inputs

    def f(*i):
        x, y = _bload(a, i), _bload(b, i)
        if isinstance(y, te.expr.FloatImm) and float(y.value) in (1.0, 2.0, 3.0):  # small integer powers as products
            return x if y.value == 1.0 else (x * x if y.value == 2.0 else x * x * x)
        if isinstance(y, te.expr.FloatImm) and float(y.value) == 0.5:
            return te.sqrt(x)
        return _signed_power(x, y) if te.expr.is_float(x.dtype) else te.power(x, y)

    return te.compute(out_type.shape, f, name="power")


def _signed_power(x: Any, y: Any) -> Any:
    """``x ** y`` as C's ``pow`` gives it for every sign of ``x`` (an exponent from a tensor: GELU's ``x ** 3``
    when the 3 is a parameter): ``|x| ** y``, negated for a negative ``x`` and an odd integer ``y``, NaN for a
    negative ``x`` and a fractional ``y``, 1 for ``y == 0``. A GPU computes ``pow`` as ``2 ** (y * log2 x)``,
    defined only for a positive base (a negative one gave NaN); the CPU's ``pow`` gives the same results."""
    dt = x.dtype
    p = te.power(te.abs(x), y)
    whole = te.floor(y) == y
    odd = te.all(whole, te.floor(y * _c(0.5, dt)) * _c(2.0, dt) != y)
    neg = x < _c(0.0, dt)
    r = te.if_then_else(te.all(neg, odd), -p, p)
    r = te.if_then_else(te.all(neg, te.floor(y) != y), _c(float("nan"), dt), r)
    return te.if_then_else(y == _c(0.0, dt), _c(1.0, dt), r)


register_op(OpDef("power", _binary_rel("power"), _power_compute, BROADCAST, num_inputs=2,
                  doc="a ** b with numpy broadcasting (constant exponents 1, 2, 3, 0.5 as products or sqrt)"))


def _mod_rel(types, attrs):
    rel = _binary_rel("mod")(types, attrs)
    if not attrs["fmod"] and rel.dtype.startswith("float"):
        raise RelayError("mod: fmod=0 (the remainder with the sign of the divisor) is defined on integers only; "
                         "floats need fmod=1")
    return rel


def _mod_compute(inputs, attrs, out_type):
    a, b = inputs
    fn = te.truncmod if attrs["fmod"] else te.floormod

    def f(*i):
        d = _bload(b, i)
        if out_type.dtype.startswith(("int", "uint")) and not isinstance(d, te.expr.IntImm):
            # a zero divisor (undefined in ONNX) reads as 1: a division by zero would trap (SIGFPE)
            d = te.if_then_else(d == _c(0, d.dtype), _c(1, d.dtype), d)
        return fn(_bload(a, i), d)

    return te.compute(out_type.shape, f, name="mod")


register_op(OpDef("mod", _mod_rel, _mod_compute, BROADCAST, attrs={"fmod": 0}, num_inputs=2,
                  doc="remainder: fmod=1 has the sign of the dividend (C's fmod), fmod=0 that of the divisor"))


_COMPARE = {
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "less": lambda a, b: a < b,
    "greater": lambda a, b: a > b,
    "less_equal": lambda a, b: a <= b,
    "greater_equal": lambda a, b: a >= b,
    "logical_and": lambda a, b: te.all(a, b),
    "logical_or": lambda a, b: te.any(a, b),
    "logical_xor": lambda a, b: a != b,
}


def _compare_rel(name: str):
    def rel(types, attrs):
        t = _binary_rel(name)(types, attrs)
        if name.startswith("logical") and t.dtype != "bool":
            raise RelayError(f"{name}: operands must be bool, got {t.dtype}")
        return TensorType(t.shape, "bool")

    return rel


def _compare_compute(name: str):
    fn = _COMPARE[name]

    def compute(inputs, attrs, out_type):
        a, b = inputs
        return te.compute(out_type.shape, lambda *i: fn(_bload(a, i), _bload(b, i)), name=name)

    return compute


for _name in _COMPARE:
    register_op(OpDef(_name, _compare_rel(_name), _compare_compute(_name), BROADCAST, num_inputs=2,
                      doc=f"{_name} with numpy broadcasting, a bool tensor"))


def _logical_not_rel(types, attrs):
    (x,) = _operands(types, "logical_not", "")
    if x.dtype != "bool":
        raise RelayError(f"logical_not: needs a bool tensor, got {x.shape} {x.dtype}")
    return x


def _logical_not_compute(inputs, attrs, out_type):
    (x,) = inputs
    return te.compute(out_type.shape, lambda *i: ~x[i], name="logical_not")


register_op(OpDef("logical_not", _logical_not_rel, _logical_not_compute, ELEMWISE, num_inputs=1,
                  doc="elementwise not of a bool tensor"))


_BITWISE = {"bitwise_and": te.bitwise_and, "bitwise_or": te.bitwise_or, "bitwise_xor": te.bitwise_xor,
            "left_shift": te.shift_left, "right_shift": te.shift_right}


def _bitwise_rel(name: str):
    def rel(types, attrs):
        t = _binary_rel(name)(types, attrs) if name in _BITWISE else _operands(types, name, "data")[0]
        if not (t.dtype.startswith("int") or t.dtype.startswith("uint")):
            raise RelayError(f"{name}: operands must be integers, got {t.dtype}")
        return t

    return rel


def _bitwise_compute(name: str):
    def compute(inputs, attrs, out_type):
        if name == "bitwise_not":
            (x,) = inputs
            return te.compute(out_type.shape, lambda *i: te.bitwise_not(x[i]), name=name)
        a, b = inputs
        return te.compute(out_type.shape, lambda *i: _BITWISE[name](_bload(a, i), _bload(b, i)), name=name)

    return compute


for _name in _BITWISE:
    register_op(OpDef(_name, _bitwise_rel(_name), _bitwise_compute(_name), BROADCAST, num_inputs=2,
                      doc=f"{_name} of integers with numpy broadcasting (a right shift: arithmetic for signed "
                          "integers, logical for unsigned)" if "shift" in _name else
                      f"{_name} of integers with numpy broadcasting"))
register_op(OpDef("bitwise_not", _bitwise_rel("bitwise_not"), _bitwise_compute("bitwise_not"), ELEMWISE, num_inputs=1,
                  doc="elementwise bitwise not of integers"))


def _where_rel(types, attrs):
    op = "where"
    c, x, y = _operands(types, op, "condition", "x", "y")
    if c.dtype != "bool":
        raise RelayError(f"{op}: the condition must be bool, got {c.shape} {c.dtype}")
    shape = broadcast_shape(broadcast_shape(c.shape, x.shape, op), y.shape, op)
    return TensorType(shape, _same_dtype(op, x, y))


def _where_compute(inputs, attrs, out_type):
    c, x, y = inputs
    return te.compute(out_type.shape, lambda *i: te.if_then_else(_bload(c, i), _bload(x, i), _bload(y, i)),
                      name="where")


register_op(OpDef("where", _where_rel, _where_compute, BROADCAST, num_inputs=3,
                  doc="x where condition holds, else y (numpy broadcasting of all three)"))


def _cast_rel(types, attrs):
    (x,) = _operands(types, "cast", "")
    return TensorType(x.shape, str(attrs["dtype"]))


def _cast_compute(inputs, attrs, out_type):
    (x,) = inputs
    dtype = str(attrs["dtype"])
    if dtype == "bool":
        return te.compute(out_type.shape, lambda *i: x[i] != _c(0, x.dtype), name="cast")
    if x.dtype == "bool":
        return te.compute(out_type.shape, lambda *i: te.if_then_else(x[i], _c(1, dtype), _c(0, dtype)), name="cast")
    return te.compute(out_type.shape, lambda *i: te.cast(dtype, x[i]), name="cast")


register_op(OpDef("cast", _cast_rel, _cast_compute, ELEMWISE, attrs={"dtype": "float32"}, num_inputs=1,
                  doc="convert the element type (to bool: x != 0)"))


def _reinterpret_rel(types, attrs):
    (x,) = _operands(types, "reinterpret", "")
    dtype = str(attrs["dtype"])
    if "bool" in (dtype, x.dtype) or np.dtype(dtype).itemsize != np.dtype(x.dtype).itemsize:
        raise RelayError(f"reinterpret: {x.dtype} and {dtype} must have one width (and not be bool)")
    return TensorType(x.shape, dtype)


def _reinterpret_compute(inputs, attrs, out_type):
    (x,) = inputs
    return te.compute(out_type.shape, lambda *i: te.reinterpret(str(attrs["dtype"]), x[i]), name="reinterpret")


register_op(OpDef("reinterpret", _reinterpret_rel, _reinterpret_compute, ELEMWISE, attrs={"dtype": "float32"},
                  num_inputs=1, doc="the same bits read as another type of the same width"))


def reinterpret(data: Any, dtype: str) -> Any:
    """``data``'s bits read as ``dtype`` (TVM's ``relay.reinterpret``; same width, e.g. float32 <-> int32)."""
    return make_call("reinterpret", [data], dtype=str(dtype))


def erf(data: Any) -> Any:
    """The Gauss error function."""
    return make_call("erf", [data])


def reciprocal(data: Any) -> Any:
    """1 / x."""
    return make_call("reciprocal", [data])


def rsqrt(data: Any) -> Any:
    """1 / sqrt(x)."""
    return make_call("reciprocal", [make_call("sqrt", [data])])


def power(lhs: Any, rhs: Any) -> Any:
    """lhs ** rhs with numpy broadcasting."""
    return make_call("power", [lhs, rhs])


def mod(lhs: Any, rhs: Any, fmod: bool = False) -> Any:
    """Remainder: ``fmod=True`` truncates (sign of lhs), else floors (sign of rhs), as ONNX Mod."""
    return make_call("mod", [lhs, rhs], fmod=int(bool(fmod)))


def compare(name: str, lhs: Any, rhs: Any) -> Any:
    """A comparison or logical binary op by name (``equal``, ``less``, ``logical_and``, ...), a bool tensor."""
    return make_call(name, [lhs, rhs])


# TVM's comparisons and logical ops (bool tensors), relay.bitwise_and/or/xor, left_shift, right_shift (a Python
# int operand takes the other's dtype)
equal = _binary("equal")
not_equal = _binary("not_equal")
less = _binary("less")
less_equal = _binary("less_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")


def bitwise_not(data: Any) -> Any:
    """``~data`` of integers."""
    return make_call("bitwise_not", [data])


def logical_not(data: Any) -> Any:
    """Not of a bool tensor."""
    return make_call("logical_not", [data])


def where(condition: Any, x: Any, y: Any) -> Any:
    """x where ``condition`` (bool) holds, else y, with numpy broadcasting."""
    return make_call("where", [condition, x, y])


def cast(data: Any, dtype: str) -> Any:
    """``data`` converted to ``dtype``."""
    return make_call("cast", [data], dtype=str(dtype))


def _call_of(name: str, doc: str):
    def build(data: Any) -> Any:
        return make_call(name, [data])

    build.__name__ = build.__qualname__ = name
    build.__doc__ = doc
    return build


# TVM's calls of the elementwise math above (relay.log, relay.abs, relay.isnan, ...)
log = _call_of("log", "Natural logarithm.")
sin = _call_of("sin", "Sine.")
cos = _call_of("cos", "Cosine.")
tan = _call_of("tan", "Tangent.")
atan = _call_of("atan", "Inverse tangent, in (-pi/2, pi/2).")
asin = _call_of("asin", "Inverse sine, in [-pi/2, pi/2] (NaN outside [-1, 1]).")
acos = _call_of("acos", "Inverse cosine, in [0, pi] (NaN outside [-1, 1]).")
floor = _call_of("floor", "The largest integer not above x, as a float.")
ceil = _call_of("ceil", "The smallest integer not below x, as a float.")
round = _call_of("round", "The nearest integer, halves to even, as a float.")  # noqa: A001 - TVM's name
abs = _call_of("abs", "Absolute value.")  # noqa: A001 - TVM's name
sign = _call_of("sign", "-1, 0 or 1 by the sign of x, in x's type.")
isnan = _call_of("isnan", "Whether x is NaN (a bool tensor).")
isinf = _call_of("isinf", "Whether x is +-inf (a bool tensor).")
