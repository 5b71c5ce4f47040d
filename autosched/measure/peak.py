"""The machine's fp32 peak, measured: a loop of independent vector FMAs, compiled by llvmlite for this CPU
(or, for ``cuda`` targets, for the GPU: :func:`measure_gpu_peak`).

The tuner reports each kernel's GFLOPS as a share of this peak (``autosched tune``, ``autosched report``),
so it is measured the way our kernels run: the same code generator and target machine, the widest vector
the CPU has, enough independent accumulator chains to cover the FMA latency on every FMA port, one call
per thread in plain Python threads (ctypes releases the GIL). A result is cached per CPU and thread
count in the user cache directory (``$AUTOSCHED_CACHE_DIR`` overrides it); ``refresh=True`` measures again.
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs

from autosched import te
from autosched.measure.machine import LoadMeter, MeasureTurn
from autosched.target import Target, init_llvm

log = logging.getLogger("autosched.measure")

#: independent FMA chains: latency (4 cycles) x FMA ports (2) plus slack
_CHAINS = 12


@dataclass(frozen=True)
class Peak:
    """Measured fp32 peak of ``threads`` threads on ``cpu``: ``gflops`` (best of the runs).

    How far to trust it: ``runs`` timed, ``spread`` between the best three (their (max - min) / max),
    ``load``: other processes' CPU use during the runs, in cores; ``trusted`` when the best runs agree
    and nothing else ran. Only trusted figures are cached.
    """

    cpu: str
    threads: int
    lanes: int
    gflops: float
    measured_at: float
    runs: int = 0
    spread: float = 0.0
    load: float = 0.0
    trusted: bool = True  # figures cached by autosched before these fields were kept count as trusted

    def to_json(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """When and how it was measured, in words."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.measured_at))
        if not self.runs:
            return f"measured {when}"
        how = f"best of {self.runs} runs, the best 3 within {self.spread:.1%}"
        if self.load >= 0.05:
            how += f", other processes using {self.load:.1f} cores"
        return f"measured {when}, {how}" + ("" if self.trusted else "; NOT trusted, so not cached")


#: the best three runs agree within this share for a trusted peak
PEAK_AGREEMENT = 0.03
#: other processes may use at most this many cores (on average) during a trusted peak measurement
PEAK_QUIET = 0.25


def cache_dir() -> Path:
    """Where autosched keeps machine facts: ``$AUTOSCHED_CACHE_DIR``, else the user cache directory."""
    env = os.environ.get("AUTOSCHED_CACHE_DIR")
    if env:
        return Path(env)

    return Path(platformdirs.user_cache_dir("autosched", appauthor=False))


def _fma_chains(b, fma, x, y, chains: int, start, iters):
    """Emit the peak loop after ``b``'s block: ``chains`` accumulators (``start(k)`` each), every iteration
    ``acc = fma(acc, x, y)``, ``iters`` times; returns their sum, with ``b`` after the loop."""
    from llvmlite import ir

    entry = b.block
    loop, done = b.function.append_basic_block("loop"), b.function.append_basic_block("done")
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(iters.type)
    accs = [b.phi(start(0).type) for _ in range(chains)]
    new = [b.call(fma, [a, x, y]) for a in accs]
    nxt = b.add(i, ir.Constant(iters.type, 1))
    i.add_incoming(ir.Constant(iters.type, 0), entry)
    i.add_incoming(nxt, loop)
    for k, (a, n) in enumerate(zip(accs, new)):
        a.add_incoming(start(k), entry)
        a.add_incoming(n, loop)
    b.cbranch(b.icmp_signed("<", nxt, iters), loop, done)
    b.position_at_end(done)
    total = new[0]
    for v in new[1:]:
        total = b.fadd(total, v)
    return total


def _compile_kernel(lanes: int, target: Any = "llvm"):
    """JIT ``float peak(int64 iters)``: ``_CHAINS`` accumulators, each ``acc = fma(acc, x, y)`` per
    iteration, summed at the end so nothing is optimised away. Returns (engine, ctypes function)."""
    import llvmlite.binding as llvm
    from llvmlite import ir

    from autosched.codegen.build import target_machine

    init_llvm()
    f32 = ir.FloatType()
    vec = ir.VectorType(f32, lanes)
    i64 = ir.IntType(64)
    mod = ir.Module(name="autosched_peak")
    mod.triple = llvm.get_process_triple()
    fn = ir.Function(mod, ir.FunctionType(f32, [i64]), name="peak")
    fma = ir.Function(mod, ir.FunctionType(vec, [vec, vec, vec]), name=f"llvm.fma.v{lanes}f32")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    # x and y are not constants LLVM can fold through: they depend on the argument
    seed = b.sitofp(fn.args[0], f32)
    x = b.fadd(ir.Constant(vec, [1.0] * lanes), b.insert_element(ir.Constant(vec, [0.0] * lanes), seed,
                                                                    ir.Constant(ir.IntType(32), 0)))
    y = ir.Constant(vec, [1e-7] * lanes)
    total = _fma_chains(b, fma, x, y, _CHAINS, lambda k: ir.Constant(vec, [float(k)] * lanes), fn.args[0])
    b.ret(b.extract_element(total, ir.Constant(ir.IntType(32), 0)))

    tm = target_machine(Target(target))
    ref = llvm.parse_assembly(str(mod))
    ref.verify()
    engine = llvm.create_mcjit_compiler(ref, tm)
    engine.finalize_object()
    cfn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("peak"))
    return engine, cfn


def measure_peak(threads: int | None = None, *, seconds: float = 0.3, repeat: int = 5,
                 target: Any = "llvm") -> Peak:
    """Measure the fp32 peak of ``threads`` threads (default: all cores), best of ``repeat`` runs of about
    ``seconds`` each, with the vectors of ``target`` (``llvm -mcpu=haswell``: what AVX2 code can reach on
    this host)."""
    target = Target(target)
    threads = int(threads or target.num_cores)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    lanes = target.cpu.lanes("float32")
    engine, fn = _compile_kernel(lanes, target)
    flop_per_iter = _CHAINS * lanes * 2
    # size the loop so one call lasts about `seconds`
    iters = 1 << 16
    while True:
        t0 = time.perf_counter()
        fn(iters)
        dt = time.perf_counter() - t0
        if dt > seconds / 4 or iters > 1 << 40:
            break
        iters *= 4
    iters = max(1, int(iters * seconds / max(dt, 1e-9)))

    quiet: list[float] = []  # GFLOPS of the runs nothing else disturbed
    loud: list[float] = []
    loads: list[float] = []
    turn = MeasureTurn()  # other autosched processes time nothing meanwhile, and we disturb none of theirs
    turn.take()
    try:
        for n in range(1, max(repeat, 20) + 1):
            start = threading.Barrier(threads + 1)
            workers = [threading.Thread(target=lambda: (start.wait(), fn(iters))) for _ in range(threads)]
            meter = LoadMeter()
            for w in workers:
                w.start()
            meter.start()
            start.wait()
            t0 = time.perf_counter()
            for w in workers:
                w.join()
            dt = time.perf_counter() - t0
            meter.stop()
            loads.append(meter.foreign_cores)
            g = threads * iters * flop_per_iter / dt / 1e9
            (loud if meter.disturbed(PEAK_QUIET) else quiet).append(g)
            top = sorted(quiet, reverse=True)[:3]
            if n >= repeat and len(top) == 3 and (top[0] - top[2]) / top[0] <= PEAK_AGREEMENT:
                break  # the best runs agree and nothing disturbed them: done
    finally:
        turn.close()
    del engine
    runs = quiet or loud
    top = sorted(runs, reverse=True)[:3]
    spread = (top[0] - top[-1]) / top[0] if top else 1.0
    trusted = bool(quiet) and len(top) == 3 and spread <= PEAK_AGREEMENT
    return Peak(cpu=target.mcpu, threads=threads, lanes=lanes, gflops=max(quiet or loud), measured_at=time.time(),
                runs=len(quiet) + len(loud), spread=spread, load=sorted(loads)[len(loads) // 2], trusted=trusted)


def measure_bandwidth(nbytes: int, threads: int | None = None, *, seconds: float = 0.3) -> float:
    """GB/s of a parallel, vectorized copy that reads and writes ``nbytes`` in all (half each way), compiled
    by autosched for this CPU: what the memory hierarchy gives a streaming kernel of that working set (an L2-,
    L3- or DRAM-sized one), the yardstick of memory-bound kernels. Median of the calls that fit ``seconds``."""
    from autosched.codegen.build import build

    target = Target("llvm")
    lanes = target.cpu.lanes("float32")
    n = max(lanes, nbytes // 8 // lanes * lanes)
    src = te.placeholder((n,), name="src")
    dst = te.compute((n,), lambda i: src[i], name="dst")
    sch = te.create_schedule(dst.op)
    outer, inner = sch[dst].split(dst.op.axis[0], factor=4 * lanes)
    sch[dst].parallel(outer)
    sch[dst].vectorize(inner)
    fn = build(sch, [src, dst], target=target, name="copy")
    fn.set_num_threads(int(threads or target.num_cores))
    a, b = np.ones(n, dtype="float32"), np.empty(n, dtype="float32")
    fn(a, b)
    times = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(times) < 5:
        t0 = time.perf_counter()
        fn(a, b)
        times.append(time.perf_counter() - t0)
    times.sort()
    return 8 * n / times[len(times) // 2] / 1e9


#: a GPU peak kernel: independent FMA chains per thread, iterations per thread, and the launch
_GPU_CHAINS, _GPU_ITERS, _GPU_BLOCKS, _GPU_THREADS = 8, 2048, 8192, 256


def _gpu_kernel_ir() -> str:
    """NVPTX IR of ``peak(float *out)``: each thread runs ``_GPU_CHAINS`` FMA chains for ``_GPU_ITERS``
    iterations and stores their sum (so nothing is optimised away)."""
    from llvmlite import ir

    from autosched.codegen.nvptx import DATA_LAYOUT, TRIPLE

    f32, i32 = ir.FloatType(), ir.IntType(32)
    mod = ir.Module(name="autosched_gpu_peak")
    mod.triple, mod.data_layout = TRIPLE, DATA_LAYOUT
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [f32.as_pointer()]), name="peak")
    fn.calling_convention = "ptx_kernel"
    sreg = {n: ir.Function(mod, ir.FunctionType(i32, []), name=f"llvm.nvvm.read.ptx.sreg.{n}")
            for n in ("tid.x", "ctaid.x", "ntid.x")}
    fma = ir.Function(mod, ir.FunctionType(f32, [f32, f32, f32]), name="llvm.fma.f32")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    tid = b.add(b.mul(b.call(sreg["ctaid.x"], []), b.call(sreg["ntid.x"], [])), b.call(sreg["tid.x"], []))
    x = b.fadd(ir.Constant(f32, 1.0), b.fmul(b.uitofp(tid, f32), ir.Constant(f32, 1e-9)))
    y = ir.Constant(f32, 1e-7)
    total = _fma_chains(b, fma, x, y, _GPU_CHAINS, lambda k: ir.Constant(f32, float(k)), ir.Constant(i32, _GPU_ITERS))
    b.store(total, b.gep(fn.args[0], [tid]))
    b.ret_void()
    return str(mod)


def measure_gpu_peak(arch: str | None = None, *, repeat: int = 5) -> Peak:
    """Measure the fp32 peak of the CUDA device (FMA chains compiled by autosched's NVPTX code generator and
    launched over enough blocks to fill every multiprocessor), best of ``repeat`` launches."""
    from autosched.codegen.nvptx import compile_ptx
    from autosched.runtime.cuda import CUDAModule, device_info

    name, device_arch = device_info()
    ptx = compile_ptx(_gpu_kernel_ir(), arch or device_arch)
    n = _GPU_BLOCKS * _GPU_THREADS
    sig = {"name": "peak", "args": [{"name": "out", "dtype": "float32", "shape": [n]}], "vars": [], "outputs": [0]}
    launch = {"grid": [_GPU_BLOCKS, 1, 1], "block": [_GPU_THREADS, 1, 1]}
    mod = CUDAModule(ptx, [sig], {"peak": launch}, "peak", arch or device_arch)
    call = mod["peak"].device_caller([np.zeros(n, dtype="float32")])
    call()  # the driver compiles the PTX on the first launch
    best = math.inf
    for _ in range(repeat):
        best = min(best, call.time(1))  # the GPU's time of one launch (CUDA events around it)
    flop = n * _GPU_ITERS * _GPU_CHAINS * 2
    return Peak(cpu=f"{name} ({device_arch})", threads=0, lanes=1, gflops=flop / best / 1e9, measured_at=time.time())


def _cache_file() -> Path:
    return cache_dir() / "peak.json"


def _is_cuda(target: Any) -> bool:
    if target is None:
        return False

    return Target(target).kind == "cuda"


def _cache_key(threads: int | None, target: Any) -> str:
    """``<cpu>/<threads>`` for the CPU, ``cuda/<device name>`` for the GPU kernels run on."""
    if _is_cuda(target):
        from autosched.runtime.cuda import device_info

        return f"cuda/{device_info()[0]}"
    cpu = Target("llvm")
    return f"{cpu.mcpu}/{int(threads or cpu.num_cores)}"


def cached_peak(threads: int | None = None, target: Any = None) -> Peak | None:
    """The cached peak of ``threads`` threads on this CPU (or, for a ``cuda`` target, of the GPU), or None
    if it was never measured."""
    try:
        data = json.loads(_cache_file().read_text())
        return Peak(**data[_cache_key(threads, target)])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def get_peak(threads: int | None = None, *, refresh: bool = False, target: Any = None) -> Peak:
    """The fp32 peak of ``threads`` threads on this CPU, or with a ``cuda`` ``target`` of the GPU: from
    the cache, else measured (and cached when it can be trusted: see :class:`Peak`)."""
    if not refresh:
        got = cached_peak(threads, target)
        if got is not None:
            return got
    key = _cache_key(threads, target)
    peak = measure_gpu_peak() if _is_cuda(target) else measure_peak(threads)
    if not peak.trusted:
        log.warning("the fp32 peak measured now (%.1f GFLOPS) cannot be trusted (%s): it is used for now and "
                    "measured again at a quiet moment; run `autosched peak --refresh` on a quiet machine",
                    peak.gflops, peak.describe())
        return peak
    path = _cache_file()
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        data = {}
    data[key] = peak.to_json()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError as e:
        log.warning("cannot cache the fp32 peak in %s (%s); it will be measured again next time", path, e)
    return peak


def share_of_peak(gflops: float, peak: float) -> str:
    """``gflops`` as a share of ``peak``, never above 100% (a kernel above a peak means a stale peak:
    :class:`PeakWatch` measures it again)."""
    return f"{min(gflops / peak, 1.0):.0%}" if peak > 0 else "-"


def _machine_is_quiet(seconds: float = 0.2) -> bool:
    """Whether other processes left the cores alone for ``seconds`` (we sleep meanwhile)."""
    meter = LoadMeter()
    meter.start()
    time.sleep(seconds)
    meter.stop()
    return not meter.disturbed(PEAK_QUIET)


class PeakWatch:
    """The peak a run reports shares of, kept honest while the run goes on.

    Call :meth:`observe` with each best GFLOPS between batches (never during a timing). A figure that was
    not trusted, or that a kernel beat, is measured again at the next quiet moment; the latter is said once
    at WARNING. At most ``max_refresh`` re-measurements per run.
    """

    def __init__(self, threads: int | None = None, target: Any = None, *, max_refresh: int = 3):
        self.threads, self.target = threads, target
        self.peak: Peak = get_peak(threads, target=target)
        self.max_refresh = max_refresh
        self.refreshes = 0
        self._warned = False

    @property
    def gflops(self) -> float:
        return self.peak.gflops

    def share(self, gflops: float) -> str:
        return share_of_peak(gflops, self.peak.gflops)

    def observe(self, best_gflops: float) -> None:
        stale = best_gflops > self.peak.gflops
        if not (stale or not self.peak.trusted) or self.refreshes >= self.max_refresh:
            return
        if stale and not self._warned:
            self._warned = True
            log.warning("a kernel ran at %.1f GFLOPS, above the %.1f GFLOPS fp32 peak (%s): that peak is stale; "
                        "measuring it again", best_gflops, self.peak.gflops, self.peak.describe())
        if not _machine_is_quiet():
            return  # try again after the next batch
        self.refreshes += 1
        new = get_peak(self.threads, refresh=True, target=self.target)
        if new.trusted or new.gflops > self.peak.gflops:
            self.peak = new
        if self.peak.trusted:
            log.info("fp32 peak now %.1f GFLOPS (%s)", self.peak.gflops, self.peak.describe())
