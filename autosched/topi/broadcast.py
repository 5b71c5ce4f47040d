"""Binary operators with numpy broadcasting (TOPI's ``topi.add``, ``topi.maximum``, ``topi.equal``, ...), over
symbolic shapes too; each operand a tensor or a scalar (a Python number takes the tensor's dtype). Importing
``topi`` also gives ``te.Tensor`` its arithmetic operators (``A + B``, ``A * 2``), as TVM's TOPI does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autosched import te
from autosched.errors import AutoschedError
from autosched.te.expr import IntImm
from autosched.tir.arith import simplify
from autosched.topi import tag
from autosched.topi.math import cast, negative
from autosched.topi.utils import get_const_tuple


def _same_dim(a: Any, b: Any) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if a is b:
        return True
    d = simplify(te.const(a) - b if isinstance(a, int) else a - b)
    return isinstance(d, IntImm) and d.value == 0


def broadcast_shape(shapes: Sequence[Sequence[Any]], what: str) -> tuple:
    """numpy broadcasting of shapes whose dimensions may be expressions (a dimension of 1 stretches)."""
    consts = [get_const_tuple(s) for s in shapes]
    n = max((len(s) for s in consts), default=0)
    out = []
    for k in range(n):
        dims = [s[len(s) - n + k] if len(s) - n + k >= 0 else 1 for s in consts]
        wide = [d for d in dims if not (isinstance(d, int) and d == 1)]
        if not wide:
            out.append(1)
            continue
        if any(not _same_dim(wide[0], d) for d in wide[1:]):
            raise AutoschedError(f"topi.{what}: shapes {' and '.join(str(tuple(s)) for s in consts)} do not broadcast")
        out.append(wide[0])
    return tuple(out)


def _load(x: Any, idx: Sequence[Any]) -> Any:
    """``x`` read at output index ``idx`` under broadcasting (a scalar is itself)."""
    if not isinstance(x, te.Tensor):
        return x
    shape = get_const_tuple(x.shape)
    sub = idx[len(idx) - len(shape):] if shape else ()
    return x(*[0 if isinstance(d, int) and d == 1 else i for d, i in zip(shape, sub)])


def _scalar(v: Any, dtype: str) -> Any:
    return te.const(v, dtype) if isinstance(v, (bool, int, float)) else v


def _binary(name: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def op(lhs: Any, rhs: Any) -> Any:
        tensors = [x for x in (lhs, rhs) if isinstance(x, te.Tensor)]
        if not tensors:  # two scalars: an expression, as TVM gives
            return fn(_scalar(lhs, "float32" if isinstance(lhs, float) else "int32"),
                      _scalar(rhs, getattr(lhs, "dtype", "float32" if isinstance(rhs, float) else "int32")))
        dtype = tensors[0].dtype
        a, b = _scalar(lhs, dtype), _scalar(rhs, dtype)
        shape = broadcast_shape([t.shape for t in tensors], name)
        kind = tag.BROADCAST if len(tensors) == 2 else tag.ELEMWISE  # a tensor and a scalar: elementwise
        return te.compute(shape, lambda *i: fn(_load(a, i), _load(b, i)), name=name, tag=kind)

    op.__name__ = name
    op.__doc__ = f"Elementwise {name} of two tensors (or a tensor and a scalar) with numpy broadcasting."
    return op


def _div(a: Any, b: Any) -> Any:
    return te.truncdiv(a, b) if te.expr.is_int(a.dtype) else a / b


add = _binary("add", lambda a, b: a + b)
subtract = _binary("subtract", lambda a, b: a - b)
multiply = _binary("multiply", lambda a, b: a * b)
divide = _binary("divide", _div)
floor_divide = _binary("floor_divide", lambda a, b: te.floordiv(a, b) if te.expr.is_int(a.dtype) else te.floor(a / b))
mod = _binary("mod", lambda a, b: te.truncmod(a, b))
floor_mod = _binary("floor_mod", lambda a, b: te.floormod(a, b))
power = _binary("power", te.power)
maximum = _binary("maximum", te.maximum)
minimum = _binary("minimum", te.minimum)
equal = _binary("equal", lambda a, b: a == b)
not_equal = _binary("not_equal", lambda a, b: a != b)
less = _binary("less", lambda a, b: a < b)
less_equal = _binary("less_equal", lambda a, b: a <= b)
greater = _binary("greater", lambda a, b: a > b)
greater_equal = _binary("greater_equal", lambda a, b: a >= b)
logical_and = _binary("logical_and", lambda a, b: te.all(a, b))
logical_or = _binary("logical_or", lambda a, b: te.any(a, b))
logical_xor = _binary("logical_xor", lambda a, b: a != b)
bitwise_and = _binary("bitwise_and", te.bitwise_and)
bitwise_or = _binary("bitwise_or", te.bitwise_or)
bitwise_xor = _binary("bitwise_xor", te.bitwise_xor)
left_shift = _binary("left_shift", te.shift_left)
right_shift = _binary("right_shift", te.shift_right)


def where(condition: Any, x: Any, y: Any) -> te.Tensor:
    """``x`` where ``condition`` is true (nonzero), else ``y``, with numpy broadcasting of the three (each a
    tensor or a scalar)."""
    tensors = [t for t in (condition, x, y) if isinstance(t, te.Tensor)]
    if not tensors:
        raise AutoschedError("topi.where: needs at least one tensor operand")
    dtype = next((t.dtype for t in (x, y) if isinstance(t, te.Tensor)), "float32")
    a, b = _scalar(x, dtype), _scalar(y, dtype)
    shape = broadcast_shape([t.shape for t in tensors], "where")

    def f(*i):
        c = _load(condition, i)
        c = c if c.dtype == "bool" else c != te.const(0, c.dtype)
        return te.if_then_else(c, _load(a, i), _load(b, i))

    return te.compute(shape, f, name="where", tag=tag.BROADCAST)


def broadcast_to(data: te.Tensor, shape: Sequence[Any]) -> te.Tensor:
    """``data`` stretched to ``shape`` (numpy broadcasting)."""
    out = broadcast_shape([data.shape, shape], "broadcast_to")
    if len(out) != len(shape) or any(not _same_dim(a, b) for a, b in zip(get_const_tuple(shape), out)):
        raise AutoschedError(f"topi.broadcast_to: {tuple(get_const_tuple(data.shape))} does not broadcast to "
                             f"{tuple(get_const_tuple(shape))}")
    return te.compute(tuple(shape), lambda *i: _load(data, i), name="broadcast_to", tag=tag.BROADCAST)


def _install_tensor_operators() -> None:
    """``A + B``, ``A - 1``, ``2 * A``, ``A / B``, ``-A`` on te tensors: TOPI's broadcast operators (what TVM's
    tensors do once TOPI is imported)."""
    pairs = {"__add__": add, "__sub__": subtract, "__mul__": multiply, "__truediv__": divide,
             "__floordiv__": floor_divide, "__mod__": floor_mod}
    for dunder, fn in pairs.items():
        setattr(te.Tensor, dunder, lambda self, other, fn=fn: fn(self, other))
        setattr(te.Tensor, dunder.replace("__", "__r", 1), lambda self, other, fn=fn: fn(other, self))
    te.Tensor.__neg__ = negative
    te.Tensor.astype = cast  # TVM's tensor.astype("int8") once TOPI is imported


_install_tensor_operators()
