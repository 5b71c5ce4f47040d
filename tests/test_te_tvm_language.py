"""The te language as TVM users write it: calling a tensor, chained indexing, the index operators, multi-output
compute, tuple reducers (argmax / argmin), reducers called on values, and TVM's error class. Each kernel is
built for llvm and compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import autosched
from autosched import te, tir
from autosched.te.hybrid.runtime import output_tensor, popcount


def _rand(*shape, dtype="float32"):
    return np.random.default_rng(0).uniform(-1, 1, size=shape).astype(dtype)


def test_call_and_chained_indexing_read_like_brackets():
    m, n = 5, 7
    A = te.placeholder((m, n), name="A")
    s0 = te.placeholder((), name="s0")
    B = te.compute((m, n), lambda i, j: A(i, j) * 2 + A[i][j] + s0(), name="B")
    s = te.create_schedule(B.op)
    f = autosched.build(s, [A, s0, B])
    a, sc, b = _rand(m, n), np.array(0.5, "float32"), np.zeros((m, n), "float32")
    f(a, sc, b)
    np.testing.assert_allclose(b, a * 3 + 0.5, rtol=1e-6)
    assert isinstance(A[1], te.TensorSlice)
    assert A[0][1].dtype == "float32"
    with pytest.raises(IndexError):
        A[0][1, 2]


@pytest.mark.parametrize("mod", [te, tir])
def test_index_operators_match_numpy_on_negative_values(mod):
    n = 24
    A = te.placeholder((n,), dtype="int32", name="A")
    outs = []
    for fn in ("floordiv", "floormod", "indexdiv", "indexmod", "truncdiv", "truncmod"):
        op = getattr(mod, fn)
        outs.append(te.compute((n,), lambda i, op=op: op(A[i], -5 if fn.startswith("trunc") else 5), name=fn))
    by_var = te.compute((n,), lambda i: mod.truncdiv(A[i], A[(i + 1) % n]), name="tdv")
    s = te.create_schedule([o.op for o in outs] + [by_var.op])
    f = autosched.build(s, [A] + outs + [by_var])
    a = np.arange(-12, 12, dtype="int32")
    a[a == 0] = 7
    res = [np.zeros(n, "int32") for _ in range(len(outs) + 1)]
    f(a, *res)
    np.testing.assert_array_equal(res[0], a // 5)
    np.testing.assert_array_equal(res[1], a % 5)
    np.testing.assert_array_equal(res[2], a // 5)
    np.testing.assert_array_equal(res[3], a % 5)
    np.testing.assert_array_equal(res[4], np.trunc(a / -5).astype("int32"))
    np.testing.assert_array_equal(res[5], np.fmod(a, -5))
    np.testing.assert_array_equal(res[6], np.trunc(a / np.roll(a, -1)).astype("int32"))
    assert te.truncdiv(-7, 2).value == -3 and te.truncmod(-7, 2).value == -1


@pytest.mark.parametrize("vectorized", [False, True])
def test_bit_operators_on_integers_and_logic_on_conditions(vectorized: bool):
    """As in TVM: >>, <<, &, |, ^ and ~ are bit operators on integers (a right shift arithmetic for signed ones,
    logical for unsigned), while & and | of conditions stay logical; tir.bitwise_* and shift_* spell them too.
    Unpacking two 4-bit values a byte, scalar and in vector lanes, equals numpy."""
    n = 64
    A = te.placeholder((n,), dtype="uint8", name="A")
    B = te.placeholder((n,), dtype="int32", name="B")
    lo = te.compute((n,), lambda i: (A[i] & 15).astype("int32") - ((A[i] >> 4) << 1), name="lo")
    mixed = te.compute((n,), lambda i: tir.bitwise_xor(B[i] >> 3, ~B[i]) | tir.shift_left(B[i], 2), name="mixed")
    gated = te.compute((n,), lambda i: te.if_then_else((i > 3) & (i < 60) | (i == 0), B[i], 0), name="gated")
    assert str(mixed.op.body[0]) == "B[i] >> 3 ^ (B[i] ^ -1) | B[i] << 2"
    s = te.create_schedule([lo.op, mixed.op, gated.op])
    if vectorized:
        for t in (lo, mixed, gated):
            _, inner = s[t].split(t.op.axis[0], factor=16)
            s[t].vectorize(inner)
    f = autosched.build(s, [A, B, lo, mixed, gated])
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 256, n).astype(np.uint8), rng.integers(-5000, 5000, n).astype(np.int32)
    outs = [np.zeros(n, np.int32) for _ in range(3)]
    f(a, b, *outs)
    i = np.arange(n)
    np.testing.assert_array_equal(outs[0], (a & 15).astype(np.int32) - ((a >> 4) << 1))
    np.testing.assert_array_equal(outs[1], ((b >> 3) ^ ~b) | (b << 2))
    np.testing.assert_array_equal(outs[2], np.where((i > 3) & (i < 60) | (i == 0), b, 0))
    with pytest.raises(TypeError, match="integers"):
        te.placeholder((n,), name="F")[0] >> 1


def test_float_truncmod_matches_fmod():
    n = 16
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.truncmod(A[i], 0.3), name="B")
    f = autosched.build(te.create_schedule(B.op), [A, B])
    a, b = _rand(n) * 3, np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_allclose(b, np.fmod(a, np.float32(0.3)), atol=1e-5)


def test_multi_output_compute_shares_one_op_and_loop_nest():
    m, n = 6, 9
    A0, A1 = te.placeholder((m, n), name="A0"), te.placeholder((m, n), name="A1")
    T0, T1 = te.compute((m, n), lambda i, j: (A0[i, j] * 2, A1[i, j] + 3), name="T")
    assert T0.op is T1.op and (T0.value_index, T1.value_index) == (0, 1)
    assert T0.op.output(1) is T1
    a0, a1 = _rand(m, n), _rand(m, n)
    # both outputs as arguments
    f = autosched.build(te.create_schedule(T0.op), [A0, A1, T0, T1])
    t0, t1 = np.zeros((m, n), "float32"), np.zeros((m, n), "float32")
    f(a0, a1, t0, t1)
    np.testing.assert_allclose(t0, a0 * 2, rtol=1e-6)
    np.testing.assert_allclose(t1, a1 + 3, rtol=1e-6)
    # read by a later stage, computed at its loop, and inlined
    C = te.compute((m, n), lambda i, j: T0[i, j] - T1[i, j], name="C")
    for how in ("root", "compute_at", "inline", "cache_read"):
        s = te.create_schedule(C.op)
        if how == "compute_at":
            s[T0].compute_at(s[C], C.op.axis[0])
        elif how == "inline":
            s[T0].compute_inline()
        elif how == "cache_read":  # the reader keeps both outputs
            AA = s.cache_read(A0, "local", [T0])
            s[AA].compute_at(s[T0], T0.op.axis[0])
        c = np.zeros((m, n), "float32")
        autosched.build(s, [A0, A1, C])(a0, a1, c)
        np.testing.assert_allclose(c, a0 * 2 - (a1 + 3), rtol=1e-6, err_msg=how)


def _argmax_reducer():
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return tir.Select(keep, x[0], y[0]), tir.Select(keep, x[1], y[1])

    def fidentity(t0, t1):
        return tir.const(-1, t0), te.min_value(t1)

    return te.comm_reducer(fcombine, fidentity, name="argmax")


def test_argmax_and_argmin_tuple_reducers():
    m, n = 7, 13
    argmax = _argmax_reducer()
    argmin = te.comm_reducer(
        lambda x, y: (tir.Select(x[1] <= y[1], x[0], y[0]), tir.Select(x[1] <= y[1], x[1], y[1])),
        lambda t0, t1: (tir.const(-1, t0), te.max_value(t1)), name="argmin")
    val = te.placeholder((m, n), name="val")
    k = te.reduce_axis((0, n), "k")
    I, V = te.compute((m,), lambda i: argmax((k.var.astype("int32"), val[i, k]), axis=k), name="mx")
    k2 = te.reduce_axis((0, n), "k2")
    J, W = te.compute((m,), lambda i: argmin((k2.var, val[i, k2]), axis=k2), name="mn")
    s = te.create_schedule([I.op, J.op])
    xo, xi = s[I].split(I.op.axis[0], factor=3)
    f = autosched.build(s, [val, I, V, J, W])
    v = _rand(m, n)
    oi, ov = np.zeros(m, "int32"), np.zeros(m, "float32")
    oj, ow = np.zeros(m, "int64"), np.zeros(m, "float32")
    f(v, oi, ov, oj, ow)
    np.testing.assert_array_equal(oi, v.argmax(1))
    np.testing.assert_allclose(ov, v.max(1))
    np.testing.assert_array_equal(oj, v.argmin(1))
    np.testing.assert_allclose(ow, v.min(1))


def test_tuple_reducer_with_condition():
    m, n = 4, 10
    mysum = te.comm_reducer(lambda x, y: (x[0] + y[0], x[1] + y[1]),
                            lambda t0, t1: (tir.const(0, t0), tir.const(1, t1)), name="mysum")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="int32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: mysum((idx[i, k], val[i, k]), axis=k, where=te.floormod(k, 2) == 0),
                        name="T")
    f = autosched.build(te.create_schedule(T0.op), [idx, val, T0, T1])
    a = np.arange(m * n, dtype="int32").reshape(m, n)
    b = a * 3
    o0, o1 = np.zeros(m, "int32"), np.zeros(m, "int32")
    f(a, b, o0, o1)
    np.testing.assert_array_equal(o0, a[:, ::2].sum(1))
    np.testing.assert_array_equal(o1, b[:, ::2].sum(1) + 1)


def test_reducer_called_on_values_combines_them():
    mysum = te.comm_reducer(lambda x, y: x + y, lambda t: tir.const(0, dtype=t))
    m, n = te.var("m"), te.var("n")
    assert str(mysum(m, n)) == str(m + n)
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: te.comm_reducer(lambda x, y: te.max(x, y), te.min_value)(A[i], 0.25, -A[i]),
                   name="B")
    b = np.zeros(8, "float32")
    a = _rand(8)
    autosched.build(te.create_schedule(B.op), [A, B])(a, b)
    np.testing.assert_allclose(b, np.maximum(np.maximum(a, 0.25), -a))


def test_refused_schedule_is_a_runtime_error_named_tvm_error():
    assert autosched.TVMError is autosched.AutoschedError
    assert issubclass(autosched.ScheduleError, RuntimeError) and issubclass(autosched.ScheduleError, ValueError)
    assert autosched.error.TVMError is autosched.TVMError
    A = te.placeholder((10, 12), name="A")
    T = te.compute((10, 12), lambda i, j: A[i, j], name="T")
    s = te.create_schedule(T.op)
    xo, xi = s[T].split(T.op.axis[0], factor=5)
    with pytest.raises(RuntimeError, match=r"stage 'T'.*'xo|'i.outer'"):
        s[T].fuse(xo, T.op.axis[1])
    with pytest.raises(autosched.TVMError):
        s[T].reorder(xi, xi)


def test_thread_axis_with_range_and_expr_equal():
    tx = te.thread_axis((0, 32), "threadIdx.x")
    assert tx.thread_tag == "threadIdx.x" and int(tx.dom.extent) == 32
    bx = te.thread_axis("blockIdx.x", "bx")
    assert bx.thread_tag == "blockIdx.x" and bx.name == "bx"
    n = 16
    A = te.placeholder((n,), dtype="int32", name="A")
    B = te.compute((n,), lambda i: te.if_then_else(A[i].equal(3), 1, 0), name="B")
    a, b = np.arange(n, dtype="int32") % 5, np.zeros(n, "int64")
    autosched.build(te.create_schedule(B.op), [A, B])(a, b)
    np.testing.assert_array_equal(b, (a == 3).astype("int64"))


def test_tvm_two_step_lowering_names_and_lower_main():
    from autosched.driver.build_module import schedule_to_module
    from autosched.te.schedule import InferBound, ScheduleOps
    from autosched.tir.stmt_functor import post_order_visit

    m, n = te.var("m"), te.var("n")
    A, B = te.placeholder((m, n), name="A"), te.placeholder((m, n), name="B")
    C = te.compute((m, n), lambda i, j: A(i, j) * B(i, j), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", readers=[C])
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[AA].compute_at(s[C], xo)
    s = s.normalize()
    bounds = InferBound(s)
    assert isinstance(bounds, autosched.container.Map)
    assert int(bounds[xi].extent) == 4 and int(bounds[AA.op.axis[0]].extent) == 4
    stmt = ScheduleOps(s, bounds)
    stores = []
    post_order_visit(stmt, lambda x: stores.append(x.buffer.name) if isinstance(x, tir.BufferStore) else None)
    assert stores == ["A.local", "C"]
    func = schedule_to_module(s, [A, B, C])["main"]
    assert autosched.lower(s, [A, B, C])["main"].name == "main" and isinstance(func, tir.PrimFunc)
    with pytest.raises(KeyError):
        func["other"]
    f = autosched.build(func)
    a, b, c = _rand(10, 3), _rand(10, 3), np.zeros((10, 3), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a * b, rtol=1e-6)


def test_tvm_views_of_relations_and_loop_annotations():
    from autosched.te import schedule as ts

    m, n = 12, 10
    A = te.placeholder((m, n), name="A")
    T = te.compute((m, n), lambda i, j: A[i, j] + 1, name="T")
    s = te.create_schedule(T.op)
    xo, yo, xi, yi = s[T].tile(T.op.axis[0], T.op.axis[1], x_factor=4, y_factor=5)
    fused = s[T].fuse(xo, yo)
    s[T].vectorize(yi)
    s[T].unroll(xi)
    s[T].parallel(fused)
    assert any(isinstance(r, ts.Fuse) for r in s[T].relations) and any(isinstance(r, ts.Split) for r in s[T].relations)
    attrs = s[T].iter_var_attrs
    assert attrs[xi].iter_type == te.IterVar.Unrolled and attrs[yi].iter_type == te.IterVar.Vectorized
    assert attrs[fused].iter_type == te.IterVar.Parallelized
    a, t = _rand(m, n), np.zeros((m, n), "float32")
    autosched.build(s, [A, T])(a, t)
    np.testing.assert_allclose(t, a + 1)
    R = te.compute((), lambda: A[0, 0] * 2, name="R")
    s = te.create_schedule(R.op)
    unit = s[R].fuse()
    assert any(isinstance(r, ts.Singleton) for r in s[R].relations) and tuple(s[R].leaf_iter_vars) == (unit,)
    r = np.zeros((), "float32")
    autosched.build(s, [A, R])(a, r)
    assert r == a[0, 0] * 2


def test_cache_write_of_a_multi_output_compute_and_of_argmax():
    m, n = 8, 6
    A, B = te.placeholder((m, n), name="A"), te.placeholder((m, n), name="B")
    C1, C2 = te.compute((m, n), lambda i, j: (A[i, j] + 1, B[i, j] / 2), name="C")
    s = te.create_schedule([C1.op, C2.op])
    L1, L2 = s.cache_write([C1, C2], "local")
    assert L1.op is L2.op and L2.value_index == 1
    s[L1].compute_at(s[C1], C1.op.axis[0])
    a, b = _rand(m, n), _rand(m, n)
    c1, c2 = np.zeros((m, n), "float32"), np.zeros((m, n), "float32")
    autosched.build(s, [A, B, C1, C2])(a, b, c1, c2)
    np.testing.assert_allclose(c1, a + 1)
    np.testing.assert_allclose(c2, b / 2)
    with pytest.raises(RuntimeError, match="outputs are cached together"):
        te.create_schedule(C1.op).cache_write(C1, "local")
    k = te.reduce_axis((0, n), "k")
    I, V = te.compute((m,), lambda i: _argmax_reducer()((k.var, A[i, k]), axis=k), name="T")
    s = te.create_schedule(I.op)
    IL, _ = s.cache_write([I, V], "local")
    xo, xi = s[I].split(I.op.axis[0], factor=4)
    s[IL].compute_at(s[I], xo)
    oi, ov = np.zeros(m, "int64"), np.zeros(m, "float32")
    autosched.build(s, [A, I, V])(a, oi, ov)
    np.testing.assert_array_equal(oi, a.argmax(1))
    np.testing.assert_allclose(ov, a.max(1))


def test_schedule_ops_of_two_outputs_with_a_shape_expression():
    from autosched.te.schedule import InferBound, ScheduleOps

    m, n = te.var("m"), te.var("n")
    A, B = te.placeholder((m * 4, n), name="A"), te.placeholder((m * 4, n), name="B")
    C1, C2 = te.compute(A.shape, lambda i, j: (A[i, j] + 1, B[i, j] * 2), name="C")
    s = te.create_schedule([C1.op, C2.op])
    s.cache_write([C1, C2], "local")
    stmt = ScheduleOps(s, InferBound(s))
    assert "C.local" in str(stmt) and "C.v1" in str(stmt)
    f = autosched.build(s, [A, B, C1, C2, m])
    a, b = _rand(8, 3), _rand(8, 3)
    c1, c2 = np.zeros((8, 3), "float32"), np.zeros((8, 3), "float32")
    f(a, b, c1, c2, 2)
    np.testing.assert_allclose(c1, a + 1)
    np.testing.assert_allclose(c2, b * 2)


def test_tensor_regions_by_slices():
    A = te.placeholder((8, 16, 4), name="A")
    i = te.var("i")
    r = A[i, 0:16]
    assert isinstance(r, te.TensorSlice) and str(r) == "A[i, 0:16]"
    (a, b, c) = r.region()
    assert a.min is i and int(a.extent) == 1 and int(b.extent) == 16 and int(c.extent) == 4
    with pytest.raises(TypeError, match="region"):
        r[0]
    # plain indexing still reads elements: a kernel that uses it
    B = te.compute((8,), lambda j: A[j][3][1] + A[j, 2, 0], name="B")
    a_np, b_np = _rand(8, 16, 4), np.zeros(8, "float32")
    autosched.build(te.create_schedule(B.op), [A, B])(a_np, b_np)
    np.testing.assert_allclose(b_np, a_np[:, 3, 1] + a_np[:, 2, 0], rtol=1e-6)


def test_tir_names_in_tvm_argument_order_and_testing_assert_allclose():
    assert tir.IntImm("int32", 5).dtype == "int32" and tir.IntImm(5, "int8").dtype == "int8"
    assert tir.FloatImm("float64", 0.5).dtype == "float64"
    n = 32
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: tir.abs(A[i]) + tir.erf(A[i]) + tir.sin(A[i]) * tir.cos(A[i]), name="B")
    a, b = _rand(n), autosched.nd.empty((n,), "float32")
    autosched.build(te.create_schedule(B.op), [A, B])(a, b)
    import math

    want = np.array([abs(x) + math.erf(x) + math.sin(x) * math.cos(x) for x in a.astype("float64")], "float32")
    autosched.testing.assert_allclose(b, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError):
        autosched.testing.assert_allclose(b, want[:-1])
    with pytest.raises(AssertionError):
        autosched.testing.assert_allclose(b.numpy() + 1e-3, want)


def test_workload_key_and_flops_of_multi_output_and_argmax():
    from autosched.te.analysis import flop_count, structural_hash

    A = te.placeholder((8, 6), name="A")
    k = te.reduce_axis((0, 6), "k")
    I, V = te.compute((8,), lambda i: _argmax_reducer()((k.var, A[i, k]), axis=k), name="T")
    assert len(structural_hash([I, V])) == 64 and flop_count([I, V]) == 8 * 6 * 2
    C1, C2 = te.compute((8, 6), lambda i, j: (A[i, j] + 1, A[i, j] * 2), name="C")
    reads_first = te.compute((8, 6), lambda i, j: C1[i, j], name="D")
    reads_second = te.compute((8, 6), lambda i, j: C2[i, j], name="D")
    assert structural_hash([reads_first]) != structural_hash([reads_second])
    assert flop_count([C1]) == 2 * 8 * 6
    s = te.create_schedule(reads_second.op)
    d = np.zeros((8, 6), "float32")
    a = _rand(8, 6)
    autosched.build(s, [A, reads_second])(a, d)
    np.testing.assert_allclose(d, a * 2)


def test_tuple_reducer_that_reads_the_output_axis_with_cache_write():
    # (count, sum) of A[i, k] over k < n, each step capped by the row index i, whose identity reads i too
    m, n = 6, 5
    A = te.placeholder((m, n), name="A", dtype="int64")

    def f(i):
        k = te.reduce_axis((0, n), "k")
        red = te.comm_reducer(lambda x, y: (x[0] + y[0], te.min(x[1] + y[1], i * 10)),
                              lambda t0, t1: (tir.const(0, t0), i.astype(t1)), name="capped")
        return red((tir.const(1, "int64"), A[i, k]), axis=k)

    C, S_ = te.compute((m,), f, name="T")
    s = te.create_schedule(C.op)
    CL, _ = s.cache_write([C, S_], "local")
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[CL].compute_at(s[C], xo)  # the cache holds a window of rows: i is its loop plus the window's start
    a = np.arange(m * n, dtype="int64").reshape(m, n)
    c, t = np.zeros(m, "int64"), np.zeros(m, "int64")
    autosched.build(s, [A, C, S_])(a, c, t)
    want = []
    for i in range(m):
        acc = i
        for k in range(n):
            acc = min(acc + a[i, k], i * 10)
        want.append(acc)
    np.testing.assert_array_equal(c, n)
    np.testing.assert_array_equal(t, want)


def test_short_type_names_and_the_original_reduce_axis_on_a_cache_write_stage():
    """TVM code writes ``x.astype("float")`` and splits the reduction it declared (``k``) on the stage that
    ``cache_write`` made, whose reduce axis is that ``k`` in TVM: both work here."""
    n = 32
    A = te.placeholder((n, n), "float16", name="A")
    B = te.placeholder((n, n), "float16", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k].astype("float") * B[k, j].astype("float"), axis=k),
                   name="C")
    assert C.dtype == "float32" and te.var("x", "int").dtype == "int32"
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    ko, ki = s[CL].split(k, factor=8)
    s[CL].reorder(ko, *s[CL].op.axis, ki)
    f = autosched.build(s, [A, B, C])
    a, b = _rand(n, n, dtype="float16"), _rand(n, n, dtype="float16")
    c = np.zeros((n, n), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="unsupported dtype 'floot'"):
        te.placeholder((2,), "floot")


def test_tag_scope_analyzer_and_convert():
    """te.tag_scope tags the computes made inside (as a context and as a decorator; scopes do not nest);
    tvm.arith.Analyzer simplifies under bound ranges; runtime.convert makes Arrays and constants; te.trunc."""

    @te.tag_scope(tag="conv")
    def conv_like(a):
        return te.compute(a.shape, lambda i: a[i] * 2, name="c")

    A = te.placeholder((8,), name="A")
    with te.tag_scope("gemm"):
        B = te.compute((8,), lambda i: A[i] + 1, name="B")
        C = te.compute((8,), lambda i: A[i] + 1, name="C", tag="mine")
    assert (B.op.tag, C.op.tag, conv_like(A).op.tag) == ("gemm", "mine", "conv")
    assert te.compute((8,), lambda i: A[i], name="D").op.tag == ""
    with pytest.raises(ValueError, match="do not nest"), te.tag_scope("outer"):
        conv_like(A)
    n = te.var("n")
    ana = autosched.arith.Analyzer()
    ana.bind(n, (0, 16))
    assert autosched.tir.arith.const_int(ana.simplify((n + 4) // 32)) == 0
    assert ana.can_prove(n < 16) and not ana.can_prove(n < 15)
    arr = autosched.runtime.convert([1, [2.5, A]])
    assert isinstance(arr, autosched.container.Array) and arr[0].value == 1 and arr[1][1] is A
    T = te.compute((4,), lambda i: te.trunc(A[i]), name="T")
    f = autosched.build(te.create_schedule(T.op), [A, T])
    a = np.array([-2.5, -0.5, 0.5, 2.7, 0, 0, 0, 0], "float32")
    out = np.zeros(4, "float32")
    f(a, out)
    np.testing.assert_array_equal(out, np.trunc(a[:4]))


def test_a_users_tir_pass_runs_in_lowering_and_building():
    """tir.transform.prim_func_pass + PassContext(config={"tir.add_lower_pass": ...}), as TVM's
    low_level_custom_pass tutorial writes it: find loops of a width divisible by 8 (post_order_visit), split and
    vectorize them (ir_transform, TVM's For argument order), in lower and in build."""
    n = tir.const(128, "int32")
    a = te.placeholder((n,), name="a")
    b = te.placeholder((n,), name="b")
    c = te.compute((n,), lambda i: a[i] + b[i], name="c")
    sch = te.create_schedule(c.op)
    loops = []

    def find_width8(op):
        if isinstance(op, tir.For) and isinstance(op.extent, tir.IntImm) and op.extent.value % 8 == 0:
            loops.append(op)

    def vectorize8(op):
        if op in loops:
            lo, li = te.var(op.loop_var.name + ".outer"), te.var(op.loop_var.name + ".inner")
            body = tir.stmt_functor.substitute(op.body, {op.loop_var: lo * 8 + li})
            body = tir.For(li, 0, 8, tir.ForKind.VECTORIZED, body)
            return tir.For(lo, 0, op.extent.value // 8, tir.ForKind.SERIAL, body)
        return None

    @tir.transform.prim_func_pass(opt_level=0)
    def vectorize(f, mod, ctx):
        loops.clear()
        tir.stmt_functor.post_order_visit(f.body, find_width8)
        return f.with_body(tir.stmt_functor.ir_transform(f.body, None, vectorize8, ["tir.For"]))

    with autosched.transform.PassContext(config={"tir.add_lower_pass": [(1, vectorize)]}):
        text = str(autosched.lower(sch, [a, b, c]))
        f = autosched.build(sch, [a, b, c])
    assert "vectorized (i.inner, 0, 8)" in text and "for (i.outer, 0, 16)" in text
    assert "vectorized" not in str(autosched.lower(sch, [a, b, c]))  # only inside the context
    x, y = _rand(128), _rand(128) * 2
    out = np.zeros(128, "float32")
    f(x, y, out)
    np.testing.assert_allclose(out, x + y)
    with pytest.raises(ValueError, match="loops start at 0"):
        tir.For(te.var("v"), 2, 8, tir.ForKind.SERIAL, tir.Evaluate(tir.const(0)))
    with pytest.raises(TypeError, match="list of \\(phase, pass\\) pairs"):
        autosched.transform.PassContext(config={"tir.add_lower_pass": [vectorize]})


def test_popcount_counts_bits_scalar_vectorized_and_in_hybrid_scripts():

    for dtype in ("int32", "uint8", "int64"):
        A = te.placeholder((37,), dtype=dtype, name="A")
        B = te.compute((37,), lambda i: tir.popcount(A[i]), name="B")
        s = te.create_schedule(B.op)
        xo, xi = s[B].split(B.op.axis[0], factor=8)
        s[B].vectorize(xi)
        info = np.iinfo(dtype)
        a = np.random.default_rng(3).integers(info.min, info.max, 37, endpoint=True, dtype=dtype)
        b = np.zeros(37, dtype)
        autosched.build(s, [A, B])(a, b)
        want = [bin(int(v) & ((1 << (8 * a.itemsize)) - 1)).count("1") for v in a]
        np.testing.assert_array_equal(b, want, err_msg=dtype)
    with pytest.raises(TypeError, match="popcount counts the bits of an integer, got a float32"):
        te.popcount(te.placeholder((2,), name="F")[0])

    @te.hybrid.script
    def bits(a):
        c = output_tensor(a.shape, a.dtype)
        for i in range(a.shape[0]):
            c[i] = popcount(a[i])
        return c

    a = np.array([0, 1, 255, -1, 1 << 20], "int32")
    np.testing.assert_array_equal(bits(a), [0, 1, 8, 32, 1])
    A = te.placeholder((5,), dtype="int32", name="A")
    C = bits(A)
    c = np.zeros(5, "int32")
    autosched.build(te.create_schedule(C.op), [A, C])(a, c)
    np.testing.assert_array_equal(c, [0, 1, 8, 32, 1])
