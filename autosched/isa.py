"""Which x86 instruction-set extensions compiled code needs, and whether this machine has them.

Code built for ``-mcpu=skylake-avx512`` dies with SIGILL on an AVX2-only host, killing the whole process
without a word. So a module records what its code uses, read from LLVM's own assembly of it
(:func:`code_features`: ``zmm`` registers and opmasks mean AVX-512, ``vfmadd`` means FMA, ...), and the
runtime compares that with the host's features (:func:`host_features`) before any of the code runs
(:func:`check_runs_here`). Feature names are LLVM's (``avx512f``, ``avx2``, ``fma``, ``sse4.1``).

Needs no llvmlite at run time: an exported library checks itself with ``/proc/cpuinfo`` where llvmlite is
absent.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from autosched.errors import UnsupportedCPUError
from autosched.target import Target, host_cpu_features, host_cpu_name, probe_assembly

#: the features a module can be checked for, in the order they are reported
CHECKED = ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt",
           "movbe", "avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd", "avx512vnni")

_AVX512_REG = re.compile(r"%(zmm\d+|k[1-7]\b|[xy]mm(1[6-9]|2\d|3[01])\b)|\{1to\d+\}|\{%k[1-7]\}")
_XY = re.compile(r"%[xy]mm\d")
_YMM = re.compile(r"%ymm\d")
_REG_SRC = re.compile(r"^\s*%[xy]mm")  # first AT&T operand is a register (not memory)

# mnemonics (AT&T, size suffix stripped) that only EVEX encodes: AVX-512 even on xmm/ymm registers
_EVEX_ONLY = re.compile(
    r"^v(pternlog|perm[it]2|fixupimm|range|reduce|rndscale|scalef|getexp|getmant|compress|expand|pcompress"
    r"|pexpand|pmov(s|us)?(db|dw|qb|qw|qd|wb)\b|pro[lr]v?[dq]|psraq|psravq|pabsq|pm(ax|in)[su]q|pmullq"
    r"|cvtt?(ps|pd|ss|sd)2u|cvtu|cvtt?(ps|pd)2qq|cvtqq2|broadcast[if](32x[248]|64x[24])|insert[if](32x|64x)"
    r"|extract[if](32x|64x)|shuf[if](32|64)x|align[dq]|pconflict|plzcnt|rcp14|rsqrt14|blendm|pblendm|fpclass"
    r"|ptestn?m|pmov[bwdq]2m|pmovm2|pbroadcastm|dbpsadbw|permw|permb|pmultishift)")
_AVX512_DQ = re.compile(r"^(kmovb|kandb|korb|kxorb|knotb|kaddb|kaddw|ktestb|ktestw|v(pmullq|cvtt?(ps|pd)2u?qq|cvtu?qq2"
                        r"|extract[if](32x8|64x2)|insert[if](32x8|64x2)|broadcast[if](32x2|32x8|64x2)|fpclass|range"
                        r"|reduce|pmov[dq]2m|pmovm2[dq]))")
_AVX512_BW = re.compile(r"^(kmov[dq]|kand[dq]|kor[dq]|kxor[dq]|knot[dq]|kortest[dq]|kunpck(wd|dq)|v(permw|pmov[bw]2m"
                        r"|pmovm2[bw]|movdqu(8|16)|dbpsadbw|pblendm[bw]|pcmpu?[bw]|pmov(s|us)?wb))")
_AVX512_CD = re.compile(r"^v(pconflict|plzcnt|pbroadcastm)")
_AVX2_ANY = re.compile(r"^v(permps|permpd|permd|permq|perm2i128|inserti128|extracti128|broadcasti128|pbroadcast"
                       r"|p?gather|pmaskmov|psllv|psrlv|psrav|pblendd)")
_FMA = re.compile(r"^vf(n)?m(add|sub)(sub|add)?\d{3}")
_SCALAR = {  # (mnemonic prefix, feature) for general-purpose and legacy-SSE instructions
    "shlx": "bmi2", "shrx": "bmi2", "sarx": "bmi2", "rorx": "bmi2", "bzhi": "bmi2", "pdep": "bmi2",
    "pext": "bmi2", "mulx": "bmi2", "andn": "bmi", "bextr": "bmi", "blsi": "bmi", "blsr": "bmi",
    "blsmsk": "bmi", "tzcnt": "bmi", "lzcnt": "lzcnt", "popcnt": "popcnt", "movbe": "movbe",
    "vcvtph2ps": "f16c", "vcvtps2ph": "f16c",
}
_SSE41 = re.compile(r"^(round(ps|pd|ss|sd)|blendv?(ps|pd)|pblend(w|vb)|pmulld|pm(in|ax)(sd|ud|sb|uw)|ptest|pinsr[bdq]"
                    r"|pextr[bdq]|insertps|extractps|dpp[sd]|pmov[sz]x|pcmpeqq|packusdw|mpsadbw|phminposuw|movntdqa)$")
_SSE42 = re.compile(r"^(pcmpgtq|crc32[bwlq]?|pcmp[ei]str[im])$")
_SSSE3 = re.compile(r"^(pshufb|palignr|pabs[bwd]|ph(add|sub)(s?w|d)|pmaddubsw|pmulhrsw|psign[bwd])$")
_SSE3 = re.compile(r"^(h(add|sub)p[sd]|addsubp[sd]|movddup|movs[hl]dup|lddqu)$")


def _mnemonic(line: str) -> tuple[str, str] | None:
    """``(mnemonic, operands)`` of one line of AT&T assembly, or None for labels, directives and comments."""
    text = line.split("#", 1)[0].strip()
    if not text or text.startswith(".") or text.endswith(":"):
        return None
    parts = text.split(None, 1)
    while parts and parts[0] in ("lock", "rep", "repe", "repne", "{vex}", "{evex}", "notrack"):
        parts = parts[1].split(None, 1) if len(parts) > 1 else []
    if not parts:
        return None
    return parts[0].lower(), (parts[1] if len(parts) > 1 else "")


def code_features(assembly: str) -> frozenset[str]:
    """The instruction-set extensions (LLVM's names, from :data:`CHECKED`) that x86 assembly text (AT&T, as
    LLVM prints it) uses. SSE2 and below are the x86-64 baseline and never reported."""
    out: set[str] = set()
    for line in assembly.splitlines():
        got = _mnemonic(line)
        if got is None:
            continue
        mn, ops = got
        base = re.sub(r"[bwlq]$", "", mn) if not mn.startswith("v") else mn
        for prefix, feature in _SCALAR.items():
            if mn.startswith(prefix):
                out.add(feature)
        if not mn.startswith("v"):
            if _SSE41.match(mn):
                out.add("sse4.1")
            elif _SSE42.match(mn) or _SSE42.match(base):
                out.add("sse4.2")
            elif _SSSE3.match(mn):
                out.add("ssse3")
            elif _SSE3.match(mn):
                out.add("sse3")
            if mn.startswith("k") and re.search(r"%k\d", ops):  # opmask instructions
                out.add("avx512f")
                if _AVX512_DQ.match(mn):
                    out.add("avx512dq")
                if _AVX512_BW.match(mn):
                    out.add("avx512bw")
            continue
        if "mm" not in ops and not mn.startswith(("vcvtph2ps", "vcvtps2ph")):
            continue  # a v-mnemonic without vector operands (none that LLVM emits for us), or a VMX instruction
        out.add("avx")
        evex = bool(_AVX512_REG.search(ops)) or bool(_EVEX_ONLY.match(mn))
        if evex:
            out.add("avx512f")
            if "%zmm" not in ops and _XY.search(ops):
                out.add("avx512vl")
            if _AVX512_DQ.match(mn):
                out.add("avx512dq")
            if _AVX512_BW.match(mn):
                out.add("avx512bw")
            if _AVX512_CD.match(mn):
                out.add("avx512cd")
            if mn.startswith(("vpdpbusd", "vpdpwssd")):
                out.add("avx512vnni")
        if _FMA.match(mn):
            out.add("fma")
        if _AVX2_ANY.match(mn) or (mn in ("vbroadcastss", "vbroadcastsd") and _REG_SRC.match(ops)) or (
                mn.startswith("vp") and _YMM.search(ops)
                and not mn.startswith(("vpermil", "vperm2f128", "vptest"))):
            out.add("avx2")
    return frozenset(out & set(CHECKED))


#: /proc/cpuinfo's flag names where they differ from LLVM's
_CPUINFO_NAMES = {"pni": "sse3", "sse4_1": "sse4.1", "sse4_2": "sse4.2", "bmi1": "bmi", "abm": "lzcnt",
                  "avx512_vnni": "avx512vnni"}


def _cpuinfo_features() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return frozenset(_CPUINFO_NAMES.get(x, x) for x in flags)
    except OSError:
        pass
    return frozenset()


@functools.cache
def host_features() -> frozenset[str]:
    """This machine's instruction-set extensions in LLVM's names: as LLVM detects them where llvmlite is
    installed, else from ``/proc/cpuinfo`` (a deployed library needs no llvmlite)."""
    try:
        return frozenset(f[1:] for f in host_cpu_features().split(",") if f.startswith("+"))
    except ImportError:  # llvmlite is not installed (target.py imports it on first use only)
        return _cpuinfo_features()


def host_cpu() -> str:
    """A name of this machine's CPU for messages: LLVM's where llvmlite is installed, else the OS's."""
    try:
        return host_cpu_name()
    except ImportError:
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "this CPU"


def missing_features(required: Iterable[str]) -> list[str]:
    """The features of ``required`` this machine lacks, in :data:`CHECKED` order."""
    have = host_features()
    req = set(required)
    return [f for f in CHECKED if f in req and f not in have]


def check_runs_here(required: Iterable[str], cpu: str, what: str) -> None:
    """Raise :class:`UnsupportedCPUError` when this machine lacks a feature of ``required``; ``cpu`` names the
    CPU the code was built for and ``what`` the code (a library's path, a kernel's name)."""
    missing = missing_features(required)
    if missing:
        raise UnsupportedCPUError(
            f"{what} was built for {cpu} and uses {', '.join(missing)}, which this CPU ({host_cpu()}) lacks; "
            "running it would crash the process with an illegal instruction. Build it for this host "
            "(target 'llvm') or for a baseline every machine it goes to has, such as 'llvm -mcpu=x86-64-v3' "
            "(AVX2)")


def target_features(target: object) -> frozenset[str]:
    """The extensions that vector code built for an ``llvm`` target uses (LLVM's assembly of a wide vector
    multiply and an FMA for the target's CPU and features): whether this machine can run what it builds."""
    t = Target(target)  # type: ignore[arg-type]
    return code_features(probe_assembly(t.mcpu, t.mattr))


def host_runs(target: object) -> bool:
    """Whether this machine can run code built for ``target`` (an ``llvm`` target string or Target)."""
    return not missing_features(target_features(target))
