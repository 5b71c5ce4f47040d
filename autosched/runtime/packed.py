"""The bridge from generated code to registered Python functions (``tir.call_packed``).

A kernel calls ``__autosched_call_packed(name, slots, n)``: ``slots`` holds six 64-bit words per argument
(kind, payload, ndim, address of the shape, dtype code, address of the strides in elements or 0 for dense).
Kinds: 0 an integer, 1 a float (the bits of a double), 2 an address, 3 a buffer (an ``NDArray`` view of the
kernel's memory is passed: a region of a tensor when a tensorized intrinsic passes its buffer). The function's
return value is ignored; an exception stops the kernel (it returns -1) and is raised again by the caller
(:func:`take_error`).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any

import numpy as np

from autosched.runtime.ndarray import NDArray
from autosched.runtime.registry import get_global_func

SYMBOL = "__autosched_call_packed"
WORDS = 6  # 64-bit words per argument
DTYPES = ("float32", "float64", "int32", "int64", "int8", "uint8", "int16", "uint16", "uint32", "uint64", "float16",
          "bool")
_PROTO = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int32)
_state = threading.local()


def _array(addr: int, shape: list[int], dtype: str, strides: list[int] | None = None) -> np.ndarray:
    np_dtype = np.dtype("uint8" if dtype == "bool" else dtype)
    n = int(np.prod(shape)) if shape else 1
    if n == 0:
        return np.zeros(shape, np_dtype)
    span = 1 + sum((d - 1) * s for d, s in zip(shape, strides)) if strides else n
    raw = (ctypes.c_char * (span * np_dtype.itemsize)).from_address(addr)
    flat = np.frombuffer(raw, dtype=np_dtype)
    if strides:
        arr = np.lib.stride_tricks.as_strided(flat, shape, [s * np_dtype.itemsize for s in strides])
    else:
        arr = flat.reshape(shape)
    return arr.view(np.bool_) if dtype == "bool" else arr


def _decode(slots: Any, n: int) -> list[Any]:
    out: list[Any] = []
    for k in range(n):
        kind, payload, ndim, shape_addr, code, strides_addr = (slots[WORDS * k + j] for j in range(WORDS))
        if kind == 0:
            out.append(int(payload))
        elif kind == 1:
            out.append(struct.unpack("<d", struct.pack("<q", payload))[0])
        elif kind == 2:
            out.append(int(payload) & 0xFFFFFFFFFFFFFFFF)
        else:
            shape = [ctypes.c_int64.from_address(shape_addr + 8 * d).value for d in range(ndim)]
            strides = [ctypes.c_int64.from_address(strides_addr + 8 * d).value for d in range(ndim)] \
                if strides_addr else None
            out.append(_ndarray(_array(payload & 0xFFFFFFFFFFFFFFFF, shape, DTYPES[code], strides)))
    return out


def _ndarray(arr: np.ndarray) -> Any:
    """An NDArray over ``arr`` (a view of the kernel's memory); a strided region stays a numpy view, which
    NDArray (dense only) cannot hold."""
    return NDArray(arr) if arr.flags.c_contiguous else arr


def _call(name: bytes, slots: Any, n: int) -> int:
    try:
        fn = get_global_func(name.decode())
        fn(*_decode(slots, n))
        return 0
    except BaseException as e:  # noqa: BLE001 - any error must stop the kernel and reach the caller
        _state.error = e
        return -1


_cfunc = _PROTO(_call)


def address() -> int:
    """The address of the C-callable entry point (kept alive for the life of the process)."""
    return ctypes.cast(_cfunc, ctypes.c_void_p).value


def take_error() -> BaseException | None:
    """The exception a registered function raised during the last failed call on this thread, once."""
    err = getattr(_state, "error", None)
    _state.error = None
    return err


__all__ = ["DTYPES", "SYMBOL", "WORDS", "address", "take_error"]
