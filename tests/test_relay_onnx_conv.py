"""The ONNX frontend's 1-D and 3-D convolution and pooling, and ConvTranspose (1-D, 2-D and 3-D), against
onnxruntime: each case imports, builds for llvm and runs once; then a small U-Net (an encoder step down by a
strided Conv, up by a ConvTranspose, joined with its skip) and a 3-D one (volumes, as medical imaging exports)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import numpy_helper  # noqa: E402

from _onnx_models import GraphBuilder, make_single_op, random_inputs, run_onnxruntime  # noqa: E402
from _volume_models import make_r3d, make_unet3d  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.relay.frontend import OnnxImportError, from_onnx  # noqa: E402
from autosched.relay.ir.expr import Call, RelayError, const, post_order  # noqa: E402
from autosched.relay.op import evaluate  # noqa: E402
from test_gpu_relay import assemble, needs_ptxas, serial_error  # noqa: E402
from test_relay_onnx import _f32, check_against_onnxruntime, run_relay  # noqa: E402


def _conv(op: str, x_shape, w_shape, bias: bool = False, opset: int = 13, **attrs):
    """One Conv or ConvTranspose node on input ``x`` with a seeded weight (and bias) as initializers."""
    inits = {"w": _f32(*w_shape)}
    extra = ["w"]
    if bias:
        inits["b"] = _f32(w_shape[0] if op == "Conv" else w_shape[1] * attrs.get("group", 1))
        extra.append("b")
    return make_single_op(op, [("x", x_shape)], initializers=inits, extra_inputs=extra, opset=opset, **attrs)


def _ct(x_shape, w_shape, bias: bool = False, **attrs):
    return _conv("ConvTranspose", x_shape, w_shape, bias=bias, **attrs)


def _pool(op: str, x_shape, **attrs):
    return make_single_op(op, [("x", x_shape)], **attrs)


CONV_CASES = {
    # Conv 1-D: [N, C, W] as a conv2d of height 1
    "conv1d": lambda: _conv("Conv", (2, 3, 17), (5, 3, 3)),
    "conv1d_bias_stride2_pads": lambda: _conv("Conv", (1, 4, 20), (6, 4, 5), bias=True, strides=[2], pads=[2, 1]),
    "conv1d_dilation2": lambda: _conv("Conv", (1, 3, 16), (4, 3, 3), dilations=[2], pads=[2, 2]),
    "conv1d_group2": lambda: _conv("Conv", (1, 4, 12), (6, 2, 3), group=2, pads=[1, 1]),
    # dilated 2-D convolutions in the blocked layouts: dense (FCN's backbone), depthwise (DeepLab-MobileNetV3's),
    # grouped, strided, with the channel padding of an odd output count
    "conv2d_dilated_blocked": lambda: _conv("Conv", (1, 16, 13, 12), (16, 16, 3, 3), bias=True, dilations=[2, 2],
                                            pads=[2, 2, 2, 2]),
    "conv2d_dilated_depthwise": lambda: _conv("Conv", (1, 16, 11, 14), (16, 1, 5, 5), group=16, dilations=[3, 2],
                                              pads=[6, 4, 6, 4]),
    "conv2d_dilated_grouped_strided": lambda: _conv("Conv", (1, 32, 15, 15), (32, 16, 3, 3), group=2, strides=[2, 2],
                                                    dilations=[2, 3], pads=[1, 2, 2, 3]),
    # groups of a few channels (ResNeXt's 32 x 4) joined into block-diagonal groups of a whole block
    "conv2d_groups_of_4_joined": lambda: _conv("Conv", (1, 32, 10, 10), (32, 4, 3, 3), bias=True, group=8,
                                               pads=[1, 1, 1, 1]),
    "conv2d_groups_of_2_in_4_out_joined": lambda: _conv("Conv", (1, 16, 9, 9), (32, 2, 3, 3), group=8,
                                                        strides=[2, 2], pads=[1, 1, 1, 1]),
    "conv2d_dilated_odd_outputs": lambda: _conv("Conv", (1, 16, 9, 9), (21, 16, 3, 3), dilations=[2, 2],
                                                pads=[2, 2, 2, 2]),
    "conv1d_depthwise": lambda: _conv("Conv", (1, 8, 15), (8, 1, 5), bias=True, group=8, strides=[2], pads=[2, 2]),
    "conv1d_same_upper": lambda: _conv("Conv", (1, 3, 11), (4, 3, 4), auto_pad="SAME_UPPER", strides=[2]),
    "conv1d_same_lower": lambda: _conv("Conv", (1, 3, 11), (4, 3, 4), auto_pad="SAME_LOWER", strides=[2]),
    # pooling 1-D
    "maxpool1d_pads": lambda: _pool("MaxPool", (1, 3, 13), kernel_shape=[3], strides=[2], pads=[1, 1]),
    "maxpool1d_ceil_dilation": lambda: _pool("MaxPool", (1, 2, 14), kernel_shape=[3], strides=[2], dilations=[2],
                                             ceil_mode=1),
    "maxpool1d_same_upper": lambda: _pool("MaxPool", (2, 2, 10), kernel_shape=[3], strides=[2],
                                          auto_pad="SAME_UPPER"),
    "avgpool1d_pads_exclude": lambda: _pool("AveragePool", (1, 3, 12), kernel_shape=[3], strides=[2], pads=[1, 1]),
    "avgpool1d_count_include_pad": lambda: _pool("AveragePool", (1, 3, 12), kernel_shape=[3], strides=[2],
                                                 pads=[1, 1], count_include_pad=1),
    "avgpool1d_ceil": lambda: _pool("AveragePool", (1, 2, 10), kernel_shape=[3], strides=[2], ceil_mode=1),
    # dilated average pooling (opset 19): only the taps inside the input (or its pads) are counted
    "avgpool2d_dilated_pads_exclude": lambda: _pool("AveragePool", (1, 2, 11, 10), opset=19, kernel_shape=[3, 2],
                                                    strides=[2, 3], dilations=[2, 3], pads=[1, 1, 2, 0]),
    "avgpool2d_dilated_include_pad_ceil": lambda: _pool("AveragePool", (1, 2, 11, 10), opset=19, kernel_shape=[3, 2],
                                                        strides=[2, 3], dilations=[2, 3], pads=[1, 1, 2, 0],
                                                        count_include_pad=1, ceil_mode=1),
    # ConvTranspose 2-D: weight [C_in, C_out / group, kH, kW]
    "convtranspose_stride1": lambda: _ct((1, 3, 6, 7), (3, 4, 3, 3)),
    "convtranspose_stride2_pads": lambda: _ct((1, 4, 5, 6), (4, 3, 3, 3), strides=[2, 2], pads=[1, 0, 1, 2]),
    "convtranspose_output_padding": lambda: _ct((1, 3, 5, 5), (3, 4, 3, 3), strides=[2, 3], pads=[1, 1, 1, 1],
                                                output_padding=[1, 2]),
    "convtranspose_dilation2": lambda: _ct((1, 3, 6, 5), (3, 2, 3, 3), dilations=[2, 2], pads=[1, 2, 0, 1]),
    "convtranspose_group2_bias": lambda: _ct((1, 4, 5, 5), (4, 3, 3, 3), bias=True, group=2, strides=[2, 2]),
    "convtranspose_depthwise": lambda: _ct((1, 6, 4, 4), (6, 1, 3, 3), group=6, strides=[2, 2], pads=[1, 1, 1, 1]),
    "convtranspose_bias": lambda: _ct((2, 3, 4, 5), (3, 5, 2, 3), bias=True, strides=[1, 2]),
    "convtranspose_same_upper": lambda: _ct((1, 3, 5, 6), (3, 2, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2]),
    "convtranspose_same_lower": lambda: _ct((1, 3, 5, 6), (3, 2, 3, 3), auto_pad="SAME_LOWER", strides=[2, 2]),
    "convtranspose_output_shape": lambda: _ct((1, 3, 5, 5), (3, 2, 3, 3), strides=[2, 2], output_shape=[10, 9]),
    "convtranspose_output_shape_odd_crop": lambda: _ct((1, 3, 5, 5), (3, 2, 3, 3), strides=[2, 2],
                                                       output_shape=[8, 11], output_padding=[1, 0]),
    "convtranspose_output_shape_above_full": lambda: _ct((1, 2, 5, 5), (2, 3, 3, 3), bias=True, strides=[2, 2],
                                                         output_shape=[12, 11]),
    "convtranspose_same_upper_stride_above_kernel": lambda: _ct((1, 2, 4, 4), (2, 3, 2, 2), strides=[3, 3],
                                                                auto_pad="SAME_UPPER"),
    "convtranspose_k4_s2_p1": lambda: _ct((1, 8, 4, 4), (8, 4, 4, 4), bias=True, strides=[2, 2], pads=[1, 1, 1, 1]),
    "convtranspose_k3_s2_p1_output_padding1": lambda: _ct((1, 4, 5, 6), (4, 3, 3, 3), bias=True, strides=[2, 2],
                                                          pads=[1, 1, 1, 1], output_padding=[1, 1]),
    "convtranspose_pads_beyond_kernel": lambda: _ct((1, 2, 6, 6), (2, 3, 3, 3), strides=[2, 2], pads=[3, 0, 2, 4]),
    "convtranspose_opset1": lambda: _ct((1, 2, 4, 4), (2, 3, 3, 3), strides=[2, 2], opset=1),
    # 3-D: [N, C, D, H, W], one conv2d over the depth-unfolded data; pools reduce the depth first
    "conv3d": lambda: _conv("Conv", (2, 3, 6, 7, 8), (5, 3, 3, 3, 3), bias=True, pads=[1, 1, 1, 1, 1, 1]),
    "conv3d_strided_asymmetric_pads": lambda: _conv("Conv", (1, 4, 9, 8, 7), (6, 4, 3, 2, 3), strides=[2, 1, 2],
                                                    pads=[0, 1, 2, 2, 0, 1]),
    "conv3d_dilated_grouped": lambda: _conv("Conv", (1, 8, 9, 9, 6), (8, 2, 3, 3, 1), group=4, dilations=[2, 1, 3],
                                            pads=[2, 1, 0, 2, 1, 0]),
    "conv3d_depthwise_same_upper": lambda: _conv("Conv", (1, 6, 5, 6, 7), (6, 1, 3, 3, 3), group=6, strides=[2, 2, 2],
                                                 auto_pad="SAME_UPPER"),
    "conv3d_pointwise_blocked": lambda: _conv("Conv", (1, 16, 4, 6, 6), (32, 16, 1, 1, 1), bias=True),
    "maxpool3d": lambda: _pool("MaxPool", (1, 3, 8, 9, 10), kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
    "maxpool3d_pads_ceil_dilation": lambda: _pool("MaxPool", (1, 2, 9, 8, 7), kernel_shape=[3, 3, 2],
                                                  strides=[2, 2, 2], pads=[1, 0, 1, 1, 1, 0], ceil_mode=1,
                                                  dilations=[1, 2, 1]),
    "avgpool3d_exclude_pad": lambda: _pool("AveragePool", (1, 3, 7, 6, 8), kernel_shape=[3, 3, 3], strides=[2, 1, 2],
                                           pads=[1, 1, 1, 1, 1, 1]),
    "avgpool3d_count_include_pad_ceil": lambda: _pool("AveragePool", (1, 2, 8, 7, 6), kernel_shape=[3, 2, 3],
                                                      strides=[2, 2, 2], pads=[1, 0, 1, 0, 1, 1],
                                                      count_include_pad=1, ceil_mode=1),
    "convtranspose3d_k2_s2": lambda: _ct((1, 8, 3, 4, 5), (8, 4, 2, 2, 2), bias=True, strides=[2, 2, 2]),
    "convtranspose3d_k3_s2_pads_output_padding": lambda: _ct((1, 4, 4, 3, 5), (4, 3, 3, 3, 3), strides=[2, 2, 1],
                                                             pads=[1, 0, 1, 1, 1, 0], output_padding=[1, 1, 0]),
    "convtranspose3d_grouped_dilated": lambda: _ct((1, 4, 3, 4, 4), (4, 2, 2, 3, 3), group=2, dilations=[2, 1, 2],
                                                   strides=[1, 2, 1]),
    "convtranspose3d_output_shape": lambda: _ct((1, 2, 3, 3, 3), (2, 3, 3, 3, 3), strides=[2, 2, 2],
                                                output_shape=[7, 6, 8]),
    # ConvTranspose 1-D
    "convtranspose1d": lambda: _ct((1, 4, 9), (4, 3, 4), bias=True, strides=[2], pads=[1, 1]),
    "convtranspose1d_group_dilation": lambda: _ct((2, 4, 7), (4, 1, 3), group=2, dilations=[2], strides=[3],
                                                  output_padding=[1]),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_op_matches_onnxruntime(case: str) -> None:
    check_against_onnxruntime(CONV_CASES[case]())


def test_dilate_op() -> None:
    """TVM's nn.dilate: stride - 1 copies of dilation_value between neighbours on each axis."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = np.full((3, 7), 1.5, np.float32)
    want[::2, ::3] = x
    np.testing.assert_array_equal(evaluate([relay.nn.dilate(const(x), (2, 3), dilation_value=1.5)])[0], want)
    with pytest.raises(RelayError, match="nn.dilate: strides"):
        evaluate([relay.nn.dilate(const(x), (2,))])


@pytest.mark.parametrize("case", ["conv2d_groups_of_4_joined", "conv2d_dilated_depthwise", "conv2d_dilated_blocked"])
def test_grouped_and_dilated_convolutions_run_in_blocked_layouts(case: str) -> None:
    """No plain NCHW convolution is left: groups of 4 channels are joined into blocks, dilated ones (dense and
    depthwise) take the blocked kernels with their dilation."""
    mod, params = from_onnx(CONV_CASES[case]())
    with relay.transform.PassContext(opt_level=3):
        fused = relay.optimize(mod, params)
    ops = [n.op.name for f in post_order(fused["main"].body) if isinstance(f, Call) and isinstance(f.op, relay.Function)
           for n in post_order(f.op.body) if isinstance(n, Call) and not isinstance(n.op, relay.Function)]
    assert "nn.conv2d" not in ops and any(o.endswith("conv2d_nchwc") for o in ops), ops


def test_conv_transpose_runs_every_phase_in_one_stride1_conv2d() -> None:
    """A stride-2 ConvTranspose with a 4x4 kernel is one stride-1 nn.conv2d of 2x2 taps with an output channel per
    phase (4 x 4 here), interleaved: no multiply reads an inserted zero (the dilated form did 4x the work). With
    the weight a parameter its rearrangement is relay ops that relay.build folds. A dilated kernel keeps
    nn.dilate."""
    model = CONV_CASES["convtranspose_k4_s2_p1"]()
    mod, params = from_onnx(model, shape={"x": (1, 8, 4, 4)}, freeze_params=True)
    calls = {getattr(e.op, "name", None): e for e in post_order(mod["main"].body) if isinstance(e, Call)}
    conv = calls["nn.conv2d"]
    assert tuple(conv.attrs["strides"]) == (1, 1) and tuple(conv.attrs["kernel_size"]) == (2, 2)
    assert conv.attrs["channels"] == 16 and "nn.dilate" not in calls and params == {}
    mod, params = from_onnx(model, shape={"x": (1, 8, 4, 4)})
    assert set(params) == {"w", "b"}
    mod, _ = from_onnx(CONV_CASES["convtranspose_dilation2"]())
    assert "nn.dilate" not in {getattr(e.op, "name", None) for e in post_order(mod["main"].body)
                               if isinstance(e, Call)}  # (stride 1: no dilation of the input)
    mod, _ = from_onnx(CONV_CASES["convtranspose_same_upper_stride_above_kernel"]())
    assert "nn.dilate" in {getattr(e.op, "name", None) for e in post_order(mod["main"].body) if isinstance(e, Call)}


@pytest.mark.parametrize("case", ["conv1d_depthwise", "convtranspose_group2_bias", "convtranspose1d_group_dilation"])
def test_frozen_weights_are_rearranged_at_import(case: str) -> None:
    """With freeze_params the weights are constants, reshaped / flipped / transposed in numpy at import."""
    model = CONV_CASES[case]()
    inputs = random_inputs(model)
    np.testing.assert_allclose(run_relay(model, inputs, freeze_params=True)[0], run_onnxruntime(model, inputs)[0],
                               atol=1e-4, rtol=1e-5)


def test_3d_convolutions_are_one_conv2d_over_unfolded_depth() -> None:
    """A 3 x 3 x 3 convolution is one 3 x 3 nn.conv2d of 3 x the channels over a batch of N x D images (the
    blocked, tunable 2-D kernel); a 4-D window and a 3-D LpPool are refused naming the rank."""
    mod, _ = from_onnx(CONV_CASES["conv3d"](), freeze_params=True)
    convs = [e for e in post_order(mod["main"].body)
             if isinstance(e, Call) and getattr(e.op, "name", "") == "nn.conv2d"]
    assert len(convs) == 1 and tuple(convs[0].attrs["kernel_size"]) == (3, 3)
    assert tuple(convs[0].args[1].data.shape) == (5, 9, 3, 3)
    model = _conv("Conv", (1, 2, 3, 4, 4, 4), (3, 2, 1, 3, 3, 3))
    with pytest.raises(OnnxImportError, match=r"4-D Conv is not supported \(the data 'x' has rank 6\)"):
        from_onnx(model)
    model = _pool("LpPool", (1, 2, 4, 4, 4), kernel_shape=[2, 2, 2])
    with pytest.raises(OnnxImportError, match=r"3-D LpPool is not supported .* rank 5"):
        from_onnx(model)


def test_conv_transpose_with_a_computed_weight() -> None:
    """A weight the graph computes is split into phases by relay ops at run time."""
    b = GraphBuilder()
    w = b.node("Relu", ["w_in"], name="w_relu")
    b.node("ConvTranspose", ["x", w], name="up", strides=[2, 2], pads=[1, 0, 0, 1])
    check_against_onnxruntime(b.model([("x", (1, 2, 4, 4)), ("w_in", (2, 3, 3, 3))], ["up"]))


def test_conv_transpose_with_a_constant_node_weight() -> None:
    """A weight from a Constant node is flipped at import in numpy (no relay op rearranges it)."""
    b = GraphBuilder()
    w = b.node("Constant", [], name="wc", value=numpy_helper.from_array(_f32(3, 2, 3, 3)))
    b.node("ConvTranspose", ["x", w], name="y", strides=[2, 2], pads=[1, 1, 1, 1])
    check_against_onnxruntime(b.model([("x", (1, 3, 5, 5))], ["y"]))


def _small_unet() -> onnx.ModelProto:
    """Conv -> Relu (the skip) -> Conv stride 2 -> Relu -> ConvTranspose k4 s2 p1 -> Concat with the skip -> Conv."""
    b = GraphBuilder(seed=3)
    skip = b.node("Relu", [b.conv("x", 3, 8, 3, bias=True)])
    down = b.node("Relu", [b.conv(skip, 8, 16, 3, stride=2, bias=True)])
    w = (b.rng.standard_normal((16, 8, 4, 4)) * 0.1).astype(np.float32)
    bias = (b.rng.standard_normal(8) * 0.1).astype(np.float32)
    up = b.node("ConvTranspose", [down, b.init("up.weight", w), b.init("up.bias", bias)], name="up",
                kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1])
    cat = b.node("Concat", [up, skip], axis=1)
    out = b.conv(cat, 16, 2, 1, bias=True, name="head")
    return b.model([("x", (1, 3, 16, 16))], [out], name="small_unet")


def test_small_unet_matches_onnxruntime() -> None:
    check_against_onnxruntime(_small_unet())


def _small_unet3d() -> onnx.ModelProto:
    """A 3-D U-Net step as medical-imaging exports write it: Conv3d -> InstanceNormalization -> LeakyRelu (the
    skip), MaxPool3d, Conv3d -> BatchNormalization -> Relu, ConvTranspose3d k2 s2, Concat with the skip, a 1x1x1
    Conv3d to the classes and a Softmax over them."""
    b = GraphBuilder(seed=5)

    def conv3(x, cin, cout, name):
        w = (b.rng.standard_normal((cout, cin, 3, 3, 3)) * (2 / (27 * cin)) ** 0.5).astype(np.float32)
        return b.node("Conv", [x, b.init(f"{name}.w", w), b.init(f"{name}.b", _f32(cout) * 0.1)], name=name,
                      pads=[1] * 6)

    skip = conv3("x", 2, 8, "enc")
    skip = b.node("InstanceNormalization", [skip, b.init("in.s", _f32(8)), b.init("in.b", _f32(8))], epsilon=1e-5)
    skip = b.node("LeakyRelu", [skip], alpha=0.01)
    down = b.node("MaxPool", [skip], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    mid = b.node("Relu", [b.bn(conv3(down, 8, 16, "mid"), 16)])
    w = (b.rng.standard_normal((16, 8, 2, 2, 2)) * 0.2).astype(np.float32)
    up = b.node("ConvTranspose", [mid, b.init("up.w", w), b.init("up.b", _f32(8) * 0.1)], strides=[2, 2, 2])
    cat = b.node("Concat", [up, skip], axis=1)
    head = b.node("Conv", [cat, b.init("head.w", _f32(3, 16, 1, 1, 1) * 0.3)])
    out = b.node("Softmax", [head], axis=1)
    return b.model([("x", (1, 2, 8, 12, 10))], [out], name="small_unet3d")


def test_small_3d_unet_matches_onnxruntime() -> None:
    check_against_onnxruntime(_small_unet3d(), atol=1e-5)


def test_volume_models_at_small_sizes_match_onnxruntime() -> None:
    """The benchmark's nnU-Net and R3D-18 forms (tests/_volume_models.py), shrunk."""
    check_against_onnxruntime(make_unet3d((1, 1, 8, 16, 16), widths=(4, 8, 16)), atol=1e-5)
    check_against_onnxruntime(make_r3d((1, 3, 4, 32, 32), widths=(8, 16, 16, 32), classes=10), atol=1e-4)


def test_small_unet_for_cuda() -> None:
    """Built for cuda (default GPU schedules), each kernel's grid run serially on the CPU matches onnxruntime."""
    model = _small_unet()
    err, kernels = serial_error(model, random_inputs(model))
    assert err < 1e-5 and sum("conv2d" in k.name for k, _ in kernels) == 4  # (the ConvTranspose is one of them)


@needs_ptxas
def test_small_unet_assembles_for_sm80_and_sm90() -> None:
    model = _small_unet()
    regs = assemble(model, random_inputs(model))
    assert regs and max(regs.values()) <= 128, regs


@pytest.mark.parametrize("image, block, attrs", [
    ((6, 7), (2, 3), {}), ((9, 8), (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((8, 9), (2, 2), {"dilations": [2, 3], "strides": [1, 2]}), ((7, 7), (3, 2), {"strides": [2, 2]})])
def test_col2im_sums_blocks_back_into_the_image(image, block, attrs) -> None:
    """torch's nn.Fold as ONNX's Col2Im: a grouped transposed convolution by a one-hot kernel, against onnx's
    reference evaluator and onnxruntime."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    strides, dilations = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    counts = [(s + p0 + p1 - d * (k - 1) - 1) // st + 1
              for s, p0, p1, d, k, st in zip(image, pads[:2], pads[2:], dilations, block, strides)]
    x = _f32(2, 3 * block[0] * block[1], counts[0] * counts[1])
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)
    graph = helper.make_graph([node], "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.array(image, np.int64), "image"),
                                           numpy_helper.from_array(np.array(block, np.int64), "block")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8  # (what onnxruntime 1.31 reads)
    got = run_relay(model, {"x": x})[0]
    for want in (ReferenceEvaluator(model).run(None, {"x": x})[0], run_onnxruntime(model, {"x": x})[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pool, shape, sized", [
    ({"kernel_shape": [2, 2], "strides": [2, 2]}, (2, 4, 8, 10), False),
    ({"kernel_shape": [2, 2], "strides": [2, 2]}, (2, 4, 9, 10), True),
    ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (2, 4, 9, 10), True),
    ({"kernel_shape": [3, 2], "strides": [1, 2]}, (1, 3, 7, 8), False),
    ({"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, (2, 4, 11), True)])
def test_max_pool_indices_and_max_unpool_as_segnet_uses_them(pool, shape, sized) -> None:
    """SegNet's decoder: MaxPool's Indices output (the flat position of each window's first maximum) feeds a
    MaxUnpool that puts the pooled values back there, zeros elsewhere (at the input's size when given, as torch's
    ``max_unpool2d(output_size=...)`` exports it); both against onnxruntime."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MaxPool", ["r"], ["p", "i"], **pool),
             helper.make_node("Mul", ["p", "two"], ["d"]),
             helper.make_node("MaxUnpool", ["d", "i", "size"] if sized else ["d", "i"], ["u"], **pool)]
    graph = helper.make_graph(nodes, "segnet_step", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("p", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None),
                               helper.make_tensor_value_info("u", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.array(2, np.float32), "two"),
                                           numpy_helper.from_array(np.array(shape, np.int64), "size")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    inputs = {"x": np.round(_f32(*shape) * 4) / 4}  # (ties: the first maximum is the one named)
    got, want = run_relay(model, inputs), run_onnxruntime(model, inputs)
    for g_, w_ in zip(got, want, strict=True):
        np.testing.assert_array_equal(g_, w_)
