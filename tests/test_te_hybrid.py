"""te.hybrid.script (TVM's hybrid script): a Python function with loops, branches and tensor indexing becomes
an operation whose body is its loop IR; it builds, composes with te.compute stages on either side and
matches the same function run as Python on numpy arrays. What cannot be turned into loop IR is refused with
the script, the line and the construct named."""

from __future__ import annotations

import numpy as np
import pytest

import autosched
from _cpus import skip_unless_host_runs
from autosched import te, tir
from autosched.te.hybrid import HYBRID_GLOBALS, HybridError, script
from autosched.te.hybrid.runtime import (
    allocate,
    const_range,
    exp,
    float32,
    int32,
    log,
    output_tensor,
    parallel,
    power,
    sigmoid,
    sqrt,
    tanh,
    unroll,
    vectorize,
)

RNG = np.random.default_rng(5)


def build_and_compare(fn, args, values, sch=None, outs=None):
    """Build ``fn`` called on te ``args``, run it on ``values`` (numpy arrays / numbers for tensors / vars;
    constants passed through), and compare every output with ``fn`` run as Python."""
    if outs is None:
        outs = fn(*args)
        outs = outs if isinstance(outs, list) else [outs]
    sch = sch or te.create_schedule([o.op for o in outs])
    params = [a for a in args if isinstance(a, (te.Tensor, te.Var))]
    f = autosched.build(sch, params + outs)
    inputs = [v for a, v in zip(args, values) if isinstance(a, (te.Tensor, te.Var))]
    ref = fn(*values)
    ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    bufs = [np.zeros(r.shape, r.dtype) for r in ref]
    f(*inputs, *bufs)
    for got, want in zip(bufs, ref):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return outs


@script
def outer_product(n, m, a, b):
    """A docstring is skipped."""
    c = output_tensor((n, m), a.dtype)
    for i in range(n):
        for j in range(m):
            assert i < n and j < m, "index out of range!"
            c[i, j] = a[i] * b[j]
    return c


def test_outer_product_over_symbolic_shapes_is_two_loops_and_runs_as_python():
    n, m = te.size_var("n"), te.size_var("m")
    a, b = te.placeholder((n,), name="a"), te.placeholder((m,), name="b")
    c = outer_product(n, m, a, b)
    loop = c.op.body
    assert isinstance(loop, tir.For) and loop.loop_var.name == "i" and loop.min.value == 0
    assert loop.extent is n and isinstance(loop.body, tir.For) and loop.body.loop_var.name == "j"
    for sizes in ((5, 7), (1, 3)):
        x, y = RNG.random(sizes[0], dtype=np.float32), RNG.random(sizes[1], dtype=np.float32)
        build_and_compare(lambda n_, m_, a_, b_: outer_product(n_, m_, a_, b_), [n, m, a, b], [*sizes, x, y])
    assert "output_tensor" in outer_product.__globals__  # imported above, for linters
    assert "serial" not in outer_product.__globals__ and "serial" in HYBRID_GLOBALS  # a run adds no names


def test_scalars_accumulate_and_loops_need_not_start_at_zero():
    @script
    def fanout(n, a):
        three = 3.0
        b = output_tensor((a.shape[0] - 3,), a.dtype)
        for i in range(a.shape[0] - 3):
            sigma = 0.0
            for j in range(3):
                sigma += a[i + j]
            sigma = sigma / three
            b[i] = sigma
        return b

    @script
    def blur(a):
        b = output_tensor((30, 30), "float32")
        for i in range(2, 32):
            for j in range(2, 32):
                s = 0.0
                for di in range(3):
                    for dj in range(3):
                        s += a[i - di, j - dj]
                b[i - 2, j - 2] = s / 9.0
        return b

    @script
    def triangle(a, b):
        c = output_tensor((10, 10), dtype="float32")
        for i in range(10):
            for j in range(i, 10):
                c[i, j] = a[i] * b[j]
        return c

    n = te.size_var("n")
    a = te.placeholder((n,), name="a")
    build_and_compare(fanout, [n, a], [10, RNG.random(10, dtype=np.float32)])
    a2 = te.placeholder((32, 32), name="a")
    build_and_compare(blur, [a2], [RNG.random((32, 32), dtype=np.float32)])
    x, y = te.placeholder((10,), name="x"), te.placeholder((10,), name="y")
    build_and_compare(triangle, [x, y], [RNG.random(10, dtype=np.float32), RNG.random(10, dtype=np.float32)])


def test_loop_kinds_branches_and_conditions():
    @script
    def looptype(a, b, c):
        d = output_tensor((16,), "int32")
        e = output_tensor((16,), "int32")
        f = output_tensor((16,), "int32")
        for i in parallel(16):
            d[i] = a[i]
        for j in vectorize(16):
            e[j] = b[j]
        for k in unroll(16):
            f[k] = c[k]
        return d, e, f

    @script
    def branches(a):
        b = output_tensor((10,), "int32")
        c = output_tensor((10,), "int32")
        for i in range(10):
            if 0 <= i < 5 and not i == 3:
                c[i] = a[i]
            elif i % 2 == 0 or i == 9:
                c[i] = a[i] + 1
            else:
                c[i] = -a[i]
        for i in unroll(10):
            b[i] = -1 if i % 2 == 0 else 1
        return b, c

    tensors = [te.placeholder((16,), name=n, dtype="int32") for n in "abc"]
    outs = build_and_compare(looptype, tensors, [RNG.integers(-9, 9, 16).astype("int32") for _ in range(3)])
    kinds = [s.kind for s in outs[0].op.body.seq]
    assert kinds == [tir.ForKind.PARALLEL, tir.ForKind.VECTORIZED, tir.ForKind.UNROLLED]
    a = te.placeholder((10,), name="a", dtype="int32")
    build_and_compare(branches, [a], [RNG.integers(-9, 9, 10).astype("int32")])


def test_math_intrinsics_casts_and_min_max():
    @script
    def intrin(a):
        b = output_tensor((9,), "float32")
        b[0] = sqrt(a[0])
        b[1] = log(a[1])
        b[2] = exp(a[2])
        b[3] = sigmoid(a[3])
        b[4] = power(a[4], a[5])
        b[5] = tanh(a[5])
        b[6] = min(a[4], a[5])
        b[7] = max(a[5], a[6], a[7])
        b[8] = float32(int32(a[7] * 2.5))
        return b

    a = te.placeholder((8,), name="a")
    build_and_compare(intrin, [a], [np.arange(2, 10).astype("float32") / 3])


def test_hybrid_stages_compose_with_te_compute_on_both_sides():
    @script
    def scale_by_index(a):
        b = output_tensor((20,), "float32")
        for i in range(20):
            b[i] = a[i] * i
        return b

    x, y = te.placeholder((20,), name="x"), te.placeholder((20,), name="y")
    c = te.compute((20,), lambda i: x[i] + y[i], name="c")
    d = scale_by_index(c)
    e = te.compute((20,), lambda i: d[i] + 1.0, name="e")
    f = autosched.build(te.create_schedule(e.op), [x, y, e])
    xv, yv = RNG.random(20, dtype=np.float32), RNG.random(20, dtype=np.float32)
    out = np.zeros(20, "float32")
    f(xv, yv, out)
    np.testing.assert_allclose(out, (xv + yv) * np.arange(20) + 1, rtol=1e-6)


def test_multiple_outputs_chain_and_constant_parameters():
    @script
    def kernel_a(a):
        b = output_tensor((16,), "int32")
        c = output_tensor((4, 4), "int32")
        for i in range(16):
            b[i] = a[i] + 2
            c[i // 4, i % 4] = a[i] + 1
        return b, c

    @script
    def kernel_b(b, a, k):
        c = output_tensor((4, 4), "int32")
        for i in range(4):
            for j in range(4):
                c[i, j] = a[i * 4 + j] * b[i, j] + k
        return c

    a = te.placeholder((16,), name="a", dtype="int32")
    b, c = kernel_a(a)
    d = kernel_b(c, b, tir.const(11, "int32"))
    f = autosched.build(te.create_schedule(d.op), [a, d])
    av = np.arange(16).astype("int32")
    out = np.zeros((4, 4), "int32")
    f(av, out)
    nb, nc = kernel_a(av)
    np.testing.assert_array_equal(out, kernel_b(nc, nb, 11))


N_CAPTURED = 8
TABLE = [[1, 2], [3, N_CAPTURED]]


def test_constant_lists_captured_names_tensor_lists_and_inlined_scripts():
    @script
    def add_table(a, b):
        c = output_tensor(a.shape, a.dtype)
        d = output_tensor(a.shape, "int32")
        for i in const_range(2):
            for j in const_range(5):
                c[i, j] = float32(int32(a[i, j]) + b[i, j])
        for i in const_range(len(b)):
            for j in const_range(len(b[0])):
                d[i, j] = int32(a[i, j] + b[i][j]) + TABLE[1][1]
        return c, d

    a = te.placeholder((2, 5), name="a")
    build_and_compare(add_table, [a, [[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]]],
                      [RNG.random((2, 5), dtype=np.float32) * 9, np.array([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])])

    @script
    def sum_array(inputs):
        out = output_tensor((10,), inputs[0].dtype)
        n = len(inputs)
        for i in range(10):
            out[i] = 0.0
            for j in const_range(n):
                out[i] += inputs[j][i]
        return out

    ts = [te.placeholder((10,), name=f"t{k}") for k in range(4)]
    out = sum_array(autosched.runtime.convert(ts))
    f = autosched.build(te.create_schedule(out.op), ts + [out])
    vals = [RNG.random(10, dtype=np.float32) for _ in ts]
    res = np.zeros(10, "float32")
    f(*vals, res)
    np.testing.assert_allclose(res, sum(vals), rtol=1e-6)

    @script
    def uses_another(a, b):
        c = outer_product(10, 10, a, b)  # inlined: its output is a temporary here
        d = output_tensor(c.shape, c.dtype)
        for i in range(10):
            for j in range(10):
                d[i, j] = c[i, j] + i * j
        return d

    x, y = te.placeholder((10,), name="x"), te.placeholder((10,), name="y")
    build_and_compare(uses_another, [x, y], [RNG.random(10, dtype=np.float32), RNG.random(10, dtype=np.float32)])


def test_data_dependent_compaction_with_a_temporary():
    """What te.compute cannot say: keep the positive values in order, count them (a running write index)."""

    @script
    def compact(a):
        out = output_tensor((64,), "float32")
        count = output_tensor((1,), "int32")
        tmp = allocate((64,), "float32")
        for i in range(64):
            tmp[i] = a[i] * 2.0
        k = 0
        for i in range(64):
            out[i] = 0.0
        for i in range(64):
            if tmp[i] > 0.0:
                out[k] = tmp[i]
                k += 1
        count[0] = k
        return out, count

    a = te.placeholder((64,), name="a")
    build_and_compare(compact, [a], [RNG.standard_normal(64).astype("float32")])


def test_what_cannot_be_loop_ir_is_refused_with_the_line():
    @script
    def with_while(a):
        b = output_tensor((4,), "float32")
        i = 0
        while i < 4:
            b[i] = a[i]
            i += 1
        return b

    @script
    def unknown_call(a):
        b = output_tensor((4,), "float32")
        for i in range(4):
            b[i] = np.cbrt(a[i])
        return b

    @script
    def not_returned(a):
        b = output_tensor((4,), "float32")
        c = output_tensor((4,), "float32")
        for i in range(4):
            b[i] = a[i]
            c[i] = a[i]
        return b

    @script
    def mixed_up(a):
        b = output_tensor((4,), "float32")
        for i in range(4):
            b[i, 0] = a[i]
        return b

    a = te.placeholder((4,), name="a")
    with pytest.raises(HybridError, match=r"with_while, line \d+: while loops are not supported"):
        with_while(a)
    with pytest.raises(HybridError, match=r"unknown_call, line \d+: only named functions"):
        unknown_call(a)
    with pytest.raises(HybridError, match="output_tensor c declared but not returned"):
        not_returned(a)
    with pytest.raises(HybridError, match="b has 1 dimensions, 2 indices given"):
        mixed_up(a)
    with pytest.raises(HybridError, match="takes 4 arguments, 2 given"):
        outer_product(a, a)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_vectorized_hybrid_loops_and_gradients_build_for_avx2_and_avx512(target):
    """A script's vectorize loop and a gradient's reductions compile for either ISA (run where the host can)."""

    @script
    def scaled(a):
        b = output_tensor((64,), "float32")
        for i in vectorize(64):
            b[i] = a[i] * 3.0 + 1.0
        return b

    a = te.placeholder((64,), name="a")
    b = scaled(a)
    k = te.reduce_axis((0, 64), name="k")
    W = te.placeholder((16, 64), name="W")
    y = te.compute((16,), lambda i: te.sum(W[i, k] * b[k], axis=k), name="y")
    ones = te.compute((16,), lambda i: te.const(1.0), name="ones")
    (gw,) = te.gradient(y, [W], head=ones)  # the script's output is read, not differentiated
    with pytest.raises(TypeError, match="cannot differentiate through ExternOp 'scaled'"):
        te.gradient(y, [a], head=ones)
    f = autosched.build(te.create_schedule([gw.op]), [W, a, gw], target=target)
    skip_unless_host_runs(target)
    av = RNG.random(64, dtype=np.float32)
    out = np.zeros((16, 64), "float32")
    f(RNG.random((16, 64), dtype=np.float32), av, out)
    np.testing.assert_allclose(out, np.tile(av * 3 + 1, (16, 1)), rtol=1e-6)


def test_a_schedule_built_as_a_hybrid_module_runs_as_python_and_parses_back(tmp_path):
    n = te.var("n")
    A = te.placeholder((n, 6), name="A")
    B = te.placeholder((6,), name="B")
    C = te.compute((n, 6), lambda i, j: te.if_then_else(A[i, j] > 0.5, A[i, j] * B[j], te.exp(A[i, j])), name="C")
    k = te.reduce_axis((0, 6), name="k")
    D = te.compute((n,), lambda i: te.sum(C[i, k], axis=k), name="D")
    s = te.create_schedule(D.op)
    io, ii = s[D].split(D.op.axis[0], factor=4)
    s[C].compute_at(s[D], io)
    s[D].parallel(io)
    module = te.hybrid.build(s, [A, B], D, name="rowsum")
    assert module.name == "rowsum" and "def rowsum(A, B):" in module.src
    assert "A.shape[0]" in module.src  # n is no argument: read from the input it sizes
    a, b = RNG.random((9, 6)).astype("float32"), RNG.random(6).astype("float32")
    want = np.where(a > 0.5, a * b, np.exp(a)).sum(axis=1)
    np.testing.assert_allclose(module(a, b), want, rtol=1e-5)  # as Python on numpy arrays
    path = tmp_path / "rowsum.py"
    module.save(path)
    again = te.hybrid.HybridModule()
    again.load(path)
    out = again(A, B)  # on te tensors: an operation, built like any stage
    d = np.zeros(9, "float32")
    autosched.build(te.create_schedule(out.op), [A, B, out])(a, b, d)
    np.testing.assert_allclose(d, want, rtol=1e-5)
    with pytest.raises(HybridError, match="nothing loaded"):
        te.hybrid.HybridModule()(a, b)
    with pytest.raises(HybridError, match="the source defines no function"):
        te.hybrid.HybridModule("x = 1\n")
    X = te.placeholder((4,), name="X")
    Y = te.extern((4,), [X], lambda ins, outs: tir.call_packed("my.copy", ins[0], outs[0]), name="Y")
    with pytest.raises(HybridError, match="te.hybrid.build of hybrid_func: the statement Evaluate"):
        te.hybrid.build(te.create_schedule(Y.op), [X], Y)
