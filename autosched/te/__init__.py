"""The tensor-expression language: describe what to compute, then schedule how."""

from autosched.te.expr import (
    Expr,
    Var,
    abs,
    all,
    any,
    cast,
    ceil,
    comm_reducer,
    const,
    cos,
    erf,
    exp,
    floor,
    if_then_else,
    log,
    max,
    max_value,
    maximum,
    min,
    min_value,
    minimum,
    power,
    sigmoid,
    sin,
    sqrt,
    sum,
    tanh,
)
from autosched.te.schedule import Schedule, Stage, create_schedule
from autosched.te.tensor import (
    ComputeOp,
    IterVar,
    Operation,
    PlaceholderOp,
    Range,
    Tensor,
    compute,
    placeholder,
    reduce_axis,
    size_var,
    thread_axis,
    var,
)
from autosched.te.trace import Step, Trace

__all__ = [
    "Expr", "Var", "abs", "all", "any", "cast", "ceil", "comm_reducer", "const", "cos", "erf", "exp", "floor",
    "if_then_else", "log", "max", "max_value", "maximum", "min", "min_value", "minimum", "power", "sigmoid", "sin",
    "sqrt", "sum", "tanh", "Schedule", "Stage", "create_schedule", "ComputeOp", "IterVar", "Operation",
    "PlaceholderOp", "Range", "Tensor", "compute", "placeholder", "reduce_axis", "size_var", "thread_axis", "var",
    "Step", "Trace",
]
