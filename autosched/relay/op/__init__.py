"""The ops, one home: the registry and ``make_call`` (``op``), the built-in ops registered on import by family
(``elemwise``, ``tensor``: reshape, transpose, concatenate, pad, slice, upsampling, take; ``indexing``: gathers
and scatters at computed positions, one_hot, topk; ``reduce``: sums,
means, extrema and layer_norm; ``nn``; ``blocked``: the
blocked-channel layouts AlterOpLayout rewrites into), the checks they share (``common``), the default CPU and GPU
schedules of the kernels they anchor (``schedules``, ``cuda_schedules``) and the evaluation of constant
expressions that FoldConstant uses (``interp``). Above the IR, below the passes.

Importing it gives ``Expr`` its ``+ - * /`` (op.py).
"""

from autosched.relay.op import blocked, elemwise, image, indexing, interp, nn, op, reduce, schedules, tensor
from autosched.relay.op.common import broadcast_shape, pad4
from autosched.relay.op.elemwise import (
    abs,
    acos,
    asin,
    atan,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    cast,
    ceil,
    clip,
    compare,
    cos,
    erf,
    exp,
    floor,
    isinf,
    isnan,
    left_shift,
    log,
    logical_not,
    maximum,
    minimum,
    mod,
    negative,
    power,
    prelu,
    reciprocal,
    right_shift,
    round,
    sigmoid,
    sign,
    sin,
    sqrt,
    tan,
    tanh,
    where,
)
from autosched.relay.op.indexing import gather, gather_nd, one_hot, scatter_elements, scatter_nd, topk
from autosched.relay.op.interp import evaluate
from autosched.relay.op.nn._nn import channel_block_of, log_softmax, lrn, pad_nchw
from autosched.relay.op.op import (
    BROADCAST,
    COMM_REDUCE,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OUT_ELEMWISE_FUSABLE,
    OpDef,
    add,
    divide,
    get,
    get_op_attr,
    list_ops,
    make_call,
    multiply,
    register_op,
    register_op_attr,
    subtract,
)
from autosched.relay.op.reduce import (  # noqa: A004 - TVM's names (relay.sum, relay.max, ...)
    argmax,
    argmin,
    cumprod,
    cumsum,
    layer_norm,
    max,
    mean,
    min,
    prod,
    sum,
)
from autosched.relay.op.tensor import (
    broadcast_to,
    concatenate,
    reshape,
    reshape_shape,
    slice_range,
    strided_slice,
    take,
    tile,
    transpose,
    trilu,
    upsampling,
)

__all__ = [
    "BROADCAST", "COMM_REDUCE", "ELEMWISE", "INJECTIVE", "OPAQUE", "OUT_ELEMWISE_FUSABLE", "OpDef", "add",
    "blocked", "broadcast_shape", "channel_block_of", "clip", "concatenate", "divide", "elemwise", "evaluate", "exp",
    "get", "get_op_attr", "interp", "list_ops", "log_softmax", "lrn", "make_call", "maximum", "minimum", "multiply",
    "negative", "nn", "op", "pad4", "pad_nchw", "prelu", "register_op", "register_op_attr", "reshape",
    "reshape_shape", "schedules", "sigmoid", "slice_range", "sqrt", "strided_slice", "subtract", "tanh", "tensor",
    "transpose", "upsampling", "cast", "compare", "erf", "logical_not", "mod", "power", "reciprocal", "where",
    "reduce", "layer_norm", "broadcast_to", "take", "trilu", "abs", "ceil", "cos", "floor", "isinf", "isnan",
    "log", "round", "sign", "sin", "tan", "atan", "asin", "acos",
    "tile", "image", "indexing", "gather", "gather_nd", "one_hot", "scatter_elements",
    "scatter_nd", "topk", "sum", "mean", "max", "min", "prod", "argmax", "argmin", "cumsum", "cumprod",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift", "right_shift",
]
