"""The CUDA driver API, by ctypes: loading ``libcuda.so.1`` (``$AUTOSCHED_LIBCUDA`` names another file) on
first use, the calls autosched makes on the primary context of one device, and whether a device is here.

Below the runtime's arrays (``Device("cuda").exist`` asks it) and its CUDA modules
(:mod:`autosched.runtime.cuda`, which launches kernels through it); importing it loads no driver.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from autosched.target import cuda_driver_path

_CUDA_SUCCESS = 0
# CUdevice_attribute values (cuda.h)
_ATTR_CC_MAJOR, _ATTR_CC_MINOR, _ATTR_L2_CACHE_SIZE = 75, 76, 38
_NO_L2_SIZE_FLUSH = 256 << 20  # bytes written to flush the L2 when the driver does not say its size


class CUDAError(RuntimeError):
    """The CUDA driver is missing, finds no device, or refused a call (the message names the call)."""


class _Driver:
    """The driver API calls autosched uses, on the primary context of one device."""

    _instance: _Driver | None = None
    _lock = threading.Lock()

    def __init__(self, device: int = 0):
        path = cuda_driver_path()
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise CUDAError(f"no CUDA driver ({path} does not load: {e}); no CUDA device here") from None
        L = self.lib
        u64, i32, u32, vp = ctypes.c_uint64, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p
        sigs = {
            "cuInit": [u32], "cuDeviceGetCount": [ctypes.POINTER(i32)], "cuDeviceGet": [ctypes.POINTER(i32), i32],
            "cuDeviceGetAttribute": [ctypes.POINTER(i32), i32, i32],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), i32], "cuCtxSetCurrent": [vp],
            "cuModuleLoadData": [ctypes.POINTER(vp), ctypes.c_char_p], "cuModuleUnload": [vp],
            "cuModuleGetFunction": [ctypes.POINTER(vp), vp, ctypes.c_char_p],
            "cuMemAlloc_v2": [ctypes.POINTER(u64), ctypes.c_size_t], "cuMemFree_v2": [u64],
            "cuMemcpyHtoD_v2": [u64, vp, ctypes.c_size_t], "cuMemcpyDtoH_v2": [vp, u64, ctypes.c_size_t],
            "cuLaunchKernel": [vp, u32, u32, u32, u32, u32, u32, u32, vp, ctypes.POINTER(vp), ctypes.POINTER(vp)],
            "cuCtxSynchronize": [], "cuGetErrorName": [i32, ctypes.POINTER(ctypes.c_char_p)],
            "cuDeviceGetName": [ctypes.c_char_p, i32, i32],
            # events (the exported names behind cuda.h's macros: cuEventDestroy is cuEventDestroy_v2)
            "cuEventCreate": [ctypes.POINTER(vp), u32], "cuEventRecord": [vp, vp], "cuEventSynchronize": [vp],
            "cuEventDestroy_v2": [vp],
            # cuMemsetD8 is cuMemsetD8_v2 (64-bit device pointers; the unversioned symbol takes 32-bit ones)
            "cuMemsetD8_v2": [u64, ctypes.c_ubyte, ctypes.c_size_t],
        }
        try:
            for name, args in sigs.items():
                f = getattr(L, name)
                f.argtypes = args
                f.restype = i32
        except AttributeError as e:
            raise CUDAError(f"{path} is not a CUDA driver this autosched can use: {e}") from None
        # cuda.h (12.8 on) names cuEventElapsedTime_v2; older drivers have only the first version (same signature)
        self.elapsed = getattr(L, "cuEventElapsedTime_v2", None) or L.cuEventElapsedTime
        self.elapsed.argtypes = [ctypes.POINTER(ctypes.c_float), vp, vp]
        self.elapsed.restype = i32
        self.check(L.cuInit(0), "cuInit")
        n = i32()
        self.check(L.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
        if n.value <= device:
            raise CUDAError(f"no CUDA device {device} (the driver sees {n.value})")
        dev = i32()
        self.check(L.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        major, minor = i32(), i32()
        self.check(L.cuDeviceGetAttribute(ctypes.byref(major), _ATTR_CC_MAJOR, dev), "cuDeviceGetAttribute")
        self.check(L.cuDeviceGetAttribute(ctypes.byref(minor), _ATTR_CC_MINOR, dev), "cuDeviceGetAttribute")
        self.arch = f"sm_{major.value}{minor.value}"
        name = ctypes.create_string_buffer(256)
        self.check(L.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
        self.name = name.value.decode(errors="replace")
        self.device, self.ordinal = dev.value, device
        self._l2_buffer: tuple[int, int] | None = None  # (pointer, bytes) of the buffer that flushes the L2
        self.ctx = vp()
        self.check(L.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "cuDevicePrimaryCtxRetain")
        self.activate()

    @classmethod
    def get(cls) -> _Driver:
        with cls._lock:
            if cls._instance is None:
                cls._instance = _Driver()
            return cls._instance

    def activate(self) -> None:
        """Make the context current in the calling thread (the driver keeps one per thread)."""
        self.check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def check(self, rc: int, what: str) -> None:
        if rc != _CUDA_SUCCESS:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            raise CUDAError(f"{what} failed: {(name.value or b'?').decode()} ({rc})")

    def copy_in(self, ptr: int, arr: np.ndarray) -> None:
        self.check(self.lib.cuMemcpyHtoD_v2(ptr, arr.ctypes.data, arr.nbytes), "cuMemcpyHtoD")

    def copy_out(self, out: np.ndarray, ptr: int) -> None:
        self.check(self.lib.cuMemcpyDtoH_v2(out.ctypes.data, ptr, out.nbytes), "cuMemcpyDtoH")

    def alloc(self, nbytes: int) -> int:
        p = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(p), max(1, nbytes)), f"cuMemAlloc({nbytes} bytes)")
        return p.value

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ptr)

    def attribute(self, attr: int) -> int:
        """``cuDeviceGetAttribute(attr)`` of the device (a ``CU_DEVICE_ATTRIBUTE_*`` number)."""
        v = ctypes.c_int()
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), attr, self.device), f"cuDeviceGetAttribute({attr})")
        return v.value

    @property
    def l2_bytes(self) -> int:
        """The L2 cache size the driver reports (``CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE``; 50 MiB on an H100)."""
        return self.attribute(_ATTR_L2_CACHE_SIZE)

    def flush_l2(self) -> None:
        """Evict everything from the GPU's L2 cache: ``cuMemsetD8`` over a buffer of twice its size (allocated
        once), on the default stream, so it ends before whatever is launched next begins."""
        if self._l2_buffer is None:
            l2 = self.l2_bytes
            n = 2 * l2 if l2 > 0 else _NO_L2_SIZE_FLUSH
            self._l2_buffer = (self.alloc(n), n)
        ptr, n = self._l2_buffer
        self.check(self.lib.cuMemsetD8_v2(ptr, 0, n), f"cuMemsetD8 ({n} bytes, flushing the L2 cache)")

    def pci_bus_id(self) -> str | None:
        """``cuDeviceGetPCIBusId``: ``"0000:65:00.0"``, what NVML finds the same GPU by; None if refused."""
        if not hasattr(self, "_bus_id"):
            self._bus_id: str | None = None
            f = getattr(self.lib, "cuDeviceGetPCIBusId", None)
            if f is not None:
                f.argtypes, f.restype = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int], ctypes.c_int
                buf = ctypes.create_string_buffer(64)
                if f(buf, 64, self.device) == _CUDA_SUCCESS:
                    self._bus_id = buf.value.decode(errors="replace") or None
        return self._bus_id


def device_info() -> tuple[str, str]:
    """``(name, arch)`` of the GPU kernels run on, e.g. ``("NVIDIA H100 80GB HBM3", "sm_90")``; raises
    :class:`CUDAError` when there is none."""
    drv = _Driver.get()
    return drv.name, drv.arch


def cuda_available() -> bool:
    """Whether a CUDA device can run kernels here (driver loads, a device exists)."""
    try:
        _Driver.get()
        return True
    except CUDAError:
        return False


__all__ = ["CUDAError", "cuda_available", "device_info"]
