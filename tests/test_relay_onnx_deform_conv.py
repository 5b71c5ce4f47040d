"""ONNX DeformConv (opset 19) as relay's nn.deformable_conv2d, against onnxruntime: zero offsets are the plain
convolution, random offsets (samples off the image too) with a mask (DCNv2), a bias, groups, offset groups,
strides, pads and dilations; topi.nn.deformable_conv2d_nchw against topi.testing's numpy reference (itself checked
against onnxruntime); the kernel built for AVX2 and AVX-512 (run where this CPU can); clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from _cpus import skip_unless_host_runs  # noqa: E402
from _onnx_models import GraphBuilder, run_onnxruntime  # noqa: E402
from autosched import relay, te, topi  # noqa: E402
from autosched.driver.build_module import build, lower  # noqa: E402
from autosched.relay.frontend import OnnxImportError, from_onnx  # noqa: E402
from autosched.relay.ir.expr import RelayError  # noqa: E402
from autosched.relay.ir.type_infer import infer_type  # noqa: E402
from autosched.runtime import ndarray as nd  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402
from autosched.target import Target  # noqa: E402
from test_relay_onnx import check_against_onnxruntime, run_relay  # noqa: E402

#: DeformConv's opset, and the IR version onnxruntime wants with it
OPSET, IR = 19, 9


def _out_size(size: int, k: int, stride: int, dil: int, lo: int, hi: int) -> int:
    return (size + lo + hi - dil * (k - 1) - 1) // stride + 1


def _run(graph_json: str, lib, params, feeds: dict[str, np.ndarray]) -> np.ndarray:
    m = GraphModule(graph_json, lib, params)
    m.set_input(**feeds)
    m.run()
    return np.asarray(m.get_output(0))


def _deform(x_shape, w_shape, *, bias: bool = False, mask: bool = False, offset_scale: float = 2.0,
            seed: int = 0, **attrs) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One DeformConv node on graph inputs x, offset (and mask), the weight (and bias) seeded initializers; with
    its seeded inputs (offsets of ``offset_scale`` pixels, standard normal; a mask uniform in [0, 1])."""
    rng = np.random.default_rng(seed)
    n, _, h, w = x_shape
    kh, kw = w_shape[2:]
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilations", [1, 1])
    pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
    oh, ow = _out_size(h, kh, sh, dh, pt, pb), _out_size(w, kw, sw, dw, pl, pr)
    dg = attrs.get("offset_group", 1)
    b = GraphBuilder(seed, OPSET)
    names = ["x", b.init("w", rng.standard_normal(w_shape).astype(np.float32)), "offset"]
    names.append(b.init("b", rng.standard_normal(w_shape[0]).astype(np.float32)) if bias else "")
    inputs = [("x", x_shape), ("offset", (n, 2 * dg * kh * kw, oh, ow))]
    if mask:
        names.append("mask")
        inputs.append(("mask", (n, dg * kh * kw, oh, ow)))
    while not names[-1]:
        names.pop()
    b.node("DeformConv", names, name="y", **attrs)
    model = b.model(inputs, ["y"], name="deform_conv")
    model.ir_version = IR
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32),
             "offset": (rng.standard_normal(inputs[1][1]) * offset_scale).astype(np.float32)}
    if mask:
        feeds["mask"] = rng.uniform(0.0, 1.0, inputs[2][1]).astype(np.float32)
    return model, feeds


CASES = {
    "random_offsets_pads": lambda: _deform((1, 4, 9, 10), (6, 4, 3, 3), pads=[1, 1, 1, 1]),
    "mask_and_bias": lambda: _deform((1, 5, 8, 7), (4, 5, 3, 3), bias=True, mask=True, pads=[1, 1, 1, 1]),
    "mask_without_bias": lambda: _deform((2, 3, 6, 6), (5, 3, 2, 2), mask=True, seed=1),
    "groups_2_offset_groups_2": lambda: _deform((1, 8, 7, 9), (6, 4, 3, 3), bias=True, mask=True, group=2,
                                                offset_group=2, pads=[1, 1, 1, 1], seed=2),
    "offset_groups_4_strided_dilated_asymmetric": lambda: _deform(
        (1, 8, 11, 10), (5, 8, 3, 2), mask=True, offset_group=4, strides=[2, 1], dilations=[2, 3],
        pads=[2, 1, 0, 2], seed=3),
    "groups_3_kernel_5_stride_2": lambda: _deform((2, 6, 12, 11), (9, 2, 5, 5), bias=True, group=3, strides=[2, 2],
                                                  pads=[2, 2, 2, 2], kernel_shape=[5, 5], seed=4),
    "channels_a_vector_and_more": lambda: _deform((1, 20, 6, 5), (24, 20, 3, 3), bias=True, pads=[1, 1, 1, 1],
                                                  seed=5),
    # offsets of about the image's size: many samples fall off it, some straddle its edges
    "samples_off_the_image": lambda: _deform((1, 3, 6, 7), (4, 3, 3, 3), mask=True, offset_scale=4.0,
                                             pads=[1, 1, 1, 1], seed=6),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_deform_conv_matches_onnxruntime(case: str) -> None:
    model, feeds = CASES[case]()
    check_against_onnxruntime(model, feeds, atol=2e-5, rtol=2e-5)


def test_some_samples_fall_off_the_image_in_the_offset_cases() -> None:
    """The random cases do read outside the image (zeros), inside it and across its edges."""
    model, feeds = CASES["samples_off_the_image"]()
    h, w = feeds["x"].shape[2:]
    off = feeds["offset"].reshape(1, 3, 3, 2, h, w)
    ys = off[:, :, :, 0] + np.arange(h)[:, None] - 1 + np.arange(3)[:, None, None, None]
    xs = off[:, :, :, 1] + np.arange(w) - 1 + np.arange(3)[:, None, None]
    outside = (ys <= -1) | (ys >= h) | (xs <= -1) | (xs >= w)
    straddling = ~outside & ((ys < 0) | (ys > h - 1) | (xs < 0) | (xs > w - 1))
    assert 0.2 < outside.mean() < 0.8 and straddling.mean() > 0.05


def test_zero_offsets_are_the_plain_convolution() -> None:
    """With offsets of zero (and no mask) DeformConv is Conv: relay's result equals onnxruntime's Conv."""
    attrs = {"group": 2, "strides": [2, 1], "dilations": [1, 2], "pads": [1, 2, 1, 0]}
    model, feeds = _deform((1, 6, 9, 8), (4, 3, 3, 3), bias=True, **attrs)
    feeds["offset"] = np.zeros_like(feeds["offset"])
    conv = onnx.ModelProto()
    conv.CopyFrom(model)
    node = conv.graph.node[0]
    node.op_type = "Conv"
    del node.input[2]
    conv.graph.input.pop(1)  # the offset
    want = run_onnxruntime(conv, {"x": feeds["x"]})[0]
    got = run_relay(model, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_the_weight_is_blocked_once_frozen_bound_or_computed() -> None:
    """The kernel reads the weight in blocks of output channels ([O / 16, kh, kw, I, 16]): a frozen weight is
    blocked at import, an initializer parameter when relay.build binds it (one kernel either way), and a weight the
    graph gives at run time by relay ops before the kernel; all three equal onnxruntime."""
    model, feeds = _deform((1, 8, 6, 7), (32, 8, 3, 3), bias=True, mask=True, pads=[1, 1, 1, 1], seed=9)
    want = run_onnxruntime(model, feeds)[0]
    for freeze in (True, False):
        mod, params = from_onnx(model, freeze_params=freeze)
        graph_json, lib, built = relay.build(mod, target="llvm", params=params)
        assert [n["name"] for n in json.loads(graph_json)["nodes"] if n["op"] == "tvm_op"] == [
            "fused_deformable_conv2d_bias_add_0"]
        assert any(np.asarray(v).shape == (2, 3, 3, 8, 16) for v in built.values())
        np.testing.assert_allclose(_run(graph_json, lib, built, feeds), want, rtol=2e-5, atol=2e-5)
    weight = onnx.numpy_helper.to_array(model.graph.initializer[0])
    as_input = onnx.ModelProto()
    as_input.CopyFrom(model)
    as_input.graph.initializer.pop(0)
    as_input.graph.input.append(helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, list(weight.shape)))
    np.testing.assert_allclose(run_relay(as_input, {**feeds, "w": weight})[0], want, rtol=2e-5, atol=2e-5)


def test_topi_deformable_conv2d_nchw_matches_the_numpy_reference() -> None:
    """TVM's names: topi.nn.deformable_conv2d_nchw scheduled by topi.generic.schedule_deformable_conv2d_nchw,
    against topi.testing.deformable_conv2d_nchw_python (groups, deformable groups, stride, padding, dilation)."""
    rng = np.random.default_rng(7)
    n, c, h, w, o, k, dg, g = 2, 8, 9, 8, 6, 3, 2, 2
    stride, padding, dilation = (2, 1), 1, (1, 2)
    oh, ow = _out_size(h, k, 2, 1, 1, 1), _out_size(w, k, 1, 2, 1, 1)
    a_np = rng.standard_normal((n, c, h, w)).astype("float32")
    off_np = (rng.standard_normal((n, 2 * dg * k * k, oh, ow)) * 2).astype("float32")
    w_np = rng.standard_normal((o, c // g, k, k)).astype("float32")
    data = te.placeholder(a_np.shape, name="data")
    offset = te.placeholder(off_np.shape, name="offset")
    kernel = te.placeholder(w_np.shape, name="kernel")
    with Target("llvm"):
        out = topi.nn.deformable_conv2d_nchw(data, offset, kernel, stride, padding, dilation, dg, g, "float32")
        sch = topi.generic.schedule_deformable_conv2d_nchw([out])
        func = build(sch, [data, offset, kernel, out], "llvm")
    assert tuple(int(d) for d in out.shape) == (n, o, oh, ow)
    # the samples are computed once per channel, tap and pixel (not once per output channel), at the root
    assert f"allocate deformable_conv2d_columns: float32[{n}, {oh * ow}, {k}, {k}, {c}], global" in str(
        lower(sch, [data, offset, kernel, out]))
    result = nd.array(np.zeros((n, o, oh, ow), "float32"))
    func(nd.array(a_np), nd.array(off_np), nd.array(w_np), result)
    want = topi.testing.deformable_conv2d_nchw_python(a_np, off_np, w_np, stride, padding, dilation, dg, g)
    np.testing.assert_allclose(result.numpy(), want, rtol=1e-5, atol=1e-5)


def test_the_numpy_reference_is_onnxruntimes_deform_conv() -> None:
    """topi.testing's reference (TVM's semantics: corners off the image read zero) with a mask is onnxruntime's."""
    model, feeds = CASES["offset_groups_4_strided_dilated_asymmetric"]()
    want = run_onnxruntime(model, feeds)[0]
    weight = onnx.numpy_helper.to_array(model.graph.initializer[0])
    got = topi.testing.deformable_conv2d_nchw_python(feeds["x"], feeds["offset"], weight, (2, 1), (2, 1, 0, 2),
                                                     (2, 3), 4, 1, mask_np=feeds["mask"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _relay_case(dtype: str = "float32", mask: bool = True) -> tuple[relay.Function, dict[str, np.ndarray],
                                                                     np.ndarray, np.ndarray, np.ndarray]:
    """relay.nn.deformable_conv2d (+ bias + relu) on variables, its inputs, numpy's result, the weight and bias:
    7 x 7 = 49 pixels, which no register tile of pixels divides, and 64 output channels, blocks of 16."""
    rng = np.random.default_rng(8)
    n, c, h, w, o, k, dg = 1, 16, 7, 7, 64, 3, 2
    x = relay.var("x", shape=(n, c, h, w), dtype=dtype)
    off = relay.var("off", shape=(n, 2 * dg * k * k, h, w), dtype=dtype)
    m = relay.var("m", shape=(n, dg * k * k, h, w), dtype=dtype) if mask else None
    w_np = rng.standard_normal((o, c, k, k)).astype(dtype)
    b_np = rng.standard_normal(o).astype(dtype)
    y = relay.nn.deformable_conv2d(x, off, relay.const(w_np), padding=(1, 1), deformable_groups=dg, channels=o,
                                   kernel_size=(k, k), mask=m)
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b_np)))
    feeds = {"x": rng.standard_normal((n, c, h, w)).astype(dtype),
             "off": (rng.standard_normal((n, 2 * dg * k * k, h, w)) * 2).astype(dtype)}
    if mask:
        feeds["m"] = rng.uniform(0, 1, (n, dg * k * k, h, w)).astype(dtype)
    want = topi.testing.deformable_conv2d_nchw_python(feeds["x"], feeds["off"], w_np, 1, 1, 1, dg, 1,
                                                      mask_np=feeds.get("m"))
    want = np.maximum(want + b_np.reshape(1, -1, 1, 1), 0)
    params = [x, off] + ([m] if mask else [])
    return relay.Function(params, y), feeds, want, w_np, b_np


def test_relay_call_with_a_mask_bias_and_relu_is_one_kernel() -> None:
    """relay.nn.deformable_conv2d(..., mask=) with a bias and relu after it: one fused kernel, in float64 too."""
    for dtype in ("float32", "float64"):
        func, feeds, want, _, _ = _relay_case(dtype)
        graph_json, lib, params = relay.build(relay.IRModule.from_expr(func), target="llvm")
        kernels = [nd_ for nd_ in json.loads(graph_json)["nodes"] if nd_["op"] == "tvm_op"]
        assert len(kernels) == 1 and "deformable_conv2d" in kernels[0]["name"]
        got = _run(graph_json, lib, params, feeds)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_deformable_conv2d_builds_for_avx2_and_avx512(target: str) -> None:
    """The sampled columns in a native vector of channels and the GEMM's register tile sized for the ISA (8 or 16
    lanes, 16 or 32 registers): built for either anywhere, run where this CPU can."""
    func, feeds, want, _, _ = _relay_case()
    graph_json, lib, params = relay.build(relay.IRModule.from_expr(func), target=target)
    if "avx512" in target:
        assert "avx512f" in lib.features
    else:
        assert "avx2" in lib.features and not any(f.startswith("avx512") for f in lib.features)
    skip_unless_host_runs(target)
    np.testing.assert_allclose(_run(graph_json, lib, params, feeds), want, rtol=1e-5, atol=1e-5)


def test_nan_offsets_read_zero_and_stay_in_bounds() -> None:
    """A NaN offset is not a position on the image: its sample reads zero (never an index computed from NaN)."""
    func, feeds, _, w_np, b_np = _relay_case(mask=False)
    feeds["off"][0, :, 2:5, 3:6] = np.nan
    graph_json, lib, params = relay.build(relay.IRModule.from_expr(func), target="llvm")
    got = _run(graph_json, lib, params, feeds)
    assert np.isfinite(got).all()
    clean = feeds["off"].copy()
    bad = np.isnan(clean)
    clean[bad] = 1e6  # far off the image: zero, as the NaN's sample is
    ref = topi.testing.deformable_conv2d_nchw_python(feeds["x"], clean, w_np, 1, 1, 1, 2, 1)
    np.testing.assert_allclose(got, np.maximum(ref + b_np.reshape(1, -1, 1, 1), 0), rtol=1e-5, atol=1e-5)


def test_bad_operands_are_refused_by_name() -> None:
    x = relay.var("x", shape=(1, 4, 8, 8))
    w = relay.var("w", shape=(6, 4, 3, 3))
    with pytest.raises(RelayError, match=r"nn.deformable_conv2d: the offset must be \(1, 18, 8, 8\)"):
        infer_type(relay.nn.deformable_conv2d(x, relay.var("o", shape=(1, 9, 8, 8)), w, padding=1))
    with pytest.raises(RelayError, match=r"the offset must be \(1, 36, 6, 6\).*deformable_groups=2"):
        infer_type(relay.nn.deformable_conv2d(x, relay.var("o", shape=(1, 18, 6, 6)), w, deformable_groups=2))
    with pytest.raises(RelayError, match=r"the mask must be \(1, 9, 6, 6\)"):
        infer_type(relay.nn.deformable_conv2d(x, relay.var("o", shape=(1, 18, 6, 6)), w,
                                              mask=relay.var("m", shape=(1, 18, 6, 6))))
    with pytest.raises(RelayError, match="deformable_groups=3 must divide the data's 4 channels"):
        infer_type(relay.nn.deformable_conv2d(x, relay.var("o", shape=(1, 54, 6, 6)), w, deformable_groups=3))
    with pytest.raises(RelayError, match=r"expects 4 x groups=2"):
        infer_type(relay.nn.deformable_conv2d(x, relay.var("o", shape=(1, 18, 6, 6)), w, groups=2))
    with pytest.raises(RelayError, match="layouts NHWC/HWIO"):
        infer_type(relay.nn.deformable_conv2d(x, relay.var("o", shape=(1, 18, 6, 6)), w, data_layout="NHWC",
                                              kernel_layout="HWIO"))
    with pytest.raises(RelayError, match=r"a weight of shape \(6, 4, 3, 3\) is not in kernel_layout 'OHWI16o'"):
        infer_type(relay.nn.deformable_conv2d(x, relay.var("o", shape=(1, 18, 6, 6)), w, kernel_layout="OHWI16o"))
    with pytest.raises(RelayError, match="share one floating-point dtype"):
        infer_type(relay.nn.deformable_conv2d(x, relay.var("o", shape=(1, 18, 6, 6), dtype="float64"), w))


def test_bad_deform_conv_nodes_are_refused_naming_the_node() -> None:
    """An offset of the wrong channel count (one offset group's for two) and a 3-D DeformConv."""
    model, _ = _deform((1, 4, 6, 6), (4, 4, 3, 3), offset_group=2, pads=[1, 1, 1, 1])
    vi = next(v for v in model.graph.input if v.name == "offset")
    vi.type.tensor_type.shape.dim[1].dim_value = 18
    want = r"node 'y' \(DeformConv\): nn.deformable_conv2d: the offset must be \(1, 36, 6, 6\)"
    with pytest.raises(OnnxImportError, match=want):
        from_onnx(model)
    node = helper.make_node("DeformConv", ["x", "w", "o"], ["y"], name="d3")
    shapes = {"x": [1, 2, 4, 4, 4], "w": [2, 2, 1, 1, 1], "o": [1, 6, 4, 4, 4], "y": [1, 2, 4, 4, 4]}
    vi = {k: helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v) for k, v in shapes.items()}
    graph = helper.make_graph([node], "g", [vi["x"], vi["w"], vi["o"]], [vi["y"]])
    model3 = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model3.ir_version = IR
    with pytest.raises(OnnxImportError, match="3-D DeformConv is not supported"):
        from_onnx(model3)

