"""CUDA kernels at run time: PTX loaded and launched through the CUDA driver API, by ctypes.

No Python package is needed: the driver's C API (``libcuda.so.1``, installed
with the NVIDIA driver) is stable and small, so the handful of calls a kernel
launch takes are declared here. The driver compiles the PTX for the GPU it
finds (PTX for ``sm_80`` runs on any newer GPU).

A :class:`CUDAModule` holds PTX and, per kernel, its signature and launch
dimensions. Calling a kernel with numpy arrays copies them to the GPU, runs
it, waits, and copies the outputs back; :meth:`CUDAFunction.device_caller`
keeps the arrays on the GPU and returns a call that only launches and waits,
which is what a measurement times.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from autosched.runtime.module import Module, PackedFunc

_CUDA_SUCCESS = 0
_ATTR_CC_MAJOR, _ATTR_CC_MINOR = 75, 76


class CUDAError(RuntimeError):
    """The CUDA driver is missing, finds no device, or refused a call (the message names the call)."""


class _Driver:
    """The driver API calls autosched uses, on the primary context of one device."""

    _instance: _Driver | None = None
    _lock = threading.Lock()

    def __init__(self, device: int = 0):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise CUDAError(f"no CUDA driver (libcuda.so.1 does not load: {e}); no CUDA device here") from None
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
        }
        for name, args in sigs.items():
            f = getattr(L, name)
            f.argtypes = args
            f.restype = i32
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

    def alloc(self, nbytes: int) -> int:
        p = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(p), max(1, nbytes)), f"cuMemAlloc({nbytes} bytes)")
        return p.value

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ptr)


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


class _DeviceArrays:
    """Device copies of a kernel's arguments; freed with this object."""

    def __init__(self, drv: _Driver, arrays: list[np.ndarray]):
        self.drv = drv
        self.ptrs: list[int] = []
        try:
            for a in arrays:
                p = drv.alloc(a.nbytes)
                self.ptrs.append(p)
                drv.check(drv.lib.cuMemcpyHtoD_v2(p, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")
        except BaseException:
            self.close()
            raise

    def download(self, k: int, out: np.ndarray) -> None:
        self.drv.check(self.drv.lib.cuMemcpyDtoH_v2(out.ctypes.data, self.ptrs[k], out.nbytes), "cuMemcpyDtoH")

    def close(self) -> None:
        for p in self.ptrs:
            self.drv.free(p)
        self.ptrs = []

    def __del__(self) -> None:
        try:
            self.close()
        except (AttributeError, TypeError):  # interpreter shutdown: the driver's globals are already gone
            pass


class CUDAFunction(PackedFunc):
    """A kernel of a :class:`CUDAModule`: same argument checks as a CPU kernel, run on the GPU."""

    def __init__(self, sig: dict, launch: dict, module: CUDAModule):
        self.sig = sig
        self.name = sig["name"]
        self.launch = launch
        self._module = module
        self._dtypes = [np.dtype(a["dtype"]) for a in sig["args"]]
        self._outputs = set(sig.get("outputs", []))
        self._handle: ctypes.c_void_p | None = None

    def _launcher(self, dev: _DeviceArrays, env: list) -> Callable[[], None]:
        drv = dev.drv
        if self._handle is None:
            h = ctypes.c_void_p()
            drv.check(drv.lib.cuModuleGetFunction(ctypes.byref(h), self._module._loaded(drv), self.name.encode()),
                      f"cuModuleGetFunction({self.name})")
            self._handle = h
        vals = [ctypes.c_uint64(p) for p in dev.ptrs] + [ctypes.c_int64(v) for v in env]
        params = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
        (gx, gy, gz), (bx, by, bz) = self.launch["grid"], self.launch["block"]
        handle, lib = self._handle, drv.lib

        def launch(number: int = 1) -> None:
            for _ in range(number):
                drv.check(lib.cuLaunchKernel(handle, gx, gy, gz, bx, by, bz, 0, None, params, None),
                          f"launching {self.name}")
            drv.check(lib.cuCtxSynchronize(), f"running {self.name}")

        launch._keep = (vals, params, dev)  # type: ignore[attr-defined]
        return launch

    def __call__(self, *arrays: Any) -> None:
        env = self.check_args(arrays)
        drv = _Driver.get()
        drv.activate()
        dev = _DeviceArrays(drv, list(arrays))
        try:
            self._launcher(dev, env)()
            for k in sorted(self._outputs):
                dev.download(k, arrays[k])
        finally:
            dev.close()

    def device_caller(self, arrays: list[np.ndarray]) -> Callable[[], None]:
        """The arrays copied to the GPU once; the returned call ``call(number=1)`` launches the kernel
        ``number`` times back to back and waits for them (what a measurement times: one wait per batch keeps
        the host's synchronisation out of short kernels' times). The device memory lives as long as the call."""
        env = self.check_args(tuple(arrays))
        drv = _Driver.get()
        drv.activate()
        return self._launcher(_DeviceArrays(drv, list(arrays)), env)


class CUDAModule(Module):
    """PTX with its kernels' signatures and launch dimensions; :meth:`save` / ``runtime.load_module``."""

    def __init__(self, ptx: str, sigs: list[dict], launches: dict[str, dict], entry: str | None = None,
                 arch: str = "sm_80", ir_text: str = ""):
        self.ptx = ptx
        self.sigs = sigs
        self.launches = launches
        self.arch = arch
        self.ir_text = ir_text
        self._cu_module: ctypes.c_void_p | None = None
        funcs = {s["name"]: CUDAFunction(s, launches[s["name"]], self) for s in sigs}
        super().__init__(funcs, entry)

    def _loaded(self, drv: _Driver) -> ctypes.c_void_p:
        if self._cu_module is None:
            m = ctypes.c_void_p()
            drv.check(drv.lib.cuModuleLoadData(ctypes.byref(m), self.ptx.encode() + b"\0"),
                      f"loading the PTX (built for {self.arch}) on {drv.arch}")
            self._cu_module = m
        return self._cu_module

    def get_source(self, fmt: str = "ptx") -> str:
        if fmt in ("ptx", "", "asm"):
            return self.ptx
        if fmt in ("ll", "llvm") and self.ir_text:
            return self.ir_text
        raise ValueError(f"unknown source format {fmt!r} for a CUDA module; use 'ptx' or 'll'")

    def save(self, path: str | os.PathLike) -> None:
        """Write the PTX, signatures and launch dimensions as one JSON file (``*.cuda.json``)."""
        path = os.fspath(path)
        if not path.endswith(".cuda.json"):
            raise ValueError(f"a CUDA module is saved as NAME.cuda.json, got {path!r}")
        with open(path, "w") as f:
            json.dump({"version": 1, "arch": self.arch, "entry": self.entry_name, "functions": self.sigs,
                       "launch": self.launches, "ptx": self.ptx}, f)

    export_library = save

    @staticmethod
    def load(path: str | os.PathLike) -> CUDAModule:
        with open(path) as f:
            d = json.load(f)
        return CUDAModule(d["ptx"], d["functions"], d["launch"], d.get("entry"), d.get("arch", "sm_80"))

    def set_num_threads(self, n: int) -> None:
        """Threads are the launch's business on a GPU: nothing to set."""

    def __del__(self) -> None:
        m = self._cu_module
        if m is not None and _Driver._instance is not None:
            try:
                _Driver._instance.lib.cuModuleUnload(m)
            except (AttributeError, TypeError):  # interpreter shutdown: the driver's globals are already gone
                pass


__all__ = ["CUDAError", "CUDAFunction", "CUDAModule", "cuda_available", "device_info"]
