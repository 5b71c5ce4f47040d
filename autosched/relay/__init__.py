"""The graph level, after TVM's relay: build a model from ops, optimise and fuse it, compile each fused
kernel with its best tuning record (or its default schedule), run it with the graph executor.

    from autosched import relay
    x = relay.var("data", shape=(1, 3, 32, 32))
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(w), padding=(1, 1)))
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    graph_json, lib, params = relay.build(mod, target="llvm")

See docs/relay.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched.relay import nn, op, transform
from autosched.relay.build import build, evaluate, extract_tasks, optimize
from autosched.relay.expr import (
    Call,
    Constant,
    Expr,
    Function,
    FuncType,
    IRModule,
    RelayError,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Type,
    Var,
    const,
    var,
)
from autosched.relay.op import add, divide, make_call, multiply, subtract

op._load()

from autosched.relay import contrib, dataflow_pattern  # noqa: E402  (contrib registers the ccompiler target)
from autosched.relay.partition import partition_for  # noqa: E402
from autosched.relay.transform import bind_params as _bind_params  # noqa: E402


def bind_params_by_name(func: Function, params: dict[str, Any]) -> Function:
    """``func`` with the inputs named in ``params`` replaced by constants (before partitioning, so that
    patterns with ``is_constant()`` see the weights)."""
    return _bind_params(func, params)


def sigmoid(data: Expr) -> Call:
    return make_call("sigmoid", [data])


def tanh(data: Expr) -> Call:
    return make_call("tanh", [data])


def exp(data: Expr) -> Call:
    return make_call("exp", [data])


def sqrt(data: Expr) -> Call:
    return make_call("sqrt", [data])


def negative(data: Expr) -> Call:
    return make_call("negative", [data])


def maximum(lhs: Expr, rhs: Expr) -> Call:
    return make_call("maximum", [lhs, rhs])


def minimum(lhs: Expr, rhs: Expr) -> Call:
    return make_call("minimum", [lhs, rhs])


def clip(data: Expr, a_min: float, a_max: float) -> Call:
    """Clamp to [a_min, a_max]."""
    return make_call("clip", [data], a_min=float(a_min), a_max=float(a_max))


def reshape(data: Expr, newshape: Sequence[int] | int) -> Call:
    """Reshape; 0 copies the input's dimension at that position and -1 is inferred (as ONNX and TVM)."""
    if isinstance(newshape, int):
        newshape = (newshape,)
    return make_call("reshape", [data], newshape=tuple(int(d) for d in newshape))


def transpose(data: Expr, axes: Sequence[int] | None = None) -> Call:
    return make_call("transpose", [data], axes=None if axes is None else tuple(int(a) for a in axes))


def strided_slice(data: Expr, begin: Any, end: Any, strides: Any = None, axes: Any = None) -> Call:
    """``data[begin:end:strides]`` along ``axes`` (all axes by default), as numpy slices."""
    from autosched.relay.ops import strided_slice as _strided_slice

    return _strided_slice(data, begin, end, strides, axes)


def concatenate(data: Sequence[Expr] | Tuple, axis: int) -> Call:
    """Join tensors along ``axis``."""
    tup = data if isinstance(data, Tuple) else Tuple(list(data))
    return make_call("concatenate", [tup], axis=int(axis))


def __getattr__(name: str) -> Any:
    if name == "frontend":  # the ONNX importer (imports onnx only when used)
        import importlib

        return importlib.import_module("autosched.relay.frontend")
    raise AttributeError(f"module 'autosched.relay' has no attribute {name!r}")


__all__ = [
    "bind_params_by_name", "contrib", "dataflow_pattern", "partition_for",
    "Call", "Constant", "Expr", "FuncType", "Function", "IRModule", "RelayError", "TensorType", "Tuple",
    "TupleGetItem", "TupleType", "Type", "Var", "add", "build", "clip", "concatenate", "const", "divide", "evaluate",
    "exp", "extract_tasks", "maximum", "minimum", "multiply", "negative", "nn", "op", "optimize", "reshape",
    "sigmoid", "sqrt", "strided_slice", "subtract", "tanh", "transform", "transpose", "var",
]
