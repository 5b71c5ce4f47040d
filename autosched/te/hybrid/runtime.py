"""What a hybrid script's own names mean when it runs as plain Python on numpy arrays (TVM's
``HYBRID_GLOBALS``): loop annotations are ``range``, ``output_tensor`` / ``allocate`` are zeroed arrays, and the
math intrinsics are numpy's. The parser gives the same names their loop-IR meaning."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np


def _range(*args: Any) -> range:
    return range(*[int(a) for a in args])


def _bind(tag: str, extent: Any) -> range:
    return range(int(extent))


def _array(shape: Any, dtype: str = "float32", scope: str = "global") -> np.ndarray:
    shape = (shape,) if np.isscalar(shape) else tuple(int(d) for d in shape)
    return np.zeros(shape, dtype=dtype)


def _sigmoid(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def _popcount(x: Any) -> Any:
    """The set bits of each integer's two's-complement word (numpy's bitwise_count counts |x| for signed)."""
    a = np.asarray(x)
    u = np.ascontiguousarray(a.reshape(-1)).view(np.dtype(f"uint{8 * a.itemsize}"))
    if hasattr(np, "bitwise_count"):  # numpy 2
        out = np.bitwise_count(u)
    else:
        out = np.unpackbits(u.view(np.uint8).reshape(u.shape + (a.itemsize,)), axis=-1).sum(axis=-1)
    return out.astype(a.dtype).reshape(a.shape)[()]  # a number for a number


def _ceil_div(a: Any, b: Any) -> Any:
    return (a + b - 1) // b


def _max_num_threads(allow_none: bool = True) -> int:
    return 1024


def _cast(dtype: str) -> Callable[[Any], Any]:
    return lambda x: np.dtype(dtype).type(x)


unroll = vectorize = parallel = const_range = serial = _range
bind = _bind
allocate = output_tensor = _array
sqrt, log, exp, tanh, power = np.sqrt, np.log, np.exp, np.tanh, np.power
floor, ceil, trunc, round = np.floor, np.ceil, np.trunc, np.round  # noqa: A001 - the scripts' names
sigmoid, ceil_div, max_num_threads, popcount = _sigmoid, _ceil_div, _max_num_threads, _popcount


def likely(cond: Any) -> Any:
    return cond


float16, float32, float64 = _cast("float16"), _cast("float32"), _cast("float64")
int8, int16, int32, int64 = _cast("int8"), _cast("int16"), _cast("int32"), _cast("int64")
uint8, uint16, uint32, uint64 = _cast("uint8"), _cast("uint16"), _cast("uint32"), _cast("uint64")

#: the names a script may use without defining them (importable from here, so that linters see them)
HYBRID_GLOBALS: dict[str, Any] = {
    name: globals()[name] for name in (
        "unroll", "vectorize", "parallel", "const_range", "serial", "bind", "allocate", "output_tensor", "sqrt",
        "log", "exp", "tanh", "sigmoid", "power", "popcount", "floor", "ceil", "trunc", "round", "ceil_div",
        "max_num_threads", "likely", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
        "uint16", "uint32", "uint64")
}


def emulate(func: types.FunctionType, *args: Any) -> Any:
    """Run ``func`` as Python with the hybrid names defined (its module's globals are left untouched)."""
    scope = dict(func.__globals__)
    scope.update(HYBRID_GLOBALS)
    clone = types.FunctionType(func.__code__, scope, func.__name__, func.__defaults__, func.__closure__)
    return clone(*args)
