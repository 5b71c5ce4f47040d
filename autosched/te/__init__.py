"""The tensor-expression language: describe what to compute, then schedule how."""

from autosched.te import tensor_core  # noqa: F401,I001 - the tensor-core intrinsics, declared on demand by name
from autosched.te import hybrid
from autosched.te.expr import (
    Expr,
    Var,
    abs,
    all,
    any,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    cast,
    ceil,
    comm_reducer,
    const,
    cos,
    erf,
    exp,
    floor,
    floordiv,
    floormod,
    if_then_else,
    indexdiv,
    indexmod,
    isinf,
    isnan,
    log,
    max,
    max_value,
    maximum,
    min,
    min_value,
    minimum,
    popcount,
    power,
    reinterpret,
    round,
    shift_left,
    shift_right,
    sigmoid,
    sin,
    sqrt,
    sum,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)
from autosched.te.autodiff import gradient
from autosched.te.extern import ExternOp, extern
from autosched.te.intrin import TensorIntrin, decl_tensor_intrin
from autosched.te.scan import ScanOp, scan
from autosched.te.schedule import Schedule, Stage, create_schedule
from autosched.te.serialize import load_json, save_json  # noqa: F401 - also registers the pickling of schedules
from autosched.te.tensor import (
    ComputeOp,
    IterVar,
    Operation,
    PlaceholderOp,
    Range,
    Tensor,
    TensorSlice,
    compute,
    placeholder,
    reduce_axis,
    size_var,
    tag_scope,
    thread_axis,
    var,
)
from autosched.te.trace import Step, Trace

__all__ = [
    "Expr", "Var", "abs", "all", "any", "cast", "ceil", "comm_reducer", "const", "cos", "erf", "exp", "floor",
    "if_then_else", "isinf", "isnan", "log", "max", "max_value", "maximum", "min", "min_value", "minimum", "popcount",
    "power", "reinterpret", "round", "sigmoid", "sin",
    "sqrt", "sum", "tanh", "trunc", "floordiv", "floormod", "indexdiv", "indexmod", "truncdiv", "truncmod",
    "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "shift_left", "shift_right",
    "Schedule", "Stage", "create_schedule", "ScanOp", "scan",
    "gradient", "ExternOp", "extern", "TensorIntrin", "decl_tensor_intrin", "ComputeOp", "IterVar", "Operation",
    "PlaceholderOp", "Range", "Tensor", "TensorSlice",
    "compute", "placeholder", "reduce_axis", "size_var", "tag_scope", "thread_axis", "var",
    "Step", "Trace", "hybrid",
]
