"""Elementwise operators (TOPI's ``topi.exp``, ``topi.clip``, ``topi.cast``, ...): one ``te.compute`` each, over
any shape (symbolic dimensions too), tagged ``elemwise``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autosched import te
from autosched.errors import AutoschedError
from autosched.topi import tag


def _elemwise(name: str, fn: Callable[[Any], Any]) -> Callable[[te.Tensor], te.Tensor]:
    def op(x: te.Tensor) -> te.Tensor:
        if not isinstance(x, te.Tensor):
            raise AutoschedError(f"topi.{name}: expected a te.Tensor, got {type(x).__name__}")
        return te.compute(x.shape, lambda *i: fn(x(*i)), name=name, tag=tag.ELEMWISE)

    op.__name__ = name
    op.__doc__ = f"Elementwise {name} of a tensor."
    return op


def _float(x: Any) -> Any:
    return te.const(1.0, x.dtype)


exp = _elemwise("exp", te.exp)
log = _elemwise("log", te.log)
log2 = _elemwise("log2", lambda v: te.log(v) / te.const(0.6931471805599453, v.dtype))
log10 = _elemwise("log10", lambda v: te.log(v) / te.const(2.302585092994046, v.dtype))
sqrt = _elemwise("sqrt", te.sqrt)
rsqrt = _elemwise("rsqrt", lambda v: _float(v) / te.sqrt(v))
sigmoid = _elemwise("sigmoid", te.sigmoid)
tanh = _elemwise("tanh", te.tanh)
erf = _elemwise("erf", te.erf)
sin = _elemwise("sin", te.sin)
cos = _elemwise("cos", te.cos)
tan = _elemwise("tan", lambda v: te.sin(v) / te.cos(v))
floor = _elemwise("floor", te.floor)
ceil = _elemwise("ceil", te.ceil)
round = _elemwise("round", te.round)  # noqa: A001 - TOPI's name
trunc = _elemwise("trunc", lambda v: te.if_then_else(v < te.const(0, v.dtype), te.ceil(v), te.floor(v)))
abs = _elemwise("abs", te.abs)  # noqa: A001 - TOPI's name
negative = _elemwise("negative", lambda v: te.const(0, v.dtype) - v)
sign = _elemwise("sign", lambda v: te.if_then_else(v > te.const(0, v.dtype), te.const(1, v.dtype),
                                                   te.if_then_else(v < te.const(0, v.dtype), te.const(-1, v.dtype),
                                                                   te.const(0, v.dtype))))
isnan = _elemwise("isnan", lambda v: te.isnan(v) if te.expr.is_float(v.dtype) else te.const(0, "bool"))
isinf = _elemwise("isinf", lambda v: te.isinf(v) if te.expr.is_float(v.dtype) else te.const(0, "bool"))
isfinite = _elemwise("isfinite", lambda v: te.all(te.isnan(v) == te.const(0, "bool"),
                                                  te.isinf(v) == te.const(0, "bool"))
                     if te.expr.is_float(v.dtype) else te.const(1, "bool"))
logical_not = _elemwise("logical_not", lambda v: v == te.const(0, v.dtype))
bitwise_not = _elemwise("bitwise_not", te.bitwise_not)
identity = _elemwise("identity", lambda v: v)
fast_exp = exp  # TOPI's approximations: here the exact functions (LLVM vectorizes them as well)
fast_tanh = tanh
fast_erf = erf


def clip(x: te.Tensor, a_min: Any, a_max: Any) -> te.Tensor:
    """Each element limited to [a_min, a_max]."""
    lo, hi = te.const(a_min, x.dtype), te.const(a_max, x.dtype)
    return te.compute(x.shape, lambda *i: te.minimum(te.maximum(x(*i), lo), hi), name="clip", tag=tag.ELEMWISE)


def cast(x: Any, dtype: str) -> Any:
    """A tensor (or a scalar expression) converted to ``dtype``."""
    if isinstance(x, te.Tensor):
        return te.compute(x.shape, lambda *i: x(*i).astype(dtype), name="cast", tag=tag.ELEMWISE)
    return te.const(x, dtype) if isinstance(x, (int, float)) else te.cast(dtype, x)


def reinterpret(x: te.Tensor, dtype: str) -> te.Tensor:
    """The same bits read as ``dtype`` (of the same width)."""
    return te.compute(x.shape, lambda *i: te.reinterpret(dtype, x(*i)), name="reinterpret", tag=tag.ELEMWISE)


def elemwise_sum(xs: Sequence[te.Tensor]) -> te.Tensor:
    """The elementwise sum of tensors of one shape."""
    xs = list(xs)
    if not xs:
        raise AutoschedError("topi.elemwise_sum: needs at least one tensor")

    def f(*i):
        total = xs[0](*i)
        for x in xs[1:]:
            total = total + x(*i)
        return total

    return te.compute(xs[0].shape, f, name="elemwise_sum", tag=tag.ELEMWISE)


def full(shape: Sequence[Any], dtype: str, fill_value: Any) -> te.Tensor:
    """A tensor of ``shape`` holding ``fill_value``."""
    v = te.const(fill_value, dtype)
    return te.compute(tuple(shape), lambda *i: v, name="full", tag=tag.ELEMWISE)


def full_like(x: te.Tensor, fill_value: Any) -> te.Tensor:
    """A tensor of ``x``'s shape and dtype holding ``fill_value``."""
    v = te.const(fill_value, x.dtype)
    return te.compute(x.shape, lambda *i: v, name="full_like", tag=tag.ELEMWISE)
