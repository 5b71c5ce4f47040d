"""``build_many`` (a model's kernels): one compile unit per kernel, generated and compiled to object code in
chunks, by worker processes when the kernels are many (``AUTOSCHED_BUILD_JOBS``, else every core), loaded
into one JIT engine, and exported as the same objects."""

from __future__ import annotations

import gc
import re
import sys

import numpy as np
import pytest

from _malloc import malloc_in_use
from autosched import te
from autosched.codegen import build as codegen_build
from autosched.codegen import objcompile, units
from autosched.errors import ScheduleError
from autosched.runtime.module import load_module
from autosched.target import Target
from autosched.tir.lower import lower


def _kernels(count: int, n: int = 4096) -> list:
    """``count`` different kernels out[i] = A[i] * k + B[i] (the odd ones parallel, with unrolled bodies that
    make their IR big), as PrimFuncs named ``k0``, ``k1``, ..."""
    funcs = []
    for k in range(count):
        A = te.placeholder((n,), name="A")
        B = te.placeholder((n,), name="B")
        C = te.compute((n,), lambda i, k=k: A[i] * float(k + 1) + B[i], name="C")
        s = te.create_schedule(C.op)
        outer, inner = s[C].split(C.op.axis[0], factor=64)
        s[C].unroll(inner)
        if k % 2:
            s[C].parallel(outer)
        funcs.append(lower(s, [A, B, C], name=f"k{k}"))
    return funcs


def _check(mod, count: int, n: int = 4096) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
    for k in range(count):
        c = np.zeros(n, "float32")
        mod[f"k{k}"](a, b, c)
        np.testing.assert_allclose(c, a * (k + 1) + b, rtol=1e-6, atol=1e-6)  # (fused multiply-adds)


def test_kernels_compile_in_worker_processes_and_run_as_one_module(monkeypatch, tmp_path):
    """With two workers allowed and kernels over the threshold, the chunks are generated and compiled in two
    processes; the module runs every kernel right, sets its parallel loops' thread count, and exports to a
    library that does too (with the CPU record a library carries)."""
    monkeypatch.setenv(objcompile.JOBS_ENV, "2")
    monkeypatch.setattr(units, "PARALLEL_MIN_BYTES", 1)
    funcs = _kernels(6)
    mod = codegen_build.build_many(funcs, "llvm")
    assert mod.compile_groups == 2 and len(mod.objects) == units.CHUNKS_PER_JOB * 2
    _check(mod, 6)
    assert mod.num_threads_address
    mod.set_num_threads(1)
    mod.set_num_threads(1)
    _check(mod, 6)
    text = mod.get_source()
    parts = len(mod.objects) + 1
    assert text.startswith(f"; compile unit 1 of {parts}") and "define" in text and "__autosched_metadata" in text
    assert f"compile unit {parts} of {parts}" in mod.get_source("asm")
    assert mod.get_source("ll-unopt").startswith('; compile unit 1 of 7\n; ModuleID = "k0"')  # kernel by kernel
    mod.export_library(tmp_path / "units.so")
    lib = load_module(tmp_path / "units.so")
    assert lib.cpu == Target("llvm").mcpu
    _check(lib, 6)


def test_one_job_compiles_in_this_process(monkeypatch):
    monkeypatch.setenv(objcompile.JOBS_ENV, "1")
    monkeypatch.setattr(units, "PARALLEL_MIN_BYTES", 1)
    started = []
    monkeypatch.setattr(units, "WorkerProcess", lambda *a, **k: started.append(a))
    mod = codegen_build.build_many(_kernels(3), "llvm")
    assert mod.compile_groups == 1 and len(mod.objects) == 1 and not started
    _check(mod, 3)


@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_job_count_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv(objcompile.JOBS_ENV, value)
    with pytest.raises(ValueError, match=f"AUTOSCHED_BUILD_JOBS={value!r}"):
        codegen_build.build_many(_kernels(1), "llvm")


def test_a_kernel_that_fails_in_a_worker_fails_the_build_with_its_own_error(monkeypatch, caplog):
    """A kernel the code generator refuses (a GPU thread binding on a CPU target) fails in its worker; the
    build redoes that chunk here and raises the generator's own error, with its type and message."""
    monkeypatch.setenv(objcompile.JOBS_ENV, "2")
    monkeypatch.setattr(units, "PARALLEL_MIN_BYTES", 1)
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    funcs = _kernels(5) + [lower(s, [A, B], name="bound")]
    with caplog.at_level("WARNING", logger="autosched.codegen"), pytest.raises(ScheduleError, match="bound to"):
        codegen_build.build_many(funcs, "llvm")
    assert "failed in a build worker (ScheduleError" in caplog.text


def test_a_worker_that_cannot_run_leaves_the_compile_to_this_process(monkeypatch, caplog):
    """An interpreter that is not Python (an embedded or frozen one) or a worker that dies: the build warns
    once and compiles the chunks here, to the same working module."""
    monkeypatch.setenv(objcompile.JOBS_ENV, "2")
    monkeypatch.setattr(units, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with caplog.at_level("WARNING", logger="autosched.codegen"):
        mod = codegen_build.build_many(_kernels(3), "llvm")
    # (it fails as it starts, or before it says it is ready: either way the message names the interpreter)
    assert re.search(r"build_many: (cannot start a build worker|a build worker did not start) with /bin/false",
                     caplog.text) and "in this process instead" in caplog.text
    assert caplog.text.count("build_many:") == 1 and mod.compile_groups == 1
    _check(mod, 3)


def test_chunks_take_the_largest_kernels_first():
    assert units.chunks_of([5, 1, 4, 2, 3], 3) == [[0], [2], [4, 3], [1]]
    assert units.chunks_of([1, 1], 4) == [[0], [1]]  # never an empty chunk
    assert sorted(i for c in units.chunks_of(list(range(1, 30)), 6) for i in c) == list(range(29))


def test_the_units_kept_workspaces_are_freed_with_their_module(monkeypatch):
    """A unit's heap workspaces are freed when the module goes (the JIT does not run an object's static
    destructors: the module calls each unit's destructor itself). Counted by glibc's mallinfo2."""
    in_use = malloc_in_use()
    if in_use is None:
        pytest.skip("this C library has no mallinfo2 (glibc >= 2.33)")

    monkeypatch.setenv(objcompile.JOBS_ENV, "2")
    monkeypatch.setattr(units, "PARALLEL_MIN_BYTES", 1)
    n = 1 << 21  # 8 MiB of float32: a heap workspace the module keeps
    funcs = []
    for k in range(2):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
        C = te.compute((n,), lambda i, k=k: B[i] * float(k + 2), name="C")
        funcs.append(lower(te.create_schedule(C.op), [A, C], name=f"w{k}"))
    gc.collect()
    before = in_use()
    mod = codegen_build.build_many(funcs, "llvm")
    a = np.ones(n, "float32")
    for k in range(2):
        c = np.zeros(n, "float32")
        mod[f"w{k}"](a, c)
        assert c[-1] == 2.0 * (k + 2)
    del c
    held = in_use() - before - a.nbytes
    assert held > 2 * 8 * 2**20, f"{held / 2**20:.0f} MiB held by a module with two 8 MiB workspaces"
    del mod
    gc.collect()
    left = in_use() - before - a.nbytes
    assert left < 8 * 2**20, f"{left / 2**20:.0f} MiB still held after the module went"
