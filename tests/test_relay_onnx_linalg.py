"""``relay.det`` (Gaussian elimination with partial pivoting in te stages) against numpy.linalg.det, and ONNX's Det
against onnxruntime: batches, one matrix, 1x1, singular matrices, matrices that need row swaps (the sign), float64
and float16; a non-square or integer input refused with the problem named; the cuda kernel (one thread per
matrix) run serially on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from _onnx_models import run_onnxruntime  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.relay.frontend import OnnxImportError, from_onnx  # noqa: E402
from autosched.relay.ir.expr import RelayError  # noqa: E402
from autosched.relay.ir.type_infer import infer_type  # noqa: E402
from test_gpu_relay import assemble, needs_ptxas, serial_error  # noqa: E402
from test_relay_onnx import run_relay  # noqa: E402

ELEM = {"float16": TensorProto.FLOAT16, "float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE,
        "int64": TensorProto.INT64}


def det_model(x: np.ndarray, opset: int = 13) -> onnx.ModelProto:
    """One Det node on input ``x`` (its shape and type), ir_version 9 as onnxruntime wants it."""
    elem = ELEM[str(x.dtype)]
    graph = helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "det",
                              [helper.make_tensor_value_info("x", elem, list(x.shape))],
                              [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def relay_det(x: np.ndarray) -> np.ndarray:
    X = relay.var("x", shape=x.shape, dtype=str(x.dtype))
    out = relay.create_executor(mod=relay.IRModule.from_expr(relay.Function([X], relay.det(X)))).evaluate()(x)
    return np.asarray(out.numpy() if hasattr(out, "numpy") else out)


def scale_of(x: np.ndarray) -> np.ndarray:
    """What a determinant's rounding error is relative to: the product of the rows' norms (Hadamard's bound)."""
    return np.prod(np.linalg.norm(x.astype(np.float64), axis=-1), axis=-1)


RNG = np.random.default_rng(20)

SINGULAR = np.array([
    [[1, 2, 3], [2, 4, 6], [1, 0, 1]],  # two proportional rows
    [[0, 0, 0], [1, 2, 3], [4, 5, 6]],  # a zero row
    [[0, 1, 2], [0, 3, 4], [0, 5, 6]],  # a zero column: no pivot in it, no division by zero
    [[1, 2, 3], [4, 5, 6], [7, 8, 9]],  # rank 2, its zero found only up to rounding
], np.float32)

SWAPS = np.array([
    [[0, 1, 0], [1, 0, 0], [0, 0, 1]],  # one swap: -1
    [[0, 0, 1], [0, 1, 0], [1, 0, 0]],  # one swap: -1
    [[0, 1, 0], [0, 0, 1], [1, 0, 0]],  # a 3-cycle, two swaps: +1
    [[1e-3, 2, 3], [4, 5, 6], [7, 8, 10]],  # a tiny leading entry: a pivot from below keeps it exact
], np.float32)


@pytest.mark.parametrize("shape", [(4, 3, 3), (2, 3, 4, 4), (5, 5), (3, 1, 1), (1, 1), (2, 6, 6), (1, 8, 8)])
@pytest.mark.parametrize("opset", [11, 13])
def test_det_against_onnxruntime_and_numpy(shape, opset):
    x = RNG.standard_normal(shape).astype(np.float32)
    model = det_model(x, opset)
    got = run_relay(model, {"x": x})[0]
    want = run_onnxruntime(model, {"x": x})[0]
    assert got.shape == want.shape == shape[:-2] and got.dtype == np.float32
    tol = 1e-5 * scale_of(x)
    np.testing.assert_array_less(np.abs(got - want), tol)
    np.testing.assert_array_less(np.abs(got - np.linalg.det(x.astype(np.float64))), tol)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_det_of_singular_matrices_is_zero():
    got = relay_det(SINGULAR)
    np.testing.assert_array_equal(got[:3], 0.0)  # exact: the elimination meets an exact zero pivot
    assert abs(got[3]) < 1e-6 * scale_of(SINGULAR[3])
    want = run_onnxruntime(det_model(SINGULAR), {"x": SINGULAR})[0]
    assert np.all(np.abs(got - want) <= 1e-6 * scale_of(SINGULAR))  # (a zero row's scale is 0)


def test_det_needing_row_swaps_has_their_sign():
    got = relay_det(SWAPS)
    np.testing.assert_array_equal(got[:3], [-1.0, -1.0, 1.0])
    np.testing.assert_allclose(got, np.linalg.det(SWAPS.astype(np.float64)), rtol=1e-5)
    np.testing.assert_allclose(got, run_onnxruntime(det_model(SWAPS), {"x": SWAPS})[0], rtol=1e-5)


def test_det_of_permuted_triangular_matrices_is_exact():
    """Triangular matrices of small integers, rows shuffled: the determinant is the diagonal's product signed by
    the permutation, and the elimination gets it exactly."""
    rng = np.random.default_rng(21)
    mats, want = [], []
    for _ in range(6):
        u = np.triu(rng.integers(-3, 4, (5, 5))).astype(np.float32)
        np.fill_diagonal(u, rng.choice([-2.0, -1.0, 1.0, 2.0], 5))
        perm = rng.permutation(5)
        mats.append(u[perm])
        want.append(np.prod(np.diag(u)) * np.linalg.det(np.eye(5)[perm]))
    np.testing.assert_allclose(relay_det(np.stack(mats)), np.round(want), rtol=1e-6)


def test_det_float64_and_float16():
    x = RNG.standard_normal((3, 4, 4))
    np.testing.assert_allclose(relay_det(x), np.linalg.det(x), rtol=1e-12)
    # (onnxruntime's CPU Det takes float32 only: the imported double model against numpy)
    np.testing.assert_allclose(run_relay(det_model(x), {"x": x})[0], np.linalg.det(x), rtol=1e-12)
    h = RNG.standard_normal((4, 3, 3)).astype(np.float16)
    got = relay_det(h)
    assert got.dtype == np.float16  # (eliminated in float32, rounded once)
    np.testing.assert_allclose(got, np.linalg.det(h.astype(np.float64)).astype(np.float16), rtol=2e-3, atol=1e-3)


def test_det_is_folded_when_its_input_is_constant():
    x = RNG.standard_normal((2, 3, 3)).astype(np.float32)
    mod = relay.IRModule.from_expr(relay.Function([], relay.det(relay.const(x))))
    folded = relay.transform.FoldConstant()(mod)["main"].body
    assert isinstance(folded, relay.Constant)
    np.testing.assert_allclose(folded.data, np.linalg.det(x.astype(np.float64)), rtol=1e-5)


def test_det_refuses_what_is_not_a_batch_of_float_square_matrices():
    def typed(shape, dtype="float32"):
        return infer_type(relay.det(relay.var("x", shape=shape, dtype=dtype)))

    assert typed((2, 3, 3)).shape == (2,) and typed((3, 3)).shape == ()
    with pytest.raises(RelayError, match=r"det: data \(2, 3, 4\) must be \[..., M, M\], a batch of square matrices"):
        typed((2, 3, 4))
    with pytest.raises(RelayError, match=r"det: data \(3,\) must be \[..., M, M\]"):
        typed((3,))
    with pytest.raises(RelayError, match="det: data must be floating point, got int32"):
        typed((3, 3), "int32")
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(OnnxImportError, match=r"\(Det\): the input 'x' must be \[..., M, M\] \(square matrices\), got "
                                              r"shape \[2, 3, 4\]"):
        from_onnx(det_model(x), shape={"x": x.shape})


# ------------------------------------------------------------------------------------------------ cuda
@pytest.mark.parametrize("shape", [(5, 4, 4), (3, 3)])
def test_cuda_kernel_run_serially_matches_onnxruntime(shape):
    """cuda: one thread per matrix, its elimination in the thread; one matrix on one thread."""
    x = np.random.default_rng(22).standard_normal(shape).astype(np.float32)
    err, kernels = serial_error(det_model(x), {"x": x})
    assert err < 1e-5 and any("det" in k.name for k, _ in kernels)


@needs_ptxas
def test_cuda_kernel_assembles_for_sm80_and_sm90():
    x = np.zeros((2, 3, 3), np.float32)
    assert assemble(det_model(x), {"x": x})
