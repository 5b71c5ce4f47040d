"""TVM's schedule primitives beyond split/reorder/fuse (issue 42): each recorded in the trace, replayed,
lowered, built for llvm and checked against numpy."""

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.errors import ScheduleError
from autosched.te.trace import Trace

RNG = np.random.default_rng(42)


def check_replay(s, outputs, args):
    """The trace of ``s`` replayed on a fresh schedule lowers to the same loop IR."""
    fresh = te.create_schedule([o.op for o in outputs])
    Trace.loads(s.trace.dumps()).replay(fresh)
    assert str(autosched.lower(fresh, args)) == str(autosched.lower(s, args))


# -- cache_write of a reduction whose range depends on a spatial axis ---------------------------------


def _triangular(n):
    A = te.placeholder((n,), name="A")

    def f(i):
        k = te.reduce_axis((0, i + 1), name="k")
        return te.sum(A[k], axis=k)

    return A, te.compute((n,), f, name="B")


@pytest.mark.parametrize("how", ["plain", "compute_at", "split_both", "parallel"])
def test_cache_write_triangular_sum(how):
    n = 37
    A, B = _triangular(n)
    s = te.create_schedule(B.op)
    if how != "parallel":
        BL = s.cache_write(B, "local")
    if how == "compute_at":
        xo, _ = s[B].split(B.op.axis[0], factor=8)
        s[BL].compute_at(s[B], xo)
    elif how == "split_both":
        s[BL].split(BL.op.axis[0], factor=8)
        s[BL].split(BL.op.reduce_axis[0], factor=4)
    elif how == "parallel":
        xo, _ = s[B].split(B.op.axis[0], factor=8)
        s[B].parallel(xo)
    a = RNG.random(n).astype("float32")
    b = np.zeros(n, "float32")
    autosched.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b, np.cumsum(a), rtol=1e-5)
    check_replay(s, [B], [A, B])


def test_reduction_loop_outside_the_axis_its_range_needs_is_refused():
    A, B = _triangular(8)
    s = te.create_schedule(B.op)
    s[B].reorder(B.op.reduce_axis[0], B.op.axis[0])
    with pytest.raises(ScheduleError, match="stage 'B'.*reduction loop 'k'.*depends on loop 'i'"):
        autosched.lower(s, [A, B])


# -- rfactor ----------------------------------------------------------------------------------------


def _row_sum(n, m):
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    return A, te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")


@pytest.mark.parametrize("factor_axis", [0, 1, -1])
def test_rfactor_parallel_partial_sums(factor_axis):
    n, m = 13, 70  # 70 is not a multiple of 16: the factored stage checks the split's tail
    A, B = _row_sum(n, m)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki, factor_axis)
    assert BF.op.name == "B.rf" and [s_.name for s_ in s.stages] == ["A", "B.rf", "B"]
    want_shape = (16, n) if factor_axis == 0 else (n, 16)
    assert tuple(int(d) for d in BF.shape) == want_shape
    assert [a.name for a in BF.op.reduce_axis] == ["k.outer"]
    rv = s[B].op.reduce_axis[0]
    assert int(rv.dom.extent) == 16
    s[BF].parallel(BF.op.axis[0])
    a = RNG.random((n, m)).astype("float32")
    b = np.zeros(n, "float32")
    autosched.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)
    check_replay(s, [B], [A, B])
    assert Trace.loads(s.trace.dumps()) == s.trace


def test_rfactor_computed_at_its_reader_with_symbolic_shapes():
    n, m = te.var("n"), te.var("m")
    A, B = _row_sum(n, m)
    s = te.create_schedule(B.op)
    _, ki = s[B].split(B.op.reduce_axis[0], factor=8)
    BF = s.rfactor(B, ki, 1)
    xo, xi = s[B].split(s[B].op.axis[0], factor=4)
    s[B].parallel(xo)
    s[BF].compute_at(s[B], xi)
    s[BF].vectorize(BF.op.axis[1])
    f = autosched.build(s, [A, B])
    for shape in [(5, 3), (9, 40), (17, 65)]:
        a = RNG.random(shape).astype("float32")
        b = np.zeros(shape[0], "float32")
        f(a, b)
        np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)
    check_replay(s, [B], [A, B])


def test_rfactor_of_a_root_axis_among_two():
    n = 6
    A = te.placeholder((n, n, n), name="A")
    k1 = te.reduce_axis((0, n), name="k1")
    k2 = te.reduce_axis((0, n), name="k2")
    B = te.compute((n,), lambda i: te.max(A[i, k1, k2], axis=[k1, k2]), name="B")
    s = te.create_schedule(B.op)
    BF = s.rfactor(B, k1)
    assert tuple(int(d) for d in BF.shape) == (n, n)
    assert list(BF.op.reduce_axis) == [k2]
    assert len(s[B].all_iter_vars) == 2
    a = RNG.standard_normal((n, n, n)).astype("float32")
    b = np.zeros(n, "float32")
    autosched.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b, a.max(axis=(1, 2)))


def test_rfactor_of_fused_reduction_axes():
    n = 5
    A = te.placeholder((n, 6, 7), name="A")
    k1 = te.reduce_axis((0, 6), name="k1")
    k2 = te.reduce_axis((0, 7), name="k2")
    B = te.compute((n,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="B")
    s = te.create_schedule(B.op)
    f = s[B].fuse(k1, k2)
    _, fi = s[B].split(f, factor=4)
    BF = s.rfactor(B, fi)
    s[BF].parallel(BF.op.axis[0])
    a = RNG.random((n, 6, 7)).astype("float32")
    b = np.zeros(n, "float32")
    autosched.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b, a.sum(axis=(1, 2)), rtol=1e-5)
    check_replay(s, [B], [A, B])


def test_rfactor_of_a_tuple_reduction_argmax():
    from autosched import tir

    argmax = te.comm_reducer(
        lambda x, y: (tir.Select(x[1] >= y[1], x[0], y[0]), tir.Select(x[1] >= y[1], x[1], y[1])),
        lambda t0, t1: (tir.const(-1, t0), te.min_value(t1)), name="argmax")
    m, n = 7, 37
    val = te.placeholder((m, n), name="val")
    k = te.reduce_axis((0, n), "k")
    idx, mx = te.compute((m,), lambda i: argmax((k.var.astype("int32"), val[i, k]), axis=k), name="am")
    s = te.create_schedule(idx.op)
    _, ki = s[idx].split(k, factor=8)
    BF = s.rfactor(idx, ki)
    s[BF].parallel(BF.op.axis[0])
    v = RNG.standard_normal((m, n)).astype("float32")
    out_i, out_v = np.zeros(m, "int32"), np.zeros(m, "float32")
    autosched.build(s, [val, idx, mx])(v, out_i, out_v)
    np.testing.assert_array_equal(out_i, v.argmax(1))
    np.testing.assert_allclose(out_v, v.max(1))


def test_rfactor_refusals_name_the_stage_and_axis():
    A, B = _row_sum(8, 8)
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match="rfactor of stage 'B' at axis 'i'.*spatial"):
        s.rfactor(B, B.op.axis[0])
    with pytest.raises(RuntimeError, match="rfactor on stage 'B'.*'k.outer'"):
        ko, _ = s[B].split(B.op.reduce_axis[0], factor=4)
        s[B].split(ko, factor=2)
        s.rfactor(B, ko)
    C = te.compute((8,), lambda i: A[i, 0] + 1, name="C")
    with pytest.raises(ScheduleError, match="rfactor of stage 'C'.*not a reduction"):
        te.create_schedule(C.op).rfactor(C, C.op.axis[0])


# -- cross-thread reductions (cuda) -----------------------------------------------------------------


def _cross_thread_row_sum(factor, rows_per_block, predicate=True):
    from autosched.te.expr import EQ, const

    n, m = te.var("n"), te.var("m")
    A, B = _row_sum(n, m)
    s = te.create_schedule(B.op)
    _, ki = s[B].split(B.op.reduce_axis[0], factor=factor)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=rows_per_block)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    if predicate:
        s[B].set_store_predicate(EQ(tx.var, const(0)))
    return s, A, B


@pytest.mark.parametrize("factor,predicate", [(16, True), (12, False)])
def test_cross_thread_reduction_grid_equals_numpy(factor, predicate):
    """The threads of a block reduce one row together (a power of two or not); the bound loops run serially
    on the CPU give numpy's sums, and the trace replays to the same kernel."""
    from autosched.tir.gpu import prepare_kernel, serialize_bindings

    s, A, B = _cross_thread_row_sum(factor, 8, predicate)
    func = autosched.lower(s, [A, B])
    text = str(func)
    assert "B.red" in text and "shared" in text and "bind[threadIdx.x]" in text
    kernel, launch = prepare_kernel(func)
    assert launch.block == (factor, 8, 1)
    assert "__syncthreads()" in str(kernel)
    f = autosched.build(serialize_bindings(kernel))
    for shape in [(8, 16), (21, 45), (3, 100)]:
        a = RNG.random(shape).astype("float32")
        b = np.zeros(shape[0], "float32")
        f(a, b)
        np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)
    check_replay(s, [B], [A, B])


def test_cross_thread_reduction_ptx_is_accepted_by_ptxas():
    from autosched.codegen.nvptx import ptxas_path
    from autosched.runtime.cuda import cuda_available

    if ptxas_path() is None:
        pytest.skip("ptxas (CUDA's PTX assembler) is not installed")
    s, A, B = _cross_thread_row_sum(32, 4)
    mod = autosched.build(s, [A, B], target="cuda -arch=sm_80")  # runs ptxas: it raises on refusal
    ptx = mod.get_source("ptx")
    assert "bar.sync" in ptx and "%tid.x" in ptx and "%tid.y" in ptx
    if cuda_available():
        a = RNG.random((37, 101)).astype("float32")
        b = np.zeros(37, "float32")
        mod(a, b)
        np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)


def test_cross_thread_reduction_refusals():
    A, B = _row_sum(8, 64)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    with pytest.raises(ScheduleError, match="bind on stage 'B'.*'k.outer'.*threadIdx"):
        s[B].bind(ko, te.thread_axis("blockIdx.y"))
    s[B].bind(ki, te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match="cross-thread reduction of stage 'B' over loop 'k.inner'.*'k.outer'"):
        autosched.lower(s, [A, B])


def test_store_predicate_on_the_cpu():
    from autosched.te.expr import LT, const

    n = 20
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].set_store_predicate(xi < 2)
    a = RNG.random(n).astype("float32")
    b = np.full(n, -1, "float32")
    autosched.build(s, [A, B])(a, b)
    want = np.where(np.arange(n) % 4 < 2, a * 2, -1).astype("float32")
    np.testing.assert_allclose(b, want)
    check_replay(s, [B], [A, B])
    with pytest.raises(ScheduleError, match="set_store_predicate on stage 'B'.*'q'"):
        s[B].set_store_predicate(LT(te.var("q"), const(2)))
    s[B].set_store_predicate(xo < 3)
    s[B].split(xo, factor=2)
    with pytest.raises(RuntimeError, match="store predicate of stage 'B' reads 'i.outer'.*no longer one of its loops"):
        autosched.lower(s, [A, B])


# -- set_scope, pragma, storage_align ---------------------------------------------------------------


def _two_stage(n=64, m=24):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] + 1, name="C")
    return A, B, C


@pytest.mark.parametrize("scope", ["local", "shared", "global"])
def test_set_scope(scope):
    A, B, C = _two_stage()
    s = te.create_schedule(C.op)
    s[B].set_scope(scope)
    xo, _ = s[C].split(C.op.axis[0], factor=8)
    s[B].compute_at(s[C], xo)
    assert f"allocate B: float32[8, 24], {scope}" in str(autosched.lower(s, [A, C]))
    a = RNG.random((64, 24)).astype("float32")
    c = np.zeros_like(a)
    autosched.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    check_replay(s, [C], [A, C])
    with pytest.raises(ScheduleError, match="set_scope of stage 'B'.*'texture'"):
        s[B].set_scope("texture")


def _kinds(func):
    from autosched.tir import stmt as S

    return {x.var.name: x.kind for x in S.walk_stmts(func.body) if isinstance(x, S.For)}


def test_pragma_auto_unroll_max_step_and_unroll_explicit():
    A, B, C = _two_stage(64, 6)
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].pragma(xo, "auto_unroll_max_step", 24)
    kinds = _kinds(autosched.lower(s, [A, C]))
    assert kinds["j"] == "unrolled" and kinds["i.inner"] == "unrolled" and kinds["i.outer"] == "serial"
    a = RNG.random((64, 6)).astype("float32")
    c = np.zeros_like(a)
    autosched.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    check_replay(s, [C], [A, C])
    s[C].pragma(xo, "unroll_explicit", False)  # TVM: a hint to the code generator instead
    assert set(_kinds(autosched.lower(s, [A, C])).values()) == {"serial"}
    with pytest.raises(ScheduleError, match="auto_unroll_max_step on stage 'C', axis 'i.outer'"):
        s[C].pragma(xo, "auto_unroll_max_step", -1)


def test_pragma_debug_skip_region_and_recorded_keys():
    A, B, C = _two_stage(16, 4)
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].pragma(xi, "vectorize")  # TVM's pragma "vectorize" is vectorize()
    assert s[C].iter_attrs[xi] == "vectorize"
    for key in ("parallel_launch_point", "parallel_stride_pattern", "parallel_barrier_when_finish", "my_hint"):
        s[C].pragma(xo, key)
    s[B].pragma(B.op.axis[0], "debug_skip_region")
    assert [k for k, _ in s[C].pragmas[xo]] == ["parallel_launch_point", "parallel_stride_pattern",
                                                "parallel_barrier_when_finish", "my_hint"]
    s[C].parallel(xo)
    a = RNG.random((16, 4)).astype("float32")
    c = np.zeros_like(a)
    autosched.build(s, [A, B, C])(a, np.zeros_like(a), c)  # B is not computed: it stays 0
    np.testing.assert_allclose(c, np.ones_like(a))
    check_replay(s, [C], [A, B, C])
    assert Trace.loads(s.trace.dumps()) == s.trace


def test_storage_align_pads_the_rows_of_the_buffer():
    A, B, C = _two_stage(64, 24)
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=8)
    s[B].compute_at(s[C], xo)
    s[B].storage_align(B.op.axis[0], 16, 3)
    func = autosched.lower(s, [A, C])
    from autosched.tir import stmt as S

    buf = next(x.buffer for x in S.walk_stmts(func.body) if isinstance(x, S.Allocate) and x.buffer.name == "B")
    assert [int(d.value) for d in buf.strides] == [35, 1]  # 24 -> 35 = 2 * 16 + 3
    a = RNG.random((64, 24)).astype("float32")
    c = np.zeros_like(a)
    autosched.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    check_replay(s, [C], [A, C])
    with pytest.raises(ScheduleError, match="storage_align on stage 'B'.*not one of its root axes"):
        s[B].storage_align(C.op.axis[0], 16, 3)


def test_cache_write_of_a_reducer_that_reads_the_axis():
    """The combiner and identity may read the compute's own axis: cache_write (and split) rename it there."""
    from autosched import tir

    X = te.placeholder((10,), name="X")

    def f(n):
        rv = te.reduce_axis((0, n), name="rv")
        init = lambda dt: tir.Select(n > 1, tir.const(0, dt), n.astype(dt))  # noqa: E731
        red = te.comm_reducer(lambda x, y: te.max(x + y, n.astype("float32")), init, name="sum_at_least_n")
        return red(X[rv], axis=rv)

    Y = te.compute(X.shape, f, name="Y")
    x = RNG.random(10).astype("float32") * 4
    want = np.zeros(10, "float32")
    for n in range(10):
        acc = 0.0 if n > 1 else float(n)
        for k in range(n):
            acc = max(acc + x[k], float(n))
        want[n] = acc
    for split in (False, True):
        s = te.create_schedule(Y.op)
        YL = s.cache_write(Y, "local")
        if split:
            s[YL].split(YL.op.axis[0], factor=4)
        y = np.zeros(10, "float32")
        autosched.build(s, [X, Y])(x, y)
        np.testing.assert_allclose(y, want, rtol=1e-6)


# -- decl_tensor_intrin + tensorize -----------------------------------------------------------------


def _vadd_intrin(n, impl):
    x = te.placeholder((n,), name="vx")
    y = te.placeholder((n,), name="vy")
    z = te.compute((n,), lambda i: x[i] + y[i], name="vz")
    return te.decl_tensor_intrin(z.op, impl, name="vadd", default_buffer_params={"offset_factor": 1}), z


def test_tensorize_an_elementwise_intrinsic_calling_a_registered_function():
    from autosched import tir

    @autosched.register_func("test_te_primitives_tvm.vadd", override=True)
    def vadd(a, b, c):
        c.copyfrom(a.numpy() + b.numpy())

    intrin, z = _vadd_intrin(16, lambda ins, outs: tir.call_packed("test_te_primitives_tvm.vadd", ins[0], ins[1],
                                                                    outs[0]))
    assert intrin.op is z.op and intrin.reduce_init is None and tuple(intrin.inputs) == tuple(z.op.input_tensors)
    assert int(intrin.buffers[0].shape[0]) == 16
    m = 64
    A = te.placeholder((4, m), name="A")
    B = te.placeholder((4, m), name="B")
    C = te.compute((4, m), lambda r, i: A[r, i] + B[r, i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[1], factor=16)
    s[C].tensorize(xi, intrin)
    assert s[C].tensorized == (xi, intrin)
    assert 'call_packed("test_te_primitives_tvm.vadd"' in str(autosched.lower(s, [A, B, C]))
    a, b = RNG.random((4, m)).astype("float32"), RNG.random((4, m)).astype("float32")
    c = np.zeros((4, m), "float32")
    autosched.build(s, [A, B, C])(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    check_replay(s, [C], [A, B, C])


def test_tensorize_a_c_micro_kernel_through_call_extern(tmp_path):
    """The intrinsic is a C function compiled here, called with the addresses of the regions."""
    import shutil
    import subprocess

    import llvmlite.binding as llvm

    from autosched import tir

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp_path / "kern.c"
    src.write_text("int test_te_prim_vmul(const float *a, const float *b, float *c) {\n"
                   "  for (int i = 0; i < 8; ++i) c[i] = a[i] * b[i];\n  return 0;\n}\n")
    lib = tmp_path / "libkern.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    llvm.load_library_permanently(str(lib))
    x = te.placeholder((8,), name="x")
    y = te.placeholder((8,), name="y")
    z = te.compute((8,), lambda i: x[i] * y[i], name="z")
    intrin = te.decl_tensor_intrin(z.op, lambda ins, outs: tir.call_extern(
        "int32", "test_te_prim_vmul", ins[0].access_ptr("r"), ins[1].access_ptr("r"), outs[0].access_ptr("w")),
        default_buffer_params={"offset_factor": 8})
    A = te.placeholder((40,), name="A")
    B = te.placeholder((40,), name="B")
    C = te.compute((40,), lambda i: A[i] * B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].parallel(xo)
    s[C].tensorize(xi, intrin)
    a, b = RNG.random(40).astype("float32"), RNG.random(40).astype("float32")
    c = np.zeros(40, "float32")
    autosched.build(s, [A, B, C])(a, b, c)
    np.testing.assert_allclose(c, a * b, rtol=1e-6)


def _gemv_intrin(m, n, with_body):
    """z[i] = sum_k w[i, k] * x[k], w read with a row stride: an ir_builder body (loops over the strided
    buffer) or a registered function, as reset + update."""
    from autosched import tir

    w = te.placeholder((m, n), name="w")
    x = te.placeholder((n,), name="x")
    k = te.reduce_axis((0, n), name="k")
    z = te.compute((m,), lambda i: te.sum(w[i, k] * x[k], axis=k), name="z")
    Wb = tir.decl_buffer(w.shape, w.dtype, name="W", offset_factor=1, strides=[te.var("ldw"), 1])

    def intrin_func(ins, outs):
        ww, xx = ins
        zz = outs[0]
        reset = tir.call_packed("test_te_primitives_tvm.fill_zero", zz)
        if with_body:
            ib = tir.ir_builder.create()
            wp, xp, zp = ib.buffer_ptr(ww), ib.buffer_ptr(xx), ib.buffer_ptr(zz)
            with ib.for_range(0, m, name="i") as i:
                with ib.for_range(0, n, name="kk") as kk:
                    zp[i] = zp[i] + wp[i * ww.strides[0] + kk] * xp[kk]
            return None, reset, ib.get()
        update = tir.call_packed("test_te_primitives_tvm.gemv_add", ww, xx, zz, ww.strides[0])
        return None, reset, update

    return te.decl_tensor_intrin(z.op, intrin_func, binds={w: Wb}, default_buffer_params={"offset_factor": 1})


@pytest.mark.parametrize("with_body", [False, True], ids=["call_packed", "ir_builder"])
def test_tensorize_a_gemv_inside_the_reduction(with_body):
    """C[i, j] = sum_k B[j, k] * A[i, k], tiled (i, j.outer, k.outer, j.inner, k.inner): the intrinsic covers
    (j.inner, k.inner) and runs reset before k.outer and update inside it."""
    strides_seen = []

    @autosched.register_func("test_te_primitives_tvm.fill_zero", override=True)
    def fill_zero(z):
        z.copyfrom(np.zeros(z.shape, z.dtype))

    @autosched.register_func("test_te_primitives_tvm.gemv_add", override=True)
    def gemv_add(w, x, z, ldw):
        strides_seen.append(ldw)
        z.copyfrom(z.numpy() + np.asarray(w) @ x.numpy())

    N, M, L = 3, 32, 48
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(B[j, k] * A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=16)
    ko, ki = s[C].split(k, factor=16)
    s[C].reorder(i, jo, ko, ji, ki)
    s[C].tensorize(ji, _gemv_intrin(16, 16, with_body))
    a, b = RNG.random((N, L)).astype("float32"), RNG.random((M, L)).astype("float32")
    c = np.zeros((N, M), "float32")
    autosched.build(s, [A, B, C])(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)
    if not with_body:
        assert set(strides_seen) == {L}


def test_tensorize_refusals():
    intrin, _ = _vadd_intrin(16, lambda ins, outs: autosched.tir.call_packed("x", ins[0]))
    A = te.placeholder((40,), name="A")
    B = te.placeholder((40,), name="B")
    C = te.compute((40,), lambda i: A[i] * B[i], name="C")
    s = te.create_schedule(C.op)
    _, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].tensorize(xi, intrin)
    with pytest.raises(ScheduleError, match="tensorize of stage 'C' at axis 'i.inner'.*not the intrinsic"):
        autosched.lower(s, [A, B, C])
    D = te.compute((40,), lambda i: A[i] + B[i], name="D")
    s = te.create_schedule(D.op)
    _, xi = s[D].split(D.op.axis[0], factor=16)
    s[D].tensorize(xi, intrin)
    with pytest.raises(ScheduleError, match="does not split evenly"):
        autosched.lower(s, [A, B, D])
    s = te.create_schedule(D.op)
    _, xi = s[D].split(D.op.axis[0], factor=8)
    s[D].tensorize(xi, intrin)
    with pytest.raises(ScheduleError, match=r"cover \[8\].*shape \[16\]"):
        autosched.lower(s, [A, B, D])


# -- double_buffer, prefetch ------------------------------------------------------------------------


def test_double_buffer_alternates_two_copies():
    A, B, C = _two_stage(64, 24)
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=8)
    s[B].compute_at(s[C], xo)
    s[B].set_scope("shared")
    s[B].double_buffer()
    text = str(autosched.lower(s, [A, C]))
    assert "allocate B: float32[2, 8, 24], shared" in text and "B[i.outer % 2, " in text
    a = RNG.random((64, 24)).astype("float32")
    c = np.zeros_like(a)
    autosched.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    check_replay(s, [C], [A, C])
    s2 = te.create_schedule(C.op)
    s2[B].double_buffer()
    with pytest.raises(RuntimeError, match="double_buffer of stage 'B': it is computed at the root"):
        autosched.lower(s2, [A, C])


def test_double_buffer_on_the_gpu_grid():
    from autosched.tir.gpu import prepare_kernel, serialize_bindings

    n, k = 64, 32
    A = te.placeholder((n, k), name="A")
    r = te.reduce_axis((0, k), name="r")
    B = te.compute((n,), lambda i: te.sum(A[i, r], axis=r), name="B")
    s = te.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=16)
    ro, ri = s[B].split(r, factor=8)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], ro)
    s[AS].double_buffer()
    _, fi = s[AS].split(s[AS].op.axis[0], factor=16)
    s[AS].bind(fi, te.thread_axis("threadIdx.x"))
    kernel, _ = prepare_kernel(autosched.lower(s, [A, B]))
    a = RNG.random((n, k)).astype("float32")
    b = np.zeros(n, "float32")
    autosched.build(serialize_bindings(kernel))(a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)


def test_prefetch_emits_cache_hints_and_keeps_results():
    n, m = 32, 40
    A = te.placeholder((n, m), name="A")
    B = te.placeholder((n, m), name="B")
    C = te.compute((n, m), lambda i, j: A[i, j] + B[i, j], name="C")
    s = te.create_schedule(C.op)
    s[C].prefetch(A, C.op.axis[0], 2)
    text = str(autosched.lower(s, [A, B, C]))
    assert "prefetch(access_ptr(A, " in text
    f = autosched.build(s, [A, B, C])
    assert "llvm.prefetch" in f.get_source("ll-unopt")
    a, b = RNG.random((n, m)).astype("float32"), RNG.random((n, m)).astype("float32")
    c = np.zeros_like(a)
    f(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    check_replay(s, [C], [A, B, C])
    D = te.compute((n, m), lambda i, j: B[i, j] * 2, name="D")
    with pytest.raises(ScheduleError, match="prefetch on stage 'D', axis 'i': the stage does not read 'A'"):
        te.create_schedule([C.op, D.op])[D].prefetch(A, D.op.axis[0], 1)


def test_cross_thread_reduction_of_a_whole_vector_in_one_block():
    """A scalar result: the one block's threads reduce everything (the shared row is the block's own)."""
    from autosched.codegen.nvptx import ptxas_path
    from autosched.tir.gpu import prepare_kernel, serialize_bindings

    n = 1000
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), "k")
    B = te.compute((), lambda: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=64)
    BF = s.rfactor(B, ki)
    s[B].bind(s[B].op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    kernel, launch = prepare_kernel(autosched.lower(s, [A, B]))
    assert launch.grid == (1, 1, 1) and launch.block == (64, 1, 1)
    a = RNG.random(n).astype("float32")
    b = np.zeros((), "float32")
    autosched.build(serialize_bindings(kernel))(a, b)
    np.testing.assert_allclose(b, a.sum(), rtol=1e-5)
    if ptxas_path() is not None:
        autosched.build(s, [A, B], target="cuda -arch=sm_80")


def test_cache_write_after_split_and_reorder_lays_the_cache_out_by_the_loops():
    n = te.var("n")
    A = te.placeholder((12, n), name="A")
    B = te.placeholder((12, n), name="B")
    C = te.compute(A.shape, lambda i, j: A[i, j] * B[i, j], name="C")
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    xo, xi = s[C].split(x, factor=4)
    s[C].reorder(xo, y, xi)
    CC = s.cache_write(C, "global")
    assert [str(d) for d in CC.shape] == ["3", "n", "4"]
    assert s[C].relations == [] and len(s[C].leaf_iter_vars) == 2
    a, b = RNG.random((12, 5)).astype("float32"), RNG.random((12, 5)).astype("float32")
    c = np.zeros_like(a)
    autosched.build(s, [A, B, C])(a, b, c)
    np.testing.assert_allclose(c, a * b, rtol=1e-6)
    check_replay(s, [C], [A, B, C])

    k = te.reduce_axis((0, n), "k")
    D = te.compute((12,), lambda i: te.sum(A[i, k] * B[i, k], axis=k), name="D")
    s = te.create_schedule(D.op)
    s[D].split(D.op.axis[0], factor=5)  # a tail: the cache guards it
    DL = s.cache_write(D, "local")
    s[DL].vectorize(DL.op.axis[1])
    d = np.zeros(12, "float32")
    autosched.build(s, [A, B, D])(a, b, d)
    np.testing.assert_allclose(d, (a * b).sum(1), rtol=1e-5)
    s = te.create_schedule(D.op)
    s[D].split(k, factor=2)
    with pytest.raises(ScheduleError, match="cache_write of 'D': its reduction axes are split"):
        s.cache_write(D, "local")


def test_a_compute_that_calls_a_tensor_intrinsic_on_regions():
    """TVM's tensor compute: ``te.compute(shape, lambda i: intrin(A[i, 0:16], ...))`` is tensorized by
    definition, at the intrinsic's first axis; cache_read/cache_write of it keep it so."""
    from autosched import tir

    @autosched.register_func("test_te_primitives_tvm.vadd2", override=True)
    def vadd2(a, b, c):
        c.copyfrom(a.numpy() + b.numpy())

    intrin, _ = _vadd_intrin(16, lambda ins, outs: tir.call_packed("test_te_primitives_tvm.vadd2", ins[0], ins[1],
                                                                    outs[0]))
    A = te.placeholder((5, 16), name="A")
    B = te.placeholder((5, 16), name="B")
    C = te.compute((5, 16), lambda i: intrin(A[i, 0:16], B[i, 0:16]), name="C")
    assert [a.name for a in C.op.axis] == ["i", "i"] and len(C.shape) == 2
    a, b = RNG.random((5, 16)).astype("float32"), RNG.random((5, 16)).astype("float32")
    for cached in (False, True):
        s = te.create_schedule(C.op)
        if cached:
            s.cache_read(A, "local", [C])
            s.cache_write(C, "local")
        c = np.zeros((5, 16), "float32")
        autosched.build(s, [A, B, C])(a, b, c)
        np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_a_compute_that_calls_a_gemv_intrinsic_with_an_outer_reduction():
    @autosched.register_func("test_te_primitives_tvm.fill_zero", override=True)
    def fill_zero(z):
        z.copyfrom(np.zeros(z.shape, z.dtype))

    @autosched.register_func("test_te_primitives_tvm.gemv_add", override=True)
    def gemv_add(w, x, z, ldw):
        z.copyfrom(z.numpy() + np.asarray(w) @ x.numpy())

    gemv = _gemv_intrin(16, 8, with_body=False)
    A = te.placeholder((2, 3, 16, 8), name="A")  # 2 row blocks of 16, 3 blocks of 8 along the reduction
    X = te.placeholder((4, 3, 8), name="X")
    k = te.reduce_axis((0, 3), name="k")
    C = te.compute((2, 4, 16), lambda i, j: gemv(A[i, k, 0:16, 0:8], X[j, k, 0:8], reduce_axis=k), name="C")
    s = te.create_schedule(C.op)
    a, x = RNG.random((2, 3, 16, 8)).astype("float32"), RNG.random((4, 3, 8)).astype("float32")
    c = np.zeros((2, 4, 16), "float32")
    autosched.build(s, [A, X, C])(a, x, c)
    np.testing.assert_allclose(c, np.einsum("ikrc,jkc->ijr", a, x), rtol=1e-5)


# -- transform_layout: a tensor stored in blocked dimensions ----------------------------------------------


def test_transform_layout_blocks_an_intermediate_and_its_readers_follow():
    """TVM's ``Stage.transform_layout``: the padded input of a convolution stored NCHW8c (the channels of a
    block innermost), its reader unchanged in meaning; a split of the reader's channel loop by the block
    reads the new layout with plain loop variables (no division left); the trace replays; numpy agrees."""
    C, H, F = 16, 6, 4
    data = te.placeholder((1, C, H, H), name="data")
    weight = te.placeholder((F, C, 3, 3), name="weight")
    pad = te.compute((1, C, H + 2, H + 2), lambda n, c, y, x: te.if_then_else(
        te.all(y >= 1, y < H + 1, x >= 1, x < H + 1), data[n, c, y - 1, x - 1], 0.0), name="pad")
    rc, rh, rw = te.reduce_axis((0, C), "rc"), te.reduce_axis((0, 3), "rh"), te.reduce_axis((0, 3), "rw")
    out = te.compute((1, F, H, H), lambda n, f, y, x: te.sum(
        pad[n, rc, y + rh, x + rw] * weight[f, rc, rh, rw], axis=[rc, rh, rw]), name="out")
    s = te.create_schedule(out.op)
    axes = s[pad].transform_layout(lambda n, c, y, x: [n, c // 8, y, x, c % 8])
    assert [int(a.dom.extent.value) for a in axes] == [1, 2, H + 2, H + 2, 8]
    s[pad].vectorize(axes[-1])
    s[out].split(s[out].op.reduce_axis[0], factor=8)
    args = [data, weight, out]
    text = str(autosched.lower(s, args))
    assert "pad: float32[1, 2, 8, 8, 8]" in text and "//" not in text.split("out[")[-1]
    check_replay(s, [out], args)
    f = autosched.build(s, args)
    d, w = RNG.standard_normal((1, C, H, H)).astype("float32"), RNG.standard_normal((F, C, 3, 3)).astype("float32")
    o = np.zeros((1, F, H, H), "float32")
    f(d, w, o)
    p = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = sum(np.einsum("fc,cyx->fyx", w[:, :, i, j], p[0, :, i:i + H, j:j + H]) for i in range(3) for j in range(3))
    np.testing.assert_allclose(o[0], ref, rtol=1e-4, atol=1e-4)


def test_transform_layout_of_an_input_through_a_cache_read():
    """An input's layout is given to a ``cache_read`` copy: weights OI to [O/4, I, 4] for a matrix-vector
    product, the copy's innermost loop vectorized."""
    A = te.placeholder((12, 10), name="A")
    x = te.placeholder((10,), name="x")
    k = te.reduce_axis((0, 10), "k")
    y = te.compute((12,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")
    s = te.create_schedule(y.op)
    AC = s.cache_read(A, "global", [y])
    o, i, oi = s[AC].transform_layout(lambda i, j: [i // 4, j, i % 4])
    s[AC].vectorize(oi)
    check_replay(s, [y], [A, x, y])
    f = autosched.build(s, [A, x, y])
    a, v = RNG.standard_normal((12, 10)).astype("float32"), RNG.standard_normal(10).astype("float32")
    out = np.zeros(12, "float32")
    f(a, v, out)
    np.testing.assert_allclose(out, a @ v, rtol=1e-5, atol=1e-5)


def test_transform_layout_refusals():
    A = te.placeholder((8, 6), name="A")
    B = te.compute((8, 6), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((8, 6), lambda i, j: B[i, j] * 2.0, name="C")
    k = te.reduce_axis((0, 6), "k")
    R = te.compute((8,), lambda i: te.sum(B[i, k], axis=k), name="R")
    D = te.compute((8,), lambda i: R[i] + C[i, 0], name="D")
    cases = [
        (lambda s: s[A].transform_layout(lambda i, j: [j, i]), "only a computed stage"),
        (lambda s: s[D].transform_layout(lambda i: [i // 2, i % 2]), "output of the schedule"),
        (lambda s: s[R].transform_layout(lambda i: [i // 2, i % 2]), "reduction"),
        (lambda s: s[B].transform_layout(lambda i, j: [i // 3, j, i % 3]), "divides it"),
        (lambda s: s[B].transform_layout(lambda i, j: [i // 2, j]), "once as i % b"),
        (lambda s: s[B].transform_layout(lambda i, j: [i]), "missing"),
        (lambda s: s[B].transform_layout(lambda i, j: [i + j, j]), "not an index"),
        (lambda s: (s[B].split(s[B].op.axis[0], factor=2), s[B].transform_layout(lambda i, j: [j, i])),
         "before splitting"),
    ]
    for do, says in cases:
        s = te.create_schedule(D.op)
        with pytest.raises(ScheduleError, match=says):
            do(s)


# -- TVM's auto-inline passes and read graph -----------------------------------------------------------


def test_auto_inline_passes_inline_by_access_pattern_as_trace_steps():
    m, n = 6, 5
    A, B = te.placeholder((m,), name="A"), te.placeholder((m, n), name="B")
    E = te.compute((m, n), lambda i, j: B[i, j] * 2.0, name="E")  # elementwise
    Bc = te.compute((m, n), lambda i, j: A[i] + E[i, j], name="Bc")  # broadcast of A
    T = te.compute((n, m), lambda j, i: Bc[i, j] - 1.0, name="T")  # injective (a transpose)
    R = te.compute((n, m), lambda j, i: T[j, i] + A[m - 1 - i], name="R")
    expected = {te.schedule.AutoInlineElemWise: {"E"}, te.schedule.AutoInlineBroadcast: {"E", "Bc"},
                te.schedule.AutoInlineInjective: {"E", "Bc", "T"}}
    a, b = RNG.random(m).astype("float32"), RNG.random((m, n)).astype("float32")
    want = (a[:, None] + b * 2 - 1).T + a[::-1][None, :]
    for auto_inline, names in expected.items():
        s = te.create_schedule(R.op)
        auto_inline(s)
        assert {st.name for st in s.stages if st.attach_type == "inline"} == names, auto_inline.__name__
        assert [step.kind for step in s.trace] == ["compute_inline"] * len(names)
        out = np.zeros((n, m), "float32")
        autosched.build(s, [A, B, R])(a, b, out)
        np.testing.assert_allclose(out, want, rtol=1e-6)
    s = te.create_schedule(R.op)
    s[E].compute_at(s[Bc], Bc.op.axis[0])  # a scheduled stage is left as it is
    te.schedule.AutoInlineInjective(s)
    assert (s[E].attach_type, s[Bc].attach_type, s[T].attach_type) == ("scope", "root", "inline")
    graph = te.schedule.CreateReadGraph([R.op])
    assert graph[R.op] == [T, A] and graph[E.op] == [B] and graph[A.op] == []
    assert [op.name for op in te.schedule.PostDFSOrder([R.op], graph)] == ["A", "B", "E", "Bc", "T", "R"]


def test_split_by_a_constant_expression_and_prim_expr_equality():
    m = te.var("m")
    A = te.placeholder((m, 6), name="A")
    A1 = te.compute((m, 6), lambda i, j: A[i, j], name="A1")
    A2 = te.compute((m, 6), lambda i, j: A1[i, j] + 3, name="A2")
    s = te.create_schedule(A2.op)
    xo, xi = s[A2].split(s[A2].fuse(*A2.op.axis), autosched.runtime.convert(3))  # TVM's IntImm factor
    assert s.trace[-1].factor == 3 and isinstance(s.trace[-1].factor, int)
    s[A1].compute_at(s[A2], xo)
    bounds = te.schedule.InferBound(s)
    five = {xo.var: autosched.tir.const(5)}
    autosched.testing.assert_prim_expr_equal(autosched.tir.stmt_functor.substitute(bounds[A1.op.axis[0]].min, five), 2)
    autosched.testing.assert_prim_expr_equal(autosched.tir.stmt_functor.substitute(bounds[A1.op.axis[1]].min, five), 3)
    with pytest.raises(AssertionError, match="their difference simplifies to"):
        autosched.testing.assert_prim_expr_equal(m + 1, m)
    with pytest.raises(ScheduleError, match="factor must be a positive integer, got 0"):
        s[A2].split(xi, autosched.tir.const(0))
