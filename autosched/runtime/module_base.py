"""The interface every kind of compiled module implements: :class:`PackedFunc` (a kernel callable with numpy
arrays, its arguments checked), :class:`Module` (functions by name, imported modules, ``export_library``,
``time_evaluator``) and the metadata symbols a library carries. Needs only ctypes and numpy (no llvmlite).

The kinds of modules stand above it: host libraries and ``load_module`` (:mod:`autosched.runtime.module`, which
re-exports these names), C source (:mod:`autosched.runtime.csource`) and CUDA (:mod:`autosched.runtime.cuda`).

A kernel's C signature is ``int32 f(void *buf0, ..., int64 var0, ...)``. Its
Python-side description (argument names, dtypes, shapes with symbolic
dimensions) travels with it: in memory for JIT modules, and as the JSON string
``__autosched_metadata`` inside an exported shared library.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autosched.runtime.cc import c_string, compile_c, link_shared
from autosched.runtime.ndarray import NDArray, as_array
from autosched.runtime.packed import take_error

METADATA_SYMBOL = "__autosched_metadata"
ISA_SYMBOL = "__autosched_isa"  # {"cpu": built for, "features": instruction-set extensions the code uses}
IMPORTS_METADATA_SYMBOL = "__autosched_imports_metadata"  # signatures of imported C-source functions
NUM_THREADS_SYMBOL = "__autosched_num_threads"
#: ``i32 run_plan(i64 n, ptr fns, ptr nargs, ptr args, ptr failed)``: calls ``fns[i]`` with its ``nargs[i]``
#: pointers (taken in turn from ``args``) for each i < n, stopping at the first nonzero status (and storing
#: the call's index at ``failed``): a graph's kernels called in a native loop, not one ctypes call each. It
#: calls the library's own kernels without shape variables (their arities are its call sites; -1: another)
RUN_PLAN_SYMBOL = "__autosched_run_plan"


def _eval_dim(d: Any, env: list) -> int:
    """Evaluate a serialised dimension: an int, ["var", k], or [op, a, b]."""
    if isinstance(d, int):
        return d
    op = d[0]
    if op == "var":
        return env[d[1]]
    a, b = _eval_dim(d[1], env), _eval_dim(d[2], env)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    raise ValueError(f"bad dimension in kernel metadata: {d!r}")


def _dim_str(d: Any, names: list) -> str:
    if isinstance(d, int):
        return str(d)
    if d[0] == "var":
        return names[d[1]]
    return f"({_dim_str(d[1], names)} {d[0]} {_dim_str(d[2], names)})"


_POINTERS: dict[int, tuple[Any, int, int]] = {}  # id(array) -> (weakref, data address, nbytes)


def data_pointer(arr: np.ndarray) -> tuple[int, int]:
    """``(address, nbytes)`` of an array's data, remembered while the array lives: numpy's ``arr.ctypes.data``
    costs about a microsecond, as much as a small kernel."""
    hit = _POINTERS.get(id(arr))
    if hit is not None and hit[0]() is arr and hit[2] == arr.nbytes:
        return hit[1], hit[2]
    if len(_POINTERS) > 4096:
        for k in [k for k, v in _POINTERS.items() if v[0]() is None]:
            del _POINTERS[k]
    addr = arr.ctypes.data
    try:
        _POINTERS[id(arr)] = (weakref.ref(arr), addr, arr.nbytes)
    except TypeError:  # an array type without weak references: look it up each time
        pass
    return addr, arr.nbytes


def _failure(name: str, rc: int) -> BaseException:
    """The error of a kernel that returned status ``rc``: what a function it called with ``tir.call_packed``
    raised, or running out of memory."""
    err = take_error()
    if err is not None:
        return err
    return RuntimeError(f"{name} failed with status {rc} (out of memory?)")


class PackedFunc:
    """A compiled kernel callable with numpy arrays; checks every argument before calling."""

    def __init__(self, sig: dict, address: int, keepalive: Any = None):
        self.sig = sig
        self.name = sig["name"]
        self.address = address  # of the compiled function (a run plan calls it directly)
        self._keepalive = keepalive
        #: called before the first call (then dropped): raises when this CPU cannot run the code
        self.isa_check: Callable[[], None] | None = None
        nbuf, nvar = len(sig["args"]), len(sig["vars"])
        var_types = [_SCALAR_CTYPES[d] for d in sig.get("var_dtypes", ["int64"] * nvar)]
        proto = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * nbuf + var_types))
        #: te.var arguments given in the call: (position among the call's arguments, index in sig["vars"])
        self._scalar_args = [tuple(x) for x in sig.get("scalar_args", [])] or None
        self._cfunc = proto(address)
        self._dtypes = [np.dtype(a["dtype"]) for a in sig["args"]]
        self._outputs = set(sig.get("outputs", []))
        shapes = [a["shape"] for a in sig["args"]]
        # the fast path of a call: every shape known, so a check is a few comparisons per array
        self._static = [(dt, tuple(s), k in self._outputs) for k, (dt, s) in enumerate(zip(self._dtypes, shapes))
                        ] if not nvar and all(isinstance(d, int) for s in shapes for d in s) else None

    def _check_isa(self) -> None:
        if self.isa_check is not None:
            self.isa_check()
            self.isa_check = None

    def split_scalars(self, args: tuple) -> tuple[tuple, list | None]:
        """The arrays of a call, and the values of its scalar (te.var) arguments by index in ``sig["vars"]``
        (None for the variables that the arrays' shapes give)."""
        if self._scalar_args is None:
            return args, None
        n = len(self.sig["args"]) + len(self._scalar_args)
        if len(args) != n:
            names = [a["name"] for a in self.sig["args"]]
            for pos, k in self._scalar_args:
                names.insert(pos, self.sig["vars"][k])
            raise TypeError(f"{self.name}() takes {n} arguments ({', '.join(names)}), got {len(args)}")
        given: list = [None] * len(self.sig["vars"])
        at = {pos: k for pos, k in self._scalar_args}
        arrays = []
        for pos, a in enumerate(args):
            if pos in at:
                k = at[pos]
                dt = self.sig.get("var_dtypes", ["int64"] * len(given))[k]
                if isinstance(a, (NDArray, np.ndarray)) or not isinstance(a, (int, float, np.number)):
                    raise TypeError(f"{self.name}: argument {pos} ('{self.sig['vars'][k]}') is a scalar ({dt}), "
                                    f"got {type(a).__name__}")
                if dt.startswith(("int", "uint")) and int(a) != a:
                    raise TypeError(f"{self.name}: argument '{self.sig['vars'][k]}' is an integer, got {a!r}")
                given[k] = int(a) if dt.startswith(("int", "uint")) else float(a)
            else:
                arrays.append(a)
        return tuple(arrays), given

    def __call__(self, *arrays: Any) -> None:
        if self.isa_check is not None:
            self._check_isa()
        given = None
        if self._scalar_args is not None:
            arrays, given = self.split_scalars(arrays)
        env = self._fast_check(arrays) if self._static is not None else None
        if env is None:
            arrays = tuple(as_array(a) for a in arrays)  # NDArrays: their numpy data
            if self._static is not None:
                env = self._fast_check(arrays)
            if env is None:
                env = self.check_args(arrays, given)
        rc = self._cfunc(*[data_pointer(a)[0] for a in arrays], *env)
        if rc != 0:
            raise _failure(self.name, rc)

    def _fast_check(self, arrays: tuple) -> list | None:
        """``[]`` when every array matches the (static) signature and no output overlaps another argument;
        None sends the call through :meth:`check_args`, which says what is wrong."""
        if len(arrays) != len(self._static):
            return None
        spans = []
        for arr, (dt, shape, out) in zip(arrays, self._static):
            if type(arr) is not np.ndarray or arr.shape != shape or (arr.dtype is not dt and arr.dtype != dt):
                return None
            flags = arr.flags
            if not flags.c_contiguous or (out and not flags.writeable):
                return None
            addr, n = data_pointer(arr)
            spans.append((addr, addr + n, out))
        for lo, hi, out in spans:
            if out and sum(1 for lo2, hi2, _ in spans if lo < hi2 and lo2 < hi) > 1:
                return None
        return []

    def raw_call(self, pointers: list[int]) -> None:
        """Call with data addresses checked beforehand (the graph executor's buffers are fixed once)."""
        if self.isa_check is not None:
            self._check_isa()
        rc = self._cfunc(*pointers)
        if rc != 0:
            raise _failure(self.name, rc)

    def check_args(self, arrays: tuple, given: list | None = None) -> list:
        """Check every array against the signature (type, dtype, rank, contiguity, shape, aliasing of outputs);
        returns the values of the shape variables (``given``: those passed as scalar arguments)."""
        arrays = tuple(as_array(a) for a in arrays)
        sig = self.sig
        specs = sig["args"]
        if len(arrays) != len(specs):
            raise TypeError(
                f"{self.name}() takes {len(specs)} arrays ({', '.join(a['name'] for a in specs)}), "
                f"got {len(arrays)}"
            )
        names = sig["vars"]
        env: list = list(given) if given is not None else [None] * len(names)
        for k, (arr, spec) in enumerate(zip(arrays, specs)):
            if not isinstance(arr, np.ndarray):
                raise TypeError(
                    f"{self.name}: argument {k} ('{spec['name']}') must be a numpy.ndarray, got {type(arr).__name__}"
                )
            if arr.dtype != self._dtypes[k]:
                raise TypeError(
                    f"{self.name}: argument '{spec['name']}' must have dtype {spec['dtype']}, got {arr.dtype}"
                )
            shape = spec["shape"]
            if arr.ndim != len(shape):
                raise ValueError(
                    f"{self.name}: argument '{spec['name']}' must have {len(shape)} dimensions, got shape {arr.shape}"
                )
            if not arr.flags.c_contiguous:
                raise ValueError(
                    f"{self.name}: argument '{spec['name']}' must be C-contiguous (use numpy.ascontiguousarray)"
                )
            if k in self._outputs and not arr.flags.writeable:
                raise ValueError(f"{self.name}: output argument '{spec['name']}' is read-only")
            for d, dim in enumerate(shape):
                if isinstance(dim, list) and dim[0] == "var" and env[dim[1]] is None:
                    env[dim[1]] = int(arr.shape[d])
        for arr, spec in zip(arrays, specs):
            want = [_eval_dim(dim, env) for dim in spec["shape"]]
            if list(arr.shape) != want:
                symbolic = ", ".join(_dim_str(dim, names) for dim in spec["shape"])
                expected = str(tuple(want)) if all(isinstance(d, int) for d in spec["shape"]) else (
                    f"({symbolic}) = {tuple(want)}")
                raise ValueError(f"{self.name}: argument '{spec['name']}' has shape {arr.shape}, expected {expected}")
        for k in self._outputs:
            for j, other in enumerate(arrays):
                if j != k and np.may_share_memory(arrays[k], other):
                    raise ValueError(
                        f"{self.name}: output '{specs[k]['name']}' overlaps argument '{specs[j]['name']}'; "
                        "kernels assume their buffers do not alias"
                    )
        return env

    def __repr__(self) -> str:
        args = ", ".join(a["name"] for a in self.sig["args"])
        return f"<PackedFunc {self.name}({args})>"


class Module:
    """A set of compiled functions: ``mod["name"]``, ``mod.get_function(name)``, ``mod(*arrays)`` for the entry."""

    def __init__(self, functions: dict[str, PackedFunc], entry: str | None = None):
        self._functions = functions
        self.entry_name = entry or (next(iter(functions)) if functions else None)
        self.imported_modules: list[Module] = []

    def import_module(self, other: Module) -> None:
        """Make ``other``'s functions callable through this module and part of its exported library (the
        C source of an external codegen next to the LLVM kernels of a model)."""
        if other is self or self in other._all_modules():
            raise ValueError("import_module: a module cannot import itself")
        clash = set(self.function_names) & set(other.function_names)
        if clash:
            raise ValueError(f"import_module: both modules define {', '.join(sorted(clash))}")
        self.imported_modules.append(other)

    def _all_modules(self) -> list[Module]:
        out = [self]
        for m in self.imported_modules:
            out.extend(m._all_modules())
        return out

    holds_model: bool = False  # a library exported with a model's graph and parameters (load_module's factory)
    num_threads_address: int = 0  # where the library keeps its parallel loops' thread count (0: none)
    run_plan_address: int = 0  # the library's RUN_PLAN_SYMBOL (0: none, as in libraries built before it)
    _plan_names: frozenset[str] = frozenset()  # the kernels it has a call site for

    def in_run_plan(self, name: str) -> bool:
        """Whether the library's run plan can call kernel ``name``: one compiled with it, without shape variables
        (not a function of an imported module, even one linked into the same library)."""
        return bool(self.run_plan_address) and name in self._plan_names

    def set_num_threads(self, n: int) -> None:
        """Threads for this module's parallel loops (0: libgomp's default); overrides AUTOSCHED_NUM_THREADS."""
        if n < 0:
            raise ValueError(f"set_num_threads: n must be >= 0, got {n}")
        if self.num_threads_address:
            ctypes.c_int32.from_address(self.num_threads_address).value = int(n)

    def get_function(self, name: str) -> PackedFunc:
        f = self._functions.get(name)
        if f is not None:
            return f
        for m in self.imported_modules:
            if name in m:
                return m.get_function(name)
        raise AttributeError(f"module has no function {name!r} (it has: {', '.join(self.function_names) or 'none'})")

    def __getitem__(self, name: str) -> PackedFunc:
        return self.get_function(name)

    def __contains__(self, name: str) -> bool:
        return name in self._own_function_names() or any(name in m for m in self.imported_modules)

    def _own_function_names(self) -> list[str]:
        return list(self._functions)

    @property
    def function_names(self) -> list[str]:
        """Names of this module's functions and of its imported modules' functions."""
        return [n for m in self._all_modules() for n in m._own_function_names()]

    @property
    def entry_func(self) -> PackedFunc:
        if self.entry_name is None:
            raise AttributeError("module has no functions")
        return self.get_function(self.entry_name)

    def __call__(self, *args: Any) -> None:
        self.entry_func(*args)

    def export_library(self, path: str | os.PathLike, extra_objects: Sequence[str] = ()) -> None:
        """Write one shared library with this module's functions and those of its imported modules, loadable
        by :func:`load_module` (ctypes and numpy only); ``NAME.tar`` holds that library. Each module contributes
        object files (and ``extra_objects`` more: a model's graph); the C compiler links them."""
        mods = self._all_modules()
        with tempfile.TemporaryDirectory(prefix="autosched-export-") as tmp:
            objects: list[str] = []
            libs: list[str] = []
            described: list[dict] = []  # signatures of functions whose objects carry no metadata
            embedded = False
            for k, m in enumerate(mods):
                objs, has_meta, mlibs = m._object_files(os.path.join(tmp, f"m{k}"))
                objects += objs
                libs += [x for x in mlibs if x not in libs]
                if has_meta:
                    if embedded:
                        raise ValueError("export_library: two imported modules both carry kernel metadata")
                    embedded = True
                else:
                    described += m._signatures()
            if described:
                meta = json.dumps({"version": 1, "entry": None if embedded else self.entry_name,
                                   "functions": described}).encode()
                symbol = IMPORTS_METADATA_SYMBOL if embedded else METADATA_SYMBOL
                obj = os.path.join(tmp, "metadata.o")
                compile_c(f"const char {symbol}[] = {c_string(meta)};\n", obj, what="export_library metadata")
                objects.append(obj)
            link_shared([*objects, *extra_objects], os.fspath(path), libs or ["-lm"])

    def _object_files(self, prefix: str) -> tuple[list[str], bool, list[str]]:
        """``(object files, whether they embed their own metadata, link flags)`` for :meth:`export_library`."""
        raise NotImplementedError(f"{type(self).__name__} cannot be exported")

    def _signatures(self) -> list[dict]:
        return [f.sig for f in self._functions.values()]

    def get_source(self, fmt: str = "") -> str:
        raise NotImplementedError(f"{type(self).__name__} has no source")

    def time_evaluator(self, func_name: str | None = None, dev: Any = None, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, f_preproc: str = "") -> Callable[..., ProfileResult]:
        """TVM's ``mod.time_evaluator(name, dev, number=, repeat=, min_repeat_ms=)``: a function that runs the
        kernel once to warm up, then ``repeat`` times ``number`` runs, and returns a :class:`ProfileResult`
        (``.mean``, ``.median``, ``.results``: seconds per run). ``min_repeat_ms`` raises ``number`` (by
        doubling) until one repeat takes at least that long. A cuda function's arrays stay on the GPU while
        it is timed, and the GPU times it: CUDA events recorded before and after each repeat's launches.
        ``f_preproc="l2_cache_flush_cuda"`` (TVM's name) times a cuda function with a cold cache: the GPU's L2
        is flushed before each launch, and events time each launch alone."""
        if number < 1 or repeat < 1:
            raise ValueError(f"time_evaluator: number and repeat must be >= 1, got {number} and {repeat}")
        f = self.get_function(func_name) if func_name else self.entry_func
        cold = f_preproc == "l2_cache_flush_cuda"

        def run(*args: Any) -> ProfileResult:
            call = _timed_call(f, args)
            call(1)
            gpu_time = getattr(call, "time_cold" if cold else "time", None)  # a cuda function's DeviceCall
            if cold and gpu_time is None:
                raise ValueError(f"time_evaluator: f_preproc='l2_cache_flush_cuda' flushes a GPU's L2 cache, and "
                                 f"{f.name!r} is not a cuda function")
            n = number
            out = []
            for _ in range(repeat):
                while True:
                    if gpu_time is not None:
                        dt = gpu_time(n) * n
                    else:
                        t0 = time.perf_counter()
                        call(n)
                        dt = time.perf_counter() - t0
                    if dt * 1e3 >= min_repeat_ms or min_repeat_ms <= 0:
                        break
                    n = max(n * 2, int(n * min_repeat_ms / max(dt * 1e3, 1e-3) * 1.1) + 1)
                out.append(dt / n)
            return ProfileResult(out)

        return run

    def save(self, path: str | os.PathLike, fmt: str = "") -> None:
        """TVM's ``mod.save(path)``, by the file's suffix (or ``fmt``): ``.o``, the object code with the kernels'
        metadata (``autosched.contrib.cc.create_shared`` links it into a library :func:`load_module` loads);
        ``.ll`` or ``.s``, LLVM IR or assembly text; anything else, the shared library of
        :meth:`export_library`."""
        path = os.fspath(path)
        fmt = fmt or os.path.splitext(path)[1].lstrip(".")
        if fmt in ("ll", "s", "asm"):
            with open(path, "w") as f:
                f.write(self.get_source(fmt))
            return
        if fmt != "o":
            self.export_library(path)
            return
        if self.imported_modules:
            raise ValueError("save: a module with imported modules is saved whole with export_library (.so)")
        with tempfile.TemporaryDirectory(prefix="autosched-save-") as tmp:
            objs, has_meta, _ = self._object_files(os.path.join(tmp, "m"))
            if not has_meta:
                raise ValueError(f"save: a {type(self).__name__} is saved with export_library (.so), not as .o")
            if len(objs) == 1:
                shutil.copyfile(objs[0], path)
            else:  # one relocatable object of several
                subprocess.run([os.environ.get("CC", "gcc"), "-r", "-nostdlib", "-o", path, *objs], check=True)


class ProfileResult:
    """Timings of :meth:`Module.time_evaluator`: seconds per run of each repeat."""

    def __init__(self, results: list[float]):
        self.results = tuple(results)

    @property
    def mean(self) -> float:
        return float(np.mean(self.results))

    @property
    def median(self) -> float:
        return float(np.median(self.results))

    @property
    def min(self) -> float:
        return float(np.min(self.results))

    @property
    def max(self) -> float:
        return float(np.max(self.results))

    @property
    def std(self) -> float:
        return float(np.std(self.results))

    def __repr__(self) -> str:
        return (f"ProfileResult(mean={self.mean:.6g}, median={self.median:.6g}, min={self.min:.6g}, "
                f"max={self.max:.6g}, std={self.std:.3g}, results={list(self.results)})")


def _timed_call(f: PackedFunc, args: tuple) -> Callable[[int], None]:
    """``call(number)``: ``number`` runs of ``f`` on ``args``, checked once; a cuda function's arrays are
    copied to the GPU once (its ``device_caller``)."""
    arrays, given = f.split_scalars(tuple(args))
    arrays = tuple(as_array(a) for a in arrays)
    device_caller = getattr(f, "device_caller", None)
    if device_caller is not None:
        return device_caller(list(arrays))
    env = f.check_args(arrays, given)
    pointers = [data_pointer(a)[0] for a in arrays] + list(env)

    def call(number: int) -> None:
        for _ in range(number):
            f.raw_call(pointers)

    call._keep = arrays  # type: ignore[attr-defined]
    return call


_SCALAR_CTYPES = {"int64": ctypes.c_int64, "int32": ctypes.c_int32, "int16": ctypes.c_int16, "int8": ctypes.c_int8,
                  "uint64": ctypes.c_uint64, "uint32": ctypes.c_uint32, "uint16": ctypes.c_uint16,
                  "uint8": ctypes.c_uint8, "bool": ctypes.c_bool, "float32": ctypes.c_float,
                  "float64": ctypes.c_double}
