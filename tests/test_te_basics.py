"""The te API: dtypes, intrinsics, casts, integer floor semantics, conditions, reductions, CLI."""

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import autosched
from autosched import te

RNG = np.random.default_rng(0)


def build(outs, ins, name="f"):
    outs = outs if isinstance(outs, list) else [outs]
    s = te.create_schedule([o.op for o in outs])
    return autosched.build(s, [*ins, *outs], target="llvm", name=name)


def run(f, ins, out_shapes_dtypes):
    outs = [np.zeros(shape, dtype=dt) for shape, dt in out_shapes_dtypes]
    f(*ins, *outs)
    return outs if len(outs) > 1 else outs[0]


# -- dtypes --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_placeholder_dtypes(dtype):
    n = 37
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: A[i] * B[i] + A[i], name="C")
    assert A.dtype == dtype and C.dtype == dtype
    f = build(C, [A, B])
    if dtype.startswith("float"):
        a, b = RNG.standard_normal(n).astype(dtype), RNG.standard_normal(n).astype(dtype)
    else:
        a, b = RNG.integers(-1000, 1000, n).astype(dtype), RNG.integers(-1000, 1000, n).astype(dtype)
    c = run(f, [a, b], [((n,), dtype)])
    ref = a * b + a
    if dtype.startswith("float"):
        np.testing.assert_allclose(c, ref, rtol=1e-6 if dtype == "float32" else 1e-14)
    else:
        np.testing.assert_array_equal(c, ref)


def test_float64_keeps_precision():
    n = 16
    A = te.placeholder((n,), name="A", dtype="float64")
    C = te.compute((n,), lambda i: (A[i] + 1e-12) - A[i], name="C")
    f = build(C, [A])
    a = np.ones(n)
    c = run(f, [a], [((n,), "float64")])
    np.testing.assert_allclose(c, (a + 1e-12) - a, rtol=1e-3)  # would be 0 in float32


# -- intrinsics ----------------------------------------------------------------------------------

INTRINSICS = {
    "exp": (te.exp, np.exp, (-5.0, 5.0)),
    "log": (te.log, np.log, (0.01, 10.0)),
    "sqrt": (te.sqrt, np.sqrt, (0.0, 10.0)),
    "tanh": (te.tanh, np.tanh, (-5.0, 5.0)),
    "sigmoid": (te.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x)), (-8.0, 8.0)),
    "abs": (te.abs, np.abs, (-5.0, 5.0)),
    "floor": (te.floor, np.floor, (-5.0, 5.0)),
    "ceil": (te.ceil, np.ceil, (-5.0, 5.0)),
}


@pytest.mark.parametrize("name", sorted(INTRINSICS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_intrinsics(name, dtype):
    tfn, nfn, (lo, hi) = INTRINSICS[name]
    n = 50
    A = te.placeholder((n,), name="A", dtype=dtype)
    C = te.compute((n,), lambda i: tfn(A[i]), name="C")
    f = build(C, [A])
    a = RNG.uniform(lo, hi, n).astype(dtype)
    c = run(f, [a], [((n,), dtype)])
    rtol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(c, nfn(a.astype("float64")), rtol=rtol, atol=rtol)


def test_power():
    n = 20
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.power(A[i], B[i]), name="C")
    f = build(C, [A, B])
    a = RNG.uniform(0.1, 3.0, n).astype("float32")
    b = RNG.uniform(-2.0, 2.0, n).astype("float32")
    c = run(f, [a, b], [((n,), "float32")])
    np.testing.assert_allclose(c, np.power(a.astype("float64"), b), rtol=1e-5)


# -- casts ---------------------------------------------------------------------------------------


def test_casts():
    n = 40
    A = te.placeholder((n,), name="A")
    I = te.compute((n,), lambda i: A[i].astype("int32"), name="I")  # truncation toward zero, as in C
    F = te.compute((n,), lambda i: I[i].astype("float64") * 0.5, name="F")
    L = te.compute((n,), lambda i: I[i].astype("int64") * 3000000000, name="L")
    assert I.dtype == "int32" and F.dtype == "float64" and L.dtype == "int64"
    f = build([I, F, L], [A])
    a = RNG.uniform(-100.0, 100.0, n).astype("float32")
    i, fl, lg = run(f, [a], [((n,), "int32"), ((n,), "float64"), ((n,), "int64")])
    np.testing.assert_array_equal(i, a.astype("int32"))
    np.testing.assert_array_equal(fl, a.astype("int32").astype("float64") * 0.5)
    np.testing.assert_array_equal(lg, a.astype("int32").astype("int64") * 3000000000)


# -- integer floor division and modulo -----------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_floordiv_floormod_by_constants(dtype):
    vals = np.arange(-10, 11).astype(dtype)
    n = len(vals)
    A = te.placeholder((n,), name="A", dtype=dtype)
    outs = [
        te.compute((n,), lambda i: A[i] // 3, name="d3"),
        te.compute((n,), lambda i: A[i] % 3, name="m3"),
        te.compute((n,), lambda i: A[i] // -3, name="dneg3"),
        te.compute((n,), lambda i: A[i] % -3, name="mneg3"),
    ]
    f = build(outs, [A])
    d3, m3, dn, mn = run(f, [vals], [((n,), dtype)] * 4)
    np.testing.assert_array_equal(d3, np.floor_divide(vals, 3))
    np.testing.assert_array_equal(m3, np.mod(vals, 3))
    np.testing.assert_array_equal(dn, np.floor_divide(vals, -3))
    np.testing.assert_array_equal(mn, np.mod(vals, -3))


def test_floordiv_floormod_by_tensor():
    n = 200
    a = RNG.integers(-50, 50, n).astype("int32")
    b = RNG.integers(1, 7, n).astype("int32") * RNG.choice([-1, 1], n).astype("int32")
    A = te.placeholder((n,), name="A", dtype="int32")
    B = te.placeholder((n,), name="B", dtype="int32")
    D = te.compute((n,), lambda i: A[i] // B[i], name="D")
    Mo = te.compute((n,), lambda i: A[i] % B[i], name="Mo")
    f = build([D, Mo], [A, B])
    d, m = run(f, [a, b], [((n,), "int32")] * 2)
    np.testing.assert_array_equal(d, np.floor_divide(a, b))
    np.testing.assert_array_equal(m, np.mod(a, b))


def test_index_floor_semantics_in_indexing():
    # index arithmetic with // and % on loop variables (reshape-like access)
    A = te.placeholder((6, 4), name="A")
    C = te.compute((24,), lambda i: A[i // 4, i % 4], name="C")
    f = build(C, [A])
    a = RNG.standard_normal((6, 4)).astype("float32")
    c = run(f, [a], [((24,), "float32")])
    np.testing.assert_array_equal(c, a.reshape(-1))


def test_an_expression_thousands_of_terms_deep_compiles():
    # a Python sum() over a constant range nests one level a term; the compiler's walkers recurse on it
    a = te.placeholder((4, 2000), name="A")
    b = te.compute((4,), lambda i: sum((a[i, j] for j in range(2000)), te.const(0.0, "float32")), name="B")
    ad = RNG.random((4, 2000), dtype=np.float32)
    out = run(build(b, [a]), [ad], [((4,), "float32")])
    np.testing.assert_allclose(out, ad.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("int32", "float32"), ("float64", "uint64"),
                                      ("int16", "float16"), ("uint8", "int8")])
def test_reinterpret_reads_the_same_bits_scalar_and_vectorized(src, dst):
    """TVM's tir.reinterpret: LLVM's bitcast, per element and on vectors; widths must match."""
    n = 64
    a = te.placeholder((n,), src, name="A")
    b = te.compute((n,), lambda i: autosched.tir.reinterpret(dst, a[i]), name="B")
    c = te.compute((n,), lambda i: te.reinterpret(dst, a[i]), name="C")
    s = te.create_schedule([b.op, c.op])
    s[c].vectorize(s[c].split(c.op.axis[0], factor=16)[1])
    f = autosched.build(s, [a, b, c], target="llvm")
    bits = RNG.integers(0, 256, n * np.dtype(src).itemsize, dtype=np.uint8)
    ad = bits.view(src).copy()
    bd, cd = np.zeros(n, dst), np.zeros(n, dst)
    f(ad, bd, cd)
    np.testing.assert_array_equal(bd.view(np.uint8), bits)
    np.testing.assert_array_equal(cd.view(np.uint8), bits)
    with pytest.raises(TypeError, match="must have one width"):
        te.reinterpret("int8" if np.dtype(src).itemsize > 1 else "int16", a[0])


def test_printed_expressions_keep_their_grouping():
    """The text form (what lowered loops print) parenthesises what evaluation order needs: a quotient or a
    remainder under a product, the right side of a difference; a product of products needs none."""
    a, b, c = te.var("a"), te.var("b"), te.var("c")
    x, y = te.var("x", "float32"), te.var("y", "float32")
    assert [str(e) for e in (a * (b // c), a * (b % c), (a * b) // c, a * (b * c), a - (b - c), x * (1.0 / y))] == \
        ["a*(b // c)", "a*(b % c)", "a*b // c", "a*b*c", "a - (b - c)", "x*(1.0f / y)"]


# -- comparisons, if_then_else, all/any ----------------------------------------------------------


def test_comparisons_and_select():
    n = 64
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    one, zero = te.const(1.0, "float32"), te.const(0.0, "float32")
    outs = [
        te.compute((n,), lambda i: te.if_then_else(A[i] > B[i], A[i], B[i]), name="gt"),
        te.compute((n,), lambda i: te.if_then_else(A[i] <= B[i], one, zero), name="le"),
        te.compute((n,), lambda i: te.if_then_else(te.all(A[i] > 0, B[i] > 0), one, zero), name="both"),
        te.compute((n,), lambda i: te.if_then_else(te.any(A[i] < -0.5, B[i] >= 0.5), one, zero), name="either"),
        te.compute((n,), lambda i: te.if_then_else(te.all(A[i] > -1, A[i] < 1, B[i] > -1), A[i], zero), name="all3"),
    ]
    f = build(outs, [A, B])
    a = RNG.uniform(-2, 2, n).astype("float32")
    b = RNG.uniform(-2, 2, n).astype("float32")
    gt, le, both, either, all3 = run(f, [a, b], [((n,), "float32")] * 5)
    np.testing.assert_array_equal(gt, np.where(a > b, a, b))
    np.testing.assert_array_equal(le, (a <= b).astype("float32"))
    np.testing.assert_array_equal(both, ((a > 0) & (b > 0)).astype("float32"))
    np.testing.assert_array_equal(either, ((a < -0.5) | (b >= 0.5)).astype("float32"))
    np.testing.assert_array_equal(all3, np.where((a > -1) & (a < 1) & (b > -1), a, 0).astype("float32"))


def test_if_then_else_on_index_guards_out_of_bounds_reads():
    n = 10
    A = te.placeholder((n,), name="A")
    C = te.compute((n + 4,), lambda i: te.if_then_else(te.all(i >= 2, i < n + 2), A[i - 2], -1.0), name="C")
    f = build(C, [A])
    a = RNG.standard_normal(n).astype("float32")
    c = run(f, [a], [((n + 4,), "float32")])
    np.testing.assert_array_equal(c, np.pad(a, 2, constant_values=-1.0))


# -- max/min elementwise vs reductions, custom reducers ------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_max_min_elementwise_and_reduce(dtype):
    m, k = 7, 9
    A = te.placeholder((m, k), name="A", dtype=dtype)
    B = te.placeholder((m, k), name="B", dtype=dtype)
    r1 = te.reduce_axis((0, k), name="r1")
    r2 = te.reduce_axis((0, k), name="r2")
    emax = te.compute((m, k), lambda i, j: te.max(A[i, j], B[i, j]), name="emax")
    emin = te.compute((m, k), lambda i, j: te.min(A[i, j], B[i, j]), name="emin")
    rmax = te.compute((m,), lambda i: te.max(A[i, r1], axis=r1), name="rmax")
    rmin = te.compute((m,), lambda i: te.min(B[i, r2], axis=r2), name="rmin")
    f = build([emax, emin, rmax, rmin], [A, B])
    if dtype == "float32":
        a, b = RNG.standard_normal((m, k)).astype(dtype), RNG.standard_normal((m, k)).astype(dtype)
    else:
        a, b = RNG.integers(-99, 99, (m, k)).astype(dtype), RNG.integers(-99, 99, (m, k)).astype(dtype)
    outs = run(f, [a, b], [((m, k), dtype), ((m, k), dtype), ((m,), dtype), ((m,), dtype)])
    np.testing.assert_array_equal(outs[0], np.maximum(a, b))
    np.testing.assert_array_equal(outs[1], np.minimum(a, b))
    np.testing.assert_array_equal(outs[2], a.max(axis=1))
    np.testing.assert_array_equal(outs[3], b.min(axis=1))


def test_sum_over_two_axes_and_nonzero_min():
    A = te.placeholder((5, 6, 7), name="A")
    r = te.reduce_axis((0, 6), name="r")
    q = te.reduce_axis((2, 7), name="q")  # range (min, end): 2..6
    C = te.compute((5,), lambda i: te.sum(A[i, r, q], axis=[r, q]), name="C")
    f = build(C, [A])
    a = RNG.standard_normal((5, 6, 7)).astype("float32")
    c = run(f, [a], [((5,), "float32")])
    np.testing.assert_allclose(c, a[:, :, 2:].astype("float64").sum(axis=(1, 2)), rtol=1e-5, atol=1e-5)


def test_custom_comm_reducer_prod():
    m, k = 6, 8
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, t), name="prod")
    A = te.placeholder((m, k), name="A")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((m,), lambda i: prod(A[i, r], axis=r), name="C")
    f = build(C, [A])
    a = RNG.uniform(0.5, 1.5, (m, k)).astype("float32")
    c = run(f, [a], [((m,), "float32")])
    np.testing.assert_allclose(c, np.prod(a.astype("float64"), axis=1), rtol=1e-5)


def test_axes_and_reduce_axes():
    M, N, K = 8, 6, 4
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    assert len(s[C].op.axis) == 2 and len(C.op.axis) == 2
    assert len(s[C].op.reduce_axis) == 1 and len(C.op.reduce_axis) == 1
    assert [ax.var.name for ax in C.op.axis] == ["i", "j"]
    assert C.op.reduce_axis[0].var.name == "k"
    assert int(C.op.axis[0].dom.extent) == M and int(C.op.axis[1].dom.extent) == N
    assert int(C.op.reduce_axis[0].dom.extent) == K
    assert C.op.name == "C" and tuple(int(d) for d in C.shape) == (M, N)


# -- the README example, version, CLI ------------------------------------------------------------


def test_readme_vector_add(tmp_path):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")

    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=64)
    s[C].vectorize(xi)
    s[C].parallel(xo)

    text = str(autosched.lower(s, [A, B, C], name="myadd"))
    assert "myadd" in text
    f = autosched.build(s, [A, B, C], target="llvm", name="myadd")

    for size in (1, 63, 64, 65, 1000):
        a = np.random.rand(size).astype("float32")
        b = np.random.rand(size).astype("float32")
        c = np.empty_like(a)
        f(a, b, c)
        np.testing.assert_allclose(c, a + b)
        c2 = np.zeros_like(a)
        f["myadd"](a, b, c2)
        np.testing.assert_allclose(c2, a + b)
        c3 = np.zeros_like(a)
        f.get_function("myadd")(a, b, c3)
        np.testing.assert_allclose(c3, a + b)

    f.export_library(str(tmp_path / "myadd.so"))
    g = autosched.runtime.load_module(str(tmp_path / "myadd.so"))
    c = np.zeros(100, dtype="float32")
    a = np.ones(100, dtype="float32")
    g["myadd"](a, a, c)
    np.testing.assert_allclose(c, 2 * a)


def _vecadd_module(factor=16):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=factor)
    s[C].vectorize(xi)
    return autosched.build(s, [A, B, C], target="llvm", name="vadd")


def test_symbolic_zero_length():
    """n = 0: the kernel runs no iteration; an empty view into a larger buffer shows it writes nothing."""
    f = _vecadd_module()
    a = np.zeros(0, dtype="float32")
    buf = np.full(64, 7.0, dtype="float32")
    f(a, a, buf[32:32])
    assert np.all(buf == 7.0)
    f(buf[:3], buf[:3], buf[3:6])  # the same module then computes n = 3
    np.testing.assert_array_equal(buf[:6], [7.0, 7.0, 7.0, 14.0, 14.0, 14.0])


@pytest.mark.parametrize("offset", [1, 2, 3, 5, 15])
def test_vectorized_kernel_on_misaligned_arrays(offset):
    # numpy only promises element alignment; a <16 x float> kernel must not assume more
    f = _vecadd_module()
    size = 1000
    bufs = [np.zeros(size + offset, dtype="float32") for _ in range(3)]
    a, b, c = (buf[offset:] for buf in bufs)
    a[...] = np.arange(size)
    b[...] = 0.5
    f(a, b, c)
    np.testing.assert_array_equal(c, np.arange(size, dtype="float32") + 0.5)
    assert bufs[2][:offset].tolist() == [0.0] * offset  # nothing written before the array


def test_version():
    assert autosched.__version__ == "0.1.0"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", autosched.__version__)


def test_cli_version_via_module():
    proc = subprocess.run([sys.executable, "-m", "autosched", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert autosched.__version__ in proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("autosched") is None, reason="console script not installed")
def test_cli_version_console_script():
    proc = subprocess.run(["autosched", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert autosched.__version__ in proc.stdout + proc.stderr
