"""The loss ops: ``relay.nn.nll_loss`` (and ``topi.nn.nll_loss``) against a numpy definition, and the ONNX
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss converters against onnxruntime: each reduction, with and
without a class weight, ignore_index, K-dimensional targets, SCE's log-probabilities output; bad inputs refused
with the problem named; the cuda kernels (a block-wide reduction for sum and mean) run serially on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import autosched  # noqa: E402
from _onnx_models import run_onnxruntime  # noqa: E402
from autosched import relay, te, topi  # noqa: E402
from autosched.relay.frontend import OnnxImportError, from_onnx  # noqa: E402
from autosched.relay.ir.expr import RelayError  # noqa: E402
from autosched.relay.ir.type_infer import infer_type  # noqa: E402
from test_gpu_relay import assemble, needs_ptxas, serial_error  # noqa: E402
from test_relay_onnx import run_relay  # noqa: E402

ELEM = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "int64": TensorProto.INT64,
        "int32": TensorProto.INT32}


def loss_model(op: str, inputs: dict[str, np.ndarray], n_outputs: int = 1, opset: int = 13, omitted_weight=False,
               **attrs) -> onnx.ModelProto:
    """One ``op`` node over graph inputs named and typed after ``inputs`` (in order: scores, targets[, weight];
    ``omitted_weight`` passes the weight as the empty name), ir_version 9 as onnxruntime wants it."""
    names = list(inputs) + ([""] if omitted_weight else [])
    outs = ["loss", "log_prob"][:n_outputs]
    node = helper.make_node(op, names, outs, **attrs)
    ins = [helper.make_tensor_value_info(n, ELEM[str(v.dtype)], list(v.shape)) for n, v in inputs.items()]
    graph = helper.make_graph([node], "loss", ins,
                              [helper.make_tensor_value_info(o, ELEM[str(inputs["x"].dtype)], None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def case(shape, seed: int, weight: bool = True, ignore: int | None = None, tdtype: str = "int64",
         dtype: str = "float32") -> dict[str, np.ndarray]:
    """Seeded scores [N, C, d...], targets [N, d...] (some equal to ``ignore`` when given) and a weight [C]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    t = rng.integers(0, shape[1], (shape[0], *shape[2:])).astype(tdtype)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    out = {"x": x, "t": t}
    if weight:
        out["w"] = rng.uniform(0.2, 2.0, shape[1]).astype(dtype)
    return out


def check(model: onnx.ModelProto, inputs: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-5) -> None:
    want = run_onnxruntime(model, inputs)
    got = run_relay(model, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------- ONNX against onnxruntime
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weight", [True, False])
def test_nll_loss_each_reduction_with_and_without_weight(reduction, weight):
    inputs = case((5, 4), seed=1, weight=weight)
    check(loss_model("NegativeLogLikelihoodLoss", inputs, reduction=reduction), inputs)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_k_dimensional_with_ignore_index(reduction):
    """[N, C, d1, d2] scores; a third of the targets are ignore_index, which counts in neither the sum nor the
    mean's weight total; int32 targets."""
    inputs = case((2, 3, 4, 5), seed=2, ignore=1, tdtype="int32")
    check(loss_model("NegativeLogLikelihoodLoss", inputs, reduction=reduction, ignore_index=1), inputs)


@pytest.mark.parametrize("opset", [12, 13, 22])
def test_nll_loss_default_mean_negative_ignore_index_and_omitted_weight(opset):
    inputs = case((6, 5, 3), seed=3, weight=False, ignore=-1)
    check(loss_model("NegativeLogLikelihoodLoss", inputs, opset=opset, omitted_weight=True, ignore_index=-1), inputs)


def test_nll_loss_without_ignore_index_counts_every_class_even_minus_100():
    """Absent ignore_index ignores nothing: a target of -100 (TVM's default) is a class like any other would be;
    here every target is a real class and all count."""
    inputs = case((4, 3), seed=4)
    model = loss_model("NegativeLogLikelihoodLoss", inputs)
    mod, _ = from_onnx(model, shape={k: v.shape for k, v in inputs.items()})
    call = mod["main"].body
    assert call.op.name == "nn.nll_loss" and call.attrs["ignore_index"] is None
    check(model, inputs)


def test_nll_loss_float64():
    inputs = case((3, 4, 2), seed=5, dtype="float64")
    check(loss_model("NegativeLogLikelihoodLoss", inputs, reduction="mean"), inputs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_softmax_cross_entropy_with_log_prob_output(reduction):
    inputs = case((3, 5), seed=6)
    check(loss_model("SoftmaxCrossEntropyLoss", inputs, n_outputs=2, reduction=reduction), inputs)


@pytest.mark.parametrize("opset", [12, 13])
def test_softmax_cross_entropy_k_dimensional_ignore_index_without_weight(opset):
    inputs = case((2, 4, 3, 2), seed=7, weight=False, ignore=2)
    check(loss_model("SoftmaxCrossEntropyLoss", inputs, n_outputs=2, opset=opset, ignore_index=2), inputs)
    check(loss_model("SoftmaxCrossEntropyLoss", inputs, opset=opset, reduction="sum", ignore_index=2), inputs)


def test_softmax_cross_entropy_weighted_mean_loss_only():
    inputs = case((4, 3, 5), seed=8, ignore=0)
    check(loss_model("SoftmaxCrossEntropyLoss", inputs, ignore_index=0), inputs)


def test_every_target_ignored_gives_nan_as_onnxruntime():
    inputs = case((3, 4), seed=9)
    inputs["t"][:] = 2
    model = loss_model("NegativeLogLikelihoodLoss", inputs, ignore_index=2)
    assert np.isnan(run_onnxruntime(model, inputs)[0]) and np.isnan(run_relay(model, inputs)[0])


# ------------------------------------------------------------------------------------- relay and topi, numpy
def nll_numpy(p: np.ndarray, t: np.ndarray, w: np.ndarray, reduction: str, ignore: int | None) -> np.ndarray:
    """The definition, loop by loop: -w[c] * p[n, c, d...] for each counted target c, summed / averaged."""
    losses, weights = np.zeros(t.shape), np.zeros(t.shape)
    for idx in np.ndindex(t.shape):
        c = int(t[idx])
        if c == ignore or not 0 <= c < p.shape[1]:
            continue
        weights[idx] = w[c]
        losses[idx] = -w[c] * p[(idx[0], c, *idx[1:])]
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / weights.sum()


def relay_nll(p, t, w, **kwargs) -> np.ndarray:
    P = relay.var("p", shape=p.shape, dtype=str(p.dtype))
    T = relay.var("t", shape=t.shape, dtype=str(t.dtype))
    W = relay.var("w", shape=w.shape, dtype=str(w.dtype))
    out = relay.create_executor(mod=relay.IRModule.from_expr(relay.Function([P, T, W], relay.nn.nll_loss(
        P, T, W, **kwargs)))).evaluate()(p, t, w)
    return np.asarray(out.numpy() if hasattr(out, "numpy") else out)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("ignore", [-100, 3, None])
def test_relay_nll_loss_against_numpy(reduction, ignore):
    """TVM's signature and default ignore_index (-100); an out-of-range target (-100 itself with ignore_index
    None) counts nothing."""
    rng = np.random.default_rng(10)
    p = rng.standard_normal((3, 5, 4)).astype("float32")
    t = rng.integers(0, 5, (3, 4)).astype("int64")
    t[0, :2] = (-100, 3)
    w = rng.uniform(0.5, 1.5, 5).astype("float32")
    got = relay_nll(p, t, w, reduction=reduction, ignore_index=ignore)
    want = nll_numpy(p, t, w, reduction, ignore)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(topi.testing.nll_loss(p, t, w, reduction, ignore), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_topi_nll_loss_builds_with_the_injective_schedule_as_tvms_test(reduction):
    """TVM's TOPI test: ``topi.nn.nll_loss`` scheduled by ``get_injective_schedule`` (the marked stage's
    schedule), built and run, against ``topi.testing.nll_loss``."""
    shape, C = (4, 3, 5), 3
    pred = te.placeholder(shape, name="predictions")
    targets = te.placeholder((4, 5), name="targets", dtype="int32")
    weights = te.placeholder((C,), name="weights")
    out = topi.nn.nll_loss(pred, targets, weights, reduction, -1)
    with autosched.target.Target("llvm"):
        s = topi.testing.get_injective_schedule("llvm")(out)
    f = autosched.build(s, [pred, targets, weights, out], target="llvm")
    rng = np.random.default_rng(11)
    p = rng.uniform(size=shape).astype("float32")
    t = rng.integers(-1, C, (4, 5)).astype("int32")
    w = rng.uniform(size=C).astype("float32")
    res = np.zeros(tuple(int(d) for d in out.shape), "float32")
    f(p, t, w, res)
    np.testing.assert_allclose(res, topi.testing.nll_loss(p, t, w, reduction, -1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res, nll_numpy(p, t, w, reduction, -1), rtol=1e-5, atol=1e-6)


def test_nll_loss_float16_sums_in_float32():
    rng = np.random.default_rng(12)
    p = rng.standard_normal((64, 3)).astype("float16")
    t = rng.integers(0, 3, 64).astype("int64")
    w = np.ones(3, "float16")
    got = relay_nll(p, t, w, reduction="sum")
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, nll_numpy(p.astype("float64"), t, w, "sum", -100), rtol=2e-3)


# ------------------------------------------------------------------------------------------------ errors
def _typed(p_shape, t_shape, w_shape, tdtype="int64", dtype="float32", **kwargs):
    call = relay.nn.nll_loss(relay.var("p", shape=p_shape, dtype=dtype), relay.var("t", shape=t_shape, dtype=tdtype),
                             relay.var("w", shape=w_shape, dtype=dtype), **kwargs)
    return infer_type(call)


def test_relay_nll_loss_refuses_bad_inputs_naming_the_problem():
    assert _typed((2, 3), (2,), (3,)).shape == ()
    with pytest.raises(RelayError, match=r"nn.nll_loss: targets must be integers \(class indices\), got float32"):
        _typed((2, 3), (2,), (3,), tdtype="float32")
    with pytest.raises(RelayError, match=r"nn.nll_loss: weights \(4,\) float32 must be one float32 per class: \(3,\)"):
        _typed((2, 3), (2,), (4,))
    with pytest.raises(RelayError, match=r"targets \(2, 5\) must be \(2, 4\) for predictions \(2, 3, 4\)"):
        _typed((2, 3, 4), (2, 5), (3,))
    with pytest.raises(RelayError, match="reduction 'avg' is not one of none, mean, sum"):
        _typed((2, 3), (2,), (3,), reduction="avg")
    with pytest.raises(RelayError, match=r"predictions \(6,\) must be \[N, C\]"):
        _typed((6,), (6,), (6,))
    with pytest.raises(RelayError, match="predictions must be floating point, got int32"):
        _typed((2, 3), (2,), (3,), dtype="int32")


def test_onnx_loss_converters_refuse_bad_inputs_naming_the_node_and_problem():
    inputs = case((4, 3), seed=13)
    bad_w = dict(inputs, w=np.ones(5, "float32"))
    with pytest.raises(OnnxImportError, match=r"NegativeLogLikelihoodLoss\): the weight 'w' \(\[5\] float32\) must "
                                              r"be one float32 per class: \[3\]"):
        from_onnx(loss_model("NegativeLogLikelihoodLoss", bad_w), shape={k: v.shape for k, v in bad_w.items()})
    float_t = dict(inputs, t=inputs["t"].astype("float32"))
    model = loss_model("SoftmaxCrossEntropyLoss", float_t)
    with pytest.raises(OnnxImportError, match="the targets 't' must be integer class indices, got float32"):
        from_onnx(model, shape={k: v.shape for k, v in float_t.items()})
    with pytest.raises(OnnxImportError, match="reduction 'max' is not one of none, mean, sum"):
        from_onnx(loss_model("NegativeLogLikelihoodLoss", inputs, reduction="max"),
                  shape={k: v.shape for k, v in inputs.items()})


# ------------------------------------------------------------------------------------------------ cuda
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_cuda_kernels_run_serially_match_onnxruntime(reduction):
    """cuda: "none" one thread per element; sum and mean one block whose threads sum the losses and weights
    together (a cross-thread reduction); each kernel's grid run serially on the CPU."""
    inputs = case((2, 3, 4, 5), seed=14, ignore=1)
    model = loss_model("SoftmaxCrossEntropyLoss", inputs, n_outputs=2, reduction=reduction, ignore_index=1)
    err, kernels = serial_error(model, inputs)
    assert err < 1e-5 and any("nll_loss" in k.name for k, _ in kernels)


@needs_ptxas
def test_cuda_kernels_assemble_for_sm80_and_sm90():
    inputs = case((4, 3), seed=15)
    assert assemble(loss_model("NegativeLogLikelihoodLoss", inputs, reduction="sum"), inputs)
