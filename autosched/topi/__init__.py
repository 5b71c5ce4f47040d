"""TVM's operator inventory (TOPI) over autosched's te: operators that build te computations, and their default
schedules, under TVM's names, so that te code written with ``from tvm import topi`` runs.

    C = topi.nn.relu(topi.nn.conv2d_nchw(data, kernel, 1, 1, 1))
    s = topi.generic.schedule_conv2d_nchw([C])     # the CPU's default loop nest (or topi.cuda.* for a GPU)

Elementwise, broadcast and reduction operators are written here and take symbolic (``te.var``) shapes; the
others are computed by relay's registered computes (constant shapes), so a TOPI convolution and a relay one are
the same computation with the same default schedule and tuning space. Importing TOPI gives ``te.Tensor`` its
arithmetic operators (``A + B`` broadcasts), as in TVM. See docs/coming_from_tvm.md.
"""

from __future__ import annotations

from autosched.topi import cuda, generic, gpu, image, nn, sparse, tag, testing, utils, vision, x86
from autosched.topi.broadcast import (
    add,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    broadcast_to,
    divide,
    equal,
    floor_divide,
    floor_mod,
    greater,
    greater_equal,
    left_shift,
    less,
    less_equal,
    logical_and,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    not_equal,
    power,
    right_shift,
    subtract,
    where,
)
from autosched.topi.einsum import einsum, tensordot
from autosched.topi.elsewhere import NAMESPACES as _ELSEWHERE
from autosched.topi.indexing import (
    adv_index,
    expand_like,
    gather,
    gather_nd,
    invert_permutation,
    matrix_set_diag,
    meshgrid,
    ndarray_size,
    one_hot,
    reverse_sequence,
    sequence_mask,
    shape,
    sparse_to_dense,
    strided_set,
    unravel_index,
)
from autosched.topi.math import (  # noqa: A004 - TOPI's names
    abs,
    bitwise_not,
    cast,
    ceil,
    clip,
    cos,
    elemwise_sum,
    erf,
    exp,
    fast_erf,
    fast_exp,
    fast_tanh,
    floor,
    full,
    full_like,
    identity,
    isfinite,
    isinf,
    isnan,
    log,
    log2,
    log10,
    logical_not,
    negative,
    reinterpret,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    tan,
    tanh,
    trunc,
)
from autosched.topi.reduction import all, any, argmax, argmin, max, min, prod, sum  # noqa: A004
from autosched.topi.scan import cumprod, cumsum
from autosched.topi.sort import argsort, sort, topk, unique
from autosched.topi.transform import (
    arange,
    concatenate,
    expand_dims,
    flip,
    layout_transform,
    matmul,
    repeat,
    reshape,
    split,
    squeeze,
    stack,
    strided_slice,
    take,
    tile,
    transpose,
)

broadcast_add, broadcast_sub, broadcast_mul, broadcast_div = add, subtract, multiply, divide  # TVM's old names
arm_cpu, hls, mali, bifrost, intel_graphics, rocm = (_ELSEWHERE[k] for k in ("arm_cpu", "hls", "mali", "bifrost",
                                                                           "intel_graphics", "rocm"))

__all__ = ["abs", "add", "adv_index", "all", "any", "arange", "argmax", "argmin", "argsort", "arm_cpu", "bifrost",
           "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "broadcast_add", "broadcast_div",
           "broadcast_mul", "broadcast_sub", "broadcast_to", "cast", "ceil", "clip", "concatenate", "cos", "cuda",
           "cumprod", "cumsum", "divide", "einsum", "elemwise_sum", "equal", "erf", "exp", "expand_dims",
           "expand_like", "fast_erf", "fast_exp", "fast_tanh", "flip", "floor", "floor_divide", "floor_mod", "full",
           "full_like", "gather", "gather_nd", "generic", "gpu", "greater", "greater_equal", "hls", "identity", "image",
           "intel_graphics", "invert_permutation", "isfinite", "isinf", "isnan", "layout_transform", "left_shift",
           "less", "less_equal", "log", "log10", "log2", "logical_and", "logical_not", "logical_or", "logical_xor",
           "mali", "matmul", "matrix_set_diag", "max", "maximum", "meshgrid", "min", "minimum", "mod", "multiply",
           "ndarray_size", "negative", "nn", "not_equal", "one_hot", "power", "prod", "reinterpret", "repeat",
           "reshape", "reverse_sequence", "right_shift", "rocm", "round", "rsqrt", "sequence_mask", "shape",
           "sigmoid", "sign", "sin", "sort", "sparse", "sparse_to_dense", "split", "sqrt", "squeeze", "stack",
           "strided_set", "strided_slice", "subtract", "sum", "tag", "take", "tan", "tanh", "tensordot", "testing",
           "tile", "topk", "transpose", "trunc", "unique", "unravel_index", "utils", "vision", "where", "x86"]
