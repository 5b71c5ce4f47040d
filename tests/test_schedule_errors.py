"""Illegal schedule primitives raise ``autosched.ScheduleError`` naming the axis and stage.

Where TVM itself only notices a mistake late (at lowering), the check may
happen either when the primitive is called or when the schedule is lowered:
those tests call both inside the ``raises`` block.
"""

import re

import numpy as np
import pytest

import autosched
from autosched import te

M, N, K = 12, 10, 6


def assert_names(excinfo, *names):
    msg = str(excinfo.value)
    for nm in names:
        assert nm in msg, f"error message does not name {nm!r}: {msg!r}"


def matmul():
    """Distinctive names, so that a message naming them is not a coincidence."""
    A = te.placeholder((M, K), name="Amat")
    B = te.placeholder((K, N), name="Bmat")
    red = te.reduce_axis((0, K), name="red_k")
    C = te.compute((M, N), lambda row, col: te.sum(A[row, red] * B[red, col], axis=red), name="Cmat")
    return A, B, C


def elementwise3d():
    A = te.placeholder((4, 5, 6), name="Ain")
    B = te.compute((4, 5, 6), lambda ax_p, ax_q, ax_r: A[ax_p, ax_q, ax_r] * 2.0, name="Bout")
    return A, B


def axis_name(iv):
    return iv.var.name


def test_schedule_error_is_a_value_error():
    assert issubclass(autosched.ScheduleError, ValueError)


def test_split_axis_of_another_stage():
    A = te.placeholder((M, N), name="Ain")
    P = te.compute((M, N), lambda row, col: A[row, col] + 1.0, name="Pstage")
    C = te.compute((M, N), lambda ii, jj: P[ii, jj] * 2.0, name="Cstage")
    s = te.create_schedule(C.op)
    foreign = s[P].op.axis[0]
    with pytest.raises(autosched.ScheduleError) as ei:
        s[C].split(foreign, factor=2)
    assert_names(ei, axis_name(foreign), "Cstage")


def test_split_axis_already_split():
    A, B = elementwise3d()
    s = te.create_schedule(B.op)
    ax = s[B].op.axis[1]
    s[B].split(ax, factor=2)
    with pytest.raises(autosched.ScheduleError) as ei:
        s[B].split(ax, factor=3)
    assert_names(ei, axis_name(ax), "Bout")


def test_fuse_with_axis_already_fused_away():
    A, B = elementwise3d()
    s = te.create_schedule(B.op)
    p, q, r = s[B].op.axis
    s[B].fuse(p, q)
    with pytest.raises(autosched.ScheduleError) as ei:
        s[B].fuse(q, r)
    assert_names(ei, axis_name(q), "Bout")


def test_reorder_with_axis_already_fused_away():
    A, B = elementwise3d()
    s = te.create_schedule(B.op)
    p, q, r = s[B].op.axis
    s[B].fuse(q, r)
    with pytest.raises(autosched.ScheduleError) as ei:
        s[B].reorder(r, p)
    assert_names(ei, axis_name(r), "Bout")


def test_reorder_not_a_permutation():
    A, B = elementwise3d()
    s = te.create_schedule(B.op)
    p, q, r = s[B].op.axis
    with pytest.raises(autosched.ScheduleError) as ei:
        s[B].reorder(q, p, q)
    assert_names(ei, axis_name(q), "Bout")


def test_fuse_non_adjacent_axes():
    A, B = elementwise3d()
    s = te.create_schedule(B.op)
    p, q, r = s[B].op.axis
    with pytest.raises(autosched.ScheduleError) as ei:
        s[B].fuse(p, r)
    assert_names(ei, axis_name(p), axis_name(r), "Bout")


def test_fuse_reduce_with_spatial_axis():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    row, col = s[C].op.axis
    (red,) = s[C].op.reduce_axis
    s[C].reorder(row, red, col)
    with pytest.raises(autosched.ScheduleError) as ei:
        s[C].fuse(red, col)
    assert_names(ei, axis_name(red), "Cmat")


@pytest.mark.parametrize("kw", [dict(factor=0), dict(nparts=0), dict(factor=-2)])
def test_split_with_non_positive_factor(kw):
    A, B = elementwise3d()
    s = te.create_schedule(B.op)
    ax = s[B].op.axis[2]
    with pytest.raises(autosched.ScheduleError) as ei:
        s[B].split(ax, **kw)
    assert_names(ei, axis_name(ax), "Bout")


def test_split_needs_exactly_one_of_factor_and_nparts():
    A, B = elementwise3d()
    s = te.create_schedule(B.op)
    ax = s[B].op.axis[2]
    with pytest.raises((autosched.ScheduleError, TypeError)):
        s[B].split(ax)
    with pytest.raises((autosched.ScheduleError, TypeError)):
        s[B].split(ax, factor=2, nparts=2)


def test_compute_at_stage_that_is_not_a_consumer():
    A = te.placeholder((M, N), name="Ain")
    P = te.compute((M, N), lambda ii, jj: A[ii, jj] * 2.0, name="Pstage")
    C = te.compute((M, N), lambda ii, jj: P[ii, jj] + 1.0, name="Cstage")
    D = te.compute((M, N), lambda ii, jj: A[ii, jj] + 3.0, name="Dother")
    s = te.create_schedule([C.op, D.op])
    with pytest.raises(autosched.ScheduleError) as ei:
        s[P].compute_at(s[D], s[D].op.axis[0])
        autosched.lower(s, [A, C, D])
    assert_names(ei, "Pstage", "Dother")


def test_compute_at_axis_of_another_stage():
    A = te.placeholder((M, N), name="Ain")
    P = te.compute((M, N), lambda ii, jj: A[ii, jj] * 2.0, name="Pstage")
    C = te.compute((M, N), lambda ii, jj: P[ii, jj] + 1.0, name="Cstage")
    s = te.create_schedule(C.op)
    wrong = s[P].op.axis[0]
    with pytest.raises(autosched.ScheduleError) as ei:
        s[P].compute_at(s[C], wrong)
        autosched.lower(s, [A, C])
    assert_names(ei, axis_name(wrong), "Cstage")


def test_vectorize_reduce_axis_keeps_partial_results_in_lanes():
    """A vectorized reduction axis is not an error: each lane accumulates a partial sum (a few vector
    accumulators, combined at the end), so the result equals numpy's up to rounding."""
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    (red,) = s[C].op.reduce_axis
    row, col = s[C].op.axis
    s[C].reorder(row, col, red)
    s[C].vectorize(red)
    f = autosched.build(s, [A, B, C])
    assert "x float>" in f.get_source("ll")
    a, b = (np.random.default_rng(0).standard_normal(s).astype("float32") for s in ((M, K), (K, N)))
    c = np.zeros((M, N), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_parallel_reduce_axis():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    (red,) = s[C].op.reduce_axis
    with pytest.raises(autosched.ScheduleError) as ei:
        s[C].parallel(red)
        autosched.lower(s, [A, B, C])
    assert_names(ei, axis_name(red), "Cmat")


def test_compute_inline_of_reduction():
    A, B, C = matmul()
    D = te.compute((M, N), lambda ii, jj: C[ii, jj] + 1.0, name="Dout")
    s = te.create_schedule(D.op)
    with pytest.raises(autosched.ScheduleError) as ei:
        s[C].compute_inline()
        autosched.lower(s, [A, B, D])
    assert_names(ei, "Cmat")


def test_compute_inline_of_output():
    A, B = elementwise3d()
    s = te.create_schedule(B.op)
    with pytest.raises(autosched.ScheduleError) as ei:
        s[B].compute_inline()
        autosched.lower(s, [A, B])
    assert_names(ei, "Bout")


def test_bind_on_llvm_fails_at_build_with_clear_error():
    n = 64
    A = te.placeholder((n,), name="Ain")
    B = te.compute((n,), lambda ii: A[ii] + 1.0, name="Bout")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError) as ei:  # ScheduleError is a ValueError
        autosched.build(s, [A, B], target="llvm", name="bound")
    msg = str(ei.value)
    assert re.search(r"bind|blockIdx\.x|threadIdx\.x", msg), msg


# -- calling a built function with bad arguments -------------------------------------------------


@pytest.fixture(scope="module")
def addfn():
    n = te.var("n")
    A = te.placeholder((n,), name="Ain")
    B = te.placeholder((n,), name="Bin")
    C = te.compute(A.shape, lambda ii: A[ii] + B[ii], name="Cout")
    s = te.create_schedule(C.op)
    return autosched.build(s, [A, B, C], target="llvm", name="add_checked")


@pytest.fixture(scope="module")
def mmfn():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    return autosched.build(s, [A, B, C], target="llvm", name="mm_checked")


def _mm_args():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.zeros((M, N), dtype="float32")
    return a, b, c


def test_good_call_works(addfn, mmfn):
    a = np.arange(10, dtype="float32")
    c = np.zeros(10, dtype="float32")
    addfn(a, a, c)
    np.testing.assert_allclose(c, 2 * a)
    a, b, c = _mm_args()
    mmfn(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


def test_wrong_shape_names_argument(mmfn):
    a, b, c = _mm_args()
    with pytest.raises((TypeError, ValueError)) as ei:
        mmfn(a, b[:, :-1].copy(), c)
    assert_names(ei, "Bmat")


def test_wrong_ndim_names_argument(mmfn):
    a, b, c = _mm_args()
    with pytest.raises((TypeError, ValueError)) as ei:
        mmfn(a.reshape(-1), b, c)
    assert_names(ei, "Amat")


def test_wrong_dtype_names_argument(mmfn):
    a, b, c = _mm_args()
    with pytest.raises((TypeError, ValueError)) as ei:
        mmfn(a, b, c.astype("float64"))
    assert_names(ei, "Cmat")


def test_non_contiguous_names_argument(mmfn):
    a, b, c = _mm_args()
    wide = np.zeros((M, 2 * K), dtype="float32")
    wide[:, ::2] = a
    with pytest.raises((TypeError, ValueError)) as ei:
        mmfn(wide[:, ::2], b, c)
    assert_names(ei, "Amat")


def test_not_an_array_names_argument(mmfn):
    a, b, c = _mm_args()
    with pytest.raises((TypeError, ValueError)) as ei:
        mmfn(a, b.tolist(), c)
    assert_names(ei, "Bmat")


def test_wrong_number_of_arguments(mmfn):
    a, b, c = _mm_args()
    with pytest.raises((TypeError, ValueError)):
        mmfn(a, b)


def test_symbolic_shape_mismatch(addfn):
    a = np.zeros(10, dtype="float32")
    b = np.zeros(11, dtype="float32")
    c = np.zeros(10, dtype="float32")
    with pytest.raises((TypeError, ValueError)) as ei:
        addfn(a, b, c)
    msg = str(ei.value)
    assert "Bin" in msg or "Ain" in msg, msg
