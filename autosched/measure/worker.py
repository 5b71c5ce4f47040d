"""The code that runs inside measurement workers: pool processes and Ray actors alike.

:class:`BuildWorker` turns a (task, trace) into a shared library: replay the
trace, lower, generate LLVM IR, and, unless a library with the same IR for the
same target is already in the cache directory, optimise, emit an object file
and link it with the system C compiler. Libraries are content-addressed (a
sha256 of the LLVM IR, the target and the compiler versions), so identical
candidates (different traces often give the same loops) are compiled once.

:class:`RunWorker` loads one library at a time, runs it once to warm up and to
check its output against the task's reference, then times it. Both classes
turn every failure into an :class:`~autosched.measure.ErrorKind`; what they
cannot turn into a result (a segfault, a hang) kills the process, and the
parent side (:mod:`~autosched.measure.engine`, through its transport)
records it and replaces the worker. :class:`BuildService` and
:class:`RunService` are the calls a worker answers, the same over a socket
and on Ray.

Tasks travel as ``(name, args, target)`` plus a *workload shipment*
(:mod:`autosched.shipment`, whose names this module also gives).
"""

from __future__ import annotations

import _ctypes
import ctypes
import ctypes.util
import hashlib
import logging
import math
import os
import platform
import shutil
import socket
import subprocess
import tempfile
import time
import traceback
from collections import OrderedDict
from typing import Any

import numpy as np

import autosched.isa as isa
from autosched.errors import AutoschedError, CodegenError, LoweringError, ScheduleError
from autosched.measure.data import TaskData, _naive_outputs
from autosched.measure.machine import LoadMeter, MeasureTurn, build_turn, holder
from autosched.measure.result import BuildResult, ErrorKind, ResultFlag
from autosched.runtime import load_module
from autosched.runtime.cuda import clock_state
from autosched.shipment import Shipment, ensure_workload, make_task, task_state, workload_shipment
from autosched.target import host_cpu_name, init_llvm
from autosched.tir.lower import lower
from autosched.version import __version__


def _short_tb(e: BaseException, limit: int = 3) -> str:
    """The exception; for an unexpected (non-autosched) one also the innermost frames: a bug to report."""
    text = f"{type(e).__name__}: {e}"
    if not isinstance(e, AutoschedError):
        frames = traceback.extract_tb(e.__traceback__)[-limit:]
        where = "; ".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames)
        text += f" (at {where})"
    return text


# ---------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------

ENTRY = "default_function"


def _compiler_id(target: Any) -> str:
    import llvmlite

    return f"{target.key}|{target.mattr}|llvmlite {llvmlite.__version__}|autosched {__version__}"


def compile_library(func: Any, target: Any, cache_dir: str) -> tuple[str, bool, list[str]]:
    """Compile a lowered PrimFunc into ``cache_dir/<sha256>.so``; returns ``(path, already_there, flags)``,
    ``flags`` naming the loop annotations the code does not honour (``serial``, ``scalar``, ``not_unrolled``).

    The same steps as ``autosched.build(...).export_library(...)`` without the JIT
    engine that a measurement never uses (a third of the build time).
    """
    from autosched.codegen.build import compile_object, generate_ir

    if target.kind == "cuda":
        return (*_compile_cuda(func, target, cache_dir), [])
    ir_text, _, unhonoured = generate_ir(func, target)  # as autosched.build does
    digest = hashlib.sha256(f"{_compiler_id(target)}\n{ir_text}".encode()).hexdigest()[:40]
    path = os.path.join(cache_dir, f"{digest}.so")
    if os.path.exists(path):
        return path, True, unhonoured
    obj = compile_object(ir_text, target)
    os.makedirs(cache_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="link-", dir=cache_dir)
    try:
        objpath = os.path.join(tmp, "k.o")
        with open(objpath, "wb") as f:
            f.write(obj)
        out = os.path.join(tmp, "k.so")
        _link(objpath, out, parallel="GOMP_parallel" in ir_text)
        os.replace(out, path)  # atomic: concurrent builders of the same IR never see half a file
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path, False, unhonoured


def _compile_cuda(func: Any, target: Any, cache_dir: str) -> tuple[str, bool]:
    """PTX for a ``cuda`` target (checked by ptxas when installed) saved as ``cache_dir/<sha256>.cuda.json``,
    which ``runtime.load_module`` loads into a CUDA module."""
    from autosched.codegen.build import build_cuda

    mod = build_cuda([func], target)
    digest = hashlib.sha256(f"{_compiler_id(target)}\n{mod.ptx}".encode()).hexdigest()[:40]
    path = os.path.join(cache_dir, f"{digest}.cuda.json")
    if os.path.exists(path):
        return path, True
    os.makedirs(cache_dir, exist_ok=True)
    tmp = path + f".{os.getpid()}.cuda.json"
    mod.save(tmp)
    os.replace(tmp, path)
    return path, False


_LD: dict[str, Any] = {}


def _direct_ld() -> tuple[str, str, str] | None:
    """``(ld, libgomp.so, libm.so)`` when the linker can be called directly, else None (found once)."""
    if "v" not in _LD:
        _LD["v"] = None
        cc = os.environ.get("CC", "gcc")
        ld = shutil.which("ld")
        if ld and "CC" not in os.environ:
            try:
                libs = [subprocess.run([cc, f"-print-file-name={n}"], capture_output=True, text=True,
                                       timeout=30).stdout.strip() for n in ("libgomp.so", "libm.so")]
                if all(os.path.isabs(x) and os.path.exists(x) for x in libs):
                    _LD["v"] = (ld, libs[0], libs[1])
            except (OSError, subprocess.SubprocessError):
                pass
    return _LD["v"]


def _link(obj: str, out: str, parallel: bool) -> None:
    """Link one object into a shared library.

    Calls ``ld`` directly when it can (with the libgomp and libm the C compiler
    would pick): the compiler driver costs ~15 ms a link, a tenth of a build.
    ``$CC`` set, or anything unusual, means the compiler driver, as
    ``export_library`` does.
    """
    direct = _direct_ld()
    if direct is not None:
        ld, gomp, libm = direct
        cmd = [ld, "-shared", "-o", out, obj, *([gomp] if parallel else []), libm]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode == 0:
            return
    cc = os.environ.get("CC", "gcc")
    libs = ["-lgomp", "-lm"] if parallel else ["-lm"]
    try:
        res = subprocess.run([cc, "-shared", "-o", out, obj, *libs], capture_output=True, text=True)
    except FileNotFoundError:
        raise CodegenError(f"linking needs a C compiler: {cc!r} was not found") from None
    if res.returncode != 0:
        raise CodegenError(f"linking failed: {res.stderr.strip()[:2000]}")


def _return_free_memory() -> None:
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``). A compile's peak leaves
    tens of MB free but held by malloc, and a builder's memory then sat at its largest compile so far
    (about 35 MB per conv2d builder); elsewhere than glibc there is nothing to do."""
    if _MALLOC_TRIM:
        _MALLOC_TRIM[0](0)


def _find_malloc_trim() -> list:
    try:
        return [ctypes.CDLL(None).malloc_trim]
    except (OSError, AttributeError):  # not glibc
        return []


_MALLOC_TRIM = _find_malloc_trim()


class BuildWorker:
    """Replays, lowers and compiles candidates into ``cache_dir``; one at a time."""

    def __init__(self, cache_dir: str, ship_artifact: bool = False):
        self.cache_dir = cache_dir
        self.ship_artifact = ship_artifact
        os.makedirs(cache_dir, exist_ok=True)
        # import the compiler now, so the first build is not charged for it
        import llvmlite.binding  # noqa: F401

        import autosched.codegen.build  # noqa: F401

    def build(self, shipment: Shipment, state: tuple, trace: Any) -> BuildResult:
        """Build one candidate; never while another autosched process on this machine times a kernel."""
        with build_turn():
            try:
                return self._build(shipment, state, trace)
            finally:
                _return_free_memory()

    def _build(self, shipment: Shipment, state: tuple, trace: Any) -> BuildResult:
        t0 = time.perf_counter()

        def fail(kind: str, e: BaseException) -> BuildResult:
            return BuildResult(error_kind=kind, error_msg=_short_tb(e),
                               build_seconds=time.perf_counter() - t0)

        try:
            task = make_task(shipment, state)
        except Exception as e:  # noqa: BLE001
            return fail(ErrorKind.UNKNOWN, e)
        try:
            sch, args = task.apply(trace)
        except Exception as e:  # noqa: BLE001 - any failure to replay a step means the trace is invalid here
            return fail(ErrorKind.INVALID_SCHEDULE, e)
        try:
            func = lower(sch, args, name=ENTRY)
        except ScheduleError as e:
            return fail(ErrorKind.INVALID_SCHEDULE, e)
        except Exception as e:  # noqa: BLE001
            return fail(ErrorKind.LOWERING_ERROR, e)
        try:
            path, cached, flags = compile_library(func, task.target, self.cache_dir)
        except (CodegenError, LoweringError, RuntimeError, ValueError) as e:
            return fail(ErrorKind.COMPILE_ERROR, e)
        except Exception as e:  # noqa: BLE001
            return fail(ErrorKind.COMPILE_ERROR, e)
        artifact = None
        if self.ship_artifact:
            with open(path, "rb") as f:
                artifact = f.read()
        return BuildResult(artifact_path=path, build_seconds=time.perf_counter() - t0, cached=cached,
                           artifact=artifact, flags=flags)

    def cleanup(self) -> None:
        shutil.rmtree(self.cache_dir, ignore_errors=True)


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------


def _llc_bytes() -> int:
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for idx in os.listdir(base):
            try:
                with open(os.path.join(base, idx, "size")) as f:
                    s = f.read().strip()
            except OSError:
                continue
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
            best = max(best, int(s.rstrip("KMG")) * mult)
    except (OSError, ValueError):
        pass
    return best or (32 << 20)


class CacheFlusher:
    """Evicts the kernel's arguments from the CPU caches between repeats (TVM's ``enable_cpu_cache_flush``).

    On x86 it JIT-compiles a ``clflush`` loop over each argument (cost
    proportional to the data, not to the last-level cache); elsewhere, or
    without llvmlite, it writes a buffer twice the size of the last-level cache.
    """

    def __init__(self) -> None:
        self._fn = None
        self._buf: np.ndarray | None = None
        try:
            self._fn = self._jit_clflush()
        except (ImportError, RuntimeError) as e:  # no llvmlite, or it cannot JIT here: use the buffer
            logging.getLogger("autosched.measure").debug("cache flush by clflush unavailable (%s); "
                                                         "writing a buffer instead", e)
            self._fn = None
        if self._fn is None:
            self._buf = np.zeros(min(2 * _llc_bytes(), 1 << 30) // 8, dtype=np.float64)

    def _jit_clflush(self) -> Any:
        if platform.machine() not in ("x86_64", "AMD64", "i686"):
            return None
        import llvmlite.binding as llvm

        init_llvm()
        ir = """
        declare void @llvm.x86.sse2.clflush(ptr)
        declare void @llvm.x86.sse2.mfence()
        define void @flush(ptr %p, i64 %n) {
        entry:
          br label %loop
        loop:
          %i = phi i64 [0, %entry], [%next, %loop]
          %q = getelementptr i8, ptr %p, i64 %i
          call void @llvm.x86.sse2.clflush(ptr %q)
          %next = add i64 %i, 64
          %more = icmp slt i64 %next, %n
          br i1 %more, label %loop, label %done
        done:
          call void @llvm.x86.sse2.mfence()
          ret void
        }
        """
        mod = llvm.parse_assembly(ir)
        mod.verify()
        tm = llvm.Target.from_default_triple().create_target_machine()
        self._engine = llvm.create_mcjit_compiler(mod, tm)
        self._engine.finalize_object()
        addr = self._engine.get_function_address("flush")
        return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(addr)

    def __call__(self, arrays: list[np.ndarray]) -> None:
        if self._fn is not None:
            for a in arrays:
                if a.nbytes:
                    self._fn(a.ctypes.data, a.nbytes)
        elif self._buf is not None:
            self._buf += 1.0


ALIGNMENT = 64  # bytes: a cache line and an AVX-512 vector, as TVM aligns its arrays


def aligned_copy(a: np.ndarray, alignment: int = ALIGNMENT) -> np.ndarray:
    """A C-contiguous copy of ``a`` starting on an ``alignment``-byte boundary.

    numpy promises only 16 bytes; a kernel's time then depends on where its
    buffers happened to land (a 64-byte vector load that straddles two cache
    lines costs two), which showed up as run-to-run differences of 1.6x. Every
    candidate is timed on aligned buffers, so timings compare kernels, not luck.
    """
    raw = np.empty(a.nbytes + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _fill_garbage(out: np.ndarray) -> None:
    """Poison the output so a kernel that skips part of it cannot pass the check."""
    if out.dtype.kind == "f":
        out.fill(np.nan)
    elif out.dtype.kind in "iub":
        out.view(np.uint8).fill(0xA5)


def _mismatch_message(out: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> str | None:
    if out.dtype.kind == "f":
        close = np.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = out == ref
    if bool(np.all(close)):
        return None
    bad = np.argwhere(~close)
    with np.errstate(invalid="ignore"):
        diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    worst = np.unravel_index(int(np.argmax(diff)), out.shape)
    return (f"{len(bad)} of {out.size} outputs differ from the reference (rtol={rtol:g}, atol={atol:g}); "
            f"worst at {tuple(int(i) for i in worst)}: got {out[worst].item()!r}, "
            f"expected {ref[worst].item()!r}")


def _unnice() -> None:
    """Time kernels at normal priority: a niced worker (Ray's default for its workers is nice 15) loses its
    core to every ordinary process that wakes up, and a parallel kernel's threads then wait for each other.
    Lowering one's own niceness needs privilege; without it the measurement goes on, with a warning."""
    try:
        nice = os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):
        return
    if nice <= 0:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except OSError:
        logging.getLogger("autosched.measure").warning(
            "the measuring worker runs at nice %d and may not lower it; timings may be noisy (start Ray with "
            "RAY_worker_niceness=0)", nice)


IDLE_SECONDS = 0.25  # a worker that timed nothing for this long is treated as cold
TIMING_ATTEMPTS = 3  # a disturbed timing is repeated this many times in all before it is marked noisy


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def _spread(xs: list[float]) -> float:
    m = _median(xs)
    return (max(xs) - min(xs)) / m if m > 0 else 0.0
HEAT_SECONDS = 0.15  # how long a cold worker runs its kernel before timing it


def this_machine() -> dict[str, str]:
    """This machine as a result names it: host name and LLVM's name of its CPU."""
    try:
        cpu = host_cpu_name()
    except ImportError:  # llvmlite is not needed to run kernels
        cpu = "unknown"
    return {"host": socket.gethostname(), "host_cpu": cpu}


class RunWorker:
    """Loads one candidate's library at a time and warms, checks and times it.

    The three steps are separate calls (:meth:`load`, :meth:`warmup`,
    :meth:`time`) so that the parent can give each its own deadline: a kernel
    that hangs is caught after ``limit`` seconds, not after the whole budget of
    the timing loop.
    """

    def __init__(self, max_tasks: int = 4):
        self._data: OrderedDict[str, TaskData] = OrderedDict()
        self._max_tasks = max_tasks
        self._lib: Any = None
        self._mod: Any = None
        self._current: TaskData | None = None
        self._arrays: list[np.ndarray] = []
        self._failed = False
        self._warm = 0.0
        self._call: Any = None
        self._flusher: CacheFlusher | None = None
        self._local_dir: str | None = None
        self._t_start = 0.0
        self._busy_until = -math.inf  # when this worker last finished timing a kernel
        self.last_seconds = 0.0  # load to end of timing, of the last candidate timed
        self.last_flags: list[str] = []  # ResultFlag values of the last candidate timed
        self.last_clocks: dict[str, str] = {}  # a GPU's clocks when the last candidate was timed (clock_state)
        self.machine = this_machine()  # where it times: results carry it into their records
        self.turn = MeasureTurn()  # this machine's one-measurement-at-a-time turn (see measure.machine)
        self._spreads: list[float] = []  # spreads of recent undisturbed timings: what "usual" is here
        self.pid = os.getpid()
        _unnice()
        # keep libgomp loaded for the life of the worker: unloading a kernel must never unmap the OpenMP
        # runtime under its idle threads
        self._gomp = None
        try:
            name = ctypes.util.find_library("gomp")
            if name:
                self._gomp = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            self._gomp = None

    # -- task data, sent once per task per worker --
    def has_data(self, key: str) -> bool:
        return key in self._data

    def put_data(self, data: TaskData) -> None:
        self._data[data.key] = data
        self._data.move_to_end(data.key)
        while len(self._data) > self._max_tasks:
            self._data.popitem(last=False)

    def _library_path(self, path: str | None, artifact: bytes | None) -> str:
        if path and os.path.exists(path):
            return path
        if artifact is None:
            raise FileNotFoundError(f"library {path} is not on this machine and was not shipped")
        if self._local_dir is None:
            self._local_dir = tempfile.mkdtemp(prefix="autosched-run-")
        local = os.path.join(self._local_dir, os.path.basename(path or "candidate.so"))
        if not os.path.exists(local):
            with open(local + ".tmp", "wb") as f:
                f.write(artifact)
            os.replace(local + ".tmp", local)
        return local

    def load(self, key: str, path: str | None, artifact: bytes | None = None) -> tuple[str, str] | None:
        """Load the candidate; returns None, or ``(error_kind, message)``."""
        self.unload()
        self._t_start = time.perf_counter()
        self._failed = True
        data = self._data.get(key)
        if data is None:
            return ErrorKind.UNKNOWN, f"no data for task {key} in this worker (send it first)"
        self._data.move_to_end(key)
        missing = isa.missing_features(data.features)
        if missing:  # the code would die of an illegal instruction: say why instead, for every candidate
            return ErrorKind.COMPILE_ERROR, (
                f"this runner's CPU ({isa.host_cpu()}) lacks {', '.join(missing)}, which code built for {data.cpu} "
                "uses: tune for this CPU (target 'llvm'), or run on a machine that has them")
        try:
            lib_path = self._library_path(path, artifact)
            self._mod = load_module(lib_path)
            self._lib = getattr(self._mod, "_lib", None)
            self._mod.set_num_threads(int(data.num_threads))  # whatever OMP_NUM_THREADS says (Ray sets 1)
        except Exception as e:  # noqa: BLE001
            self.unload()
            return ErrorKind.COMPILE_ERROR, f"the built library does not load: {type(e).__name__}: {e}"
        self._current = data
        self._arrays = [aligned_copy(a) for a in data.arrays]
        self._failed = False
        self.turn.try_take()  # the parent calls take_turn() (and may wait) if another process has it
        return None

    def take_turn(self, timeout: float = 600.0) -> tuple[float, str]:
        """Wait for this machine's measurement turn; ``(seconds waited, who had it)``."""
        waited = self.turn.take(timeout)
        return waited, self.turn.waited_for

    def _caller(self) -> Any:
        """A zero-overhead call of the kernel on the current arrays (ctypes directly, checks done once)."""
        f = self._mod.entry_func
        device_caller = getattr(f, "device_caller", None)
        if device_caller is not None:  # a GPU kernel: arrays uploaded once, each call launches and waits
            return device_caller(self._arrays)
        cfunc = getattr(f, "_cfunc", None)
        if cfunc is None:
            arrays = self._arrays
            return lambda: f(*arrays)
        env = [0] * len(f.sig["vars"])
        for arr, spec in zip(self._arrays, f.sig["args"]):
            for d, dim in enumerate(spec["shape"]):
                if isinstance(dim, list) and dim[0] == "var":
                    env[dim[1]] = int(arr.shape[d])
        args = [a.ctypes.data for a in self._arrays] + env

        def call() -> None:
            if cfunc(*args) != 0:
                raise RuntimeError("the kernel returned a non-zero status (out of memory?)")

        return call

    def warmup(self, warmup: int = 1, limit: float | None = None,
               check: bool = True) -> tuple[str, str] | float:
        """Run once (checked against the reference), then ``warmup - 1`` more times.

        Returns the seconds of the fastest warm-up run, or ``(error_kind, message)``
        when the run was slower than ``limit`` or the output is wrong (then the machine's
        measurement turn is given back at once: no timing follows).
        """
        out = self._warmup(warmup, limit, check)
        if isinstance(out, tuple):
            self.turn.give()
        return out

    def _warmup(self, warmup: int, limit: float | None, check: bool) -> tuple[str, str] | float:
        if self._failed or self._mod is None:
            return ErrorKind.UNKNOWN, "no candidate loaded"
        self._failed = True
        data = self._current
        out = self._arrays[-1]
        _fill_garbage(out)
        f = self._mod.entry_func
        try:
            t0 = time.perf_counter()
            f(*self._arrays)  # the checked call: validates shapes and dtypes
            first = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            return ErrorKind.RUNTIME_CRASH, f"{type(e).__name__}: {e}"
        try:
            call = self._caller()
            if getattr(f, "device_caller", None) is not None:
                # a GPU's checked call also paid for the driver compiling the PTX and for the copies to and
                # from the device (tens of ms): the limit applies to a launch on device-resident arrays
                t0 = time.perf_counter()
                call()
                first = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            return ErrorKind.RUNTIME_CRASH, f"{type(e).__name__}: {e}"
        # the first call pays for argument checks and cold caches: never cut a run off below a millisecond
        if limit is not None and first > max(limit, 1e-3):
            return ErrorKind.RUN_TIMEOUT, f"one run took {first:.3g} s, over the limit of {limit:.3g} s"
        if check and data is not None and data.reference is not None:
            msg = _mismatch_message(out, data.reference, data.rtol, data.atol)
            if msg is not None:
                return ErrorKind.WRONG_RESULT, msg
        best = first
        runs = max(1, warmup) - 1 + (1 if first < 0.1 else 0)  # one more when cheap: first is cold
        # cores that sat idle run slow for a while (clock ramp, sleeping OpenMP threads): measured here, the
        # first ~0.1 s of kernels after an idle spell timed at half speed, so heat up before timing
        idle = time.perf_counter() - self._busy_until > IDLE_SECONDS
        heat_until = time.perf_counter() + (HEAT_SECONDS if idle else 0.0)
        while runs > 0 or time.perf_counter() < heat_until:
            t0 = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - t0)
            runs -= 1
        self._warm = best
        self._call = call  # time() reuses it: a GPU caller holds the device copies of the arrays
        self._failed = False
        return best

    def time(self, number: int = 1, repeat: int = 3, min_repeat_ms: float = 0.0,
             flush_cache: bool = False) -> list[float] | None:
        """Seconds per run for each of ``repeat`` repeats of ``number`` runs (more if ``min_repeat_ms`` asks).

        A GPU kernel is timed by the GPU: CUDA events around each repeat's ``number`` launches, or with
        ``flush_cache`` around each launch alone, the L2 cache flushed before it (cold-cache timing); its
        clocks are then read into ``last_clocks``. Unloads the library afterwards. None when the warm-up failed.
        """
        self.last_clocks = {}
        try:
            if self._failed or self._mod is None:
                return None
            call = self._call or self._caller()
            est = max(self._warm, 1e-9)
            if min_repeat_ms > 0:
                number = max(number, math.ceil(min_repeat_ms / 1e3 / est))
            number = int(min(number, 10_000_000))
            gpu = getattr(self._mod.entry_func, "device_caller", None) is not None
            flush = None
            if flush_cache and not gpu:  # the CPU's caches: a GPU kernel's arrays are in device memory
                if self._flusher is None:
                    self._flusher = CacheFlusher()
                flush = self._flusher
            perf = time.perf_counter

            def timed() -> list[float]:
                costs = []
                for _ in range(repeat):
                    if gpu:  # events on the GPU around the batch (or, cold, around each launch after a flush)
                        costs.append(call.time_cold(number) if flush_cache else call.time(number))
                        continue
                    if flush is not None:
                        flush(self._arrays)
                    t0 = perf()
                    for _ in range(number):
                        call()
                    costs.append((perf() - t0) / number)
                return costs

            self.last_flags = []
            best: list[float] | None = None
            meter = LoadMeter()
            for attempt in range(TIMING_ATTEMPTS):
                meter.start()
                costs = timed()
                meter.stop()
                if gpu:  # the clocks it ran at, read while the GPU is still warm from the timing
                    self.last_clocks = clock_state()
                if best is None or _median(costs) < _median(best):
                    best = costs
                if not self._disturbed(costs, meter):
                    self._spreads = (self._spreads + [_spread(costs)])[-32:]
                    return costs
                time.sleep(0.05 * (attempt + 1))  # let whatever else runs here get on with it
            self.last_flags = [ResultFlag.NOISY]  # kept, but said to be disturbed
            return best
        finally:
            self._busy_until = time.perf_counter()
            self.last_seconds = time.perf_counter() - self._t_start
            self.unload()

    def _disturbed(self, costs: list[float], meter: LoadMeter) -> bool:
        """Whether other processes shared the cores while ``costs`` were timed, or the repeats spread far
        more than timings on this worker usually do."""
        if meter.disturbed():
            return True
        usual = sorted(self._spreads)[len(self._spreads) // 2] if len(self._spreads) >= 5 else 0.05
        return len(costs) >= 3 and _spread(costs) > max(0.3, 4 * usual)

    def unload(self) -> None:
        """Drop the current library and unmap it (a tuning run loads thousands); give the turn back."""
        self.turn.give()
        lib = self._lib
        self._mod = None
        self._lib = None
        self._current = None
        self._arrays = []
        self._call = None
        if lib is not None:
            handle = getattr(lib, "_handle", None)
            del lib
            if handle:
                try:
                    _ctypes.dlclose(handle)
                except OSError:  # leaving it mapped is harmless
                    pass

    def cleanup(self) -> None:
        self.unload()
        self.turn.close()
        if self._local_dir:
            shutil.rmtree(self._local_dir, ignore_errors=True)


# ---------------------------------------------------------------------------
# services: what a worker answers to the engine's calls, whichever transport carries them
# ---------------------------------------------------------------------------

#: what :meth:`RunService.load` answers when the worker does not have the task's data yet
NEED_DATA = "need_data"


class BuildService:
    """The calls a build worker answers (:mod:`autosched.measure.engine` makes them, over a socket or Ray)."""

    def __init__(self, cache_dir: str, ship_artifact: bool = False):
        self.worker = BuildWorker(cache_dir, ship_artifact=ship_artifact)

    def build(self, shipment: Shipment, state: tuple, trace: Any) -> BuildResult:
        return self.worker.build(shipment, state, trace)

    def cleanup(self) -> None:
        self.worker.cleanup()


class RunService:
    """The calls a run worker answers, one step each so that each gets its own deadline:
    ``load`` (after ``put_data`` once per task), ``take_turn`` when another process times on this machine,
    ``warmup``, ``time``."""

    def __init__(self) -> None:
        self.worker = RunWorker()

    def load(self, key: str, path: str | None, artifact: bytes | None) -> Any:
        """:data:`NEED_DATA`, or ``(error or None, who has the machine's measurement turn or None when this
        worker took it)``."""
        if not self.worker.has_data(key):
            return NEED_DATA
        err = self.worker.load(key, path, artifact)
        if err is not None or self.worker.turn.held:
            return err, None
        return None, holder()

    def put_data(self, data: TaskData) -> None:
        self.worker.put_data(data)

    def take_turn(self, timeout: float) -> tuple[float, str]:
        return self.worker.take_turn(timeout)

    def warmup(self, warmup: int, limit: float | None, check: bool) -> Any:
        out = self.worker.warmup(warmup, limit, check)
        if isinstance(out, tuple):  # no timing follows: drop the library now
            self.worker.unload()
        return out

    def time(self, number: int, repeat: int, min_repeat_ms: float, flush_cache: bool) -> Any:
        """``(seconds per run of each repeat, seconds from load to the end, flags, where it was timed)``; where
        includes, for a GPU kernel, the GPU and its clocks (:func:`autosched.runtime.cuda.clock_state`)."""
        costs = self.worker.time(number, repeat, min_repeat_ms, flush_cache)
        return costs, self.worker.last_seconds, self.worker.last_flags, {**self.worker.machine,
                                                                         **self.worker.last_clocks}

    def cleanup(self) -> None:
        self.worker.cleanup()


class ReferenceService:
    """The call a reference worker answers: the outputs of a task's untransformed schedule, isolated in a
    process of its own because a workload may crash it."""

    def reference(self, shipment: Shipment, state: tuple, inputs: list) -> Any:
        return _naive_outputs(make_task(shipment, state), inputs)


__all__ = ["NEED_DATA", "BuildService", "BuildWorker", "CacheFlusher", "ReferenceService", "RunService",
           "RunWorker", "compile_library", "ensure_workload", "make_task", "task_state", "workload_shipment"]
