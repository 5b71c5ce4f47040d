"""te.scan (recurrences over time) and te.extern (calls to registered functions), built for llvm (and cuda
where it concerns GPUs) and checked against numpy (issue 42)."""

import numpy as np
import pytest

import autosched
from autosched import te
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
    func = autosched.lower(s, [X, res])
    _, launch = prepare_kernel(func)
    assert launch.block == (64, 1, 1)
    f = autosched.build(serialize_bindings(func))
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
