"""The graph level, after TVM's relay: build a model from ops, optimise and fuse it, compile each fused
kernel with its best tuning record (or its default schedule), run it with the graph executor.

    from autosched import relay
    x = relay.var("data", shape=(1, 3, 32, 32))
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(w), padding=(1, 1)))
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    graph_json, lib, params = relay.build(mod, target="llvm")

Sub-packages, each importing only those before it: ``ir`` (expressions, printer, type inference) < ``op`` (the
registry and every op's compute and default schedules) < ``dataflow_pattern`` < ``transform`` (passes, layouts,
partitioning) < ``backend`` (build, fused kernels, external compilers) and ``frontend`` (ONNX). This module
gathers TVM's names from them. See docs/relay.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from autosched.relay import backend, dataflow_pattern, ir, op, transform
from autosched.relay.backend import build, build_module, contrib, create_executor, extract_tasks, optimize
from autosched.relay.ir import (
    Call,
    Constant,
    Expr,
    ExprMutator,
    ExprVisitor,
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
    expr,
    var,
)
from autosched.relay.op import (  # noqa: A004 - TVM's names
    abs,
    acos,
    add,
    arange,
    argmax,
    argmin,
    asin,
    atan,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    broadcast_to,
    cast,
    ceil,
    clip,
    concatenate,
    cos,
    cumprod,
    cumsum,
    det,
    divide,
    equal,
    erf,
    evaluate,
    exp,
    expand_dims,
    floor,
    full,
    full_like,
    gather,
    gather_nd,
    greater,
    greater_equal,
    image,
    isinf,
    isnan,
    layout_transform,
    left_shift,
    less,
    less_equal,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    max,
    maximum,
    mean,
    min,
    minimum,
    mod,
    multiply,
    negative,
    nn,
    not_equal,
    one_hot,
    ones,
    ones_like,
    power,
    prod,
    reinterpret,
    repeat,
    reshape,
    reshape_like,
    reverse,
    right_shift,
    round,
    rsqrt,
    scatter_elements,
    scatter_nd,
    shape_of,
    sigmoid,
    sign,
    sin,
    split,
    sqrt,
    squeeze,
    stack,
    strided_slice,
    subtract,
    sum,
    take,
    tan,
    tanh,
    tile,
    topk,
    transpose,
    trilu,
    unique,
    vision,
    where,
    zeros,
    zeros_like,
)
from autosched.relay.transform import bind_params, partition_for


def bind_params_by_name(func: Function, params: dict[str, Any]) -> Function:
    """``func`` with the inputs named in ``params`` replaced by constants (before partitioning, so that
    patterns with ``is_constant()`` see the weights)."""
    return bind_params(func, params)


def __getattr__(name: str) -> Any:
    # the ONNX importer, TVM's networks, the weight-dependent rewrites (sparse layers): loaded when first used
    if name in ("frontend", "testing", "data_dep_optimization"):
        return importlib.import_module(f"autosched.relay.{name}")
    raise AttributeError(f"module 'autosched.relay' has no attribute {name!r}")


__all__ = [
    "bind_params_by_name", "build_module", "contrib", "create_executor", "dataflow_pattern", "partition_for",
    "Call", "Constant", "Expr", "ExprMutator", "ExprVisitor", "FuncType", "Function", "IRModule", "RelayError",
    "TensorType", "Tuple",
    "TupleGetItem", "TupleType", "Type", "Var", "add", "backend", "build", "clip", "concatenate", "const", "divide",
    "evaluate", "exp", "expr", "extract_tasks", "ir", "maximum", "minimum", "multiply", "negative", "nn", "op",
    "optimize", "reshape", "sigmoid", "sqrt", "strided_slice", "subtract", "tanh", "transform", "transpose", "var",
    "abs", "ceil", "cos", "floor", "isinf", "isnan", "log", "round", "sign", "sin", "tan", "atan", "asin", "acos",
    "broadcast_to", "cast", "erf", "gather", "gather_nd", "image", "vision", "logical_not", "mod", "one_hot", "power",
    "scatter_elements", "scatter_nd", "take", "tile", "topk", "trilu", "unique", "where",
    "sum", "mean", "max", "min", "prod", "argmax", "argmin", "cumsum", "cumprod", "det",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift", "right_shift",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
    "logical_xor", "reinterpret", "rsqrt", "layout_transform", "arange", "expand_dims", "full", "full_like", "ones",
    "ones_like",
    "repeat", "reshape_like", "reverse", "shape_of", "split", "squeeze", "stack", "zeros", "zeros_like",
]
