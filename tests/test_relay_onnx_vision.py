"""The region-of-interest ops of two-stage detectors: ONNX RoiAlign and MaxRoiPool against onnxruntime (opsets 10
and 16, both coordinate modes, avg and ONNX's max, adaptive and fixed sample grids, boxes partly or wholly outside
the image, tiny and inverted boxes), ``relay.vision.roi_align`` / ``roi_pool`` in NHWC, TVM's
``topi.vision.roi_align_nchw`` / ``roi_pool_nchw`` against numpy references, builds for AVX2 and AVX-512, and
the errors of bad boxes, modes and layouts. A bin's sample grid or window is a loop bound read from the boxes at
run time (a te reduction whose extent reads a tensor)."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as oh  # noqa: E402

import autosched as tvm  # noqa: E402
from _cpus import host_runs  # noqa: E402
from _onnx_models import run_onnxruntime  # noqa: E402
from autosched import relay, te, topi, tune  # noqa: E402
from autosched.database import Database  # noqa: E402
from autosched.relay.frontend import OnnxImportError, from_onnx  # noqa: E402
from autosched.relay.ir.expr import RelayError  # noqa: E402
from autosched.relay.op import evaluate  # noqa: E402
from test_gpu_relay import assemble, needs_ptxas, serial_error  # noqa: E402
from test_relay_onnx import run_relay  # noqa: E402

IMAGE = (2, 3, 12, 10)


def _model(op: str, inputs, opset: int, **attrs) -> onnx.ModelProto:
    infos = [oh.make_tensor_value_info(name, dtype, shape) for name, dtype, shape in inputs]
    graph = oh.make_graph([oh.make_node(op, [name for name, _, _ in inputs], ["y"], **attrs)], op, infos,
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=9)


def _boxes(rng: np.random.Generator, n: int, scale: float, height: int = 12, width: int = 10) -> np.ndarray:
    """[n, 4] boxes (x1, y1, x2, y2) in image coordinates: some partly or wholly outside the feature map, some
    under a pixel and some inverted (x2 < x1), as proposals are before clipping."""
    x1 = rng.uniform(-3, width / scale, n)
    y1 = rng.uniform(-3, height / scale, n)
    w, h = rng.uniform(-1, width / scale, n), rng.uniform(-1, height / scale, n)
    w[:2], h[:2] = 0.3, 0.2  # under a pixel
    return np.stack([x1, y1, x1 + w, y1 + h], 1).astype(np.float32)


ROI_ALIGN_CASES = {
    "opset16_half_pixel_adaptive": (16, {}),
    "opset16_max": (16, dict(mode="max", output_height=3, output_width=2)),
    "opset16_fixed_grid_scaled": (16, dict(sampling_ratio=2, output_height=3, output_width=4, spatial_scale=0.5)),
    "opset10_output_half_pixel": (10, dict(output_height=2, output_width=2, spatial_scale=0.5)),
    "opset16_output_half_pixel_max": (16, dict(coordinate_transformation_mode="output_half_pixel", mode="max",
                                               output_height=5, output_width=5, sampling_ratio=1)),
    "opset16_7x7_quarter_scale": (16, dict(output_height=7, output_width=7, spatial_scale=0.25, sampling_ratio=3)),
}


@pytest.mark.parametrize("case", list(ROI_ALIGN_CASES))
def test_roi_align_matches_onnxruntime(case: str) -> None:
    opset, attrs = ROI_ALIGN_CASES[case]
    rng = np.random.default_rng(sorted(ROI_ALIGN_CASES).index(case))
    x = rng.standard_normal(IMAGE).astype(np.float32)
    rois = _boxes(rng, 9, attrs.get("spatial_scale", 1.0))
    batch = rng.integers(0, IMAGE[0], 9).astype(np.int64)
    model = _model("RoiAlign", [("x", TensorProto.FLOAT, x.shape), ("rois", TensorProto.FLOAT, rois.shape),
                                ("batch", TensorProto.INT64, batch.shape)], opset, **attrs)
    inputs = {"x": x, "rois": rois, "batch": batch}
    expected = run_onnxruntime(model, inputs)[0]
    got = run_relay(model, inputs)[0]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("pooled, scale", [((2, 2), 1.0), ((3, 4), 0.5), ((7, 7), 0.25)])
def test_max_roi_pool_matches_onnxruntime(pooled, scale) -> None:
    rng = np.random.default_rng(pooled[0])
    x = rng.standard_normal(IMAGE).astype(np.float32)
    rois = np.concatenate([rng.integers(0, IMAGE[0], (8, 1)), _boxes(rng, 8, scale)], 1).astype(np.float32)
    model = _model("MaxRoiPool", [("x", TensorProto.FLOAT, x.shape), ("rois", TensorProto.FLOAT, rois.shape)], 16,
                   pooled_shape=list(pooled), spatial_scale=scale)
    inputs = {"x": x, "rois": rois}
    expected = run_onnxruntime(model, inputs)[0]
    got = run_relay(model, inputs)[0]
    np.testing.assert_array_equal(got, expected)
    assert (got == 0).any() and (got != 0).any()  # empty bins (boxes off the map) and full ones both occur


def _tvm_rois(rng: np.random.Generator, n: int, batch: int, size: int) -> np.ndarray:
    rois = rng.uniform(-1, 1, (n, 5)).astype(np.float32) * size  # TVM's test draws boxes this way
    rois[:, 0] = rng.integers(0, batch, n)
    return rois


@pytest.mark.parametrize("mode, ratio", [(b"avg", -1), (b"avg", 2), (b"max", -1), (1, 2)])
def test_topi_roi_align_matches_the_numpy_reference(mode, ratio) -> None:
    rng = np.random.default_rng(3)
    a_np = rng.uniform(-1, 1, (2, 4, 16, 16)).astype(np.float32)
    rois_np = _tvm_rois(rng, 12, 2, 16)
    a, rois = te.placeholder(a_np.shape, name="a"), te.placeholder(rois_np.shape, name="rois")
    b = topi.vision.rcnn.roi_align_nchw(a, rois, pooled_size=5, spatial_scale=0.5, mode=mode, sample_ratio=ratio)
    s = topi.generic.schedule_roi_align(b)
    out = tvm.nd.array(np.zeros(b.shape, np.float32))
    tvm.build(s, [a, rois, b], "llvm")(tvm.nd.array(a_np), tvm.nd.array(rois_np), out)
    expected = topi.testing.roi_align_nchw_python(a_np, rois_np, 5, 0.5, ratio, mode)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_topi_roi_pool_matches_the_numpy_reference() -> None:
    rng = np.random.default_rng(4)
    a_np = rng.uniform(size=(2, 4, 16, 16)).astype(np.float32)
    rois_np = np.abs(_tvm_rois(rng, 16, 2, 16))
    a, rois = te.placeholder(a_np.shape, name="a"), te.placeholder(rois_np.shape, name="rois")
    b = topi.vision.rcnn.roi_pool_nchw(a, rois, pooled_size=(4, 3), spatial_scale=0.5)
    s = topi.generic.schedule_roi_pool(b)
    out = tvm.nd.array(np.zeros(b.shape, np.float32))
    tvm.build(s, [a, rois, b], "llvm")(tvm.nd.array(a_np), tvm.nd.array(rois_np), out)
    np.testing.assert_array_equal(out.numpy(), topi.testing.roi_pool_nchw_python(a_np, rois_np, (4, 3), 0.5))


@pytest.mark.parametrize("op", ["roi_align", "roi_pool"])
def test_nhwc_is_the_nchw_result_transposed(op) -> None:
    rng = np.random.default_rng(5)
    x_np = rng.standard_normal((2, 9, 11, 5)).astype(np.float32)  # NHWC
    rois_np = np.abs(_tvm_rois(rng, 6, 2, 10))
    fn = getattr(relay.vision, op)
    kwargs = {"sample_ratio": 2, "aligned": True} if op == "roi_align" else {}
    nhwc = fn(relay.const(x_np), relay.const(rois_np), (3, 2), 0.75, layout="NHWC", **kwargs)
    nchw = fn(relay.const(x_np.transpose(0, 3, 1, 2).copy()), relay.const(rois_np), (3, 2), 0.75, **kwargs)
    got, ref = evaluate(nhwc), evaluate(nchw)
    assert got.shape == (6, 3, 2, 5)
    np.testing.assert_allclose(got, ref.transpose(0, 2, 3, 1), rtol=1e-6, atol=1e-7)


@pytest.mark.compile_only
@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_roi_ops_build_for_avx2_and_avx512(target) -> None:
    """A detector head's shapes: 20 boxes over 32 channels, 7x7 bins; run where this CPU can."""
    rng = np.random.default_rng(6)
    x_np = rng.standard_normal((1, 32, 20, 24)).astype(np.float32)
    rois_np = np.abs(_tvm_rois(rng, 20, 1, 160))
    x = relay.var("x", shape=x_np.shape)
    rois = relay.var("rois", shape=rois_np.shape)
    out = relay.Tuple([relay.vision.roi_align(x, rois, 7, 1 / 8, sample_ratio=2),
                       relay.vision.roi_pool(x, rois, 7, 1 / 8)])
    graph, lib, params = relay.build(relay.Function([x, rois], out), target=target)
    if not host_runs(target):
        return
    m = tvm.contrib.graph_executor.GraphModule(graph, lib, params)
    m.set_input("x", x_np)
    m.set_input("rois", rois_np)
    m.run()
    a = topi.testing.roi_align_nchw_python(x_np, rois_np, 7, 1 / 8, 2)
    np.testing.assert_allclose(m.get_output(0).numpy(), a, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(m.get_output(1).numpy(), topi.testing.roi_pool_nchw_python(x_np, rois_np, 7,
                                                                                              1 / 8))


@pytest.mark.parametrize("op", ["roi_align", "roi_pool"])
def test_tuning_the_roi_kernels_measures_only_valid_candidates(op) -> None:
    """A window whose bounds read the bin (RoIPool) keeps its bin's loops outside it in every sketch (before,
    12 of 16 candidates put the window inside the vectorized bin loop and failed); every candidate of a short
    random search builds and is kept or cut off as slow, and the FLOP count uses the typical bin."""
    rng = np.random.default_rng(8)
    x = relay.var("x", shape=(1, 16, 20, 24))
    rois = relay.const(np.abs(_tvm_rois(rng, 10, 1, 160)))
    y = getattr(relay.vision, op)(x, rois, 7, 1 / 8)
    (task,) = relay.extract_tasks(relay.IRModule.from_expr(relay.Function([x], y)), target="llvm")
    assert task.flop > 10 * 16 * 49  # (mean grid / window sizes: relay.op.vision.TYPICAL_BIN)
    path = os.path.join(tempfile.mkdtemp(), "t.db")
    tune(task, 10, policy="random", database=path, backend="local", seed=0)
    with Database(path, create=False) as db:
        records = list(db.records())
    failed = [(r.error_kind, r.error_msg[:160]) for r in records if not r.ok and r.error_kind != "cut_off"]
    assert len(records) == 10 and not failed and sum(r.ok for r in records) >= 5, failed


def _roi_align_model(rng: np.random.Generator, opset: int = 16, **attrs):
    x = rng.standard_normal(IMAGE).astype(np.float32)
    rois, batch = _boxes(rng, 9, attrs.get("spatial_scale", 1.0)), rng.integers(0, IMAGE[0], 9).astype(np.int64)
    model = _model("RoiAlign", [("x", TensorProto.FLOAT, x.shape), ("rois", TensorProto.FLOAT, rois.shape),
                                ("batch", TensorProto.INT64, batch.shape)], opset, **attrs)
    return model, {"x": x, "rois": rois, "batch": batch}


def _max_roi_pool_model(rng: np.random.Generator):
    x = rng.standard_normal(IMAGE).astype(np.float32)
    rois = np.concatenate([rng.integers(0, IMAGE[0], (8, 1)), _boxes(rng, 8, 0.5)], 1).astype(np.float32)
    model = _model("MaxRoiPool", [("x", TensorProto.FLOAT, x.shape), ("rois", TensorProto.FLOAT, rois.shape)], 16,
                   pooled_shape=[3, 4], spatial_scale=0.5)
    return model, {"x": x, "rois": rois}


@pytest.mark.parametrize("case", ["adaptive", "fixed_max", "pool"])
def test_cuda_kernels_run_serially_match_onnxruntime(case) -> None:
    """The cuda build's kernels (default GPU schedules: a thread per output element), their grids run one
    thread after another on this CPU."""
    rng = np.random.default_rng(9)
    if case == "pool":
        model, inputs = _max_roi_pool_model(rng)
    else:
        attrs = {"mode": "max", "sampling_ratio": 2} if case == "fixed_max" else {}
        model, inputs = _roi_align_model(rng, output_height=3, output_width=2, **attrs)
    err, kernels = serial_error(model, inputs)
    assert err < 1e-5 and kernels


@needs_ptxas
def test_cuda_kernels_assemble_for_sm80_and_sm90() -> None:
    rng = np.random.default_rng(10)
    assert assemble(*_roi_align_model(rng))
    assert assemble(*_max_roi_pool_model(rng))


def test_a_reduction_bound_read_from_a_tensor() -> None:
    """te: a reduction's extent may read a tensor (a window sized per output point); it is an input of the op."""
    a = te.placeholder((5, 8), name="a")
    length = te.placeholder((5,), name="length", dtype="int32")
    k = None

    def row(i):
        nonlocal k
        k = te.reduce_axis((0, length[i]), name="k")
        return te.sum(a[i, k], axis=k)

    b = te.compute((5,), row, name="b")
    assert {t.op.name for t in b.op.input_tensors} == {"a", "length"}
    a_np = np.random.default_rng(7).standard_normal((5, 8)).astype(np.float32)
    n_np = np.array([0, 1, 3, 8, 5], np.int32)
    out = tvm.nd.array(np.zeros(5, np.float32))
    tvm.build(te.create_schedule(b.op), [a, length, b], "llvm")(tvm.nd.array(a_np), tvm.nd.array(n_np), out)
    np.testing.assert_allclose(out.numpy(), [a_np[i, :n].sum() for i, n in enumerate(n_np)], rtol=1e-6)


def test_bad_boxes_modes_and_layouts_are_refused_by_name() -> None:
    x = relay.var("x", shape=(1, 3, 8, 8))
    with pytest.raises(RelayError, match=r"vision.roi_align: rois must be \[num_rois, 5\].*\(4, 4\)"):
        relay.ir.type_infer.infer_type(relay.vision.roi_align(x, relay.var("r", shape=(4, 4)), 2, 1.0))
    rois = relay.var("r", shape=(4, 5))
    with pytest.raises(RelayError, match="mode 'mean' is not one of avg, max, max_corner"):
        relay.ir.type_infer.infer_type(relay.vision.roi_align(x, rois, 2, 1.0, mode="mean"))
    with pytest.raises(RelayError, match="layout 'NCHW4c' is not supported"):
        relay.ir.type_infer.infer_type(relay.vision.roi_pool(x, rois, 2, 1.0, layout="NCHW4c"))
    with pytest.raises(RelayError, match="pooled_size must be a positive int"):
        relay.vision.roi_pool(x, rois, (0, 2), 1.0)
    with pytest.raises(tvm.errors.AutoschedError, match="mode 'median'"):
        topi.vision.roi_align_nchw(te.placeholder((1, 3, 8, 8)), te.placeholder((4, 5)), 2, 1.0, "median")
    # ONNX: boxes given with their batch index to RoiAlign (which takes them apart), MaxRoiPool without its size
    bad = _model("RoiAlign", [("x", TensorProto.FLOAT, (1, 3, 8, 8)), ("rois", TensorProto.FLOAT, (4, 5)),
                              ("batch", TensorProto.INT64, (4,))], 16)
    with pytest.raises(OnnxImportError, match=r"RoiAlign.*rois 'rois' must be \[num_rois, 4\]"):
        from_onnx(bad)
    bad = _model("MaxRoiPool", [("x", TensorProto.FLOAT, (1, 3, 8, 8)), ("rois", TensorProto.FLOAT, (4, 5))], 16)
    with pytest.raises(OnnxImportError, match="MaxRoiPool.*pooled_shape is required"):
        from_onnx(bad)
