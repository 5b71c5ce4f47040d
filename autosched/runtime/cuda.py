"""CUDA kernels at run time: PTX loaded and launched through the CUDA driver API, by ctypes.

No Python package is needed: the driver's C API (``libcuda.so.1``, installed
with the NVIDIA driver; ``$AUTOSCHED_LIBCUDA`` names another file) is stable
and small, so the handful of calls a kernel launch takes are declared here.
The driver compiles the PTX for the GPU it finds (PTX for ``sm_80`` runs on
any newer GPU).

A cuda build is two modules, as in TVM: the host module (:class:`CUDAModule`)
holds, per function, its signature and its launch dimensions, which may be
expressions of the shape variables (``(n + 63) // 64`` blocks) evaluated on
each call; the device module (:class:`PTXModule`, ``host.imported_modules[0]``)
holds the PTX. Each can be saved and loaded apart (``export_library("f.so")``,
``save("f.ptx")``) and joined again with ``import_module``.

Calling a host function with numpy arrays copies them to the GPU, launches,
waits, and copies the outputs back; :meth:`CUDAFunction.device_caller` keeps
the arrays on the GPU and returns a :class:`DeviceCall`, which launches and
waits, and times launches on the GPU with CUDA events (a batch back to back,
or each launch alone after the L2 cache is flushed: cold-cache timing), which
is what a measurement does; :meth:`CUDAFunction.launcher` launches on device
memory the caller owns (the graph executor's). :func:`clock_state` reads the
GPU's clocks and performance state through NVML (``libnvidia-ml.so.1``, also
by ctypes, and optional: without it they are "unknown").
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autosched.runtime.cc import c_string, compile_c, link_shared
from autosched.runtime.cuda_driver import CUDAError, _Driver, cuda_available, device_info
from autosched.runtime.module_base import METADATA_SYMBOL, Module, PackedFunc, _dim_str, _eval_dim
from autosched.runtime.ndarray import as_array

_EVENT_DEFAULT = 0  # CU_EVENT_DEFAULT: timing enabled, the waiting thread spins (no sleep in the measurement)


class EventTimer:
    """Pairs of CUDA events recorded on the default stream (where autosched launches) around launches: the
    GPU's own time between them, with a resolution of about half a microsecond, and no host overhead."""

    CHUNK = 32  # cold launches queued before the host waits for them

    def __init__(self, drv: _Driver):
        self.drv = drv
        self.events: list[ctypes.c_void_p] = []

    def _pairs(self, n: int) -> list[tuple[ctypes.c_void_p, ctypes.c_void_p]]:
        while len(self.events) < 2 * n:
            e = ctypes.c_void_p()
            self.drv.check(self.drv.lib.cuEventCreate(ctypes.byref(e), _EVENT_DEFAULT), "cuEventCreate")
            self.events.append(e)
        return [(self.events[2 * k], self.events[2 * k + 1]) for k in range(n)]

    def _record(self, event: ctypes.c_void_p) -> None:
        self.drv.check(self.drv.lib.cuEventRecord(event, None), "cuEventRecord")

    def _elapsed(self, start: ctypes.c_void_p, end: ctypes.c_void_p) -> float:
        ms = ctypes.c_float()
        self.drv.check(self.drv.elapsed(ctypes.byref(ms), start, end), "cuEventElapsedTime")
        return ms.value * 1e-3

    def batch(self, launch: Callable[..., None], number: int, what: str) -> float:
        """Seconds per launch of ``number`` launches back to back, between two events."""
        ((start, end),) = self._pairs(1)
        self._record(start)
        launch(number, sync=False)
        self._record(end)
        self.drv.check(self.drv.lib.cuEventSynchronize(end), what)
        return self._elapsed(start, end) / number

    def cold(self, launch: Callable[..., None], number: int, what: str) -> float:
        """Seconds per launch of ``number`` launches, each timed alone between two events after the L2 cache
        was flushed (its arguments come from device memory, as in a network whose other layers ran between)."""
        total, left = 0.0, number
        while left > 0:
            pairs = self._pairs(min(left, self.CHUNK))
            for start, end in pairs:
                self.drv.flush_l2()
                self._record(start)
                launch(1, sync=False)
                self._record(end)
            self.drv.check(self.drv.lib.cuEventSynchronize(pairs[-1][1]), what)
            total += sum(self._elapsed(s, e) for s, e in pairs)
            left -= len(pairs)
        return total / number

    def close(self) -> None:
        if _Driver._instance is self.drv:
            for e in self.events:
                self.drv.lib.cuEventDestroy_v2(e)
        self.events = []

    def __del__(self) -> None:
        try:
            self.close()
        except (AttributeError, TypeError):  # interpreter shutdown: the driver's globals are already gone
            pass


class DeviceBuffers:
    """Device memory: ``ptrs[k]`` holds ``nbytes[k]`` bytes (a kernel's arguments, a graph's storage); freed
    with this object."""

    def __init__(self, nbytes: list[int]):
        self.drv = _Driver.get()
        self.drv.activate()
        self.ptrs: list[int] = []
        try:
            for n in nbytes:
                self.ptrs.append(self.drv.alloc(n))
        except BaseException:
            self.close()
            raise

    @staticmethod
    def of(arrays: list[np.ndarray]) -> DeviceBuffers:
        """Device copies of ``arrays``."""
        dev = DeviceBuffers([a.nbytes for a in arrays])
        for p, a in zip(dev.ptrs, arrays):
            dev.upload(p, a)
        return dev

    def upload(self, ptr: int, arr: np.ndarray) -> None:
        self.drv.copy_in(ptr, np.ascontiguousarray(arr))

    def download(self, ptr: int, out: np.ndarray) -> None:
        self.drv.copy_out(out, ptr)

    def synchronize(self) -> None:
        self.drv.check(self.drv.lib.cuCtxSynchronize(), "waiting for the GPU")

    def close(self) -> None:
        for p in self.ptrs:
            self.drv.free(p)
        self.ptrs = []

    def __del__(self) -> None:
        try:
            self.close()
        except (AttributeError, TypeError):  # interpreter shutdown: the driver's globals are already gone
            pass


#: the largest number of blocks along x, y, z (CUDA's limits since sm_30)
GRID_LIMITS = (2**31 - 1, 65535, 65535)
PTX_SYMBOL = "__autosched_ptx"  # the device code embedded in an exported host library (JSON: list of PTX)


class CUDAFunction(PackedFunc):
    """A host function of a :class:`CUDAModule`: the same argument checks as a CPU kernel; the launch
    dimensions evaluated from the arguments' shapes; the kernel run on the GPU."""

    def __init__(self, sig: dict, launch: dict, module: CUDAModule):
        self.sig = sig
        self.name = sig["name"]
        self.launch = launch
        self.kernel = launch.get("kernel", self.name)  # the PTX entry it launches
        self._module = module
        self._dtypes = [np.dtype(a["dtype"]) for a in sig["args"]]
        self._outputs = set(sig.get("outputs", []))
        self._scalar_args = [tuple(x) for x in sig.get("scalar_args", [])] or None

    def launch_dims(self, env: list) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """``(grid, block)`` for shape variables ``env``; a grid over CUDA's limits is refused, naming the
        shapes that ask for it."""
        grid = tuple(_eval_dim(g, env) for g in self.launch["grid"])
        block = tuple(int(b) for b in self.launch["block"])
        for k, (n, limit) in enumerate(zip(grid, GRID_LIMITS)):
            if n > limit:
                shapes = ", ".join(f"{v} = {x}" for v, x in zip(self.sig["vars"], env))
                raise ValueError(f"{self.name}: {shapes} needs {n} blocks along blockIdx.{'xyz'[k]} "
                                 f"({_dim_str(self.launch['grid'][k], self.sig['vars'])}), over CUDA's limit "
                                 f"of {limit}")
        return grid, block  # type: ignore[return-value]

    def launcher(self, pointers: list[int], env: list) -> Callable[..., None]:
        """``launch(number=1, sync=True)`` of the kernel on device memory the caller owns (``pointers``, one
        per argument, as ints): ``number`` launches back to back, then a wait unless ``sync=False``."""
        drv = _Driver.get()
        drv.activate()  # the context is current per thread: the one that makes the launcher launches
        handle = self._module.device_module(self.kernel).function(drv, self.kernel)
        vals = [ctypes.c_uint64(p) for p in pointers] + [ctypes.c_int64(v) for v in env]
        params = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
        (gx, gy, gz), (bx, by, bz) = self.launch_dims(env)
        empty = gx * gy * gz == 0  # a zero-sized argument: nothing to compute, and the driver refuses 0 blocks
        lib, what = drv.lib, f"launching {self.kernel} (grid {gx}x{gy}x{gz}, block {bx}x{by}x{bz})"

        def launch(number: int = 1, sync: bool = True) -> None:
            if not empty:
                for _ in range(number):
                    drv.check(lib.cuLaunchKernel(handle, gx, gy, gz, bx, by, bz, 0, None, params, None), what)
            if sync:
                drv.check(lib.cuCtxSynchronize(), f"running {self.kernel}")

        launch._keep = (vals, params)  # type: ignore[attr-defined]
        return launch

    def __call__(self, *arrays: Any) -> None:
        arrays, given = self.split_scalars(arrays)
        arrays = tuple(as_array(a) for a in arrays)  # NDArrays: their (host) numpy data
        env = self.check_args(arrays, given)
        dev = DeviceBuffers.of(list(arrays))
        try:
            self.launcher(dev.ptrs, env)()
            for k in sorted(self._outputs):
                dev.download(dev.ptrs[k], arrays[k])
        finally:
            dev.close()

    def device_caller(self, arrays: list[np.ndarray]) -> DeviceCall:
        """The arrays copied to the GPU once; the returned :class:`DeviceCall` launches the kernel on them
        (``call(number=1)``: back to back, then one wait) and times it on the GPU (``call.time(number)``,
        ``call.time_cold(number)``). The device memory lives as long as the call."""
        arrays = [as_array(a) for a in arrays]
        env = self.check_args(tuple(arrays))
        dev = DeviceBuffers.of(list(arrays))
        return DeviceCall(self.launcher(dev.ptrs, env), dev, self.kernel)


class DeviceCall:
    """A kernel bound to device-resident arguments (:meth:`CUDAFunction.device_caller`).

    - ``call(number=1)``: ``number`` launches back to back, then one wait for them;
    - ``call.time(number)``: seconds per launch on the GPU, CUDA events recorded before and after a batch of
      ``number`` launches (the host's launch and wait overheads stay out of the figure);
    - ``call.time_cold(number)``: the same with a cold cache: before each launch the GPU's L2 cache is flushed
      (``cuMemsetD8`` over twice its size), and events time that launch alone; the mean of ``number``.
    """

    def __init__(self, launch: Callable[..., None], buffers: DeviceBuffers, kernel: str):
        self._launch = launch
        self._buffers = buffers  # the device memory lives as long as the call
        self.kernel = kernel
        self._timer: EventTimer | None = None

    def __call__(self, number: int = 1) -> None:
        self._launch(number)

    def _events(self) -> EventTimer:
        if self._timer is None:
            self._timer = EventTimer(self._buffers.drv)
        return self._timer

    def time(self, number: int = 1) -> float:
        """Seconds per launch of ``number`` launches back to back, measured on the GPU with CUDA events."""
        return self._events().batch(self._launch, max(1, int(number)), f"running {self.kernel}")

    def time_cold(self, number: int = 1) -> float:
        """Seconds per launch, each of ``number`` launches timed alone on the GPU after an L2 cache flush."""
        return self._events().cold(self._launch, max(1, int(number)), f"running {self.kernel}")

    def close(self) -> None:
        if self._timer is not None:
            self._timer.close()
        self._buffers.close()


# ----------------------------------------------------------------------------- the GPU's clocks, by NVML
UNKNOWN = "unknown"
_NVML_CLOCK_SM, _NVML_CLOCK_MEM = 1, 2  # nvmlClockType_t
_NVML_PSTATE_UNKNOWN = 32  # nvmlPstates_t


class _NVML:
    """NVML (``libnvidia-ml.so.1``, or ``$AUTOSCHED_LIBNVML``) on the GPU kernels run on, found by its PCI bus
    id; ``handle`` is None where the library or the GPU is not there (then every reading is unknown)."""

    _instance: _NVML | None = None
    _key: tuple | None = None
    _lock = threading.Lock()

    def __init__(self, bus_id: str | None):
        self.lib: Any = None
        self.handle: ctypes.c_void_p | None = None
        path = os.environ.get("AUTOSCHED_LIBNVML") or "libnvidia-ml.so.1"
        try:
            lib = ctypes.CDLL(path)
            u32, vp = ctypes.c_uint, ctypes.c_void_p
            sigs = {"nvmlInit_v2": [], "nvmlShutdown": [], "nvmlDeviceGetCount_v2": [ctypes.POINTER(u32)],
                    "nvmlDeviceGetHandleByIndex_v2": [u32, ctypes.POINTER(vp)],
                    "nvmlDeviceGetHandleByPciBusId_v2": [ctypes.c_char_p, ctypes.POINTER(vp)],
                    "nvmlDeviceGetClockInfo": [vp, ctypes.c_int, ctypes.POINTER(u32)],
                    "nvmlDeviceGetPerformanceState": [vp, ctypes.POINTER(ctypes.c_int)]}
            for name, args in sigs.items():
                f = getattr(lib, name)
                f.argtypes, f.restype = args, ctypes.c_int
        except (OSError, AttributeError):
            return
        if lib.nvmlInit_v2() != 0:
            return
        self.lib = lib
        atexit.register(lib.nvmlShutdown)
        h = ctypes.c_void_p()
        if bus_id and lib.nvmlDeviceGetHandleByPciBusId_v2(bus_id.encode(), ctypes.byref(h)) == 0:
            self.handle = h
            return
        count = ctypes.c_uint()
        # without the bus id, only a machine with one GPU says for sure which one it is
        if (lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0 and count.value == 1
                and lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0):
            self.handle = h

    @classmethod
    def get(cls, bus_id: str | None) -> _NVML:
        key = (os.environ.get("AUTOSCHED_LIBNVML"), bus_id)
        with cls._lock:
            if cls._instance is None or cls._key != key:
                cls._instance, cls._key = _NVML(bus_id), key
            return cls._instance

    def clock(self, which: int) -> str:
        v = ctypes.c_uint()
        if self.handle is None or self.lib.nvmlDeviceGetClockInfo(self.handle, which, ctypes.byref(v)) != 0:
            return UNKNOWN
        return str(v.value)

    def pstate(self) -> str:
        v = ctypes.c_int()
        if self.handle is None or self.lib.nvmlDeviceGetPerformanceState(self.handle, ctypes.byref(v)) != 0:
            return UNKNOWN
        return UNKNOWN if v.value == _NVML_PSTATE_UNKNOWN else f"P{v.value}"


def clock_state() -> dict[str, str]:
    """The GPU kernels run on, and its state now, as a measurement records it: ``gpu`` (its name), ``gpu_arch``,
    the current SM and memory clocks in MHz (``sm_clock_mhz``, ``mem_clock_mhz``) and the performance state
    (``pstate``, ``"P0"`` is the fastest). What NVML cannot say (no ``libnvidia-ml.so.1``, a GPU it does not
    know, a call it refuses) is ``"unknown"``; this never raises."""
    try:
        drv = _Driver.get()
    except CUDAError:
        return {"gpu": UNKNOWN, "gpu_arch": UNKNOWN, "sm_clock_mhz": UNKNOWN, "mem_clock_mhz": UNKNOWN,
                "pstate": UNKNOWN}
    nvml = _NVML.get(drv.pci_bus_id())
    return {"gpu": drv.name, "gpu_arch": drv.arch, "sm_clock_mhz": nvml.clock(_NVML_CLOCK_SM),
            "mem_clock_mhz": nvml.clock(_NVML_CLOCK_MEM), "pstate": nvml.pstate()}


def _ptx_kernels(ptx: str) -> list[str]:
    return re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(", ptx)


class PTXModule(Module):
    """The device module of a cuda build: PTX, its kernels (its ``.entry`` functions) and the architecture
    it was printed for. Its kernels run through the host module that imports it, which knows their
    launch dimensions; ``save("f.ptx")`` writes the plain PTX, ``runtime.load_module("f.ptx")`` reads it."""

    def __init__(self, ptx: str, arch: str | None = None, ir_text: str = ""):
        kernels = _ptx_kernels(ptx)
        if not kernels:
            raise ValueError("PTXModule: the PTX defines no kernel (no '.entry NAME(' line)")
        m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
        self.ptx = ptx
        self.arch = arch or (m.group(1) if m else "sm_80")
        self.ir_text = ir_text
        self.kernels = kernels
        self._loaded: tuple[_Driver, ctypes.c_void_p] | None = None
        self._handles: dict[str, ctypes.c_void_p] = {}
        super().__init__({}, None)

    def function(self, drv: _Driver, kernel: str) -> ctypes.c_void_p:
        """The driver's handle of ``kernel`` (the PTX is loaded on first use, once per driver)."""
        if self._loaded is None or self._loaded[0] is not drv:
            m = ctypes.c_void_p()
            drv.activate()
            drv.check(drv.lib.cuModuleLoadData(ctypes.byref(m), self.ptx.encode() + b"\0"),
                      f"loading the PTX (built for {self.arch}) on {drv.arch}")
            self._loaded, self._handles = (drv, m), {}
        h = self._handles.get(kernel)
        if h is None:
            h = ctypes.c_void_p()
            drv.check(drv.lib.cuModuleGetFunction(ctypes.byref(h), self._loaded[1], kernel.encode()),
                      f"cuModuleGetFunction({kernel})")
            self._handles[kernel] = h
        return h

    def get_function(self, name: str) -> PackedFunc:
        raise AttributeError(f"{name!r} is a kernel of a device module: call it through the host module that "
                             f"imports this one (host.import_module(device)), which knows its launch dimensions")

    def get_source(self, fmt: str = "ptx") -> str:
        if fmt in ("ptx", "", "asm"):
            return self.ptx
        if fmt in ("ll", "llvm") and self.ir_text:
            return self.ir_text
        raise ValueError(f"unknown source format {fmt!r} for a device module; use 'ptx' or 'll'")

    def save(self, path: str | os.PathLike) -> None:
        """Write the PTX as text (``NAME.ptx``): what ``ptxas`` and the driver read."""
        path = os.fspath(path)
        if not path.endswith(".ptx"):
            raise ValueError(f"a device module is saved as NAME.ptx, got {path!r}")
        with open(path, "w") as f:
            f.write(self.ptx)

    @staticmethod
    def load(path: str | os.PathLike) -> PTXModule:
        with open(path) as f:
            return PTXModule(f.read())

    def export_library(self, path: str | os.PathLike, extra_objects: Sequence[str] = ()) -> None:
        raise ValueError("a device module is exported with its host module (host.export_library(path) embeds "
                         "the PTX), or saved alone with save('NAME.ptx')")

    def __del__(self) -> None:
        loaded = self._loaded
        if loaded is not None and _Driver._instance is loaded[0]:
            try:
                loaded[0].lib.cuModuleUnload(loaded[1])
            except (AttributeError, TypeError):  # interpreter shutdown: the driver's globals are already gone
                pass


class CUDAModule(Module):
    """The host module of a cuda build: per function its signature and launch dimensions (ints, or
    expressions of the shape variables evaluated on each call); the PTX lives in an imported
    :class:`PTXModule`. ``save("f.cuda.json")`` writes both in one file; ``export_library("f.so")`` a
    library loadable by ``runtime.load_module`` with the PTX embedded."""

    def __init__(self, ptx: str | None, sigs: list[dict], launches: dict[str, dict], entry: str | None = None,
                 arch: str = "sm_80", ir_text: str = ""):
        self.sigs = sigs
        self.launches = launches
        self.arch = arch
        missing = [s["name"] for s in sigs if s["name"] not in launches]
        if missing:
            raise ValueError(f"CUDAModule: no launch dimensions for {', '.join(missing)}")
        funcs = {s["name"]: CUDAFunction(s, launches[s["name"]], self) for s in sigs}
        super().__init__(funcs, entry)
        if ptx is not None:
            self.import_module(PTXModule(ptx, arch, ir_text))

    def import_module(self, other: Module) -> None:
        """Import device code (a :class:`PTXModule`: it replaces the device module that defines the same
        kernels, e.g. the PTX a library carried), or any other module as :meth:`Module.import_module` does."""
        if not isinstance(other, PTXModule):
            return super().import_module(other)
        new = set(other.kernels)
        kept = [m for m in self.imported_modules if not (isinstance(m, PTXModule) and set(m.kernels) <= new)]
        clash = new & {k for m in kept if isinstance(m, PTXModule) for k in m.kernels}
        if clash:
            raise ValueError(f"import_module: an imported device module already defines {', '.join(sorted(clash))}"
                             " and others this one does not")
        self.imported_modules = kept + [other]

    def device_module(self, kernel: str) -> PTXModule:
        """The imported device module that defines ``kernel``."""
        for m in reversed(self.imported_modules):
            if isinstance(m, PTXModule) and kernel in m.kernels:
                return m
        raise CUDAError(f"no device code for kernel {kernel!r}: this host module imports none that defines it; "
                        f"load its PTX and import it: host.import_module(runtime.load_module('NAME.ptx'))")

    def _device_modules(self) -> list[PTXModule]:
        return [m for m in self.imported_modules if isinstance(m, PTXModule)]

    @property
    def ptx(self) -> str:
        """The PTX of the imported device modules (one text when there is one)."""
        mods = self._device_modules()
        if not mods:
            raise CUDAError("this host module imports no device module (no PTX)")
        return "\n".join(m.ptx for m in mods)

    def get_source(self, fmt: str = "ptx") -> str:
        """The device code (``'ptx'``, or ``'ll'``: the NVPTX LLVM IR it was printed from)."""
        mods = self._device_modules()
        if not mods:
            raise CUDAError("this host module imports no device module (no PTX)")
        return "\n".join(m.get_source(fmt) for m in mods)

    def _meta(self) -> dict:
        return {"version": 2, "device": "cuda", "arch": self.arch, "entry": self.entry_name, "functions": self.sigs,
                "launch": self.launches}

    def save(self, path: str | os.PathLike) -> None:
        """Write the host functions and the PTX as one JSON file (``NAME.cuda.json``)."""
        path = os.fspath(path)
        if not path.endswith(".cuda.json"):
            raise ValueError(f"a CUDA host module is saved as NAME.cuda.json (its device module alone as "
                             f"NAME.ptx, with imported_modules[0].save), got {path!r}")
        with open(path, "w") as f:
            json.dump({**self._meta(), "ptx": self.ptx}, f)

    def export_library(self, path: str | os.PathLike, extra_objects: Sequence[str] = ()) -> None:
        """Write a shared library holding the host functions (signatures, launch dimensions) and the PTX of
        the imported device modules (and ``extra_objects``: a model's graph); ``runtime.load_module`` loads it
        with the device code imported."""
        if any(not isinstance(m, PTXModule) for m in self.imported_modules):
            raise ValueError("export_library: a CUDA host module exports only its device (PTX) modules")
        meta = json.dumps(self._meta()).encode()
        ptx = json.dumps([m.ptx for m in self._device_modules()]).encode()
        src = (f"const char {METADATA_SYMBOL}[] = {c_string(meta)};\n"
               f"const char {PTX_SYMBOL}[] = {c_string(ptx)};\n")
        with tempfile.TemporaryDirectory(prefix="autosched-export-") as tmp:
            obj = os.path.join(tmp, "host.o")
            compile_c(src, obj, flags=("-O0", "-fPIC"), what="export_library (CUDA host module)")
            link_shared([obj, *extra_objects], os.fspath(path), [])

    @staticmethod
    def from_metadata(meta: dict, ptx: list[str]) -> CUDAModule:
        mod = CUDAModule(None, meta["functions"], meta["launch"], meta.get("entry"), meta.get("arch", "sm_80"))
        for text in ptx:
            mod.import_module(PTXModule(text, meta.get("arch")))
        return mod

    @staticmethod
    def load(path: str | os.PathLike) -> CUDAModule:
        """A module saved by :meth:`save` (``.cuda.json``)."""
        with open(path) as f:
            d = json.load(f)
        return CUDAModule.from_metadata(d, [d["ptx"]] if d.get("ptx") else [])

    def set_num_threads(self, n: int) -> None:
        """Threads are the launch's business on a GPU: nothing to set."""


__all__ = ["CUDAError", "CUDAFunction", "CUDAModule", "DeviceBuffers", "DeviceCall", "EventTimer", "PTXModule",
           "clock_state", "cuda_available", "device_info"]
