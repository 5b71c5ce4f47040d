"""Expert CPU schedules, explicit SIMD paths, threads and targets."""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys

import numpy as np
import pytest

import autosched
from _cpus import host_runs
from _malloc import malloc_in_use
from autosched import te
from autosched.codegen import build as codegen_build
from autosched.target import Target
from autosched.tir.arith import simplify
from autosched.workloads.reference import get_reference
from autosched.workloads.tile_sizes import TRANSPOSE_RUN

SMALL = [
    ("matmul", dict(M=64, N=96, K=40)),
    ("matmul", dict(M=30, N=50, K=7)),
    ("batch_matmul", dict(B=3, M=20, N=48, K=16)),
    ("dense", dict(N=2, CI=40, CO=50, relu=True)),
    ("dense", dict(N=1, CI=64, CO=37, bias=False)),
    ("conv2d", dict(H=14, W=14, CI=8, CO=16)),
    ("conv2d", dict(H=15, W=15, CI=4, CO=8, stride=2)),
    ("conv2d", dict(H=14, W=14, CI=8, CO=32, layout="NHWC")),
    ("depthwise_conv2d", dict(C=8, H=13, W=13)),
    ("pool2d", dict(C=4, H=15, W=15)),
    ("pool2d", dict(C=4, H=15, W=15, pool_type="avg")),
    ("softmax", dict(M=7, N=50)),
    ("elementwise", dict(C=3, H=9, W=11)),
    ("elementwise", dict(C=2, H=5, W=7, op="sigmoid_mul")),
]


def _run(task: autosched.Task, sch, args, seed: int = 0):
    rng = np.random.default_rng(seed)
    f = autosched.build(sch, args)
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype(t.dtype) for t in args[:-1]]
    out = np.zeros([int(d) for d in args[-1].shape], args[-1].dtype)
    f(*ins, out)
    return out, get_reference(task.name)(ins, **task.args)


@pytest.mark.parametrize("name,args", SMALL, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SMALL)])
def test_expert_schedule_matches_numpy(name, args):
    task = autosched.Task(name, args)
    sch, targs = task.default_schedule()
    assert len(sch.trace) > 0, "every built-in workload has an expert CPU schedule"
    out, ref = _run(task, sch, targs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_expert_schedule_is_a_replayable_trace():
    task = autosched.Task("conv2d", dict(H=14, W=14, CI=8, CO=16))
    sch, _ = task.default_schedule()
    sch2, args2 = task.apply(sch.trace.to_json())
    assert str(autosched.lower(sch2, args2)) == str(autosched.lower(sch, task.tensors()))


def _vec_add(n, factor):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * 2.0 + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=factor)
    s[C].vectorize(xi)
    return s, [A, B, C]


@pytest.mark.parametrize("n,factor", [(50, 16), (64, 16), (7, 16), (1000, 100), (33, 33)])
def test_vector_tails_are_masked_not_overrun(n, factor):
    s, args = _vec_add(n, factor)
    f = autosched.build(s, args)
    # guard bands around the arrays: a write past the end would change them
    a = np.arange(n + 32, dtype="float32")[:n]
    b = np.ones(n, "float32")
    backing = np.full(n + 32, -7.0, "float32")
    c = backing[:n]
    f(a, b, c)
    np.testing.assert_allclose(c, a * 2 + b)
    assert (backing[n:] == -7.0).all()


def test_vectorized_gather_and_select():
    """Strided reads (gathers) and padding (per-lane masks) in one vectorized loop."""
    A = te.placeholder((40,), name="A")
    C = te.compute((18,), lambda i: te.if_then_else(i >= 2, A[i * 2 - 4], 0.0) + A[39 - i], name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[0])
    f = autosched.build(s, [A, C])
    a = np.random.default_rng(1).standard_normal(40).astype("float32")
    c = np.zeros(18, "float32")
    f(a, c)
    ref = np.array([(a[i * 2 - 4] if i >= 2 else 0.0) + a[39 - i] for i in range(18)], "float32")
    np.testing.assert_allclose(c, ref, rtol=1e-6)


def test_vectorized_select_between_loads_keeps_the_false_branch():
    """Both branches of a select are loads (a concatenation along the vectorized axis): the false branch's loads
    run under the negated condition, not under the condition and its negation (which read nothing: zeros)."""
    A = te.placeholder((2, 3), name="A")
    B = te.placeholder((2, 4), name="B")
    C = te.compute((2, 7), lambda i, j: te.if_then_else(j >= 3, B[i, j - 3], A[i, j]), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    f = autosched.build(s, [A, B, C])
    a = np.random.default_rng(2).standard_normal((2, 3)).astype("float32")
    b = np.random.default_rng(3).standard_normal((2, 4)).astype("float32")
    c = np.zeros((2, 7), "float32")
    f(a, b, c)
    np.testing.assert_array_equal(c, np.concatenate([a, b], axis=1))


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_float_min_max_propagate_nan_from_either_side_in_vectors_and_reductions(target):
    """max and min of floats give NaN when either operand is NaN (numpy's maximum and max), element by element
    and in a vectorized reduction (accumulators, then the lanes halved), in a few instructions: llvm.maximum
    with ``nsz``, since ordering -0 below +0 cost x86 a longer chain per reduction step."""
    n = 61
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    k = te.reduce_axis((0, n), "k")
    kernels = {"max": te.compute((n,), lambda i: te.max(A[i], B[i]), name="C"),
               "min": te.compute((n,), lambda i: te.min(A[i], B[i]), name="C"),
               "rmax": te.compute((1,), lambda _: te.max(A[k], axis=k), name="C"),
               "rmin": te.compute((1,), lambda _: te.min(A[k], axis=k), name="C")}
    rng = np.random.default_rng(7)
    for name, C in kernels.items():
        s = te.create_schedule(C.op)
        if name.startswith("r"):
            s[C].vectorize(k)
            args = [A, C]
        else:
            _, xi = s[C].split(C.op.axis[0], factor=16)
            s[C].vectorize(xi)
            args = [A, B, C]
        f = autosched.build(s, args, target=target)
        calls = re.findall(r"call (.*)@\"llvm\.(?:maximum|minimum)\.", f.get_source("ll-unopt"))
        assert not f.unhonoured and calls and all("nsz" in c for c in calls), calls
        if not host_runs(target):  # compiled and inspected only: this CPU lacks the target's extensions
            continue
        for nan_at in ([], [3], [60], [0, 33]):  # none, in a whole vector, in the partial last one, several
            a, b = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
            a[nan_at] = np.nan
            b[[5, 40]] = np.nan  # NaN on the other side (element-wise kernels)
            out = np.zeros(C.shape[0], "float32")
            f(*([a, out] if name.startswith("r") else [a, b, out]))
            ref = {"max": np.maximum(a, b), "min": np.minimum(a, b), "rmax": [np.max(a)], "rmin": [np.min(a)]}[name]
            np.testing.assert_array_equal(out, np.asarray(ref, "float32"), err_msg=f"{name} NaN at {nan_at}")


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_lane_dependent_division_of_small_indices_runs_in_int32_lanes(target):
    """``//`` and ``%`` by a constant of an index that moves with the lane (a transposing copy whose rows the
    vector does not divide) run in int32 lanes when the loops' bounds keep the dividend within int32: x86
    divides int64 lanes one at a time (an LSTM model's transposing concatenation: 39 -> 4 us on Emerald
    Rapids). A dividend that may pass 2^31 stays int64, and both give numpy's floor semantics, negatives
    included."""
    n = 2304
    A = te.placeholder((n,), name="A")
    kernels = {  # (kernel, int32 lanes expected)
        "small": (te.compute((n,), lambda i: A[(i % 36) * 64 + i // 36], name="B"), True),
        "negative": (te.compute((n,), lambda i: A[(i - 1000) % 36 * 63 + (i - 1000) // 36 + 28], name="B"), True),
        "large": (te.compute((n,), lambda i: A[(i * (1 << 22) + i) % 37 * 62], name="B"), False),
    }
    a = np.random.default_rng(3).standard_normal(n).astype("float32")
    i = np.arange(n)
    want = {"small": a[(i % 36) * 64 + i // 36], "negative": a[(i - 1000) % 36 * 63 + (i - 1000) // 36 + 28],
            "large": a[(i * (1 << 22) + i) % 37 * 62]}
    for name, (B, narrow) in kernels.items():
        s = te.create_schedule(B.op)
        _, xi = s[B].split(B.op.axis[0], factor=16)
        s[B].vectorize(xi)
        f = autosched.build(s, [A, B], target=target)
        ir = f.get_source("ll-unopt")
        assert bool(re.search(r"(sdiv|srem) <\d+ x i32>", ir)) == narrow, name
        assert bool(re.search(r"(sdiv|srem) <\d+ x i64>", ir)) != narrow, name
        if host_runs(target):
            b = np.zeros(n, "float32")
            f(a, b)
            np.testing.assert_array_equal(b, want[name], err_msg=name)


def _every_op(dtype: str, vectorize: bool):
    """One loop over an expression of every operator and math function, vectorized or scalar."""
    n = 37
    A = te.placeholder((n,), dtype, name="A")
    B = te.placeholder((n,), dtype, name="B")
    J = te.placeholder((n,), "int32", name="J")

    def f(i):
        x, y, j = A[i], B[i], J[i]
        v = te.exp(x) + te.tanh(y) + te.sqrt(te.abs(x)) + te.max(x, y) - te.min(x, y) * te.log(te.abs(y) + 1.0)
        v = v + te.if_then_else(x > y, x, y) + te.if_then_else(te.all(x < 0.5, y != 0.25), 1.0, 2.0)
        v = v + ((j // 3) + (j % 5) + (j // 4) + (j % 8) - te.max(j, 2) * te.min(j, -1)).astype(dtype)
        return v + te.floor(x) + te.power(te.abs(y) + 1.0, x) + te.sigmoid(x) + x / (te.abs(y) + 1.0)

    C = te.compute((n,), f, name="C")
    s = te.create_schedule(C.op)
    if vectorize:
        _, xi = s[C].split(C.op.axis[0], factor=16)
        s[C].vectorize(xi)
    return autosched.build(s, [A, B, J, C])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_op_gives_the_same_values_vectorized_and_scalar(dtype):
    """Operators and math functions are emitted by one code path for scalars and vectors (codegen/ops.py): a
    vectorized loop agrees with the scalar loop and with numpy (float32 exp of a vector is a polynomial within
    about 1 ulp, libm's elsewhere)."""
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(37) * 3).astype(dtype), (rng.standard_normal(37) * 3).astype(dtype)
    j = rng.integers(-50, 50, 37).astype("int32")
    outs = []
    for vec in (True, False):
        f = _every_op(dtype, vec)
        assert not f.unhonoured
        c = np.zeros(37, dtype)
        f(a, b, j, c)
        outs.append(c)
    ref = (np.exp(a) + np.tanh(b) + np.sqrt(np.abs(a)) + np.maximum(a, b) - np.minimum(a, b) * np.log(np.abs(b) + 1)
           + np.where(a > b, a, b) + np.where((a < 0.5) & (b != 0.25), 1.0, 2.0)
           + (j // 3 + j % 5 + j // 4 + j % 8 - np.maximum(j, 2) * np.minimum(j, -1)).astype(dtype)
           + np.floor(a) + np.power(np.abs(b) + 1, a) + 1 / (1 + np.exp(-a.astype("float64"))) + a / (np.abs(b) + 1))
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(outs[0], outs[1], rtol=rtol)
    np.testing.assert_allclose(outs[1], ref, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
@pytest.mark.parametrize("fn", ["exp", "tanh", "erf"])
def test_float32_math_of_vectors_is_inline_and_accurate(fn, target):
    """float32 exp, tanh and erf of a vector are emitted inline (a polynomial or rational approximation in
    fused multiply-adds, no libm call per lane: a GELU's erf took 6 ns an element), within 5e-7 of the exact
    value relative to it (erf near 0 included), at the special values too: +-0, +-inf, NaN, past the clamps."""
    import math

    n = 1 << 16
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-6, 6, n - 4096), np.geomspace(1e-30, 1e-2, 2048), -np.geomspace(1e-20, 20, 2048)])
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 100.0, -100.0, -3.4e38, 0.625, -0.625, 3.9999, 4.0, 4.5, 9.0, 88.0,
               88.5, 88.7, -87.0, -88.0]
    x = np.concatenate([x, special]).astype("float32")
    A = te.placeholder((len(x),), "float32", name="A")
    B = te.compute(A.shape, lambda i: getattr(te, fn)(A[i]), name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(xi)
    f = autosched.build(s, [A, B], target=target)
    ir = f.get_source()
    assert not any(f"@{name}(" in ir for name in ("expf", "tanhf", "erff")), "a libm call per lane"
    # AVX-512 scales exp's 2^n by vscalefps (tanh calls exp); other targets build 2^n from its bits
    assert ("scalef" in ir) == (fn != "erf" and "avx512" in target)
    if not host_runs(target):  # compiled and inspected only: this CPU lacks the target's extensions
        return
    y = np.zeros_like(x)
    f(x, y)
    with np.errstate(over="ignore"):
        exact = {"exp": np.exp, "tanh": np.tanh, "erf": np.vectorize(math.erf)}[fn](x.astype("float64"))
    finite = np.isfinite(exact) & (np.abs(exact) > 1e-37) & (exact < 3e38)
    rel = np.abs(y[finite] - exact[finite]) / np.abs(exact[finite])
    assert rel.max() < 5e-7, (fn, x[finite][rel.argmax()], rel.max())
    tail = y[-len(special):]
    want = {"exp": [1, 1, np.inf, 0, np.nan, np.inf, 0, 0], "tanh": [0, -0.0, 1, -1, np.nan, 1, -1, -1],
            "erf": [0, -0.0, 1, -1, np.nan, 1, -1, -1]}[fn]  # past the clamps: overflow inf, underflow 0
    np.testing.assert_array_equal(tail[:8], np.array(want, "float32"))
    assert np.signbit(tail[1]) == (fn != "exp")  # an odd function keeps -0's sign


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_float32_log_of_vectors_is_inline_and_accurate(target):
    """float32 log of a vector is inline too (softplus and Mish took a libm call per element): within 5e-7 of
    the exact value relative to it over all of float32's positive range, subnormals and values near 1 included,
    and exact at the special values (0 and -0 give -inf, inf inf, negatives and NaN NaN)."""
    rng = np.random.default_rng(1)
    x = np.concatenate([np.geomspace(1e-45, 3.4e38, 1 << 14), rng.uniform(0.5, 2.0, 1 << 14),
                        1 + rng.uniform(-1e-3, 1e-3, 4096)])
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0]
    x = np.concatenate([x, special]).astype("float32")
    A = te.placeholder((len(x),), "float32", name="A")
    B = te.compute(A.shape, lambda i: te.log(A[i]), name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(xi)
    f = autosched.build(s, [A, B], target=target)
    assert "@logf(" not in f.get_source() and "@llvm.log." not in f.get_source(), "a libm call per lane"
    if not host_runs(target):  # compiled and inspected only: this CPU lacks the target's extensions
        return
    y = np.zeros_like(x)
    f(x, y)
    with np.errstate(all="ignore"):
        exact = np.log(x.astype("float64"))
    finite = np.isfinite(exact) & (np.abs(exact) > 1e-30)
    rel = np.abs(y[finite] - exact[finite]) / np.abs(exact[finite])
    assert rel.max() < 5e-7, (x[finite][rel.argmax()], rel.max())
    np.testing.assert_array_equal(y[-len(special):], np.array([-np.inf, -np.inf, np.inf, np.nan, np.nan, np.nan, 0],
                                                              "float32"))


@pytest.mark.parametrize("vectorize", [False, True])
def test_a_libm_function_of_float16_is_refused_vectorized_or_not(vectorize):
    """tanh has no float16 libm function: both loops say so (a vectorized one used to call the float64 tanh with
    half-precision lanes and return wrong values)."""
    A = te.placeholder((32,), "float16", name="A")
    B = te.compute((32,), lambda i: te.tanh(A[i]), name="B")
    s = te.create_schedule(B.op)
    if vectorize:
        s[B].vectorize(B.op.axis[0])
    with pytest.raises(autosched.CodegenError, match="tanh is not available for float16"):
        autosched.build(s, [A, B])


def test_nested_parallel_is_refused():
    A = te.placeholder((8, 8), name="A")
    C = te.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    s[C].parallel(C.op.axis[1])
    with pytest.raises(autosched.ScheduleError, match="nested parallel"):
        autosched.build(s, [A, C])


def test_target_strings():
    t = Target("llvm -mcpu=skylake-avx512 -num-cores=2")
    assert t.kind == "llvm" and t.mcpu == "skylake-avx512" and t.num_cores == 2
    assert str(Target(str(t))) == str(t)
    assert Target("llvm").key.startswith("llvm -mcpu=")
    for bad in ("", "opencl", "llvm -num-cores=0", "llvm mcpu", "llvm -foo=1"):
        with pytest.raises(ValueError):
            Target(bad)


def test_num_threads_env_and_target(tmp_path):
    """A parallel kernel gives the same answer on 1 thread (env) and on the target's -num-cores."""
    task = autosched.Task("matmul", dict(M=64, N=64, K=32))
    sch, args = task.default_schedule()
    mod = autosched.build(sch, args, target="llvm -num-cores=1")
    mod.export_library(tmp_path / "mm.so")
    code = (
        "import numpy as np, autosched\n"
        f"g = autosched.runtime.load_module({str(tmp_path / 'mm.so')!r})\n"
        "a = np.ones((64, 32), 'float32'); b = np.ones((32, 64), 'float32'); c = np.zeros((64, 64), 'float32')\n"
        "g(a, b, c); assert (c == 32).all(); print('threads ok')\n"
    )
    for env in ({"AUTOSCHED_NUM_THREADS": "1"}, {"AUTOSCHED_NUM_THREADS": "2"}, {}):
        import os

        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, **env}, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "threads ok" in res.stdout
    with pytest.raises(ValueError):
        mod.set_num_threads(-1)


def test_compile_cache_reuses_identical_kernels():
    s, args = _vec_add(64, 16)
    f = autosched.build(s, args)
    s2, args2 = _vec_add(64, 16)
    g = autosched.build(s2, args2)
    assert f is g
    assert f.compile_seconds > 0


def test_two_builds_of_a_parallel_kernel_keep_their_own_thread_counts():
    """set_num_threads on one build of a parallel kernel leaves another build of the same loops as it was."""
    task = autosched.Task("matmul", dict(M=64, N=64, K=32))
    f = autosched.build(*task.default_schedule())
    g = autosched.build(*task.default_schedule())
    assert f is not g and f.num_threads_address and g.num_threads_address
    before = ctypes.c_int32.from_address(g.num_threads_address).value
    f.set_num_threads(1)
    g.set_num_threads(before + 2)
    assert ctypes.c_int32.from_address(f.num_threads_address).value == 1
    assert ctypes.c_int32.from_address(g.num_threads_address).value == before + 2
    a, b = np.ones((64, 32), "float32"), np.ones((32, 64), "float32")
    for mod in (f, g):
        c = np.zeros((64, 64), "float32")
        mod(a, b, c)
        assert (c == 32).all()


def _const_operand_instructions(ir_text: str) -> list[str]:
    """Integer arithmetic on two literal constants in LLVM IR text (what a constant folder leaves out)."""
    pat = re.compile(r"= (add|sub|mul|sdiv|srem|and|ashr|icmp \w+)( nsw)? i(1|32|64) -?\d+, -?\d+$")
    return [line for line in ir_text.splitlines() if pat.search(line.strip())]


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_unrolled_copies_share_their_index_arithmetic(target):
    """A register-blocked matmul with padding-like guards, unrolled: each copy adds a constant offset to an index
    emitted once, with nothing computed on two constants, guards decided by the unrolled loops emit no branch,
    and the kernel still matches numpy."""
    M, N, K = 24, 40, 20
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((M, N), lambda i, j: te.if_then_else(i % 8 < 6, C[i, j], 0.0), name="D")
    s = te.create_schedule(D.op)
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=4)
    jo, ji = s[C].split(j, factor=8)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ki, ii, ji)
    s[C].unroll(ki)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    di, dj = s[D].op.axis
    dio, dii = s[D].split(di, factor=8)
    s[D].unroll(dii)
    f = autosched.build(s, [A, B, D], target=target)
    text = f.get_source("ll-unopt")
    assert not _const_operand_instructions(text)
    assert "_then" not in text  # the guard i % 8 < 6 is known in every unrolled copy: no branch
    if not host_runs(target):  # compiled and inspected only: this CPU lacks the target's extensions
        return
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K)).astype("float32"), rng.standard_normal((K, N)).astype("float32")
    d = np.zeros((M, N), "float32")
    f(a, b, d)
    ref = a @ b
    ref[np.arange(M) % 8 >= 6] = 0.0
    np.testing.assert_allclose(d, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_padding_guards_mask_only_the_edge_chunks(target):
    """A convolution row with its padding inlined, the row two native vectors wide and the taps unrolled: the
    guard is decided for each chunk and tap where it is emitted, so only the two edge copies (first chunk and
    tap, last chunk and tap) use masked loads, with no run-time test for a full vector or for the accumulator's
    bounds (its row loop's range keeps it inside), and the result matches numpy."""
    lanes = Target(target).cpu.lanes("float32")
    C, F, W = 8, 8, 2 * lanes
    data = te.placeholder((C, W), name="data")
    weight = te.placeholder((F, C, 3), name="weight")
    pad = te.compute((C, W + 2), lambda c, x: te.if_then_else(te.all(x >= 1, x < W + 1), data[c, x - 1], 0.0),
                     name="pad")
    c = te.reduce_axis((0, C), name="c")
    r = te.reduce_axis((0, 3), name="r")
    out = te.compute((F, W), lambda f, x: te.sum(pad[c, x + r] * weight[f, c, r], axis=[c, r]), name="out")
    s = te.create_schedule(out.op)
    s[pad].compute_inline()
    acc = s.cache_write(out, "local")
    fo, _ = s[out].split(s[out].op.axis[0], factor=4)
    s[acc].compute_at(s[out], fo)
    af, ax = s[acc].op.axis
    ac, ar = s[acc].op.reduce_axis
    s[acc].reorder(ac, af, ar, ax)
    s[acc].unroll(ar)
    s[acc].vectorize(ax)
    s[out].vectorize(s[out].op.axis[1])
    f = autosched.build(s, [data, weight, out], target=target)
    text = f.get_source("ll-unopt")
    assert len(re.findall(r"call .*@\"llvm\.masked\.load", text)) == 2
    assert "vfull" not in text and "vstack" not in text
    if not host_runs(target):  # compiled and inspected only: this CPU lacks the target's extensions
        return
    rng = np.random.default_rng(0)
    d, w = rng.standard_normal((C, W)).astype("float32"), rng.standard_normal((F, C, 3)).astype("float32")
    o = np.zeros((F, W), "float32")
    f(d, w, o)
    p = np.pad(d, ((0, 0), (1, 1)))
    ref = sum(w[:, :, k] @ p[:, k:k + W] for k in range(3))
    np.testing.assert_allclose(o, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
@pytest.mark.parametrize("stride", [2, 3, 4, 5])
def test_strided_vector_loads_are_whole_vectors_and_a_shuffle(stride, target):
    """Lanes a small constant stride apart (a stride-2 convolution's input row) are read as contiguous vectors
    and one shuffle, not a gather: the last vector is masked past the last element used, so a buffer that
    ends there is not overrun. Beyond a stride of 4, a gather. The values match numpy either way."""
    lanes = Target(target).cpu.lanes("float32")
    n = 4 * lanes
    A = te.placeholder((stride * (n - 1) + 1,), "float32", name="A")  # ends at the last element read
    B = te.compute((n,), lambda i: A[i * stride] * 2.0, name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=lanes)
    s[B].vectorize(xi)
    f = autosched.build(s, [A, B], target=target)
    text = f.get_source("ll-unopt")
    assert ("llvm.masked.gather" in text) == (stride > 4)
    if stride <= 4:
        assert len(re.findall(r"call .*@\"?llvm\.masked\.load", text)) == 1
    if not host_runs(target):  # compiled and inspected only: this CPU lacks the target's extensions
        return
    a = np.random.default_rng(stride).standard_normal(A.shape[0]).astype("float32")
    b = np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a[::stride] * 2)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
@pytest.mark.parametrize("args", [dict(H=224, W=224, CI=3, CO=64, KH=7, KW=7, stride=2, padding=3),
                                  dict(H=28, W=28, CI=32, CO=64, KH=1, KW=1, stride=2, padding=0)],
                         ids=["stem7x7s2", "1x1s2"])
def test_direct_strided_conv2d_reads_rows_without_gathers(args, target):
    """The direct NCHW schedule of a stride-2 convolution (a ResNet stem, a 1x1 downsampling; the default on
    AVX-512) reads its input rows as whole vectors and shuffles, built for AVX2 and AVX-512, and matches numpy
    where the host runs it."""
    task = autosched.Task("conv2d", args, target)
    space = task.space("template")
    sch, tensors = task.apply(space.generate({"layout": "direct"})[0])
    f = autosched.build(sch, tensors, target=target)
    assert "llvm.masked.gather" not in f.get_source("ll-unopt")
    if not host_runs(target):  # compiled and inspected only: this CPU lacks the target's extensions
        return
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors[:-1]]
    out = np.zeros([int(d) for d in tensors[-1].shape], "float32")
    f(*ins, out)
    np.testing.assert_allclose(out, get_reference("conv2d")(ins, **task.args), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
@pytest.mark.parametrize("args", [dict(H=14, W=14, CI=32, CO=48), dict(H=14, W=14, CI=4, CO=16),
                                  dict(H=28, W=28, CI=3, CO=16, KH=7, KW=7, stride=2, padding=3),
                                  dict(H=16, W=16, CI=24, CO=32, KH=1, KW=1, stride=2, padding=0)],
                         ids=["3x3", "3x3_block4", "stem7x7s2", "1x1s2"])
def test_default_nchw_conv2d_form_follows_the_target(args, target):
    """The default NCHW convolution is computed in blocked layouts (input and weights given blocked layouts by
    ``transform_layout`` and copied by in-register transposes, the output cached NCHW[x]c and copied back the
    same way), except a strided one on AVX-512, computed directly; the template space holds both forms (its
    ``layout`` knob); both match numpy where the host runs them."""
    form = "direct" if args.get("stride", 1) > 1 and "avx512" in target else "packed"
    task = autosched.Task("conv2d", args, target)
    sch, tensors = task.default_schedule()
    assert any(step.kind == "transform_layout" for step in sch.trace) == (form == "packed")
    space = task.space("template")
    assert space.knobs[0].name == "layout" and set(space.knobs[0].candidates) == {"direct", "packed"}
    assert space.generate()[0] == task.default_trace()  # a point without choices takes the expert's defaults
    builds = [(sch, tensors), task.apply(space.generate({"layout": "direct" if form == "packed" else "packed"})[0])]
    if form == "packed" and args.get("KH", 3) == 3:  # the weights' copy too: runs of (i, h, w) transposed
        assert "masked.gather" not in autosched.build(sch, tensors, target=target).get_source("ll-unopt")
    if not host_runs(target):  # compiled only: this CPU lacks the target's extensions
        for b, t in builds:
            autosched.build(b, t, target=target)
        return
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors[:-1]]
    ref = get_reference("conv2d")(ins, **task.args)
    if form == "packed":  # the copies are transposes in registers, no scatters (widths here leave no tails)
        assert "masked.scatter" not in autosched.build(sch, tensors, target=target).get_source("ll-unopt")
    for b, t in builds:
        out = np.zeros([int(d) for d in tensors[-1].shape], "float32")
        autosched.build(b, t, target=target)(*ins, out)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_the_packed_conv2d_reads_its_padding_in_place_when_its_knob_says(target):
    """The packed NCHW convolution's ``pad`` knob: ``root`` copies the input padded into its blocked layout,
    ``inline`` copies it unpadded and the kernel reads it in place, the guards partitioned out of the interior
    (no work on the padding: 2% fewer FMAs on a 56-wide 3x3). Both match numpy where the host runs them."""
    task = autosched.Task("conv2d", dict(H=10, W=10, CI=16, CO=16), target)
    space = task.space("template")
    rng = np.random.default_rng(0)
    _, tensors = task.default_schedule()
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors[:-1]]
    for place in ("root", "inline"):
        sch, ts = task.apply(space.generate({"layout": "packed", "pad": place})[0])
        text = str(autosched.lower(sch, ts))
        assert ("allocate pad:" in text) == (place == "root"), place
        f = autosched.build(sch, ts, target=target)
        if host_runs(target):
            out = np.zeros([int(d) for d in ts[-1].shape], "float32")
            f(*ins, out)
            np.testing.assert_allclose(out, get_reference("conv2d")(ins, **task.args), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
@pytest.mark.parametrize("case", ["pack", "pack_wide", "unpack", "tail"])
def test_an_unrolled_copy_into_another_layout_is_a_transpose_in_registers(case, target):
    """An unrolled loop around a vectorized one whose store moves by 1 with the unrolled index and by S >= U
    with the lane: NCHW rows into NCHW[b]c pixels (``pack``, S = U; ``pack_wide``, more lanes than channels),
    or a block's pixels back into rows of its channels (``unpack``, S the plane size) is computed as vectors,
    transposed by shuffles and stored as runs, with no scatter. A row with a tail (``tail``) is transposed
    but for its last, guarded chunk. Every result matches numpy."""
    lanes = Target(target).cpu.lanes("float32")
    b = lanes // 2 if case == "pack_wide" else lanes
    run = TRANSPOSE_RUN  # pixels per transpose: a tile of b x 8 at most
    C, H, W = 2 * b, 3, 4 * run + (3 if case == "tail" else 0)
    if case == "unpack":
        A = te.placeholder((C // b, H, W, b), name="A")
        B = te.compute((C, H, W), lambda c, y, x: A[c // b, y, x, c % b] + 1.0, name="B")
        s = te.create_schedule(B.op)
        c, y, x = B.op.axis
        co, ci = s[B].split(c, factor=b)
        xo, xi = s[B].split(x, factor=run)
        s[B].reorder(co, y, xo, xi, ci)
        unrolled, lane = xi, ci
        ref = lambda a: a.transpose(0, 3, 1, 2).reshape(C, H, W) + 1  # noqa: E731
    else:
        A = te.placeholder((C, H, W), name="A")
        B = te.compute((C // b, H, W, b), lambda co, y, x, ci: A[co * b + ci, y, x] + 1.0, name="B")
        s = te.create_schedule(B.op)
        co, y, x, ci = B.op.axis
        xo, xi = s[B].split(x, factor=run)
        s[B].reorder(co, y, xo, ci, xi)
        unrolled, lane = ci, xi
        ref = lambda a: a.reshape(C // b, b, H, W).transpose(0, 2, 3, 1) + 1  # noqa: E731
    s[B].unroll(unrolled)
    s[B].vectorize(lane)
    f = autosched.build(s, [A, B], target=target)
    text = f.get_source("ll-unopt")
    assert ("masked.scatter" in text) == (case == "tail")
    assert len(re.findall(r"shufflevector", text)) >= run  # the transpose
    if not host_runs(target):  # compiled and inspected only: this CPU lacks the target's extensions
        return
    a = np.random.default_rng(0).standard_normal([int(d) for d in A.shape]).astype("float32")
    out = np.zeros([int(d) for d in B.shape], "float32")
    f(a, out)
    np.testing.assert_array_equal(out, ref(a))


def test_digits_of_a_fused_index_merge_back_into_it():
    """A loop fused over three or more dimensions, read back by its digits (``x // 9``, ``x // 3 % 3``,
    ``x % 3``), flattens to the plain index: the lower digits merge first (``x // 3 % 3 * 3 + x % 3`` is
    ``x % 9``), then the top one. Digits that do not line up stay as they are."""
    x, o = te.var("x"), te.var("o")
    assert str(simplify((x // 9) * 144 + (x // 3 % 3) * 48 + (x % 3) * 16 + o)) == str(x * 16 + o)
    assert str(simplify((x // 3 % 3) * 3 + x % 3)) == str(x % 9)
    assert str(simplify((x // 27) * 27 + (x // 9 % 3) * 9 + (x // 3 % 3) * 3 + x % 3)) == "x"
    kept = (x // 3 % 3) * 3 + x % 2
    assert str(simplify(kept)) == str(kept)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_a_window_weight_copy_into_blocks_is_a_transpose_in_registers(target):
    """OIHW weights copied to OI[b]iHW[b]o (the packed NCHW convolution's copy): a block's (i, h, w) is one run
    of the source and of the copy, so the loop fused over them, split into runs of 8 and vectorized inside an
    unrolled loop of output channels, is read as whole vectors and transposed in registers: no gather, no
    scatter. It matches numpy."""
    b = Target(target).cpu.lanes("float32")
    CO, CI = 2 * b, 2 * b
    W = te.placeholder((CO, CI, 3, 3), name="W")
    P = te.compute((CO // b, CI // b, b, 3, 3, b), lambda a, c, i, h, w, o: W[a * b + o, c * b + i, h, w], name="P")
    s = te.create_schedule(P.op)
    a, c, i, h, w, o = P.op.axis
    run, lane = s[P].split(s[P].fuse(i, h, w), factor=TRANSPOSE_RUN)
    s[P].reorder(a, c, run, o, lane)
    s[P].unroll(o)
    s[P].vectorize(lane)
    f = autosched.build(s, [W, P], target=target)
    text = f.get_source("ll-unopt")
    assert "masked.gather" not in text and "masked.scatter" not in text
    if not host_runs(target):
        return
    wt = np.random.default_rng(0).standard_normal((CO, CI, 3, 3)).astype("float32")
    out = np.zeros([int(d) for d in P.shape], "float32")
    f(wt, out)
    np.testing.assert_array_equal(out, wt.reshape(CO // b, b, CI // b, b, 3, 3).transpose(0, 2, 3, 4, 5, 1))


def test_a_masked_off_lane_does_not_divide_by_zero():
    """An integer division in a vectorized loop with a tail: the lanes past the end load nothing (zero), and
    dividing by them would trap (SIGFPE) although their results are thrown away."""
    A = te.placeholder((13,), name="A", dtype="int32")
    B = te.placeholder((13,), name="B", dtype="int32")
    C = te.compute((13,), lambda i: te.floormod(A[i], B[i]) + te.floordiv(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    _, vi = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(vi)
    a = np.arange(-6, 7, dtype="int32") * 7
    b = np.array([3, -4, 5, 7, -2, 9, 1, 2, -3, 4, 6, -5, 8], dtype="int32")
    c = np.zeros(13, "int32")
    autosched.build(s, [A, B, C])(a, b, c)
    np.testing.assert_array_equal(c, a % b + a // b)


def _with_heap_intermediate(n: int):
    """B = A + 1 computed at the root into a buffer too big for the stack, C = B * 2."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((n,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    return s, [A, C]


@pytest.mark.compile_only  # the named CPUs' builds are read, not run; the host's own build runs
def test_a_parallel_loop_writes_no_masked_off_lane_of_its_callers_stack_buffer():
    """A stack intermediate computed by a parallel loop is shared by its threads: a row's last partial vector
    covers the start of the next row, which another thread writes, so its stores are masked, never a whole
    vector blended with what was there (that lost another thread's writes: garbage in a property test's
    parallel matmul, now and then). A buffer of the thread's own frame keeps whole-vector blends. The row
    is 23 floats, a prime, so both vector widths (8 and 16 lanes) end it with a partial vector."""
    M, N, K = 11, 23, 10
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")

    def schedule(parallel: bool):
        s = te.create_schedule(C.op)
        CL = s.cache_write(C, "local")
        i, j = CL.op.axis
        s[CL].reorder(i, CL.op.reduce_axis[0], j)
        if parallel:
            s[CL].parallel(i)
        s[CL].vectorize(j)
        return s

    for target in ("llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"):
        text = autosched.build(schedule(True), [A, B, C], target=target).get_source("ll-unopt")
        par = text[text.index('define internal void @"main_par'):]
        par = par[:par.index("\n}\n")]
        assert "llvm.masked.store" in par and not re.search(r"select\s+<\d+ x i1>", par), target
        # the same loops, serial: the buffer is this frame's, blends stay
        serial = autosched.build(schedule(False), [A, B, C], target=target).get_source("ll-unopt")
        assert re.search(r"select\s+<\d+ x i1>", serial), target
    f = autosched.build(schedule(True), [A, B, C])
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.standard_normal((M, K)).astype("float32"), rng.standard_normal((K, N)).astype("float32")
        c = np.full((M, N), np.nan, "float32")
        f(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


def test_a_heap_intermediate_is_kept_between_calls_and_shared_safely_by_threads():
    """A module keeps a heap intermediate from one call to the next (malloc would map it anew on every call,
    and the page faults made a convolution's time vary by a fifth from process to process); callers in
    several threads at once each get a buffer of their own, so every result is right."""
    import threading

    n = 1 << 18  # 1 MiB of float32: on the heap
    s, args = _with_heap_intermediate(n)
    f = autosched.build(s, args)
    text = f.get_source("ll-unopt")
    assert "__autosched_ws0" in text and "llvm.global_dtors" in text
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(n).astype("float32") for _ in range(8)]
    outs = [np.zeros(n, "float32") for _ in range(8)]

    def run(k: int) -> None:
        for _ in range(20):
            f(inputs[k], outs[k])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, o in zip(inputs, outs):
        np.testing.assert_array_equal(o, (a + 1) * 2)


def test_kept_workspaces_are_freed_with_their_module():
    """Modules that each keep an 8 MiB workspace hold it while they live (build's cache keeps the last 64);
    once they are dropped the memory malloc hands out is back where it was: the module's destructor frees
    what it kept (JIT-compiled: when the module object goes). Counted by glibc's mallinfo2, not the RSS, which
    malloc may keep."""
    import gc

    in_use = malloc_in_use()
    if in_use is None:
        pytest.skip("this C library has no mallinfo2 (glibc >= 2.33)")

    codegen_build._cache.clear()
    gc.collect()
    before = in_use()
    for k in range(6):
        n = (1 << 21) + 64 * k  # 8 MiB, a different kernel each time
        s, args = _with_heap_intermediate(n)
        a, c = np.ones(n, "float32"), np.zeros(n, "float32")
        autosched.build(s, args)(a, c)
        assert c[-1] == 4.0
    held = in_use() - before
    assert held > 6 * 8 * 2**20, f"{held / 2**20:.0f} MiB held by 6 live modules with 8 MiB workspaces"
    codegen_build._cache.clear()
    del s, args, a, c  # numpy's arrays are malloc's too
    gc.collect()
    left = in_use() - before
    assert left < 8 * 2**20, f"{left / 2**20:.0f} MiB still held after the modules went"


@pytest.mark.parametrize("vectorized", [False, True])
def test_a_value_shared_by_several_parents_is_emitted_once(vectorized: bool) -> None:
    """x = x * 0.5 + x * x * 0.01, forty times over: each level uses the one before three times, so the
    expression is a DAG of ~200 nodes but 3^40 paths. Walked as a tree, twelve levels took two minutes and
    354 MB of IR; each node is now emitted once: the multiplies grow linearly with the depth (twice the depth,
    twice the multiplies, however many copies the vector body and its tail make on this CPU) and the result
    is numpy's."""
    n = 1000
    A = te.placeholder((n,), name="A")

    def built(depth: int):
        def f(i):
            x = A[i]
            for _ in range(depth):
                x = x * 0.5 + x * x * 0.01
            return x

        B = te.compute((n,), f, name="B")
        s = te.create_schedule(B.op)
        if vectorized:
            _, inner = s[B].split(B.op.axis[0], factor=16)
            s[B].vectorize(inner)
        fn = autosched.build(s, [A, B])
        return fn, fn.get_source("ll-unopt").count("fmul")

    depth = 40
    fn, muls = built(depth)
    _, half = built(depth // 2)
    assert muls == 2 * half and muls <= 8 * 3 * depth  # 3 multiplies a level per copy, not 3^depth
    a = np.random.default_rng(0).random(n).astype("float32")
    x = a.copy()
    for _ in range(depth):
        x = x * np.float32(0.5) + x * x * np.float32(0.01)
    b = np.zeros(n, "float32")
    fn(a, b)
    np.testing.assert_allclose(b, x, rtol=1e-5, atol=1e-30)
