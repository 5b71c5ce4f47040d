"""Compilation targets: ``llvm`` (the host CPU) with ``-mcpu=``, ``-mattr=``, ``-num-cores=`` and ``-opt-level=``
(LLVM's pipeline, ``-O3`` by default: lower compiles faster, for code whose speed does not matter) options, and
``cuda`` (NVIDIA GPUs through NVPTX) with ``-arch=sm_XY``: without one, the architecture of the GPU here
(``sm_90`` on an H100, asked of the CUDA driver once per process), or ``sm_80`` where there is none.

What a target is, and what the host is (LLVM's name of its CPU, LLVM's version), sits here below every
package that needs it: the code generator builds for a target, and the database keys records by one without
importing the code generator. llvmlite is imported on first use only (naming the host CPU, describing it).

``Target.cpu`` describes the CPU a ``llvm`` target builds for (:class:`CPUDescription`): vector width, vector
registers, FMA, caches and cores. Every default schedule, template and the code generator read it, so nothing
else in autosched assumes an ISA; ``llvm -mcpu=haswell`` gives AVX2 code and AVX2 schedules on any host.
Schedules find the target they are written for with :meth:`Target.current` (``with target:`` sets it).
"""

from __future__ import annotations

import contextvars
import ctypes
import difflib
import functools
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

KINDS = ("llvm", "cuda")
_CURRENT: contextvars.ContextVar[tuple[Target, ...]] = contextvars.ContextVar("autosched_target", default=())


_init_lock = threading.Lock()
_initialised = False


def init_llvm() -> None:
    """Initialise LLVM's native target, assembly printer and parser (once per process): describing a CPU and
    building code for it both need them."""
    global _initialised
    with _init_lock:
        if not _initialised:
            import llvmlite.binding as llvm

            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            llvm.initialize_native_asmparser()
            _initialised = True


@functools.cache
def host_cpu_name() -> str:
    """LLVM's name of this machine's CPU (``sapphirerapids``, ``znver4``): what ``llvm`` targets build for
    (asked once: the search asks for its target's CPU thousands of times a batch)."""
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_name()


@functools.cache
def host_cpu_features() -> str:
    """LLVM's feature string of this machine's CPU (``+avx2,+fma,...``), asked once."""
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_features().flatten()


def llvm_version() -> str:
    """The version of the LLVM that llvmlite links (``22.1.0``): records name the compiler that built them."""
    import llvmlite.binding as llvm

    return ".".join(str(x) for x in llvm.llvm_version_info)


#: the architecture a ``cuda`` target without ``-arch`` builds for where no GPU is found (its PTX runs on any
#: newer GPU: the driver compiles it for the one it finds)
DEFAULT_CUDA_ARCH = "sm_80"
_CU_ATTR_CC_MAJOR, _CU_ATTR_CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR


def cuda_driver_path() -> str:
    """The CUDA driver library autosched loads: ``$AUTOSCHED_LIBCUDA`` (a stand-in, in tests), else
    ``libcuda.so.1`` (installed with the NVIDIA driver)."""
    return os.environ.get("AUTOSCHED_LIBCUDA") or "libcuda.so.1"


def host_gpu_arch() -> str | None:
    """``sm_XY`` of the first CUDA device here (what ``cuda`` targets without ``-arch`` build for), or None
    without a driver or a device. Asked once per driver library and ``CUDA_VISIBLE_DEVICES``."""
    return _gpu_arch(cuda_driver_path(), os.environ.get("CUDA_VISIBLE_DEVICES"))


@functools.cache
def _gpu_arch(path: str, visible: str | None) -> str | None:
    """The driver's compute capability of device 0: ``cuInit``, ``cuDeviceGet`` and two attributes, by ctypes
    (no context is made, so no GPU memory is taken)."""
    try:
        lib = ctypes.CDLL(path)
        i32, p32 = ctypes.c_int, ctypes.POINTER(ctypes.c_int)
        for name, args in (("cuInit", [ctypes.c_uint]), ("cuDeviceGetCount", [p32]), ("cuDeviceGet", [p32, i32]),
                           ("cuDeviceGetAttribute", [p32, i32, i32])):
            getattr(lib, name).argtypes = args
            getattr(lib, name).restype = i32
    except (OSError, AttributeError):  # no driver here (or not a CUDA driver)
        return None
    count, dev, major, minor = i32(), i32(), i32(), i32()
    if (lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1
            or lib.cuDeviceGet(ctypes.byref(dev), 0) != 0
            or lib.cuDeviceGetAttribute(ctypes.byref(major), _CU_ATTR_CC_MAJOR, dev) != 0
            or lib.cuDeviceGetAttribute(ctypes.byref(minor), _CU_ATTR_CC_MINOR, dev) != 0 or major.value <= 0):
        return None
    return f"sm_{major.value}{minor.value}"


@dataclass(frozen=True)
class CPUDescription:
    """What a schedule needs to know of a CPU: derived from LLVM's CPU name and features (what LLVM makes of
    ``<16 x float>`` arithmetic for this CPU gives the native vector width and whether FMA exists) and, for
    the host, from the OS (caches). Other CPUs get typical cache sizes for their vector class; cores are
    those the kernels run on (this machine's, or ``-num-cores=``)."""

    name: str  #: LLVM's CPU name (``haswell``, ``znver4``, ``sapphirerapids``)
    vector_bytes: int  #: the widest native vector register (16 SSE, 32 AVX/AVX2, 64 AVX-512)
    vector_registers: int  #: architectural vector registers (16, or 32 with AVX-512)
    fma: bool  #: fused multiply-add instructions
    l1d_bytes: int  #: L1 data cache per core
    l2_bytes: int  #: L2 cache per core
    l3_bytes: int  #: last-level cache (shared)
    cores: int  #: cores the kernels run on (threads of parallel loops)
    dot_u8s8: bool = False  #: AVX-512 VNNI: vpdpbusd sums 4 uint8 x int8 products into each 32-bit lane

    def lanes(self, dtype: str = "float32") -> int:
        """Elements of ``dtype`` in one native vector (its width from its name: the dtype table lives in te,
        a layer above)."""
        bits = int(re.sub(r"\D", "", dtype) or 8)
        return max(1, self.vector_bytes * 8 // bits)

    @property
    def isa(self) -> str:
        """A short name of the vector ISA class, for people: ``avx512``, ``avx2``, ``avx`` or ``sse``."""
        if self.vector_bytes >= 64:
            return "avx512"
        if self.vector_bytes >= 32:
            return "avx2" if self.fma else "avx"
        return "sse"

    def __str__(self) -> str:
        kib = lambda n: f"{n // 1024} KiB" if n < 1 << 20 else f"{n / (1 << 20):g} MiB"  # noqa: E731
        return (f"{self.name} ({self.isa}: {self.vector_bytes * 8}-bit vectors x {self.vector_registers} registers"
                f"{', FMA' if self.fma else ''}; L1d {kib(self.l1d_bytes)}, L2 {kib(self.l2_bytes)}, "
                f"L3 {kib(self.l3_bytes)}; {self.cores} cores)")


_PROBE_IR = """
define void @probe_width(ptr %a, ptr %b) {
  %x = load <16 x float>, ptr %a
  %y = load <16 x float>, ptr %b
  %z = fmul <16 x float> %x, %y
  store <16 x float> %z, ptr %a
  ret void
}
define float @probe_fma(float %a, float %b, float %c) {
  %r = call float @llvm.fma.f32(float %a, float %b, float %c)
  ret float %r
}
declare float @llvm.fma.f32(float, float, float)
define void @probe_int(ptr %a, ptr %b) {
  %x = load <16 x i32>, ptr %a
  %y = load <16 x i32>, ptr %b
  %z = shl <16 x i32> %x, %y
  store <16 x i32> %z, ptr %a
  ret void
}
define i32 @probe_dot(<64 x i8> %a, <64 x i8> %b) {
  %za = zext <64 x i8> %a to <64 x i32>
  %sb = sext <64 x i8> %b to <64 x i32>
  %m = mul <64 x i32> %za, %sb
  %r = call i32 @llvm.vector.reduce.add.v64i32(<64 x i32> %m)
  ret i32 %r
}
declare i32 @llvm.vector.reduce.add.v64i32(<64 x i32>)
"""


@functools.cache
def probe_assembly(cpu: str, features: str) -> str:
    """LLVM's assembly, for ``cpu`` with ``features``, of a ``<16 x float>`` multiply, an FMA, an integer shift
    and a uint8 x int8 dot product: what the target's vector code looks like (its width, FMA, VNNI, and the
    instruction-set extensions it needs)."""
    import llvmlite.binding as llvm

    init_llvm()
    mod = llvm.parse_assembly(_PROBE_IR)
    mod.triple = llvm.get_process_triple()
    tm = llvm.Target.from_triple(mod.triple).create_target_machine(cpu=cpu, features=features, opt=2)
    return tm.emit_assembly(mod)


def has_dot_u8s8(cpu: str, features: str) -> bool:
    """Whether ``cpu`` with ``features`` has AVX-512 VNNI's ``vpdpbusd`` (4 uint8 x int8 products into each
    32-bit lane): LLVM compiles the probe's uint8 x int8 dot product to it exactly when the CPU has it (to
    ``vpmaddwd`` otherwise), so LLVM is asked rather than a table of CPU names."""
    return bool(re.search(r"\svpdpbusd\s+[^\n]*%zmm", probe_assembly(cpu, features)))


@functools.cache
def _probe_isa(cpu: str, features: str) -> tuple[int, bool]:
    """``(vector bytes, fma)`` as LLVM compiles for ``cpu`` with ``features``: a ``<16 x float>`` multiply
    takes one instruction per native vector, and an ``llvm.fma`` call is one instruction or a libm call."""
    asm = probe_assembly(cpu, features)
    width_part, _, fma_part = asm.partition("probe_fma:")
    muls = sum(1 for line in width_part.splitlines() if re.match(r"\s+v?mul", line))
    fma = "call" not in fma_part and bool(re.search(r"^\s+v?f(n)?madd", fma_part, re.M))
    return 64 // max(1, muls), fma


def _host_caches() -> dict[int, int]:
    """Per cache level, the data (or unified) cache size in bytes, from sysfs (Linux); {} elsewhere."""
    out: dict[int, int] = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return out
    for e in entries:
        if not e.startswith("index"):
            continue
        try:
            with open(f"{base}/{e}/level") as f:
                level = int(f.read())
            with open(f"{base}/{e}/type") as f:
                kind = f.read().strip()
            with open(f"{base}/{e}/size") as f:
                size = f.read().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", size)
        if m:
            out[level] = int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
    return out


def _host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@functools.cache
def describe_cpu(cpu: str, features: str, host: bool) -> CPUDescription:
    """The :class:`CPUDescription` of an LLVM CPU name and feature string; ``host``: it is this machine's CPU,
    so its caches come from the OS (others get typical sizes for their vector class)."""
    vector_bytes, fma = _probe_isa(cpu, features)
    # AVX-512 doubles the architectural vector registers (zmm0-31); SSE and AVX/AVX2 on x86-64 have 16
    registers = 32 if vector_bytes >= 64 else 16
    caches = _host_caches() if host else {}
    typical_l2 = (1 << 20) if vector_bytes >= 64 else (512 << 10)  # server AVX-512 cores have 1-2 MiB, AVX2 0.25-1
    return CPUDescription(
        name=cpu,
        vector_bytes=vector_bytes,
        vector_registers=registers,
        fma=fma,
        l1d_bytes=caches.get(1, 32 << 10),
        l2_bytes=caches.get(2, typical_l2),
        l3_bytes=caches.get(3, 16 << 20),
        cores=_host_cores(),
        dot_u8s8=vector_bytes >= 64 and has_dot_u8s8(cpu, features),
    )


@dataclass(frozen=True)
class GPUDescription:
    """What one block of a ``cuda`` kernel may use on a GPU architecture, and the facts its tiles are sized
    from: the space's prior (threads per block, shared tiles, coalesced runs) and the GPU rules read these,
    not constants of one card."""

    arch: str
    warp_size: int = 32
    max_threads_per_block: int = 1024
    shared_bytes_per_block: int = 48 * 1024  # static __shared__ arrays (what the code generator emits)
    shared_bytes_opt_in: int = 48 * 1024  # dynamic shared memory a kernel may opt into (not used yet)
    registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    sector_bytes: int = 32  # the unit of a global memory transaction: a warp's stores coalesce into sectors
    shared_banks: int = 32  # shared memory banks, each serving one word per pass
    bank_bytes: int = 4

    def coalesced_run(self, dtype_bytes: int = 4) -> int:
        """Consecutive elements that fill one memory sector (8 floats)."""
        return max(1, self.sector_bytes // dtype_bytes)


#: per compute capability, what differs from GPUDescription's defaults (CUDA C Programming Guide, "Features
#: and Technical Specifications"); an arch missing here is described by its nearest older neighbour
_GPU_ARCHS: dict[int, dict] = {
    50: {}, 60: {}, 70: {"shared_bytes_opt_in": 96 * 1024}, 75: {"shared_bytes_opt_in": 64 * 1024},
    80: {"shared_bytes_opt_in": 163 * 1024}, 86: {"shared_bytes_opt_in": 99 * 1024},
    89: {"shared_bytes_opt_in": 99 * 1024}, 90: {"shared_bytes_opt_in": 227 * 1024},
}


@functools.cache
def describe_gpu(arch: str) -> GPUDescription:
    """The description of ``arch`` (``sm_90``, ``sm_90a``)."""
    m = re.fullmatch(r"sm_(\d+)[a-z]?", arch)
    if m is None:
        raise ValueError(f"unknown GPU architecture {arch!r}; expected sm_XY, e.g. sm_80 or sm_90")
    cc = int(m.group(1))
    known = max((k for k in _GPU_ARCHS if k <= cc), default=min(_GPU_ARCHS))
    return GPUDescription(arch, **_GPU_ARCHS[known])


class TargetKind(str):
    """A target's kind, a string (``"llvm"``, ``"cuda"``) that also answers TVM's ``target.kind.name``."""

    @property
    def name(self) -> str:
        return str(self)


class Target:
    """A parsed target string, e.g. ``llvm -mcpu=sapphirerapids -num-cores=2``. TVM's spelling
    ``Target(target="cuda", host="llvm")`` is accepted: ``host`` is kept as ``.host`` (a cuda build's host
    code is compiled for this machine's CPU). A ``cuda`` target without ``-arch`` gets the architecture of
    the GPU here, as TVM's does (``cuda -arch=sm_90`` on an H100; ``-arch=sm_80`` without a GPU): the string
    says what the PTX is built for, and it travels so to builders elsewhere and into tuning records."""

    def __init__(self, spec: str | Target = "llvm", host: str | Target | None = None, *,
                 target: str | Target | None = None):
        if target is not None:
            spec = target
        self.host: Target | None = Target(host) if host is not None else getattr(spec, "host", None)
        if isinstance(spec, Target):
            self.kind, self.options = spec.kind, dict(spec.options)
            return
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"target must be a non-empty string such as 'llvm', got {spec!r}")
        parts = shlex.split(spec)
        self.kind = TargetKind(parts[0])
        if self.kind not in KINDS:
            raise ValueError(f"unknown target kind {self.kind!r} in {spec!r}; expected one of {', '.join(KINDS)}")
        self.options: dict[str, str] = {}
        for p in parts[1:]:
            if not p.startswith("-") or "=" not in p:
                raise ValueError(f"target option {p!r} in {spec!r} must look like -key=value")
            k, v = p.lstrip("-").split("=", 1)
            if k not in ("mcpu", "mattr", "num-cores", "mtriple", "arch", "opt-level"):
                raise ValueError(f"unknown target option -{k} in {spec!r}")
            self.options[k] = v
        if "num-cores" in self.options:
            try:
                if int(self.options["num-cores"]) <= 0:
                    raise ValueError
            except ValueError:
                raise ValueError(f"-num-cores must be a positive integer in {spec!r}") from None
        if self.options.get("opt-level", "3") not in ("0", "1", "2", "3"):
            raise ValueError(f"-opt-level must be 0, 1, 2 or 3 (LLVM's -O levels; 3 by default) in {spec!r}")
        if self.kind == "cuda" and "arch" not in self.options:
            self.options["arch"] = host_gpu_arch() or DEFAULT_CUDA_ARCH

    @property
    def keys(self) -> tuple[str, ...]:
        """TVM's target keys, by which TOPI's tables pick an implementation: ``("cpu",)`` for llvm,
        ``("cuda", "gpu")`` for cuda."""
        return ("cuda", "gpu") if self.kind == "cuda" else ("cpu",)

    @property
    def mcpu(self) -> str:
        if "mcpu" in self.options:
            return self.options["mcpu"]
        return host_cpu_name()

    @property
    def arch(self) -> str:
        """The GPU architecture of a ``cuda`` target (``-arch=``; by default the GPU's here, else ``sm_80``)."""
        return self.options.get("arch", DEFAULT_CUDA_ARCH)

    @property
    def mattr(self) -> str:
        if self.kind == "cuda":
            return ""
        if "mattr" in self.options:
            return self.options["mattr"]
        if "mcpu" in self.options:
            return ""
        return host_cpu_features()

    @property
    def num_cores(self) -> int:
        env = os.environ.get("AUTOSCHED_NUM_THREADS")
        if env:
            return int(env)
        if "num-cores" in self.options:
            return int(self.options["num-cores"])
        return _host_cores()

    @property
    def gpu(self) -> GPUDescription:
        """The description of the GPU architecture this (``cuda``) target builds for: warp size, threads,
        shared memory and registers per block."""
        if self.kind != "cuda":
            raise ValueError(f"target {self} is not a GPU target; .gpu describes cuda targets only")
        return describe_gpu(self.arch)

    @property
    def cpu(self) -> CPUDescription:
        """The description of the CPU this (``llvm``) target builds for: vector width, registers, FMA, caches,
        cores (``-num-cores=`` or ``AUTOSCHED_NUM_THREADS`` override the OS's count)."""
        if self.kind != "llvm":
            raise ValueError(f"target {self} is not a CPU target; .cpu describes llvm targets only")
        host = self.mcpu == host_cpu_name() and "mattr" not in self.options
        desc = describe_cpu(self.mcpu, self.mattr, host)
        cores = self.num_cores  # where the kernels run: this machine, unless -num-cores says otherwise
        if cores != desc.cores:
            desc = replace(desc, cores=cores)
        return desc

    @staticmethod
    def current(allow_none: bool = False) -> Target | None:
        """The target of the innermost ``with target:`` block: what a schedule is being written for. Outside
        any, ``llvm`` (the host) unless ``allow_none``."""
        stack = _CURRENT.get()
        if stack:
            return stack[-1]
        return None if allow_none else Target("llvm")

    def __enter__(self) -> Target:
        self._token = _CURRENT.set(_CURRENT.get() + (self,))
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.reset(self._token)

    @property
    def opt_level(self) -> int:
        """LLVM's optimisation level for the code of this target (``-opt-level``, TVM's spelling; 3 by default)."""
        return int(self.options.get("opt-level", 3))

    @property
    def key(self) -> str:
        """The target with the CPU spelled out (``llvm -mcpu=emeraldrapids``): what tuning records are keyed by,
        so records tuned on one CPU are not silently applied on another."""
        opts = dict(self.options)
        if self.kind == "llvm":
            opts["mcpu"] = self.mcpu
        else:
            opts["arch"] = self.arch
        opts.pop("num-cores", None)
        return " ".join([self.kind] + [f"-{k}={v}" for k, v in sorted(opts.items())])

    def __str__(self) -> str:
        return " ".join([self.kind] + [f"-{k}={v}" for k, v in self.options.items()])

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


@functools.cache
def llvm_cpu_names(triple: str | None = None) -> tuple[str, ...]:
    """The CPU names LLVM knows for ``triple`` (default: this machine's), as ``llc -mcpu=help`` lists them.

    llvmlite has no call for the list; LLVM prints it when a target machine is made for the CPU ``help``, so a
    short child process does that and its standard error is read (LLVM writes there from C++, out of Python's
    reach). An empty tuple when the list cannot be had: the caller then checks nothing."""
    code = ("import sys, llvmlite.binding as llvm\n"
            "llvm.initialize_native_target(); llvm.initialize_native_asmprinter()\n"
            "t = sys.argv[1] or llvm.get_default_triple()\n"
            "llvm.Target.from_triple(t).create_target_machine(cpu='help')\n")
    try:
        out = subprocess.run([sys.executable, "-c", code, triple or ""], capture_output=True, text=True,
                             timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return ()
    names, listing = [], False
    for line in out.splitlines():
        if line.startswith("Available CPUs"):
            listing = True
        elif line.startswith("Available features"):
            break
        elif listing and " - " in line:
            names.append(line.split(" - ", 1)[0].strip())
    return tuple(names)


def check_target(spec: str | Target) -> Target:
    """Parse ``spec`` and check it against LLVM before anything is built for it: an ``llvm`` target's
    ``-mcpu`` must be a CPU LLVM knows for the triple (an unknown one makes LLVM print a warning per target
    machine and then abort or crash the process). Raises ValueError with one line that names the CPU and the
    nearest known names."""
    target = Target(spec)
    cpu = target.options.get("mcpu")
    if target.kind != "llvm" or cpu is None or cpu in ("native", "generic"):
        return target
    known = llvm_cpu_names(target.options.get("mtriple"))
    if known and cpu not in known:
        near = difflib.get_close_matches(cpu, known, n=4, cutoff=0.5)
        hint = (f"; nearest: {', '.join(near)}" if near
                else f"; LLVM {llvm_version()} knows {len(known)} CPUs, e.g. {', '.join(known[:4])}")
        raise ValueError(f"-mcpu={cpu} is not a CPU LLVM knows for this target{hint}")
    return target


def cuda(model: str = "unknown", arch: str | None = None, options: Sequence[str] | str | None = None) -> Target:
    """TVM's ``tvm.target.cuda()``: a cuda target (``arch`` such as ``"sm_80"``; the GPU here's by default)."""
    extra = [options] if isinstance(options, str) else list(options or [])
    return Target(" ".join(["cuda"] + ([f"-arch={arch}"] if arch else []) + extra))


def create(spec: str | Target) -> Target:
    """TVM's older spelling of ``Target(spec)``."""
    return Target(spec)
