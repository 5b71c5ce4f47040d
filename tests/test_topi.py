"""TOPI under TVM's names (autosched.topi): the operators build te computations that run and match numpy
(the elementwise, broadcast and reduction ones over symbolic shapes too), te tensors get their arithmetic
operators, the nn operators are relay's computes with relay's default schedules (CPU nests, cuda thread
mappings whose PTX ptxas accepts), and TVM's test helpers (tvm.testing, topi.testing) choose targets."""

from __future__ import annotations

import numpy as np
import pytest

import autosched
from autosched import te, topi
from autosched.codegen.nvptx import ptxas_check, ptxas_path
from autosched.errors import AutoschedError
from autosched.target import Target
from autosched.topi import testing as topi_ref
from autosched.topi.nn.poolnd import poolnd
from autosched.topi.utils import get_shape

RNG = np.random.default_rng(7)


def run(sch, args, *arrays, out_shape=None, out_dtype="float32", extra=()):
    """Build ``sch`` for the CPU and call it on ``arrays`` (+ scalar ``extra``); the output array."""
    f = autosched.build(sch, args)
    out = np.zeros(out_shape, dtype=out_dtype)
    f(*arrays, out, *extra)
    return out


def test_symbolic_reduction_and_elementwise_run_on_any_shape():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    C = topi.exp(topi.sum(A, axis=1, keepdims=True))
    s = te.create_schedule(C.op)
    f = autosched.build(s, [A, C, n, m])
    for shape in ((3, 5), (1, 17)):
        a = RNG.random(shape, dtype=np.float32)
        c = np.zeros((shape[0], 1), "float32")
        f(a, c, *shape)
        np.testing.assert_allclose(c, np.exp(a.sum(1, keepdims=True)), rtol=1e-5)


def test_tensor_operators_broadcast_with_tvms_tags():
    n = te.var("n")
    A = te.placeholder((), name="A")
    B = te.placeholder((10, 5), name="B")
    assert isinstance(n + A, te.Tensor) and isinstance(A + n, te.Tensor) and isinstance(2 + B, te.Tensor)
    assert (B + 1).op.tag == topi.tag.ELEMWISE and (n * B).op.tag == topi.tag.ELEMWISE
    assert (A + B).op.tag == topi.tag.BROADCAST and (B - B).op.tag == topi.tag.BROADCAST
    assert isinstance(B[0, 0] + n, autosched.tir.PrimExpr)  # expressions stay expressions
    assert isinstance(B[0, 0] + A, te.Tensor)
    x = te.var("x", dtype="float32")
    D = 3 + A - B * B / 2.0 + x
    s = te.create_schedule(D.op)
    a, b = np.array(0.5, "float32"), RNG.random((10, 5), dtype=np.float32)
    f = autosched.build(s, [x, A, B, D])
    out = np.zeros((10, 5), "float32")
    f(1.5, a, b, out)
    np.testing.assert_allclose(out, 3 + a - b * b / 2 + 1.5, rtol=1e-6)
    with pytest.raises(AutoschedError, match="do not broadcast"):
        topi.add(B, te.placeholder((10, 4), name="C"))


@pytest.mark.parametrize("fn,ref", [(topi.maximum, np.maximum), (topi.power, np.power),
                                    (topi.floor_mod, np.mod), (topi.greater, np.greater)])
def test_broadcast_operators_match_numpy(fn, ref):
    A = te.placeholder((4, 1, 6), name="A")
    B = te.placeholder((3, 1), name="B")
    C = fn(A, B)
    assert tuple(int(d) for d in C.shape) == (4, 3, 6)
    a, b = RNG.random((4, 1, 6), dtype=np.float32) + 0.5, RNG.random((3, 1), dtype=np.float32) + 0.5
    out = run(te.create_schedule(C.op), [A, B, C], a, b, out_shape=(4, 3, 6), out_dtype=C.dtype)
    np.testing.assert_allclose(out, ref(a, b), rtol=1e-5)


def test_reductions_and_arg_reductions_match_numpy():
    A = te.placeholder((6, 8), name="A")
    a = RNG.integers(0, 4, (6, 8)).astype("float32")  # ties: the first index wins, or the last one asked
    for fn, ref, kw in ((topi.max, np.max, {"axis": 0}), (topi.prod, np.prod, {"axis": (0, 1)}),
                        (topi.min, np.min, {"axis": 1, "keepdims": True})):
        C = fn(A, **kw)
        out = run(topi.generic.schedule_reduce(C), [A, C], a, out_shape=ref(a, **kw).shape)
        np.testing.assert_allclose(out, ref(a, **kw), rtol=1e-6)
    for fn, ref in ((topi.argmax, np.argmax), (topi.argmin, np.argmin)):
        C = fn(A, axis=1)
        out = run(te.create_schedule(C.op), [A, C], a, out_shape=(6,), out_dtype="int32")
        np.testing.assert_array_equal(out, ref(a, axis=1))
    C = topi.argmax(A, axis=1, select_last_index=True)
    out = run(te.create_schedule(C.op), [A, C], a, out_shape=(6,), out_dtype="int32")
    np.testing.assert_array_equal(out, 7 - np.argmax(a[:, ::-1], axis=1))
    C = topi.any(topi.greater(A, 2.5), axis=1)
    out = run(te.create_schedule(C.op), [A, C], a, out_shape=(6,), out_dtype="bool")
    np.testing.assert_array_equal(out, (a > 2.5).any(axis=1))


def test_conv2d_relu_takes_relays_default_cpu_nest_and_matches_the_reference():
    data = te.placeholder((1, 8, 14, 14), name="data")
    kernel = te.placeholder((16, 8, 3, 3), name="kernel")
    out = topi.nn.relu(topi.nn.conv2d_nchw(data, kernel, 1, 1, 1))
    s = topi.generic.schedule_conv2d_nchw([out])
    text = str(autosched.lower(s, [data, kernel, out]))
    assert "parallel" in text and "vectorized" in text  # relay's conv2d nest, not the naive loops
    d, k = RNG.random((1, 8, 14, 14), dtype=np.float32), RNG.random((16, 8, 3, 3), dtype=np.float32)
    got = run(s, [data, kernel, out], d, k, out_shape=(1, 16, 14, 14))
    want = np.maximum(topi.testing.conv2d_nchw_python(d, k, 1, 1), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_nn_operators_match_numpy():
    x = RNG.random((2, 4, 9, 9), dtype=np.float32)
    X = te.placeholder(x.shape, name="X")
    cases = [
        (topi.nn.pool2d(X, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max"),
         topi.testing.pool2d_nchw_python(x, (3, 3), (2, 2), (1, 1, 1, 1), "max")),
        (topi.nn.pool2d(X, (2, 2), (2, 2), (1, 1), (0, 0, 1, 1), "avg", count_include_pad=False),
         topi.testing.pool2d_nchw_python(x, (2, 2), (2, 2), (0, 0, 1, 1), "avg", count_include_pad=False)),
        (topi.nn.global_pool(X, "avg"), x.mean(axis=(2, 3), keepdims=True)),
        (topi.nn.softmax(X, axis=1), topi.testing.softmax_python(x, axis=1)),
        (topi.nn.pad(X, (0, 0, 1, 2), (0, 0, 2, 1), 0.5), np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)),
                                                                 constant_values=0.5)),
        (topi.transpose(X, (0, 2, 3, 1)), x.transpose(0, 2, 3, 1)),
        (topi.reshape(X, (8, -1)), x.reshape(8, -1)),
        (topi.concatenate([X, X], axis=1), np.concatenate([x, x], axis=1)),
        (topi.strided_slice(X, [0, 1, 0, 2], [2, 4, 9, 9], [1, 2, 3, 1]), x[0:2, 1:4:2, 0:9:3, 2:9]),
    ]
    for out, want in cases:
        s = topi.generic.default_schedule(out)
        got = run(s, [X, out], x, out_shape=want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    parts = topi.split(X, 2, axis=1)
    assert [tuple(int(d) for d in p.shape) for p in parts] == [(2, 2, 9, 9), (2, 2, 9, 9)]


def test_dense_batch_matmul_and_depthwise_match_numpy():
    a, w, b = (RNG.random(s, dtype=np.float32) for s in ((5, 12), (7, 12), (7,)))
    A, W, B = te.placeholder(a.shape, name="A"), te.placeholder(w.shape, name="W"), te.placeholder(b.shape, name="B")
    out = topi.nn.dense(A, W, B)
    got = run(topi.x86.schedule_dense(out), [A, W, B, out], a, w, b, out_shape=(5, 7))
    np.testing.assert_allclose(got, a @ w.T + b, rtol=1e-5)
    x, y = RNG.random((3, 4, 6), dtype=np.float32), RNG.random((3, 5, 6), dtype=np.float32)
    X, Y = te.placeholder(x.shape, name="X"), te.placeholder(y.shape, name="Y")
    out = topi.nn.batch_matmul(X, Y)
    got = run(topi.generic.schedule_batch_matmul(out), [X, Y, out], x, y, out_shape=(3, 4, 5))
    np.testing.assert_allclose(got, topi.testing.batch_matmul(x, y), rtol=1e-5)
    d, k = RNG.random((1, 6, 10, 10), dtype=np.float32), RNG.random((6, 2, 3, 3), dtype=np.float32)
    D, K = te.placeholder(d.shape, name="D"), te.placeholder(k.shape, name="K")
    out = topi.nn.depthwise_conv2d_nchw(D, K, 2, "SAME", 1)
    want = topi.testing.depthwise_conv2d_python_nchw(d, k, 2, "SAME")
    got = run(topi.generic.schedule_depthwise_conv2d_nchw(out), [D, K, out], d, k, out_shape=want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_operators_that_need_constant_shapes_say_so():
    n = te.var("n")
    with pytest.raises(AutoschedError, match="needs constant shapes"):
        topi.nn.softmax(te.placeholder((n, 4), name="A"))
    with pytest.raises(AutoschedError, match="pool_type"):
        topi.nn.pool2d(te.placeholder((1, 1, 4, 4)), (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "median")


def test_cuda_schedules_bind_threads_and_ptxas_accepts_them():
    data = te.placeholder((1, 3, 32, 32), name="data")
    kernel = te.placeholder((10, 3, 5, 5), name="kernel")
    x = te.placeholder((100, 10, 10), name="x")
    t = te.placeholder((64, 512), name="t")
    with Target("cuda -arch=sm_80"):
        conv = topi.nn.relu(topi.cuda.conv2d_nchw(data, kernel, 1, 2, 1))
        total, soft = topi.sum(x), topi.nn.softmax(t)
        kernels = [(topi.cuda.schedule_conv2d_nchw([conv]), [data, kernel, conv]),
                   (topi.cuda.schedule_reduce(total), [x, total]),  # one value: one block reduces it all
                   (topi.cuda.schedule_softmax(soft), [t, soft])]
    for sch, args in kernels:
        text = str(autosched.lower(sch, args, target="cuda"))
        assert "blockIdx.x" in text and "threadIdx.x" in text
        if ptxas_path() is not None:
            mod = autosched.build(sch, args, target="cuda -arch=sm_80")
            ptxas_check(mod.imported_modules[0].get_source(), "sm_80")


def test_tvm_testing_helpers_choose_targets():
    assert autosched.testing.device_enabled("llvm")
    assert not autosched.testing.device_enabled("opencl")
    assert ("llvm", autosched.cpu(0)) in autosched.testing.enabled_targets()
    assert not autosched.device("opencl", 0).exist  # TVM's tests make one before asking
    with pytest.raises(ValueError, match="cpu .llvm. and on cuda"):
        autosched.nd.array(np.zeros(2), autosched.device("opencl", 0))
    assert topi.testing.get_broadcast_schedule("cuda") is topi.cuda.schedule_broadcast
    compute, schedule = topi.testing.get_conv2d_nchw_implement("llvm")
    assert compute is topi.nn.conv2d_nchw and schedule is topi.generic.schedule_conv2d_nchw
    assert autosched.target.cuda(arch="sm_90").options["arch"] == "sm_90"


def test_transposed_and_nhwc_convolutions_match_their_references():
    d, w = RNG.random((1, 4, 7, 7), dtype=np.float32), RNG.random((4, 3, 3, 3), dtype=np.float32)
    D, W = te.placeholder(d.shape, name="D"), te.placeholder(w.shape, name="W")
    for stride, pad, output_padding in ((2, 1, (1, 1)), (3, (1, 0, 2, 1), (0, 2))):
        out = topi.nn.conv2d_transpose_nchw(D, W, stride, pad, "float32", output_padding)
        want = topi.testing.conv2d_transpose_nchw_python(d, w, stride, pad, output_padding)
        got = run(topi.generic.schedule_conv2d_transpose_nchw(out), [D, W, out], d, w, out_shape=want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    x, k = RNG.random((2, 9, 9, 4), dtype=np.float32), RNG.random((3, 3, 4, 6), dtype=np.float32)
    X, K = te.placeholder(x.shape, name="X"), te.placeholder(k.shape, name="K")
    out = topi.nn.conv2d(X, K, 2, "SAME", 1, layout="NHWC")
    want = topi.testing.conv2d_nhwc_python(x, k, 2, "SAME")
    got = run(topi.generic.schedule_conv2d_nhwc(out), [X, K, out], x, k, out_shape=want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_traverse_inline_visits_every_compute_stage_consumers_first():
    conv = topi.nn.conv2d_nchw(te.placeholder((1, 4, 8, 8)), te.placeholder((4, 4, 3, 3)), 1, 1, 1)
    out = topi.nn.relu(conv)
    seen = []
    topi.utils.traverse_inline(te.create_schedule(out.op), out.op, lambda op: seen.append(op.name))
    assert seen == ["relu", "conv2d", "pad"]
    assert topi.utils.get_const_tuple(out.shape) == (1, 4, 8, 8)


def test_take_where_argmax_and_full_like_follow_tvm():
    a = np.arange(12, dtype="float32").reshape(3, 4)
    A = te.placeholder((3, 4), name="A")
    idx = np.array([-1, 2, 7], dtype="int32")
    Ind = te.placeholder((3,), "int32", name="Ind")
    for mode in ("clip", "wrap"):
        for axis in (None, 1):
            out = topi.take(A, Ind, axis=axis, mode=mode)
            want = np.take(a, idx, axis=axis, mode=mode)
            got = run(topi.generic.schedule_injective(out), [A, Ind, out], a, idx, out_shape=want.shape)
            np.testing.assert_array_equal(got, want)
    cond = np.array([[1.0, 0.0, 2.0, 0.0]], "float32")  # a float condition: nonzero is true
    C = te.placeholder((1, 4), name="C")
    out = topi.where(C, A, 0.5)
    got = run(te.create_schedule(out.op), [C, A, out], cond, a, out_shape=(3, 4))
    np.testing.assert_array_equal(got, np.where(cond != 0, a, 0.5))
    out = topi.argmax(A, axis=None, keepdims=True)
    got = run(te.create_schedule(out.op), [A, out], a, out_shape=(1, 1), out_dtype="int32")
    assert got.tolist() == [[11]]
    out = topi.full_like(A, 3.0)  # A is an argument the kernel does not read, as TVM allows
    got = run(te.create_schedule(out.op), [A, out], a, out_shape=(3, 4))
    assert (got == 3.0).all()
    assert topi.greater(A, 2.0).astype("int8").dtype == "int8"
    assert autosched.lower(te.create_schedule(topi.isinf(te.placeholder((2,), "int32")).op),
                           [te.placeholder((2,), "int32")]) is not None


def test_same_padding_uses_the_dilated_kernel_and_other_targets_are_refused_by_name():
    x, k = RNG.random((1, 2, 9, 9), dtype=np.float32), RNG.random((3, 2, 3, 3), dtype=np.float32)
    X, K = te.placeholder(x.shape, name="X"), te.placeholder(k.shape, name="K")
    out = topi.nn.conv2d_nchw(X, K, 1, "SAME", 2)
    want = topi.testing.conv2d_nchw_python(x, k, 1, (2, 2), dilation=2)
    assert tuple(int(d) for d in out.shape) == want.shape == (1, 3, 9, 9)
    got = run(topi.generic.schedule_conv2d_nchw(out), [X, K, out], x, k, out_shape=want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert topi.testing.dispatch("cuda", {"generic": 1, "gpu": 2}) == 2
    assert topi.testing.dispatch("llvm", {"generic": 1, "gpu": 2}) == 1
    with pytest.raises(AutoschedError, match="no hls target"):
        topi.hls.schedule_softmax(out)


def _build_run(outs, ins, in_vals, out_dtypes=None):
    outs = outs if isinstance(outs, list) else [outs]
    f = autosched.build(te.create_schedule([o.op for o in outs]), list(ins) + outs)
    bufs = [np.zeros(tuple(int(d) for d in o.shape), o.dtype) for o in outs]
    f(*in_vals, *bufs)
    return bufs if len(bufs) > 1 else bufs[0]


def test_indexing_operators_match_numpy():
    data = RNG.random((3, 4, 5), dtype=np.float32)
    D = te.placeholder(data.shape, name="D")
    idx = RNG.integers(0, 4, (3, 2, 5)).astype("int32")
    I = te.placeholder(idx.shape, name="I", dtype="int32")
    np.testing.assert_array_equal(_build_run(topi.gather(D, 1, I), [D, I], [data, idx]),
                                  topi_ref.gather_python(data, 1, idx))
    nd_idx = np.array([[0, 2, 1], [3, 0, 1]], "int64")
    J = te.placeholder(nd_idx.shape, name="J", dtype="int64")
    np.testing.assert_array_equal(_build_run(topi.gather_nd(D, J), [D, J], [data, nd_idx]),
                                  topi_ref.gather_nd_python(data, nd_idx))
    hot = np.array([[0, 3], [2, 1]], "int32")
    H = te.placeholder(hot.shape, name="H", dtype="int32")
    for axis in (-1, 0, 1):
        np.testing.assert_array_equal(_build_run(topi.one_hot(H, 5.0, -1.0, 4, axis, "float32"), [H], [hot]),
                                      topi_ref.one_hot(hot, 5.0, -1.0, 4, axis, "float32"))
    seq = RNG.random((6, 3, 2), dtype=np.float32)
    S = te.placeholder(seq.shape, name="S")
    lens = np.array([2, 6, 0], "int32")
    L = te.placeholder((3,), name="L", dtype="int32")
    np.testing.assert_array_equal(_build_run(topi.sequence_mask(S, L, -7.0, 0), [S, L], [seq, lens]),
                                  topi_ref.sequence_mask(seq, lens, -7.0, 0))
    rev = _build_run(topi.reverse_sequence(S, L, seq_axis=0, batch_axis=1), [S, L], [seq, lens])
    want = seq.copy()
    for b, n in enumerate(lens):
        want[:n, b] = seq[:n, b][::-1]
    np.testing.assert_array_equal(rev, want)
    flat = np.array([0, 7, 23, 59], "int32")
    F = te.placeholder((4,), name="F", dtype="int32")
    Sh = te.placeholder((3,), name="Sh", dtype="int32")
    np.testing.assert_array_equal(_build_run(topi.unravel_index(F, Sh), [F, Sh], [flat, np.array([3, 4, 5], "int32")]),
                                  np.array(np.unravel_index(flat, (3, 4, 5))))


def test_scatter_like_operators_and_shapes_match_numpy():
    sp_idx = np.array([[0, 1], [2, 3], [1, 0]], "int32")
    sp_val = np.array([1.5, -2.0, 4.0], "float32")
    SI = te.placeholder(sp_idx.shape, name="SI", dtype="int32")
    SV = te.placeholder((3,), name="SV")
    dense = _build_run(topi.sparse_to_dense(SI, (3, 4), SV, 0.5), [SI, SV], [sp_idx, sp_val])
    want = np.full((3, 4), 0.5, "float32")
    want[tuple(sp_idx.T)] = sp_val
    np.testing.assert_array_equal(dense, want)
    mat = RNG.random((2, 4, 5), dtype=np.float32)
    M = te.placeholder(mat.shape, name="M")
    diag = RNG.random((2, 4), dtype=np.float32)
    Dg = te.placeholder(diag.shape, name="Dg")
    np.testing.assert_array_equal(_build_run(topi.matrix_set_diag(M, Dg), [M, Dg], [mat, diag]),
                                  topi_ref.matrix_set_diag(mat, diag))
    band = RNG.random((2, 3, 4), dtype=np.float32)  # k = -1..1: three diagonals, 4 long at most
    B = te.placeholder(band.shape, name="B")
    for align in ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"):
        np.testing.assert_array_equal(
            _build_run(topi.matrix_set_diag(M, B, (-1, 1), align), [M, B], [mat, band]),
            topi_ref.matrix_set_diag(mat, band, (-1, 1), align))
    a = RNG.random((6, 5), dtype=np.float32)
    v = RNG.random((2, 2), dtype=np.float32)
    A, V = te.placeholder(a.shape, name="A"), te.placeholder(v.shape, name="V")
    Be, En, St = (te.placeholder((2,), name=n, dtype="int64") for n in ("Be", "En", "St"))
    got = _build_run(topi.strided_set(A, V, Be, En, St), [A, V, Be, En, St],
                     [a, v, np.array([1, -4], "int64"), np.array([5, 5], "int64"), np.array([3, 2], "int64")])
    np.testing.assert_array_equal(got, topi_ref.strided_set_python(a, v, [1, 1], [5, 5], [3, 2]))
    assert list(_build_run(topi.shape(A, "int32"), [A], [a])) == [6, 5]
    assert int(_build_run(topi.ndarray_size(A, "int64"), [A], [a])) == 30
    T = te.placeholder((6, 1, 5), name="T")
    np.testing.assert_array_equal(_build_run(topi.expand_like(A, T, [1]), [A], [a]), a[:, None, :])
    x, y = np.arange(3, dtype="float32"), np.arange(4, dtype="float32") * 10
    X, Y = te.placeholder((3,), name="X"), te.placeholder((4,), name="Y")
    for indexing in ("ij", "xy"):
        gx, gy = _build_run(topi.meshgrid([X, Y], indexing), [X, Y], [x, y])
        wx, wy = np.meshgrid(x, y, indexing=indexing)
        np.testing.assert_array_equal(gx, wx)
        np.testing.assert_array_equal(gy, wy)
    perm = np.array([2, 0, 3, 1], "int32")
    P = te.placeholder((4,), name="P", dtype="int32")
    np.testing.assert_array_equal(_build_run(topi.invert_permutation(P), [P], [perm]), np.argsort(perm))
    i0, i1 = np.array([[0], [5]], "int32"), np.array([1, 4, 2], "int32")
    I0, I1 = te.placeholder(i0.shape, name="I0", dtype="int32"), te.placeholder(i1.shape, name="I1", dtype="int32")
    np.testing.assert_array_equal(_build_run(topi.adv_index(A, [I0, I1]), [A, I0, I1], [a, i0, i1]), a[i0, i1])
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        topi.one_hot(te.placeholder((2,), dtype="int32"), 1, 0, 3, 3, "float32")


def test_nd_pooling_adaptive_pooling_and_pool_grad():
    """pool1d/pool3d in any layout and adaptive pooling match loop references; the n-D pooling in 2-D agrees
    with relay's pool2d (ceil mode and pad counting included); pool_grad is pool2d's adjoint."""
    x1 = RNG.random((1, 3, 13), dtype=np.float32)
    for layout, data in (("NCW", x1), ("NWC", x1.transpose(0, 2, 1).copy())):
        A = te.placeholder(data.shape, name="A")
        for pool_type, ceil, include in (("max", False, True), ("avg", True, False), ("avg", True, True)):
            B = topi.nn.pool1d(A, [3], [2], [2], [1, 2], pool_type, ceil, layout, include)
            want = topi_ref.poolnd_python(data, [3], [2], [2], [1], [2], pool_type, include, ceil, layout=layout)
            np.testing.assert_allclose(_build_run(B, [A], [data]), want, rtol=1e-5)
    x3 = RNG.random((1, 2, 5, 6, 7), dtype=np.float32)
    A3 = te.placeholder(x3.shape, name="A3")
    B3 = topi.nn.pool3d(A3, [2, 3, 2], [2, 1, 2], [1, 1, 1], [1, 0, 1, 0, 1, 1], "avg", True, "NCDHW", False)
    np.testing.assert_allclose(_build_run(B3, [A3], [x3]),
                               topi_ref.poolnd_python(x3, [2, 3, 2], [2, 1, 2], [1, 1, 1], [1, 0, 1], [0, 1, 1], "avg",
                                                 False, True), rtol=1e-5)
    x2 = RNG.random((1, 2, 11, 10), dtype=np.float32)
    A2 = te.placeholder(x2.shape, name="A2")
    for pool_type, ceil, include in (("max", True, True), ("avg", True, True), ("avg", False, False)):
        mine = poolnd(A2, [3, 2], [2, 3], [1, 1], [1, 0, 2, 1], pool_type, ceil, "NCHW", include, "pool2d")
        relays = topi.nn.pool2d(A2, [3, 2], [2, 3], [1, 1], [1, 0, 2, 1], pool_type, ceil, "NCHW", include)
        assert [int(d) for d in mine.shape] == [int(d) for d in relays.shape]
        np.testing.assert_allclose(_build_run(mine, [A2], [x2]), _build_run(relays, [A2], [x2]), rtol=1e-6)
    for out_size, layout, data in (((3, 4), "NCHW", x2), ((2, 3, 4), "NCDHW", x3),
                                   ((4, 3), "NHWC", x2.transpose(0, 2, 3, 1).copy())):
        T = te.placeholder(data.shape, name="T")
        for pool_type in ("max", "avg"):
            fn = topi.nn.adaptive_pool3d if len(out_size) == 3 else topi.nn.adaptive_pool
            np.testing.assert_allclose(_build_run(fn(T, out_size, pool_type, layout), [T], [data]),
                                       topi_ref.adaptive_pool(data, out_size, pool_type, layout), rtol=1e-5)
    G = te.placeholder((1, 2, 6, 4), name="G")
    g = RNG.random((1, 2, 6, 4), dtype=np.float32)
    for pool_type, include in (("max", True), ("avg", True), ("avg", False)):
        P = topi.nn.pool_grad(G, A2, [3, 2], [2, 3], [1, 0, 2, 1], pool_type, count_include_pad=include)
        s = topi.generic.schedule_pool_grad(P)
        f = autosched.build(s, [A2, G, P])
        out = np.zeros(x2.shape, "float32")
        f(x2, g, out)
        np.testing.assert_allclose(out, topi_ref.pool_grad_nchw(x2, g, (3, 2), (2, 3), (1, 0, 2, 1), pool_type, False,
                                                            include), rtol=1e-5, atol=1e-6)
    with pytest.raises(AutoschedError, match="grads of shape"):
        topi.nn.pool_grad(te.placeholder((1, 2, 3, 3)), A2, [3, 2], [2, 3], [1, 0, 2, 1], "max")
    with pytest.raises(AutoschedError, match="is not a 1-D pooling layout"):
        topi.nn.pool1d(A2, [3], [1], [1], [0, 0], "max", layout="NCHW")


def test_get_shape_between_layouts_and_lrn_reference():
    assert get_shape((1, 3, 224, 224), "NCHW", "NHWC") == (1, 224, 224, 3)
    assert get_shape((2, 3, 32, 32, 16, 8), "OIHW16i8o", "HWO8oI16i") == (32, 32, 2, 8, 3, 16)
    with pytest.raises(AutoschedError, match="must name the same axes"):
        get_shape((1, 3, 4, 4), "NCHW", "NCHW4c")
    a = RNG.random((1, 6, 3, 3), dtype=np.float32)
    A = te.placeholder(a.shape, name="A")
    out = _build_run(topi.nn.lrn(A, 3, 1, 1e-4, 0.75, 2.0), [A], [a])
    np.testing.assert_allclose(out, topi_ref.lrn_python(a, 3, 1, 2.0, 1e-4, 0.75), rtol=1e-5)


def test_sort_argsort_topk_and_running_sums_match_numpy():
    x = RNG.permutation(4 * 30).astype("float32").reshape(4, 30)  # distinct values: one right order
    data = te.placeholder(x.shape, name="data")
    for axis in (0, 1, -1):
        for ascend in (True, False):
            order = np.argsort(x if ascend else -x, axis=axis, kind="stable")
            for compute, want, dtype in ((topi.sort(data, axis, ascend), np.take_along_axis(x, order, axis),
                                          "float32"),
                                         (topi.argsort(data, axis=axis, is_ascend=ascend, dtype="int32"), order,
                                          "int32")):
                sch = topi.generic.schedule_sort(compute)
                np.testing.assert_array_equal(run(sch, [data, compute], x, out_shape=x.shape, out_dtype=dtype),
                                              want)
    values, indices = topi.topk(data, k=5, axis=1, ret_type="both", is_ascend=False, dtype="int64")
    sch = topi.generic.schedule_topk([values, indices])
    v, i = np.zeros((4, 5), "float32"), np.zeros((4, 5), "int64")
    autosched.build(sch, [data, values, indices])(x, v, i)
    np.testing.assert_array_equal(i, np.argsort(-x, axis=1)[:, :5])
    np.testing.assert_array_equal(v, -np.sort(-x, axis=1)[:, :5])
    assert int(topi.topk(data, k=0, ret_type="values").shape[1]) == 30  # k < 1: the whole axis
    with pytest.raises(AutoschedError, match="valid_count"):
        topi.argsort(data, valid_count=data)
    with pytest.raises(AutoschedError, match="ret_type 'all'"):
        topi.topk(data, ret_type="all")

    a = RNG.integers(-5, 5, size=(6, 7)).astype("int32")
    A = te.placeholder(a.shape, dtype="int32", name="A")
    cases = [(topi.cumsum(A), np.cumsum(a).astype("int32")),  # no axis: the flattened tensor
             (topi.cumsum(A, axis=1, dtype="int64"), np.cumsum(a, axis=1, dtype="int64")),
             (topi.cumsum(A, axis=0, exclusive=True), (np.cumsum(a, axis=0) - a).astype("int32")),
             (topi.cumprod(A, axis=-1, dtype="float64"), np.cumprod(a.astype("float64"), axis=-1))]
    for out, want in cases:
        sch = topi.generic.schedule_scan(out)
        got = run(sch, [A, out], a, out_shape=want.shape, out_dtype=want.dtype)
        np.testing.assert_array_equal(got, want)


def test_grouped_convolutions_under_topis_names():
    """``topi.nn.group_conv2d_nchw`` / ``_nhwc`` (TVM's arguments, with ``groups``) and their schedules: relay's
    grouped conv2d, against the numpy reference."""
    rng = np.random.default_rng(11)
    x_np = rng.standard_normal((1, 8, 9, 9)).astype("float32")
    w_np = rng.standard_normal((12, 2, 3, 3)).astype("float32")  # 4 groups of 2 -> 3 channels
    ref = topi.testing.conv2d_nchw_python(x_np, w_np, 2, 1, groups=4)
    for layout in ("NCHW", "NHWC"):
        nhwc = layout == "NHWC"
        xv = x_np.transpose(0, 2, 3, 1).copy() if nhwc else x_np
        wv = w_np.transpose(2, 3, 1, 0).copy() if nhwc else w_np
        x, w = te.placeholder(xv.shape, name="x"), te.placeholder(wv.shape, name="w")
        fn = topi.nn.group_conv2d_nhwc if nhwc else topi.nn.group_conv2d_nchw
        y = fn(x, w, 2, 1, 1, 4)
        s = (topi.generic.schedule_group_conv2d_nhwc if nhwc else topi.generic.schedule_group_conv2d_nchw)([y])
        out = autosched.nd.array(np.zeros([int(d) for d in y.shape], "float32"))
        autosched.build(s, [x, w, y], "llvm")(autosched.nd.array(xv), autosched.nd.array(wv), out)
        got = out.numpy().transpose(0, 3, 1, 2) if nhwc else out.numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
