"""Devices and n-dimensional arrays under TVM's names: ``autosched.cpu(0)``, ``autosched.cuda(0)``,
``autosched.device("llvm", 0)``, ``autosched.nd.array(np_array, dev)``, ``autosched.nd.empty(shape, dtype, dev)``.

An :class:`NDArray` holds its data in host memory as a numpy array, on every device: autosched's compiled
functions take numpy arrays, and a cuda function copies its arguments to the GPU and its outputs back on each
call (``Module.time_evaluator`` keeps them on the GPU while it times). So ``nd.array`` costs one copy, as in
TVM, and ``.numpy()`` another; a numpy array passed straight to a function costs none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.runtime.cuda_driver import cuda_available, device_info

#: TVM's (DLPack's) device type codes; the kinds after cuda are TVM's other devices, which autosched does not
#: run kernels on: their devices exist as names (TVM's tests make one before asking whether it is enabled) and
#: are never present
_TYPE_CODES = {"cpu": 1, "cuda": 2, "opencl": 4, "aocl": 5, "sdaccel": 6, "vulkan": 7, "metal": 8, "vpi": 9,
               "rocm": 10, "ext_dev": 12, "hexagon": 14, "webgpu": 15}
_ABSENT = {"opencl", "aocl", "sdaccel", "vulkan", "metal", "vpi", "rocm", "ext_dev", "hexagon", "webgpu"}
#: the names a device (or a target kind) goes by
_ALIASES = {"cpu": "cpu", "llvm": "cpu", "c": "cpu", "stackvm": "cpu", "cuda": "cuda", "gpu": "cuda",
            "nvptx": "cuda", "cl": "opencl", "mtl": "metal", "aocl_sw_emu": "aocl", **{k: k for k in _ABSENT}}


class Device:
    """Where a kernel runs: ``cpu(0)`` or ``cuda(0)`` (TVM's ``Device``)."""

    __slots__ = ("device_type", "device_id")

    def __init__(self, device_type: str | int, device_id: int = 0):
        if isinstance(device_type, int):
            names = {v: k for k, v in _TYPE_CODES.items()}
            if device_type not in names:
                raise ValueError(f"unknown device type code {device_type} (cpu is 1, cuda is 2, others TVM's)")
            kind = names[device_type]
        else:
            key = str(device_type).split()[0].lower()
            if key not in _ALIASES:
                raise ValueError(
                    f"unknown device {device_type!r}: autosched runs kernels on the cpu (llvm) and on cuda")
            kind = _ALIASES[key]
        self.device_type = kind
        self.device_id = int(device_id)

    @property
    def device_type_code(self) -> int:
        return _TYPE_CODES[self.device_type]

    @property
    def exist(self) -> bool:
        """Whether this device is present on this machine."""
        if self.device_type == "cpu":
            return self.device_id == 0
        return self.device_type == "cuda" and cuda_available()

    @property
    def compute_version(self) -> str | None:
        """A GPU's compute capability, ``"9.0"`` on an H100 (TVM's); None for the CPU. Asking a cuda device
        on a machine without one raises the driver's error."""
        if self.device_type == "cpu":
            return None
        if self.device_type in _ABSENT:
            raise ValueError(f"{self.device_type}: autosched runs kernels on the cpu (llvm) and on cuda only")
        digits = device_info()[1].removeprefix("sm_").rstrip("a")
        return f"{digits[:-1]}.{digits[-1]}"

    def sync(self) -> None:
        """Wait for the device's work: autosched's calls return when their kernel has finished."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and (self.device_type, self.device_id) == (other.device_type,
                                                                                    other.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"


def device(dev_type: str | int, dev_id: int = 0) -> Device:
    """A device by name (``"cpu"``, ``"llvm"``, ``"cuda"``, ``"gpu"``; a target string's kind works too)."""
    return Device(dev_type, dev_id)


def cpu(dev_id: int = 0) -> Device:
    return Device("cpu", dev_id)


def cuda(dev_id: int = 0) -> Device:
    return Device("cuda", dev_id)


gpu = cuda


class NDArray:
    """An array on a device (TVM's ``tvm.nd.NDArray``); compiled functions accept it where they take numpy
    arrays and write their outputs into it."""

    __slots__ = ("_array", "device", "__weakref__")

    def __init__(self, array: np.ndarray, dev: Device | None = None):
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            raise TypeError("NDArray wraps a C-contiguous numpy array; use autosched.nd.array(...) to make one")
        if dev is not None and dev.device_type in _ABSENT:
            raise ValueError(f"no array on {dev}: autosched runs kernels on the cpu (llvm) and on cuda only")
        self._array = array
        self.device = dev if dev is not None else cpu(0)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def dtype(self) -> str:
        return str(self._array.dtype)

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def handle(self) -> np.ndarray:
        """The numpy array holding the data (shared, not copied): what a compiled function reads and writes."""
        return self._array

    def numpy(self) -> np.ndarray:
        """A copy of the data as a numpy array."""
        return self._array.copy()

    asnumpy = numpy

    def copyfrom(self, source: Any) -> NDArray:
        """Overwrite this array with ``source`` (a numpy array or NDArray of the same shape)."""
        src = source._array if isinstance(source, NDArray) else np.asarray(source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: shape {src.shape} does not match the array's {self.shape}")
        self._array[...] = src.astype(self._array.dtype, copy=False)
        return self

    def copyto(self, target: NDArray | Device) -> NDArray:
        """Copy into another NDArray (same shape), or to a new array on ``target`` if it is a Device."""
        if isinstance(target, Device):
            return NDArray(self._array.copy(), target)
        if not isinstance(target, NDArray):
            raise TypeError(f"copyto: expected an NDArray or a Device, got {type(target).__name__}")
        return target.copyfrom(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._array if dtype is None else self._array.astype(dtype)

    def __setitem__(self, key: Any, value: Any) -> None:
        if key != slice(None):
            raise ValueError("an NDArray can only be written as a whole: arr[:] = value")
        self.copyfrom(value)

    def __repr__(self) -> str:
        return f"<autosched.nd.NDArray shape={self.shape}, {self.device}>\n{self._array!r}"


def array(arr: Any, device: Device | None = None) -> NDArray:  # noqa: A001 - TVM's name
    """An NDArray with a copy of ``arr`` (a numpy array, an NDArray, or anything numpy can convert)."""
    if isinstance(arr, NDArray):
        arr = arr._array
    return NDArray(np.array(arr, copy=True, order="C"), device)


def empty(shape: int | Sequence[int], dtype: str = "float32", device: Device | None = None) -> NDArray:
    """An uninitialised NDArray (TVM's ``nd.empty``)."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    return NDArray(np.empty(tuple(int(d) for d in shape), dtype=np.dtype(dtype)), device)


def as_array(x: Any) -> Any:
    """The numpy array behind an NDArray; anything else unchanged (a compiled function checks it)."""
    return x._array if isinstance(x, NDArray) else x


__all__ = ["Device", "NDArray", "array", "as_array", "cpu", "cuda", "device", "empty", "gpu"]
