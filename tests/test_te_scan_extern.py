"""te.scan (recurrences over time) and te.extern (calls to registered functions), built for llvm (and cuda
where it concerns GPUs) and checked against numpy (issue 42)."""

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.contrib import cblas
from autosched.te.trace import Trace

RNG = np.random.default_rng(7)


def check_replay(s, outputs, args):
    fresh = te.create_schedule([o.op for o in outputs])
    Trace.loads(s.trace.dumps()).replay(fresh)
    assert str(autosched.lower(fresh, args)) == str(autosched.lower(s, args))


def _cumsum():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    return X, init, update, te.scan(init, update, state, inputs=[X])


def test_scan_cumulative_sum():
    X, init, update, res = _cumsum()
    assert isinstance(res.op, te.ScanOp) and len(res.shape) == 2
    assert int(res.op.scan_axis.dom.min) == 1
    s = te.create_schedule(res.op)
    xo, xi = s[update].split(update.op.axis[1], factor=8)
    s[update].vectorize(xi)
    f = autosched.build(s, [X, res])
    for shape in [(10, 33), (1, 5), (4, 64)]:
        a = RNG.random(shape).astype("float32")
        b = np.zeros_like(a)
        f(a, b)
        np.testing.assert_allclose(b, np.cumsum(a, axis=0), rtol=1e-5)
    check_replay(s, [res], [X, res])


def test_scan_on_the_gpu_grid():
    from autosched.codegen.nvptx import ptxas_path
    from autosched.tir.gpu import prepare_kernel, serialize_bindings

    X, init, update, res = _cumsum()
    s = te.create_schedule(res.op)
    for stage in (init, update):
        xo, xi = s[stage].split(stage.op.axis[1], factor=64)
        s[stage].bind(xo, te.thread_axis("blockIdx.x"))
        s[stage].bind(xi, te.thread_axis("threadIdx.x"))
    kernel, launch = prepare_kernel(autosched.lower(s, [X, res]))
    assert launch.block == (64, 1, 1)
    f = autosched.build(serialize_bindings(kernel))
    a = RNG.random((6, 150)).astype("float32")
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_allclose(b, np.cumsum(a, axis=0), rtol=1e-5)
    if ptxas_path() is not None:
        autosched.build(s, [X, res], target="cuda -arch=sm_80")  # ptxas accepts it


def test_scan_with_two_step_stages_computed_at_each_other():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    s1 = te.compute((m, n), lambda t, i: state[t - 1, i] * 2, name="s1")
    s2 = te.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    res = te.scan(init, s2, state, inputs=[X])
    s = te.create_schedule(res.op)
    xo, _ = s[s2].split(s2.op.axis[1], factor=4)
    s[s1].compute_at(s[s2], xo)
    a = RNG.random((7, 10)).astype("float32")
    b = np.zeros_like(a)
    autosched.build(s, [X, res])(a, b)
    want = np.zeros_like(a)
    want[0] = a[0]
    for t in range(1, 7):
        want[t] = want[t - 1] * 2 + a[t]
    np.testing.assert_allclose(b, want, rtol=1e-5)
    check_replay(s, [res], [X, res])


def test_scan_of_two_states_with_an_inlined_step_and_a_reader():
    m, n = 6, 5
    X = te.placeholder((m, n), name="X")
    st1 = te.placeholder((m, n), name="st1")
    st2 = te.placeholder((m, 1), name="st2")
    i1 = te.compute((1, n), lambda _, i: X[0, i], name="i1")
    i2 = te.compute((1, 1), lambda _, i: te.const(0.0), name="i2")
    xx = te.compute((m, n), lambda t, i: st1[t - 1, i] + X[t, i], name="xx")
    u1 = te.compute((m, n), lambda t, i: xx[t, i] * 1, name="u1")
    u2 = te.compute((m, 1), lambda t, i: st2[t - 1, i] + st1[t - 1, 0], name="u2")
    r1, r2 = te.scan([i1, i2], [u1, u2], [st1, st2], inputs=[X])
    assert (r1.value_index, r2.value_index) == (0, 1)
    assert [int(d) for d in r2.shape] == [m, 1]
    total = te.compute((m,), lambda t: r1[t, n - 1] + r2[t, 0], name="total")
    s = te.create_schedule(total.op)
    s[xx].compute_inline()
    a = RNG.random((m, n)).astype("float32")
    out = np.zeros(m, "float32")
    autosched.build(s, [X, total])(a, out)
    c1 = np.cumsum(a, axis=0)
    c2 = np.concatenate([[0.0], np.cumsum(c1[:-1, 0])])
    np.testing.assert_allclose(out, c1[:, -1] + c2, rtol=1e-5)


def test_scan_refusals():
    X, init, update, res = _cumsum()
    s = te.create_schedule(res.op)
    with pytest.raises(RuntimeError, match="on stage 'scan'.*scan"):
        s[res].split(res.op.scan_axis, factor=2)
    bad = te.compute((1, 3), lambda _, i: X[0, i], name="bad")
    with pytest.raises(ValueError, match="must be a te.placeholder"):
        te.scan(init, update, bad)


# -- te.extern, tir.call_packed, tir.call_extern, ir_builder, decl_buffer -----------------------------


def test_extern_call_packed_to_a_registered_function():
    calls = []

    @autosched.register_func("test_te_scan_extern.add_scalar", override=True)
    def add_scalar(x, y, c, n):
        calls.append((c, n))
        assert isinstance(x, autosched.runtime.ndarray.NDArray) and x.shape == (n,)
        y.copyfrom(x.numpy() + c)

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.extern((n,), [A], lambda ins, outs: autosched.tir.call_packed(
        "test_te_scan_extern.add_scalar", ins[0], outs[0], 1.5, ins[0].shape[0]), name="B")
    C = te.compute((n,), lambda i: B[i] * 2, name="C")
    s = te.create_schedule(C.op)
    text = str(autosched.lower(s, [A, C]))
    assert 'call_packed("test_te_scan_extern.add_scalar", A, B, 1.5f, n)' in text
    f = autosched.build(s, [A, C])
    a = RNG.random(7).astype("float32")
    c = np.zeros(7, "float32")
    f(a, c)
    np.testing.assert_allclose(c, (a + 1.5) * 2, rtol=1e-6)
    assert calls == [(1.5, 7)]


def test_extern_with_two_outputs_and_an_error_in_the_function():
    @autosched.register_func("test_te_scan_extern.split", override=True)
    def split(x, lo, hi):
        lo.copyfrom(np.minimum(x.numpy(), 0))
        hi.copyfrom(np.maximum(x.numpy(), 0))

    @autosched.register_func("test_te_scan_extern.fail", override=True)
    def fail(x):
        raise KeyError("the function's own error")

    A = te.placeholder((6,), name="A")
    lo, hi = te.extern([A.shape, A.shape], [A], lambda ins, outs: autosched.tir.call_packed(
        "test_te_scan_extern.split", ins[0], outs[0], outs[1]), name="parts")
    assert (lo.value_index, hi.value_index) == (0, 1)
    f = autosched.build(te.create_schedule(lo.op), [A, lo, hi])
    a = RNG.standard_normal(6).astype("float32")
    out_lo, out_hi = np.zeros(6, "float32"), np.zeros(6, "float32")
    f(a, out_lo, out_hi)
    np.testing.assert_array_equal(out_lo, np.minimum(a, 0))
    np.testing.assert_array_equal(out_hi, np.maximum(a, 0))
    bad = te.extern((6,), [A], lambda ins, outs: autosched.tir.call_packed("test_te_scan_extern.fail", ins[0]))
    g = autosched.build(te.create_schedule(bad.op), [A, bad])
    with pytest.raises(KeyError, match="the function's own error"):
        g(a, np.zeros(6, "float32"))


def test_extern_with_an_ir_builder_body():
    from autosched import tir

    n = te.var("n")
    A = te.placeholder((n, 3), name="A")

    def body(ins, outs):
        ib = tir.ir_builder.create()
        x, y = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="i") as i:
            with ib.for_range(1, 3, name="j") as j:
                with ib.if_scope(i % 2 == 0):
                    y[i * 2 + j - 1] = x[i * 3 + j] + 1
                with ib.else_scope():
                    y[i * 2 + j - 1] = x[i * 3 + j] * 10
        return ib.get()

    B = te.extern((n, 2), [A], body, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(RuntimeError, match="stage 'B'.*te.extern"):
        s[B].compute_inline()
    f = autosched.build(s, [A, B])
    a = RNG.random((5, 3)).astype("float32")
    b = np.zeros((5, 2), "float32")
    f(a, b)
    want = np.where((np.arange(5) % 2 == 0)[:, None], a[:, 1:] + 1, a[:, 1:] * 10)
    np.testing.assert_allclose(b, want, rtol=1e-6)


def test_call_extern_to_a_c_function_in_a_compute():
    from autosched import tir

    A = te.placeholder((9,), name="A")
    four = tir.const(4.0, "float64")  # call_extern passes what it is given: hypot takes doubles
    B = te.compute((9,), lambda i: tir.call_extern("float64", "hypot", A[i].astype("float64"), four), name="B")
    a = RNG.random(9).astype("float64") * 3
    b = np.zeros(9, "float64")
    autosched.build(te.create_schedule(B.op), [A, B])(a.astype("float32"), b)
    np.testing.assert_allclose(b, np.hypot(a.astype("float32").astype("float64"), 4.0), rtol=1e-12)


def test_decl_buffer_strides_and_offset_in_an_extern_and_binds():
    from autosched import tir

    m = te.var("m")
    X = te.placeholder((m, 4), name="X")
    s0 = te.var("s0")
    Xb = tir.decl_buffer((m, 4), "float32", name="Xb", strides=[s0, 1], offset_factor=1)
    assert Xb.elem_offset is not None and Xb.offset_factor == 1 and Xb.strides[0] is s0
    seen = {}

    @autosched.register_func("test_te_scan_extern.rowsum", override=True)
    def rowsum(x, y, stride, offset):
        seen["layout"] = (stride, offset)
        y.copyfrom(x.numpy().sum(1))

    Y = te.extern((m,), [X], lambda ins, outs: tir.call_packed(
        "test_te_scan_extern.rowsum", ins[0], outs[0], ins[0].strides[0], ins[0].elem_offset),
        in_buffers=[Xb], name="Y")
    s = te.create_schedule(Y.op)
    Yb = tir.decl_buffer((m,), "float32", name="Yout")
    func = autosched.lower(s, [X, Y], binds={Y: Yb})
    assert [b.name for b in func.params] == ["X", "Yout"]
    x = RNG.random((5, 4)).astype("float32")
    y = np.zeros(5, "float32")
    autosched.build(s, [X, Y], binds={Y: Yb})(x, y)
    np.testing.assert_allclose(y, x.sum(1), rtol=1e-6)
    assert seen["layout"] == (4, 0)  # the dense layout the call's array has
    with pytest.raises(RuntimeError, match=r"binds\[X\].*strides \[16, 1\].*dense"):
        autosched.lower(s, [X, Y], binds={X: tir.decl_buffer((m, 4), "float32", strides=[16, 1])})


def test_a_module_with_packed_calls_is_not_exported(tmp_path):
    @autosched.register_func("test_te_scan_extern.noop", override=True)
    def noop(x, y):
        y.copyfrom(x.numpy())

    A = te.placeholder((4,), name="A")
    B = te.extern((4,), [A], lambda ins, outs: autosched.tir.call_packed("test_te_scan_extern.noop", ins[0],
                                                                         outs[0]), name="B")
    f = autosched.build(te.create_schedule(B.op), [A, B])
    with pytest.raises(autosched.CodegenError, match="register_func.*exported library"):
        f.export_library(str(tmp_path / "packed.so"))


def test_a_scan_takes_one_input_tensor_and_a_tensor_is_not_iterable():
    """TVM's te.scan(..., inputs=x) with one tensor; list(tensor) used to call __getitem__(0), (1), ... without
    end (the process ran out of memory): it is refused by name."""
    m, n = te.size_var("m"), te.size_var("n")
    x = te.compute((m, n), lambda i, j: te.const(1.0, "float32"), name="x")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: x[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + x[t, i], name="update")
    res = te.scan(init, update, state, inputs=x)
    assert res.op.inputs == [x]
    with pytest.raises(TypeError, match="not iterable"):
        list(x)


def test_cblas_matmul_and_batch_matmul_are_extern_stages():
    """tvm.contrib.cblas: the products run in numpy's BLAS through packed calls, composed with te stages."""
    rng = np.random.default_rng(3)
    A = te.placeholder((6, 4), name="A")
    B = te.placeholder((5, 4), name="B")
    bias = te.var("bias", dtype="float32")
    C = cblas.matmul(A, B, transb=True)
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    f = autosched.build(te.create_schedule(D.op), [A, B, D, bias])
    a, b = rng.random((6, 4), dtype=np.float32), rng.random((5, 4), dtype=np.float32)
    d = np.zeros((6, 5), "float32")
    f(a, b, d, 2.0)
    np.testing.assert_allclose(d, a @ b.T + 2, rtol=1e-5)
    X = te.placeholder((3, 4, 6), name="X")
    Y = te.placeholder((3, 4, 2), name="Y")
    Z = cblas.batch_matmul(X, Y, transa=True)
    f = autosched.build(te.create_schedule(Z.op), [X, Y, Z])
    x, y = rng.random((3, 4, 6), dtype=np.float32), rng.random((3, 4, 2), dtype=np.float32)
    z = np.zeros((3, 6, 2), "float32")
    f(x, y, z)
    np.testing.assert_allclose(z, np.swapaxes(x, 1, 2) @ y, rtol=1e-5)
