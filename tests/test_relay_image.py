"""``relay.image`` / ``topi.image`` under TVM's names: resize1d/2d/3d (nearest, linear, cubic; every coordinate
mode and rounding), TensorFlow's crop_and_resize, affine_grid into grid_sample; checked against the numpy
references of ``topi.testing`` (which TVM's own TOPI tests use), built for AVX2 and AVX-512."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import autosched as tvm
from _cpus import host_runs
from autosched import relay, te, topi, tune
from autosched.database import Database
from autosched.relay.ir.expr import RelayError
from autosched.relay.op import evaluate

MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn",
         "half_pixel_symmetric")


def _resize_ref(x: np.ndarray, out: tuple, layout: str, **kw) -> np.ndarray:
    spatial = [x.shape[layout.index(ch)] for ch in layout if ch in "DHW"]
    fn = {1: topi.testing.resize1d_python, 2: topi.testing.resize2d_python, 3: topi.testing.resize3d_python}
    return fn[len(out)](x, [o / i for o, i in zip(out, spatial)], layout, **kw)


@pytest.mark.parametrize("method", ["nearest_neighbor", "linear", "cubic"])
@pytest.mark.parametrize("mode", MODES)
def test_resize2d_matches_the_reference_in_every_mode(method, mode) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    for size in ((11, 13), (4, 3)):  # up and down
        got = evaluate(relay.image.resize2d(relay.const(x), size, method=method, coordinate_transformation_mode=mode))
        ref = _resize_ref(x, size, "NCHW", method=method, coordinate_transformation_mode=mode)
        assert got.shape == (2, 3, *size)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rounding", ["round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_nearest_rounding_methods(rounding) -> None:
    x = np.arange(2 * 9 * 5, dtype=np.float32).reshape(1, 2, 9, 5)
    got = evaluate(relay.image.resize2d(relay.const(x), (6, 8), method="nearest_neighbor", rounding_method=rounding,
                                        coordinate_transformation_mode="half_pixel"))
    ref = _resize_ref(x, (6, 8), "NCHW", method="nearest_neighbor", coordinate_transformation_mode="half_pixel",
                      rounding_method=rounding)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("alpha, exclude", [(-0.5, 0), (-0.75, 1)])
def test_cubic_coefficient_and_exclude_outside(alpha, exclude) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    got = evaluate(relay.image.resize2d(relay.const(x), (9, 5), method="cubic", cubic_alpha=alpha,
                                        cubic_exclude=exclude))
    ref = _resize_ref(x, (9, 5), "NCHW", method="cubic", coordinate_transformation_mode="half_pixel",
                      cubic_alpha=alpha, cubic_exclude=exclude)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout, shape, size", [("NCW", (2, 3, 9), (14,)), ("NWC", (2, 9, 3), (5,)),
                                                  ("NHWC", (1, 6, 7, 3), (9, 4)),
                                                  ("NCDHW", (1, 2, 4, 5, 6), (7, 3, 8)),
                                                  ("NDHWC", (1, 4, 5, 6, 2), (2, 9, 6))])
def test_1d_3d_and_channels_last_layouts(layout, shape, size) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    fn = {1: relay.image.resize1d, 2: relay.image.resize2d, 3: relay.image.resize3d}[len(size)]
    for method in ("nearest_neighbor", "linear"):
        got = evaluate(fn(relay.const(x), size, layout=layout, method=method,
                          coordinate_transformation_mode="align_corners"))
        ref = _resize_ref(x, size, layout, method=method, coordinate_transformation_mode="align_corners")
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_integer_images_are_rounded_and_out_dtype_casts() -> None:
    x = np.array([[[[0, 255], [10, 101]]]], np.uint8)
    got = evaluate(relay.image.resize2d(relay.const(x), (3, 3), coordinate_transformation_mode="align_corners"))
    assert got.dtype == np.uint8
    ref = _resize_ref(x.astype(np.float64), (3, 3), "NCHW", method="linear",
                      coordinate_transformation_mode="align_corners")
    np.testing.assert_array_equal(got, np.round(ref).astype(np.uint8))
    as_float = evaluate(relay.image.resize2d(relay.const(x), (3, 3), coordinate_transformation_mode="align_corners",
                                             out_dtype="float32"))
    np.testing.assert_allclose(as_float, ref, rtol=1e-6)


def test_topi_resize_crop_and_affine_grid_build_as_tvm_code_does() -> None:
    """TVM's TOPI test pattern: te placeholders, the op, the target's injective schedule, tvm.build, call."""
    rng = np.random.default_rng(3)
    a_np = rng.uniform(size=(2, 8, 8, 3)).astype(np.float32)
    a = te.placeholder(a_np.shape, name="a")
    b = topi.image.resize2d(a, (13, 5), layout="NHWC", method="cubic")
    s = topi.testing.get_injective_schedule("llvm")(b)
    out = tvm.nd.array(np.zeros(b.shape, np.float32))
    tvm.build(s, [a, b], "llvm")(tvm.nd.array(a_np), out)
    ref = _resize_ref(a_np, (13, 5), "NHWC", method="cubic", coordinate_transformation_mode="half_pixel")
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)

    theta_np = rng.uniform(-1, 1, (2, 2, 3)).astype(np.float32)
    theta = te.placeholder(theta_np.shape, name="theta")
    grid = topi.image.affine_grid(theta, (6, 9))
    s = topi.testing.get_injective_schedule("llvm")(grid)
    out = tvm.nd.array(np.zeros((2, 2, 6, 9), np.float32))
    tvm.build(s, [theta, grid], "llvm")(tvm.nd.array(theta_np), out)
    np.testing.assert_allclose(out.numpy(), topi.testing.affine_grid_python(theta_np, (6, 9)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("method", ["bilinear", "nearest_neighbor"])
def test_crop_and_resize_matches_the_reference(layout, method) -> None:
    rng = np.random.default_rng(4)
    img = rng.uniform(size=(3, 4, 20, 17)).astype(np.float32)
    img = img if layout == "NCHW" else img.transpose(0, 2, 3, 1).copy()
    boxes = np.array([[0.2, 0.3, 0.7, 0.9], [0.0, 0.1, 0.8, 1.0], [-0.2, 0.5, 0.4, 1.3], [0.5, 0.5, 0.5, 0.5]],
                     np.float32)  # inside, to the edges, partly off the image (extrapolated), a point
    index = np.array([1, 0, 2, 1], np.int32)
    for crop in ((7, 11), (1, 1)):
        got = evaluate(relay.image.crop_and_resize(relay.const(img), relay.const(boxes), relay.const(index), crop,
                                                   layout=layout, method=method, extrapolation_value=0.3))
        ref = topi.testing.crop_and_resize_python(img, boxes, index, crop, layout, method, 0.3)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_affine_grid_into_grid_sample_is_a_spatial_transformer() -> None:
    """A spatial transformer network's sampler: the identity matrix reproduces the image, a matrix of the
    reference's grid samples as the reference does."""
    rng = np.random.default_rng(5)
    x = rng.uniform(size=(2, 3, 10, 12)).astype(np.float32)
    theta = np.tile(np.array([[1, 0, 0], [0, 1, 0]], np.float32), (2, 1, 1))
    same = evaluate(relay.image.grid_sample(relay.const(x), relay.image.affine_grid(relay.const(theta), (10, 12))))
    np.testing.assert_allclose(same, x, rtol=1e-5, atol=1e-5)
    theta = rng.uniform(-1, 1, (2, 2, 3)).astype(np.float32)
    got = evaluate(relay.image.grid_sample(relay.const(x), relay.image.affine_grid(relay.const(theta), (7, 8))))
    ref = topi.testing.grid_sample_nchw_python(x, topi.testing.affine_grid_python(theta, (7, 8)))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.compile_only
@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_image_ops_build_for_avx2_and_avx512(target) -> None:
    """A segmentation head's upsampling (bilinear, 4x) and a crop of it; run where this CPU can."""
    rng = np.random.default_rng(6)
    x_np = rng.standard_normal((1, 21, 16, 16)).astype(np.float32)
    boxes_np = np.array([[0.1, 0.2, 0.6, 0.9], [0.3, 0.0, 1.0, 0.5]], np.float32)
    x = relay.var("x", shape=x_np.shape)
    boxes = relay.var("boxes", shape=boxes_np.shape)
    up = relay.image.resize2d(x, (64, 64), method="linear", coordinate_transformation_mode="align_corners")
    crop = relay.image.crop_and_resize(relay.nn.relu(up), boxes, relay.const(np.zeros(2, np.int32)), (9, 9))
    graph, lib, params = relay.build(relay.Function([x, boxes], relay.Tuple([up, crop])), target=target)
    if not host_runs(target):
        return
    m = tvm.contrib.graph_executor.GraphModule(graph, lib, params)
    m.set_input("x", x_np)
    m.set_input("boxes", boxes_np)
    m.run()
    ref = _resize_ref(x_np, (64, 64), "NCHW", method="linear", coordinate_transformation_mode="align_corners")
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-5, atol=1e-5)
    crop_ref = topi.testing.crop_and_resize_python(np.maximum(ref, 0).astype(np.float32), boxes_np,
                                                   np.zeros(2, np.int32), (9, 9), "NCHW")
    np.testing.assert_allclose(m.get_output(1).numpy(), crop_ref, rtol=1e-5, atol=1e-5)


def test_upsampling_takes_tvm_scales_and_methods() -> None:
    """Integer nearest scales replicate pixels (``nn.upsampling``); a fractional scale (1.95: its output is
    round(22 * 1.95) = 43 rows, it was truncated to 1 and gave 22), bilinear and align_corners are resizes."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 2, 22, 32)).astype(np.float32)
    y = relay.nn.upsampling(relay.const(x), 2, 3)
    assert y.op.name == "nn.upsampling"
    np.testing.assert_array_equal(evaluate(y), x.repeat(2, 2).repeat(3, 3))
    got = evaluate(relay.nn.upsampling(relay.const(x), 1.954545497894287, 2.0))
    ref = topi.testing.resize2d_python(x, (1.954545497894287, 2.0), "NCHW", "nearest_neighbor", "asymmetric")
    assert got.shape == (1, 2, 43, 64)
    np.testing.assert_array_equal(got, ref)
    nhwc = x.transpose(0, 2, 3, 1).copy()
    got = evaluate(relay.nn.upsampling(relay.const(nhwc), 3, 3, layout="NHWC", method="bilinear",
                                       align_corners=True))
    ref = topi.testing.resize2d_python(nhwc, (3, 3), "NHWC", "linear", "align_corners")
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    x3 = x[:, :, :4, :5, None].repeat(3, 4)  # NCDHW
    got = evaluate(relay.nn.upsampling3d(relay.const(x3), 2, 1.5, 1, method="linear"))
    ref = topi.testing.resize3d_python(x3, (2, 1.5, 1), "NCDHW", "linear", "half_pixel")
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(RelayError, match=r"nn.upsampling: scale_h 0 and scale_w 2 must be positive"):
        relay.nn.upsampling(relay.const(x), 0, 2)


@pytest.mark.parametrize("op", ["resize", "crop_and_resize"])
def test_tuning_the_image_kernels_measures_only_valid_candidates(op) -> None:
    """Every candidate of a short random search of a fused kernel (relu into a cubic resize; a crop of a relu)
    builds and is kept or cut off as slow."""
    x = relay.var("x", shape=(1, 16, 20, 24))
    if op == "resize":
        y = relay.image.resize2d(relay.nn.relu(x), (40, 48), method="cubic")
    else:
        boxes = relay.const(np.array([[0.1, 0.2, 0.6, 0.9], [0.3, 0.0, 1.0, 0.5]], np.float32))
        y = relay.image.crop_and_resize(relay.nn.relu(x), boxes, relay.const(np.zeros(2, np.int32)), (14, 14))
    (task,) = relay.extract_tasks(relay.IRModule.from_expr(relay.Function([x], y)), target="llvm")
    path = os.path.join(tempfile.mkdtemp(), "t.db")
    tune(task, 10, policy="random", database=path, backend="local", seed=0)
    with Database(path, create=False) as db:
        records = list(db.records())
    failed = [(r.error_kind, r.error_msg[:160]) for r in records if not r.ok and r.error_kind != "cut_off"]
    assert len(records) == 10 and not failed and sum(r.ok for r in records) >= 5, failed


def test_bad_arguments_are_refused_by_name() -> None:
    x = relay.var("x", shape=(1, 3, 8, 8))
    cases = [
        (lambda: relay.image.resize2d(x, (4, 4), layout="NHWC8c"), r"image.resize: layout 'NHWC8c' does not fit"),
        (lambda: relay.image.resize1d(x, (4,)), r"layout 'NCW' does not fit data of shape \(1, 3, 8, 8\)"),
        (lambda: relay.image.resize2d(x, (4, 4, 4)), r"size \[4, 4, 4\] must give 2 positive"),
        (lambda: relay.image.resize2d(x, (4, 0)), r"size \[4, 0\] must give 2 positive"),
        (lambda: relay.image.resize2d(x, (4, 4), method="area"), r"method 'area' is not one of"),
        (lambda: relay.image.resize2d(x, (4, 4), coordinate_transformation_mode="tf_crop_and_resize"),
         r"coordinate_transformation_mode 'tf_crop_and_resize' is not one of"),
        (lambda: relay.image.resize2d(x, (4, 4), rounding_method="stochastic"), r"rounding_method 'stochastic'"),
        (lambda: relay.image.crop_and_resize(x, relay.var("b", shape=(2, 5)), relay.var("i", shape=(2,),
                                                                                        dtype="int32"), (3, 3)),
         r"boxes \(2, 5\) must be \[num_boxes, 4\]"),
        (lambda: relay.image.crop_and_resize(x, relay.var("b", shape=(2, 4)), relay.var("i", shape=(2,)), (3, 3)),
         r"box_indices must be integers"),
        (lambda: relay.image.affine_grid(relay.var("t", shape=(2, 3, 4)), (5, 5)), r"must be affine matrices"),
    ]
    for build, match in cases:
        with pytest.raises(RelayError, match=match):
            relay.transform.InferType()(relay.IRModule.from_expr(build()))
    with pytest.raises(RelayError, match=r"relay.image.resize2d: size must be constant integers"):
        relay.image.resize2d(x, relay.var("s", shape=(2,), dtype="int64"))
