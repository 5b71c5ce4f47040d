"""The one helper for tests that build for a named CPU (``llvm -mcpu=skylake-avx512``): build and inspect the
code anywhere, call it only where this machine has the instruction-set extensions it uses.

``host_runs(target)`` says whether it may be called here; ``skip_unless_host_runs(target)`` skips a test that
has nothing to check without running the code, naming what this CPU lacks. tests/test_isa.py fails for a test
that names a CPU, builds or runs code, and uses neither (or is not marked ``compile_only``).
"""

from __future__ import annotations

import pytest

from autosched.isa import host_cpu, host_runs, missing_features, target_features
from autosched.target import Target

__all__ = ["host_runs", "skip_if_the_host_build_is_this_isa", "skip_unless_host_runs"]


def skip_unless_host_runs(target: str) -> None:
    """Skip the calling test, with the reason, when this machine cannot run code built for ``target``."""
    if not host_runs(target):
        lacks = ", ".join(missing_features(target_features(target)))
        pytest.skip(f"this CPU ({host_cpu()}) lacks {lacks}, which code built for {target!r} uses")


def skip_if_the_host_build_is_this_isa(target: str) -> None:
    """Skip a test's second build, for ``target``, where this machine's own build (``llvm``) has the same vector
    ISA (an AVX2 host and ``-mcpu=haswell``): the schedules, which read the vector width, the registers and FMA,
    would be the same, and the test would check one program twice."""
    host, other = Target("llvm").cpu, Target(target).cpu
    if (host.isa, host.vector_bytes, host.vector_registers, host.fma) == (
            other.isa, other.vector_bytes, other.vector_registers, other.fma):
        pytest.skip(f"this CPU's own build ({host_cpu()}: {host.isa}) already has the vector ISA of {target!r}")

#: the target a GPU kernel's grid is built for when the tests run it on this CPU (``serialize_bindings``): only
#: its result matters, and LLVM's -O3 spent a second or more on each kernel's lockstep code
SERIAL_CPU = "llvm -opt-level=0"
