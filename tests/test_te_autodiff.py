"""te.gradient (TVM's autodiff): the adjoints of te computations are te computations that build and match
central differences and numpy's closed forms; index equations are solved, so a convolution's input gradient sums
over kernel taps and channels, not over the whole output; what cannot be differentiated is refused by name.
Also topi.einsum / tensordot (the contractions TVM's autodiff tests use) and dilated average pooling."""

from __future__ import annotations

import numpy as np
import pytest

import autosched
from autosched import te, topi
from autosched.testing import check_numerical_grads

RNG = np.random.default_rng(11)


def _rand(t, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=tuple(int(d) for d in t.shape)).astype(t.dtype)


def grads_of(out, inputs, values, args=(), arg_values=()):
    """Build ``te.gradient(out, inputs)`` under a head of ones and run it: the gradients of ``sum(out)``."""
    grads = te.gradient(out, inputs, head=topi.full_like(out, 1.0))
    s = te.create_schedule([g.op for g in grads])
    f = autosched.build(s, list(grads) + list(inputs) + list(args))
    bufs = [np.zeros(tuple(int(d) for d in g.shape), g.dtype) for g in grads]
    f(*bufs, *values, *arg_values)
    return bufs


def check(out, inputs, lo=-2.0, hi=2.0, args=()):
    """The gradients of ``sum(out)`` agree with central differences of the compiled forward computation."""
    values = [_rand(t, lo, hi) for t in inputs]
    arg_values = [_rand(t, lo, hi) for t in args]
    grads = grads_of(out, inputs, values, args, arg_values)
    fwd = autosched.build(te.create_schedule(out.op), [out, *inputs, *args])

    def total(*vals):
        buf = np.zeros(tuple(int(d) for d in out.shape), out.dtype)
        fwd(buf, *[v.astype(t.dtype) for v, t in zip(vals, inputs)], *arg_values)
        return buf.astype(np.float64).sum()

    check_numerical_grads(total, values, grads)


def test_elementwise_and_reduction_gradients_match_central_differences():
    A = te.placeholder((6, 6), name="A")
    B = te.placeholder((6, 6), name="B")
    k = te.reduce_axis((0, 6), name="k")
    check(te.compute((6, 6), lambda i, j: A[i, j] * (B[j, i] + A[j, i]), name="C"), [A, B])
    check(te.compute((6, 6), lambda i, j: te.sigmoid(A[i, j] * A[j, i]) + te.tanh(B[i, j]), name="C"), [A, B])
    check(te.compute((6, 6), lambda i, j: te.log(0.5 + te.abs(A[i, j] + te.exp(B[j, i]))), name="C"), [A, B])
    check(te.compute((6, 6), lambda i, j: te.power(te.abs(A[i, j]) + 0.5, B[j, i]), name="C"), [A, B])
    check(te.compute((6,), lambda i: te.sum(A[i, k] * B[k, i], axis=k), name="C"), [A, B])
    check(te.compute((6, 6), lambda i, j: te.max(A[i, k] * B[k, j], axis=k), name="C"), [A, B])
    check(te.compute((6,), lambda i: te.sum(A[k, k] - A[te.min(i + k, 5), i] * B[i, k], axis=k), name="C"), [A, B])
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, t), name="prod")
    check(te.compute((6,), lambda i: prod(A[i, k] + 3.0, axis=k), name="C"), [A], lo=0.5, hi=1.5)
    zero = grads_of(te.compute((6, 6), lambda i, j: te.floor(A[i, j]) + te.trunc(B[i, j]), name="C"),
                    [A, B], [_rand(A), _rand(B)])
    assert all(not g.any() for g in zero)


def test_sigmoid_gradient_stays_finite_where_exp_overflows():
    A = te.placeholder((4,), name="A")
    (g,) = grads_of(te.compute((4,), lambda i: te.sigmoid(A[i]), name="C"), [A],
                    [np.array([-200.0, -1.0, 1.0, 200.0], "float32")])
    s = 1 / (1 + np.exp(-np.array([-1.0, 1.0])))
    np.testing.assert_allclose(g, [0.0, s[0] * (1 - s[0]), s[1] * (1 - s[1]), 0.0], rtol=1e-5, atol=1e-30)


def test_conv2d_gradients_are_transposed_convolutions_over_the_taps_only():
    X = te.placeholder((1, 2, 9, 9), name="X")
    W = te.placeholder((3, 2, 3, 3), name="W")
    Y = topi.nn.conv2d(X, W, 2, 1, 1)  # stride 2, padding 1
    gx, gw = te.gradient(Y, [X, W], head=topi.full_like(Y, 1.0))
    x, w = _rand(X), _rand(W)
    bx, bw = grads_of(Y, [X, W], [x, w])
    # numpy: d sum(Y) / d X[c, h, w] = sum over (o, rh, rw, y, xx) with y*2 + rh - 1 == h, ...
    ref_x, ref_w = np.zeros_like(x), np.zeros_like(w)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for y in range(5):
        for xx in range(5):
            ref_w += xp[0, :, y * 2:y * 2 + 3, xx * 2:xx * 2 + 3][None]
            for o in range(3):
                ref_x_pad = np.zeros_like(xp)
                ref_x_pad[0, :, y * 2:y * 2 + 3, xx * 2:xx * 2 + 3] = w[o]
                ref_x += ref_x_pad[:, :, 1:-1, 1:-1]
    np.testing.assert_allclose(bx, ref_x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bw, ref_w, rtol=1e-5, atol=1e-5)

    def reduce_extents(t):
        """The reduction extents of every compute behind ``t`` that has one."""
        out, stack, seen = [], [t], set()
        while stack:
            op = stack.pop().op
            if id(op) in seen:
                continue
            seen.add(id(op))
            if getattr(op, "reduce_axis", None) and "adj" in op.name:
                out.append([int(r.dom.extent) for r in op.reduce_axis])
            stack.extend(op.input_tensors)
        return out

    assert reduce_extents(gx) == [[3, 3, 3]]  # output channels x kernel taps, not the 5x5 output
    assert reduce_extents(gw) == [[5, 5]]  # the output positions (the batch of 1 is solved for)


def test_pooling_softmax_reshape_take_and_concatenate_gradients():
    X = te.placeholder((1, 2, 6, 6), name="X")
    check(topi.nn.pool2d(X, [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], "max"), [X])
    check(topi.nn.pool2d(X, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], "avg"), [X])
    check(topi.nn.softmax(topi.reshape(X, (2, 36))), [X])
    check(topi.nn.log_softmax(topi.reshape(X, (1, 72))), [X])
    Y = te.placeholder((1, 3, 6, 6), name="Y")
    check(topi.concatenate((X, Y), 1), [X, Y])
    V = te.placeholder((5, 4), name="V")
    Idx = te.placeholder((7,), name="I", dtype="int32")
    out = topi.take(V, Idx)
    idx = np.array([0, 3, 3, 19, 7, 0, 12], "int32")
    (g,) = grads_of(out, [V], [_rand(V)], [Idx], [idx])
    np.testing.assert_array_equal(g.reshape(-1), np.bincount(idx, minlength=20))


def test_jacobian_without_a_head_and_a_prefixed_head():
    A = te.placeholder((3, 4), name="A")
    B = te.placeholder((4, 2), name="B")
    C = topi.einsum("ij,jk->ik", A, B)
    ja, jb = te.gradient(C, [A, B])
    assert tuple(int(d) for d in ja.shape) == (3, 2, 3, 4) and tuple(int(d) for d in jb.shape) == (3, 2, 4, 2)
    a, b = _rand(A), _rand(B)
    f = autosched.build(te.create_schedule([ja.op, jb.op]), [ja, jb, A, B])
    oa, ob = np.zeros((3, 2, 3, 4), "float32"), np.zeros((3, 2, 4, 2), "float32")
    f(oa, ob, a, b)
    eye3, eye2 = np.eye(3), np.eye(2)
    np.testing.assert_allclose(oa, np.einsum("ip,jk->ikpj", eye3, b), rtol=1e-6)  # dC[i,k]/dA[p,j] = [i=p] B[j,k]
    np.testing.assert_allclose(ob, np.einsum("ij,kq->ikjq", a, eye2), rtol=1e-6)  # dC[i,k]/dB[j,q] = A[i,j] [k=q]
    # a head with a prefix: two vectors at once, the results gain the prefix
    H = te.placeholder((2, 3, 2), name="H")
    (ga,) = te.gradient(C, [A], head=H)
    h = _rand(H)
    f = autosched.build(te.create_schedule(ga.op), [ga, A, B, H])
    out = np.zeros((2, 3, 4), "float32")
    f(out, a, b, h)
    np.testing.assert_allclose(out, np.einsum("pik,jk->pij", h, b), rtol=1e-5)


def test_what_cannot_be_differentiated_is_refused_by_name():
    A = te.placeholder((4, 4), name="A")
    Ai = te.placeholder((4,), name="Ai", dtype="int32")
    k = te.reduce_axis((0, 4), name="k")
    C = te.compute((4,), lambda i: A[i, 0] * 2.0, name="C")
    with pytest.raises(TypeError, match="Ai is int32"):
        te.gradient(C, [Ai])
    with pytest.raises(ValueError, match="must end with the output C's shape"):
        te.gradient(C, [A], head=te.placeholder((5,), name="H"))
    weird = te.comm_reducer(lambda x, y: x * 2.0 + y, lambda t: te.const(0, t), name="weird")
    W = te.compute((4,), lambda i: weird(A[i, k], axis=k), name="W")
    with pytest.raises(TypeError, match="reduction 'weird'"):
        te.gradient(W, [A])
    argmax = te.comm_reducer(lambda x, y: (te.if_then_else(x[1] >= y[1], x[0], y[0]),
                                           te.if_then_else(x[1] >= y[1], x[1], y[1])),
                             lambda t0, t1: (te.const(-1, t0), te.min_value(t1)), name="argmax")
    M = te.compute((4,), lambda i: argmax((k, A[i, k]), axis=k), name="M")
    with pytest.raises(TypeError, match="tuple reduction 'argmax'"):
        te.gradient(M[1], [A])


def test_check_numerical_grads_catches_a_wrong_gradient():
    x = RNG.uniform(-1, 1, size=(5,))

    def f(v):
        return float((v ** 2).sum())

    check_numerical_grads(f, [x], [2 * x])
    with pytest.raises(AssertionError, match="input 0 differs"):
        check_numerical_grads(f, [x], [3 * x])


def test_einsum_and_tensordot_match_numpy():
    A = te.placeholder((3, 4, 5), name="A")
    B = te.placeholder((5, 4, 2), name="B")
    D = te.placeholder((3, 3), name="D")
    a, b, d = _rand(A), _rand(B), _rand(D)
    cases = [
        (topi.tensordot(A, B, ((1, 2), (1, 0))), [A, B], [a, b], np.tensordot(a, b, ((1, 2), (1, 0)))),
        (topi.tensordot(A, B, 1), [A, B], [a, b], np.tensordot(a, b, 1)),
        (topi.einsum("ii->i", D), [D], [d], np.einsum("ii->i", d)),
        (topi.einsum("ijk,kjl", A, B), [A, B], [a, b], np.einsum("ijk,kjl", a, b)),
        (topi.einsum("ii", D), [D], [d], np.einsum("ii", d)),
        (topi.einsum("...jk,kjl->...l", A, B), [A, B], [a, b], np.einsum("...jk,kjl->...l", a, b)),
        (topi.einsum("...i", D), [D], [d], np.einsum("...i", d)),
    ]
    for out, ins, vals, ref in cases:
        f = autosched.build(te.create_schedule(out.op), [*ins, out])
        buf = np.zeros(ref.shape, "float32")
        f(*vals, buf)
        np.testing.assert_allclose(buf, ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="more than one ellipsis"):
        topi.einsum("...i...->i", D)
    with pytest.raises(ValueError, match="dimension .k. has extents 5 and 2, which do not broadcast"):
        topi.einsum("ijk,lmk->ijlm", A, B)
    with pytest.raises(ValueError, match="does not name the 2 dimensions of D"):
        topi.einsum("ijk->i", D)


def test_dilated_average_pooling_counts_only_the_taps_inside():
    X = te.placeholder((1, 1, 9, 9), name="X")
    x = _rand(X)
    for include_pad in (False, True):
        Y = topi.nn.pool2d(X, [3, 3], [2, 1], [2, 2], [1, 1, 1, 1], "avg", count_include_pad=include_pad)
        f = autosched.build(te.create_schedule(Y.op), [X, Y])
        out = np.zeros(tuple(int(d) for d in Y.shape), "float32")
        f(x, out)
        ref = np.zeros_like(out)
        for y in range(out.shape[2]):
            for xx in range(out.shape[3]):
                taps = [(y * 2 - 1 + 2 * r, xx - 1 + 2 * c) for r in range(3) for c in range(3)]
                inside = [x[0, 0, h, w] for h, w in taps if 0 <= h < 9 and 0 <= w < 9]
                ref[0, 0, y, xx] = sum(inside) / (9 if include_pad else len(inside))
        np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_a_reshapes_gradient_is_a_gather_not_a_sum_over_every_element():
    X = te.placeholder((4, 6, 5), name="X")
    for shape in [(24, 5), (120,), (2, 60), (5, 4, 6), (4, 30)]:
        Y = topi.reshape(X, shape)
        (g,) = te.gradient(Y, [X], head=te.placeholder(tuple(int(d) for d in Y.shape), name="H"))
        assert not g.op.reduce_axis, (shape, g.op.body[0])  # each element reads its one source: linear, not n^2
        x = _rand(X)
        (gx,) = grads_of(Y * Y, [X], [x])
        np.testing.assert_allclose(gx, 2 * x, rtol=1e-6)
    # a division that is not a flattened index keeps its sum: each element of X feeds two of Y
    Z = te.compute((8,), lambda i: X[0, 0, i // 2] * 3.0, name="Z")
    (gz,) = grads_of(Z, [X], [_rand(X)])
    want = np.zeros((4, 6, 5), "float32")
    want[0, 0, :4] = 6.0
    np.testing.assert_allclose(gz, want)
    # the digits of an index that wraps around X (L up to 240 over 120 elements) are not one number: summed
    W = te.compute((8, 30), lambda i, j: X[(i * 30 + j) // 30 % 4, (i * 30 + j) // 5 % 6, (i * 30 + j) % 5] * 1.0,
                   name="W")
    (gw,) = te.gradient(W, [X], head=te.placeholder((8, 30), name="H"))
    assert gw.op.reduce_axis
    check(W, [X])
