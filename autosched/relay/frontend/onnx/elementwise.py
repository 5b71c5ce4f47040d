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


# ------------------------------------------------------------------ transformer exports: math, masks, logic
register("Erf")(_unary("erf"))
register("Atan")(_unary("atan"))
register("Asin")(_unary("asin"))
register("Acos")(_unary("acos"))
register("Reciprocal")(_unary("reciprocal"))


def _operand(g: _GraphConverter, name: str, dtype: str) -> Expr:
    """``name`` as a relay expression of ``dtype`` (an import-time value is converted; a tensor must have it)."""
    if g.is_const(name) and str(g.value(name, "").dtype) != dtype:
        return relay_ir.const(np.asarray(g.value(name, "")).astype(dtype))
    return g.tensor(name)


@register("Pow")
def _pow(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x ** y; a constant exponent takes the base's type (ONNX allows them to differ), 2, 3 and 0.5 become products
    and a square root in the kernel."""
    dt = g.dtype(node.input[0])
    if g.dtype(node.input[1]) != dt and not g.is_const(node.input[1]):
        g._fail(f"the exponent's type {g.dtype(node.input[1])} differs from the base's {dt} and is not a "
                "constant; only same-typed or constant exponents are supported")
    base, exp = node.input[0], node.input[1]
    if g.is_const(exp) and np.asarray(g.value(exp, "")).size == 1 and len(g.shape(base)) >= np.ndim(g.value(exp, "")):
        # one exponent for every element (GELU's x ** 3): a scalar in the kernel, which computes x * x * x for
        # 2 and 3 and a square root for 0.5 (a pow call per element took 28% of GPT-2's time on a CPU)
        return relay_op.power(g.tensor(base), relay_ir.const(np.asarray(g.value(exp, "")).astype(dt).reshape(())))
    return relay_op.power(g.tensor(base), _operand(g, exp, dt))


@register("Mod")
def _mod(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """fmod=0: the remainder with the divisor's sign (integers); fmod=1: C's fmod (the dividend's sign)."""
    fmod = int(attrs.get("fmod", 0))
    if not fmod and g.dtype(node.input[0]).startswith("float"):
        g._fail("fmod=0 on floating-point inputs is invalid in ONNX (floats need fmod=1)")
    return relay_op.mod(g.tensor(node.input[0]), g.tensor(node.input[1]), fmod=bool(fmod))


_COMPARE = {"Equal": "equal", "Less": "less", "Greater": "greater", "LessOrEqual": "less_equal",
            "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or"}


@register(*_COMPARE)
def _compare(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    return relay_op.compare(_COMPARE[node.op_type], g.tensor(node.input[0]), g.tensor(node.input[1]))


@register("Not")
def _not(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    return relay_op.logical_not(g.tensor(node.input[0]))


_BITWISE = {"BitwiseAnd": relay_op.bitwise_and, "BitwiseOr": relay_op.bitwise_or, "BitwiseXor": relay_op.bitwise_xor}


@register(*_BITWISE)
def _bitwise(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    return _BITWISE[node.op_type](g.tensor(node.input[0]), g.tensor(node.input[1]))


@register("BitwiseNot")
def _bitwise_not(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    return relay_op.bitwise_not(g.tensor(node.input[0]))


@register("BitShift")
def _bit_shift(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Unsigned integers shifted by the second input's bits, ``direction`` LEFT or RIGHT (logical)."""
    direction = attrs.get("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        g._fail(f"direction {direction!r} must be LEFT or RIGHT")
    shift = relay_op.left_shift if direction == "LEFT" else relay_op.right_shift
    return shift(g.tensor(node.input[0]), g.tensor(node.input[1]))


@register("Where")
def _where(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x where the condition holds, else y; a constant branch takes the other's type (a mask's fill value)."""
    xn, yn = node.input[1], node.input[2]
    dt = g.dtype(yn if g.is_const(xn) else xn)
    return relay_op.where(g.tensor(node.input[0]), _operand(g, xn, dt), _operand(g, yn, dt))


@register("Cast")
def _cast(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """A conversion of element type (values known at import are converted then)."""
    from onnx import helper

    if "to" not in attrs:
        g._fail("the 'to' attribute is required")
    dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(int(attrs["to"]))))
    if dtype not in ("float32", "float64", "float16", "int64", "int32", "int8", "uint8", "bool"):
        g._fail(f"casting to {dtype} is not supported")
    if g.dtype(node.input[0]) == dtype:
        return g.tensor(node.input[0])
    return relay_op.cast(g.tensor(node.input[0]), dtype)


@register("Gelu")
def _gelu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Gelu (opset 20): 0.5 x (1 + erf(x / sqrt 2)), or with approximate='tanh' 0.5 x (1 + tanh(sqrt(2 / pi)
    (x + 0.044715 x^3))); element-wise ops that fuse into the producing dense's epilogue."""
    x = g.tensor(node.input[0])
    approximate = attrs.get("approximate", "none")

    def c(v: float) -> Expr:
        return _scalar(g, node.input[0], v)

    if approximate == "none":
        inner = relay_op.erf(relay_op.multiply(x, c(float(np.float32(1.0 / np.sqrt(2.0))))))
    elif approximate == "tanh":
        cube = relay_op.multiply(relay_op.multiply(x, x), x)
        inner = relay_op.tanh(relay_op.multiply(relay_op.add(x, relay_op.multiply(cube, c(0.044715))),
                                                c(float(np.sqrt(2.0 / np.pi)))))
    else:
        g._fail(f"approximate={approximate!r} is not supported (only 'none' and 'tanh')")
    return relay_op.multiply(relay_op.multiply(x, c(0.5)), relay_op.add(inner, c(1.0)))


# ------------------------------------------------------------------ more math and activations (CNNs, detectors)
for _op, _fn in (("Log", "log"), ("Abs", "abs"), ("Floor", "floor"), ("Ceil", "ceil"), ("Round", "round"),
                 ("Sign", "sign"), ("Sin", "sin"), ("Cos", "cos"), ("Tan", "tan"), ("IsNaN", "isnan")):
    register(_op)(_unary(_fn))


@register("Xor")
def _xor(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    return relay_op.compare("logical_xor", g.tensor(node.input[0]), g.tensor(node.input[1]))


@register("IsInf")
def _isinf(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """+inf and/or -inf, as ``detect_positive`` / ``detect_negative`` ask (both by default)."""
    x = g.tensor(node.input[0])
    pos, neg = bool(attrs.get("detect_positive", 1)), bool(attrs.get("detect_negative", 1))
    if pos and neg:
        return relay_op.isinf(x)
    if pos or neg:
        return relay_op.compare("equal", x, _scalar(g, node.input[0], float("inf") if pos else float("-inf")))
    inf = relay_op.isinf(x)  # neither: all false, still computed from x (a graph output cannot be a constant)
    return relay_op.compare("logical_and", inf, relay_op.logical_not(inf))


def _exp_minus_one(g: _GraphConverter, name: str, x: Expr, alpha: float) -> Expr:
    """alpha * (exp(x) - 1), the negative branch of the ELU family."""
    return relay_op.multiply(relay_op.subtract(relay_op.exp(x), _scalar(g, name, 1.0)), _scalar(g, name, alpha))


@register("Elu", "Selu")
def _elu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x for x > 0, else alpha (e^x - 1); Selu scales both branches by gamma (its defaults are SELU's constants)."""
    name = node.input[0]
    x = g.tensor(name)
    selu = node.op_type == "Selu"
    alpha = float(attrs.get("alpha", 1.6732632423543772 if selu else 1.0))
    out = relay_op.where(relay_op.compare("greater", x, _scalar(g, name, 0.0)), x, _exp_minus_one(g, name, x, alpha))
    return relay_op.multiply(out, _scalar(g, name, float(attrs.get("gamma", 1.0507009873554805)))) if selu else out


@register("Celu")
def _celu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """max(0, x) + min(0, alpha (e^(x / alpha) - 1))."""
    name = node.input[0]
    x = g.tensor(name)
    alpha = float(attrs.get("alpha", 1.0))
    neg = _exp_minus_one(g, name, relay_op.multiply(x, _scalar(g, name, 1.0 / alpha)), alpha)
    return relay_op.add(relay_op.nn.relu(x), relay_op.minimum(neg, _scalar(g, name, 0.0)))


def _softplus_of(g: _GraphConverter, name: str, x: Expr) -> Expr:
    """log(1 + e^x) as max(x, 0) + log(1 + e^-|x|): no overflow for large x, exact to rounding for small."""
    tail = relay_op.log(relay_op.add(relay_op.exp(relay_op.negative(relay_op.abs(x))), _scalar(g, name, 1.0)))
    return relay_op.add(relay_op.nn.relu(x), tail)


@register("Softplus")
def _softplus(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    return _softplus_of(g, node.input[0], g.tensor(node.input[0]))


@register("Mish")
def _mish(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x tanh(softplus(x)) (YOLOv4's activation)."""
    x = g.tensor(node.input[0])
    return relay_op.multiply(x, relay_op.tanh(_softplus_of(g, node.input[0], x)))


@register("Softsign")
def _softsign(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    x = g.tensor(node.input[0])
    return relay_op.divide(x, relay_op.add(relay_op.abs(x), _scalar(g, node.input[0], 1.0)))


@register("ThresholdedRelu")
def _thresholded_relu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x where x > alpha (default 1), else 0."""
    name = node.input[0]
    x = g.tensor(name)
    above = relay_op.compare("greater", x, _scalar(g, name, float(attrs.get("alpha", 1.0))))
    return relay_op.where(above, x, _scalar(g, name, 0.0))


@register("Shrink")
def _shrink(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x + bias below -lambd, x - bias above lambd, 0 between (defaults: bias 0, lambd 0.5)."""
    name = node.input[0]
    x = g.tensor(name)
    bias, lambd = float(attrs.get("bias", 0.0)), float(attrs.get("lambd", 0.5))
    high = relay_op.where(relay_op.compare("greater", x, _scalar(g, name, lambd)),
                          relay_op.subtract(x, _scalar(g, name, bias)), _scalar(g, name, 0.0))
    return relay_op.where(relay_op.compare("less", x, _scalar(g, name, -lambd)),
                          relay_op.add(x, _scalar(g, name, bias)), high)


# ------------------------------------------------------------------ more math
@register("CastLike")
def _cast_like(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Cast to the element type of the second input."""
    dtype = g.dtype(node.input[1])
    return g.tensor(node.input[0]) if g.dtype(node.input[0]) == dtype else relay_op.cast(g.tensor(node.input[0]),
                                                                                          dtype)


@register("Swish")
def _swish(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x * sigmoid(alpha x) (alpha 1: SiLU)."""
    x = g.tensor(node.input[0])
    alpha = float(attrs.get("alpha", 1.0))
    inner = x if alpha == 1.0 else relay_op.multiply(x, _scalar(g, node.input[0], alpha))
    return relay_op.multiply(x, relay_op.sigmoid(inner))


@register("BitCast")
def _bitcast(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The same bits as the type ``to`` of the same width (opset 26; bfloat16 / float8 tricks): ``reinterpret``."""
    from onnx import helper

    if "to" not in attrs:
        g._fail("the to attribute is required")
    dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(int(attrs["to"]))))
    src = g.dtype(node.input[0])
    if "bool" in (src, dtype) or np.dtype(src).itemsize != np.dtype(dtype).itemsize:
        g._fail(f"{src} and {dtype} must have one width (and not be bool)")
    return relay_op.reinterpret(g.tensor(node.input[0]), dtype)


@register("SwiGLU")
def _swiglu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Swish(A) * B (opset 28: an LLM's gated MLP activation), A and B of one shape."""
    a, b = node.input[0], node.input[1]
    if g.shape(a) != g.shape(b):
        g._fail(f"A {list(g.shape(a))} and B {list(g.shape(b))} must have one shape (SwiGLU does not broadcast)")
    return relay_op.multiply(_swish(g, node, attrs), g.tensor(b))


@register("Sinh", "Cosh")
def _sinh_cosh(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """(e^x -+ e^-x) / 2."""
    x = g.tensor(node.input[0])
    ex, emx = relay_op.exp(x), relay_op.exp(relay_op.negative(x))
    both = relay_op.subtract(ex, emx) if node.op_type == "Sinh" else relay_op.add(ex, emx)
    return relay_op.multiply(both, _scalar(g, node.input[0], 0.5))


@register("Asinh", "Acosh", "Atanh")
def _inverse_hyperbolic(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """log(x + sqrt(x^2 + 1)), log(x + sqrt(x^2 - 1)) and log((1 + x) / (1 - x)) / 2; asinh of a negative x as
    -asinh(-x), so that large negative inputs do not cancel to log(0)."""
    name = node.input[0]
    x = g.tensor(name)
    one = _scalar(g, name, 1.0)
    if node.op_type == "Atanh":
        ratio = relay_op.divide(relay_op.add(one, x), relay_op.subtract(one, x))
        return relay_op.multiply(relay_op.log(ratio), _scalar(g, name, 0.5))
    if node.op_type == "Acosh":
        return relay_op.log(relay_op.add(x, relay_op.sqrt(relay_op.subtract(relay_op.multiply(x, x), one))))
    ax = relay_op.abs(x)
    pos = relay_op.log(relay_op.add(ax, relay_op.sqrt(relay_op.add(relay_op.multiply(ax, ax), one))))
    return relay_op.multiply(pos, relay_op.sign(x))
