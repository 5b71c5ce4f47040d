"""Quantized ONNX models as onnxruntime's quantization tool writes them: dynamic quantization (DynamicQuantizeLinear,
MatMulInteger, ConvInteger) and the operator format (QLinearConv, QLinearMatMul, onnxruntime's com.microsoft
QLinear* ops and QGemm), op by op against the ONNX reference evaluator (the standard ops, exactly as the spec
defines them) or onnxruntime (its contrib ops), then whole models quantized by onnxruntime.quantization; and the
relay side they rest on: ``out_dtype`` of the products, integer filters kept off Winograd, scalar kernels."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from _cpus import host_runs, skip_unless_host_runs  # noqa: E402
from _onnx_models import IR_VERSION, make_resnet18, run_onnxruntime  # noqa: E402
from _transformer_models import make_encoder, token_inputs  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.relay.frontend import OnnxImportError, from_onnx  # noqa: E402
from autosched.relay.frontend.onnx.quantized import _QRANGE  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402
from autosched.target import Target, has_dot_u8s8  # noqa: E402

_TYPES = {"uint8": onnx.TensorProto.UINT8, "int8": onnx.TensorProto.INT8, "int32": onnx.TensorProto.INT32,
          "float32": onnx.TensorProto.FLOAT}


def _node_model(op: str, inputs: list[tuple[str, str, tuple]], inits: dict[str, np.ndarray],
                outputs: list[tuple[str, str, tuple | None]], domain: str = "", opset: int = 13, **attrs):
    """One ``op`` node: graph inputs (name, dtype, shape), initializers, then the node's inputs in order (the
    names of both, "" for an omitted one); outputs (name, dtype, shape or None)."""
    order = attrs.pop("order")
    node = helper.make_node(op, order, [o for o, _, _ in outputs], domain=domain, **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, _TYPES[d], list(s)) for n, d, s in inputs],
        [helper.make_tensor_value_info(n, _TYPES[d], None if s is None else list(s)) for n, d, s in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = IR_VERSION
    return model


def _run(model, inputs: dict[str, np.ndarray]) -> tuple[list[np.ndarray], set[str]]:
    """Import, build for llvm, run: the outputs, and the dtypes the imported products (dense, matmul, conv2d)
    compute in."""
    mod, params = from_onnx(model, shape={k: v.shape for k, v in inputs.items()})
    typed = relay.transform.InferType()(mod)
    products = {c.checked_type.dtype for c in relay.ir.expr.post_order(typed["main"].body)
                if isinstance(c, relay.Call) and getattr(c.op, "name", "") in _PRODUCTS}
    graph_json, lib, params = relay.build(mod, target="llvm", params=params)
    m = GraphModule(graph_json, lib, params)
    m.set_input(**inputs)
    m.run()
    return [np.asarray(m.get_output(i)) for i in range(len(model.graph.output))], products


_PRODUCTS = ("nn.dense", "nn.matmul", "nn.batch_matmul", "nn.conv2d")


def _reference(model, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, inputs)]


def _assert_same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)


R = np.random.default_rng(7)


def _u8(*shape):
    return R.integers(0, 256, shape).astype(np.uint8)


def _i8(*shape, lo=-128, hi=128):
    return R.integers(lo, hi, shape).astype(np.int8)


# ------------------------------------------------------------------ integer products, exact
@pytest.mark.parametrize("k, exact_in", [(32, "float32"), (1100, "int32")])
def test_matmul_integer_is_exact_in_float32_when_its_sums_fit_and_in_int32_otherwise(k: int, exact_in: str) -> None:
    """(A - a_zp) @ (B - b_zp) with a runtime zero point (DynamicQuantizeLinear's) and one per column of the
    constant B equals the ONNX definition exactly: in float32 kernels while the largest possible partial sum is
    below 2^24, in int32 once it may not be (K = 1100 of full-range int8 weights)."""
    b = _i8(k, 24)
    bzp = _i8(24, lo=-3, hi=4)
    model = _node_model("MatMulInteger", [("a", "uint8", (2, 5, k)), ("azp", "uint8", ())], {"b": b, "bzp": bzp},
                        [("y", "int32", (2, 5, 24))], order=["a", "b", "azp", "bzp"])
    inputs = {"a": _u8(2, 5, k), "azp": np.array(131, np.uint8)}
    got, products = _run(model, inputs)
    _assert_same(got, _reference(model, inputs))
    assert products == {exact_in}


def test_matmul_integer_of_bytes_by_a_weight_of_zero_point_0_stays_in_bytes() -> None:
    """quantize_dynamic's form (uint8 activations with a run-time zero point, an int8 weight of zero point 0) is
    one int8 dense summed in int32, less the zero point times the weight's row sums: exact."""
    model = _node_model("MatMulInteger", [("a", "uint8", (2, 8, 64)), ("azp", "uint8", ())],
                        {"b": _i8(64, 32), "bzp": np.array(0, np.int8)}, [("y", "int32", (2, 8, 32))],
                        order=["a", "b", "azp", "bzp"])
    inputs = {"a": _u8(2, 8, 64), "azp": np.array(97, np.uint8)}
    got, products = _run(model, inputs)
    _assert_same(got, _reference(model, inputs))
    assert products == {"int32"}


def test_matmul_integer_of_two_runtime_operands() -> None:
    model = _node_model("MatMulInteger", [("a", "uint8", (4, 16)), ("b", "int8", (16, 8))],
                        {"azp": np.array(3, np.uint8), "bzp": np.array(-2, np.int8)}, [("y", "int32", (4, 8))],
                        order=["a", "b", "azp", "bzp"])
    inputs = {"a": _u8(4, 16), "b": _i8(16, 8)}
    _assert_same(_run(model, inputs)[0], _reference(model, inputs))


@pytest.mark.parametrize("group", [1, 2])
def test_conv_integer_pads_with_the_zero_point(group: int) -> None:
    """The padding is the data's zero point (0 once shifted); the filters' zero point one per output channel."""
    w = _i8(16, 8 // group, 3, 3)
    model = _node_model("ConvInteger", [("x", "uint8", (1, 8, 9, 9))],
                        {"w": w, "xzp": np.array(7, np.uint8), "wzp": _i8(16, lo=-2, hi=3)},
                        [("y", "int32", (1, 16, 5, 5))], order=["x", "w", "xzp", "wzp"], pads=[1, 1, 1, 1],
                        strides=[2, 2], group=group)
    inputs = {"x": _u8(1, 8, 9, 9)}
    _assert_same(_run(model, inputs)[0], _reference(model, inputs))


def _qlinear_conv(signed: bool, nd: int):
    act = "int8" if signed else "uint8"
    xshape, wshape = ((1, 8, 10, 10), (16, 8, 3, 3)) if nd == 2 else ((1, 8, 20), (16, 8, 3))
    inits = {"xs": np.float32(0.05), "xzp": np.array(-4 if signed else 128, act), "w": _i8(*wshape, lo=-64, hi=64),
             "ws": (R.random(16) * 0.01 + 0.001).astype(np.float32), "wzp": np.zeros(16, np.int8),
             "ys": np.float32(0.3), "yzp": np.array(5 if signed else 100, act),
             "bias": R.integers(-2000, 2000, 16).astype(np.int32)}
    out = (1, 16, 10, 10) if nd == 2 else (1, 16, 20)
    return _node_model("QLinearConv", [("x", act, xshape)], inits, [("y", act, out)],
                       order=["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "bias"], pads=[1] * (2 * nd))


@pytest.mark.parametrize("signed, nd", [(False, 2), (True, 2), (False, 1)])
def test_qlinear_conv_requantizes_as_the_spec(signed: bool, nd: int) -> None:
    """Per-channel filter scales, an int32 bias, uint8 or int8 activations, 1-D and 2-D: every output equals the
    reference's (the float32 multiply by x_scale * w_scale / y_scale, halves to even, saturated); onnxruntime's
    for 1-D, where onnx 1.23's reference evaluator returns a 4-D result."""
    model = _qlinear_conv(signed, nd)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = (R.integers(-128, 128, shape) if signed else R.integers(0, 256, shape)).astype("int8" if signed else "uint8")
    want = _reference(model, {"x": x}) if nd == 2 else run_onnxruntime(model, {"x": x})
    _assert_same(_run(model, {"x": x})[0], want)


def _qdq_product(op: str, act: str = "uint8"):
    """A float ``op`` of dequantized activations (one scale and zero point) and a dequantized constant int8 weight
    (zero point 0, a scale per output channel or column), as quantize_static's QDQ format writes it."""
    x_shape, w, axis, out, attrs = {
        "Conv": ((1, 8, 9, 9), _i8(16, 8, 3, 3), 0, (1, 16, 5, 5), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
        "MatMul": ((2, 3, 64), _i8(64, 32), 1, (2, 3, 32), {}),
        "Gemm": ((4, 64), _i8(48, 64), 0, (4, 48), {"transB": 1})}[op]
    channels = out[1] if op == "Conv" else out[-1]
    inits = {"xs": np.float32(0.03), "xzp": np.array(-5 if act == "int8" else 117, act), "w": w,
             "ws": (R.random(channels) * 0.01 + 0.001).astype(np.float32), "wzp": np.zeros(channels, np.int8),
             "b": R.standard_normal(channels).astype(np.float32)}
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xzp"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wzp"], ["wf"], axis=axis),
             helper.make_node(op, ["xf", "wf"] + (["b"] if op != "MatMul" else []), ["y"], **attrs)]
    graph = helper.make_graph(nodes, op, [helper.make_tensor_value_info("x", _TYPES[act], list(x_shape))],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, list(out))],
                              initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])  # the reference's Dequantize
    model.ir_version = IR_VERSION
    return model, x_shape


@pytest.mark.parametrize("op, act", [("Conv", "uint8"), ("MatMul", "uint8"), ("Gemm", "uint8"), ("Conv", "int8")])
def test_qdq_products_of_uint8_by_int8_run_on_their_integers(op: str, act: str) -> None:
    """quantize_static's default (QDQ) format: a Conv, MatMul or Gemm of dequantized uint8 activations by a
    dequantized int8 weight runs as QLinearConv's integer product of the bytes (VNNI where the CPU has it),
    scaled after the sum: the float reference's value, up to its roundings. int8 activations stay float."""
    model, x_shape = _qdq_product(op, act)
    lo, hi = _QRANGE[act]
    x = R.integers(lo, hi + 1, x_shape).astype(act)
    got, products = _run(model, {"x": x})
    want = _reference(model, {"x": x})[0]
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
    assert products == ({"int32"} if act == "uint8" else {"float32"})


@pytest.mark.parametrize("channels, group, stride", [(32, 32, 2), (16, 4, 1)])
def test_grouped_and_depthwise_qlinear_convs_equal_the_spec(channels: int, group: int, stride: int) -> None:
    """A quantized MobileNet's depthwise convolution and a grouped one, uint8 data at a zero point of 100 (the
    padding), per-channel int8 filters: bytes imported, run in the blocked float kernels (VNNI takes groups of
    one only), every output equal to the reference's."""
    inits = {"xs": np.float32(0.05), "xzp": np.array(100, np.uint8),
             "w": _i8(channels, channels // group, 3, 3, lo=-100, hi=100),
             "ws": (R.random(channels) * 0.01 + 0.001).astype(np.float32), "wzp": np.zeros(channels, np.int8),
             "ys": np.float32(0.3), "yzp": np.array(90, np.uint8),
             "bias": R.integers(-2000, 2000, channels).astype(np.int32)}
    out = (12 + 2 - 3) // stride + 1
    model = _node_model("QLinearConv", [("x", "uint8", (1, channels, 12, 12))], inits,
                        [("y", "uint8", (1, channels, out, out))],
                        order=["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "bias"], pads=[1, 1, 1, 1],
                        group=group, strides=[stride, stride])
    x = {"x": _u8(1, channels, 12, 12)}
    got, products = _run(model, x)
    assert products == {"int32"}
    _assert_same(got, _reference(model, x))


def test_qlinear_matmul_with_a_scale_per_column() -> None:
    inits = {"as": np.float32(0.02), "azp": np.array(120, np.uint8), "b": _i8(16, 8),
             "bs": (R.random(8) * 0.01 + 0.001).astype(np.float32), "bzp": np.zeros(8, np.int8),
             "ys": np.float32(0.1), "yzp": np.array(128, np.uint8)}
    model = _node_model("QLinearMatMul", [("a", "uint8", (3, 16))], inits, [("y", "uint8", (3, 8))],
                        order=["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"])
    inputs = {"a": _u8(3, 16)}
    _assert_same(_run(model, inputs)[0], _reference(model, inputs))


@pytest.mark.parametrize("values", ["mixed", "positive", "zeros"])
def test_dynamic_quantize_linear_gives_values_scale_and_zero_point(values: str) -> None:
    """The range includes 0; an all-zero tensor gets scale 1 (its range is empty)."""
    x = {"mixed": R.standard_normal((4, 33)) * 3, "positive": R.random((4, 33)) + 0.5,
         "zeros": np.zeros((4, 33))}[values].astype(np.float32)
    model = _node_model("DynamicQuantizeLinear", [("x", "float32", (4, 33))], {},
                        [("y", "uint8", (4, 33)), ("scale", "float32", ()), ("zp", "uint8", ())], order=["x"])
    _assert_same(_run(model, {"x": x})[0], _reference(model, {"x": x}))


# ------------------------------------------------------------------ onnxruntime's com.microsoft QLinear ops
def _ms(op: str, inputs, inits, out, **attrs):
    return _node_model(op, inputs, inits, out, domain="com.microsoft", **attrs)


def _scale_zp(prefix: str, scale: float, zp: int, dtype: str = "uint8") -> dict:
    return {f"{prefix}s": np.float32(scale), f"{prefix}z": np.array(zp, dtype)}


MS_CASES = {
    "QLinearAdd": lambda: _ms("QLinearAdd", [("a", "uint8", (2, 8, 5, 5)), ("b", "uint8", (2, 8, 5, 5))],
                              {**_scale_zp("a", 0.03, 100), **_scale_zp("b", 0.05, 90), **_scale_zp("c", 0.06, 110)},
                              [("y", "uint8", (2, 8, 5, 5))], order=["a", "as", "az", "b", "bs", "bz", "cs", "cz"]),
    "QLinearMul": lambda: _ms("QLinearMul", [("a", "int8", (3, 16)), ("b", "int8", (3, 16))],
                              {**_scale_zp("a", 0.03, 2, "int8"), **_scale_zp("b", 0.05, -1, "int8"),
                               **_scale_zp("c", 0.02, 3, "int8")},
                              [("y", "int8", (3, 16))], order=["a", "as", "az", "b", "bs", "bz", "cs", "cz"]),
    "QLinearGlobalAveragePool": lambda: _ms(
        "QLinearGlobalAveragePool", [("a", "uint8", (1, 16, 7, 7))], {**_scale_zp("a", 0.04, 20),
                                                                      **_scale_zp("c", 0.03, 10)},
        [("y", "uint8", (1, 16, 1, 1))], order=["a", "as", "az", "cs", "cz"], channels_last=0),
    "QLinearAveragePool": lambda: _ms(
        "QLinearAveragePool", [("a", "uint8", (1, 8, 9, 9))], {**_scale_zp("a", 0.04, 20), **_scale_zp("c", 0.03, 10)},
        [("y", "uint8", (1, 8, 5, 5))], order=["a", "as", "az", "cs", "cz"], kernel_shape=[3, 3], strides=[2, 2],
        pads=[1, 1, 1, 1]),
    "QLinearLeakyRelu": lambda: _ms("QLinearLeakyRelu", [("a", "uint8", (4, 40))],
                                    {**_scale_zp("a", 0.05, 128), **_scale_zp("c", 0.03, 60)},
                                    [("y", "uint8", (4, 40))], order=["a", "as", "az", "cs", "cz"], alpha=0.1),
    "QLinearSigmoid": lambda: _ms("QLinearSigmoid", [("a", "int8", (4, 40))],
                                  {**_scale_zp("a", 0.05, 0, "int8"), **_scale_zp("c", 1 / 256, -128, "int8")},
                                  [("y", "int8", (4, 40))], order=["a", "as", "az", "cs", "cz"]),
    "QLinearConcat": lambda: _ms("QLinearConcat", [("a", "uint8", (1, 3, 4)), ("b", "uint8", (1, 5, 4))],
                                 {**_scale_zp("a", 0.05, 128), **_scale_zp("b", 0.02, 3), **_scale_zp("c", 0.04, 64)},
                                 [("y", "uint8", (1, 8, 4))], order=["cs", "cz", "a", "as", "az", "b", "bs", "bz"],
                                 axis=1),
    # B within [-64, 64): onnxruntime's AVX2 kernels sum u8 x s8 pairs in saturating int16 (exact in that range)
    "QGemm": lambda: _ms("QGemm", [("a", "uint8", (5, 32))],
                         {**_scale_zp("a", 0.02, 120), "b": _i8(12, 32, lo=-64, hi=64),
                          **_scale_zp("b", 0.004, 0, "int8"), "c": R.integers(-500, 500, 12).astype(np.int32),
                          **_scale_zp("y", 0.05, 128)},
                         [("y", "uint8", (5, 12))], order=["a", "as", "az", "b", "bs", "bz", "c", "ys", "yz"],
                         transB=1),
    "QGemm to float": lambda: _ms("QGemm", [("a", "uint8", (5, 32))],
                                  {**_scale_zp("a", 0.02, 120), "b": _i8(32, 12, lo=-64, hi=64),
                                   **_scale_zp("b", 0.004, 0, "int8")},
                                  [("y", "float32", (5, 12))], order=["a", "as", "az", "b", "bs", "bz"]),
}


@pytest.mark.parametrize("case", list(MS_CASES))
def test_onnxruntime_qlinear_contrib_ops_match_onnxruntime(case: str) -> None:
    """onnxruntime's contrib ops of the operator format (what quantize_static writes besides QLinearConv and
    QLinearMatMul): exactly its outputs; QLinearAdd and QLinearMul follow the formula (dequantize, compute,
    quantize), which onnxruntime's x86 kernels approximate in fixed point: at most one step apart, rarely."""
    model = MS_CASES[case]()
    inputs = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        inputs[vi.name] = _i8(*shape) if vi.type.tensor_type.elem_type == onnx.TensorProto.INT8 else _u8(*shape)
    want = run_onnxruntime(model, inputs)
    got = _run(model, inputs)[0]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype == np.float32:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
        elif case in ("QLinearAdd", "QLinearMul"):
            steps = np.abs(g.astype(np.int32) - w)
            assert steps.max() <= 1 and (steps > 0).mean() < 0.05, (steps.max(), (steps > 0).mean())
        else:
            np.testing.assert_array_equal(g, w)


def test_quantized_ops_name_what_they_cannot_take() -> None:
    """A runtime scale and NHWC data are refused with the node and the input named."""
    model = _node_model("QLinearMatMul", [("a", "uint8", (3, 16)), ("as", "float32", ())],
                        {"azp": np.array(1, np.uint8), "b": _i8(16, 8), "bs": np.float32(0.1),
                         "bzp": np.array(0, np.int8), "ys": np.float32(0.1), "yzp": np.array(0, np.uint8)},
                        [("y", "uint8", (3, 8))], order=["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"])
    with pytest.raises(OnnxImportError, match=r"QLinearMatMul.*a_scale 'as' is computed at run time"):
        from_onnx(model)
    nhwc = _ms("QLinearGlobalAveragePool", [("a", "uint8", (1, 7, 7, 16))],
               {**_scale_zp("a", 0.04, 20), **_scale_zp("c", 0.03, 10)}, [("y", "uint8", (1, 1, 1, 16))],
               order=["a", "as", "az", "cs", "cz"], channels_last=1)
    with pytest.raises(OnnxImportError, match="channels_last=1"):
        from_onnx(nhwc)


# ------------------------------------------------------------------ whole models from onnxruntime.quantization
def test_a_dynamically_quantized_encoder_matches_onnxruntime(tmp_path, caplog) -> None:
    """quantize_dynamic's BERT-style encoder (int8 weights; activations quantized at run time by
    DynamicQuantizeLinear for each MatMulInteger): onnxruntime's outputs, to float32 rounding."""
    from onnxruntime.quantization import quantize_dynamic

    caplog.set_level(logging.ERROR)  # the quantizer's advice to preprocess (restored after the test)
    onnx.save(make_encoder(layers=2, d_model=64, heads=4, seq=16, vocab=100), tmp_path / "enc.onnx")
    quantize_dynamic(tmp_path / "enc.onnx", tmp_path / "enc_int8.onnx", reduce_range=True)
    model = onnx.load(tmp_path / "enc_int8.onnx")
    ops = {n.op_type for n in model.graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops
    inputs = token_inputs(model, 16, 100)
    want = run_onnxruntime(model, inputs)
    got, _ = _run(model, inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4 * float(np.abs(want[0]).max()))


def _static_resnet18(tmp_path, width: int, **quantize_args) -> onnx.ModelProto:
    """A ResNet-18-shaped network for 32 x 32 images quantized by onnxruntime's quantize_static, calibrated on
    four seeded images."""
    from onnxruntime.quantization import CalibrationDataReader, quantize_static

    class Images(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            self.it = iter([{"data": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    onnx.save(make_resnet18(image=32, num_classes=10, width=width), tmp_path / "rn.onnx")
    quantize_static(tmp_path / "rn.onnx", tmp_path / "rn_quantized.onnx", Images(), **quantize_args)
    return onnx.load(tmp_path / "rn_quantized.onnx")


@pytest.mark.parametrize("activations", ["QUInt8", "QInt8"])
def test_a_statically_quantized_resnet_in_the_operator_format_matches_onnxruntime(tmp_path, caplog,
                                                                                  activations) -> None:
    """quantize_static's operator format of a ResNet-18-shaped network (QLinearConv, QLinearAdd, MaxPool on
    uint8, QLinearGlobalAveragePool, QGemm), calibrated on four images: every logit equals onnxruntime's."""
    from onnxruntime.quantization import QuantFormat, QuantType

    caplog.set_level(logging.ERROR)
    model = _static_resnet18(tmp_path, 8, quant_format=QuantFormat.QOperator,
                             activation_type=getattr(QuantType, activations), reduce_range=True)
    assert {"QLinearConv", "QLinearAdd", "QGemm"} <= {n.op_type for n in model.graph.node}
    x = {"data": np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    want = run_onnxruntime(model, x)
    got, _ = _run(model, x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("per_channel", [False, True])
def test_a_statically_quantized_resnet_in_the_qdq_format_runs_its_products_on_integers(tmp_path, caplog,
                                                                                       per_channel) -> None:
    """quantize_static's default format (QDQ: QuantizeLinear/DequantizeLinear around float Conv, Add, Gemm) of a
    ResNet-18-shaped network: every Conv and the Gemm run on the bytes (the QDQ rewrite), and every logit equals
    onnxruntime's, with its graph optimisations (which fuse the pattern into integer kernels) and without."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantFormat, QuantType

    caplog.set_level(logging.ERROR)
    # 7-bit weights (reduce_range), as the operator-format test: onnxruntime's AVX2 integer kernels (its graph
    # optimisations) add pairs of uint8 x int8 products in 16 bits, which full-range weights can saturate
    model = _static_resnet18(tmp_path, 16, quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                             per_channel=per_channel, reduce_range=True)
    assert "QLinearConv" not in {n.op_type for n in model.graph.node}
    x = {"data": np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    as_defined = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
        None, x)[0]
    got, products = _run(model, x)
    assert products == {"int32"}
    np.testing.assert_allclose(got[0], run_onnxruntime(model, x)[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[0], as_defined, rtol=1e-6, atol=1e-6)


#: the converters these tests cover (an onnxruntime contrib op as domain.op_type, as the importer names it)
# ------------------------------------------------------------------ fused integer matmuls, 4-bit LLM weights
def _pack(values: np.ndarray, bits: int) -> np.ndarray:
    """``bits``-bit values packed along the last axis into bytes, lowest bits first (MatMulNBits' layout)."""
    per = 8 // bits
    v = values.astype(np.uint8).reshape(*values.shape[:-1], -1, per)
    return np.bitwise_or.reduce(v << (np.arange(per, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


def _nbits(k: int, n: int, block: int, bits: int = 4, zero_points: str = "packed", bias: bool = True,
           lead: tuple[int, ...] = (2, 3)):
    """MatMulNBits of A [*lead, k] by a weight quantized per block of ``block`` along k (asymmetric, by the
    block's range), its zero points packed, as floats, or absent (then the values are centred on 2^(bits-1))."""
    blocks = -(-k // block)
    top = (1 << bits) - 1
    q = R.integers(0, top + 1, (n, blocks, block))
    scales = R.uniform(0.01, 0.05, (n, blocks)).astype(np.float32)
    inits = {"B": _pack(q, bits).reshape(n, blocks, block * bits // 8), "scales": scales.reshape(-1)}
    order = ["A", "B", "scales"]
    if zero_points == "packed":
        zp = R.integers(0, top + 1, (n, blocks))
        pad = (-blocks) % (8 // bits)
        inits["zp"] = _pack(np.pad(zp, ((0, 0), (0, pad))), bits).reshape(-1)
        order.append("zp")
    elif zero_points == "float":
        inits["zp"] = R.uniform(0, top, (n, blocks)).astype(np.float32).reshape(-1)
        order.append("zp")
    if bias:
        inits["bias"] = R.standard_normal(n).astype(np.float32)
        order += [""] * (5 - len(order)) + ["bias"]
    return _ms("MatMulNBits", [("A", "float32", (*lead, k))], inits, [("y", "float32", (*lead, n))], order=order,
               K=k, N=n, bits=bits, block_size=block)


FUSED_CASES = {
    "MatMulNBits, 4 bits, packed zero points, K not a multiple of the block": lambda: _nbits(80, 24, 32),
    "MatMulNBits, 4 bits, no zero points": lambda: _nbits(64, 16, 16, zero_points="none", bias=False),
    "MatMulNBits, 4 bits, float zero points": lambda: _nbits(64, 16, 32, zero_points="float"),
    "MatMulNBits, 8 bits": lambda: _nbits(64, 16, 32, bits=8),
    "MatMulIntegerToFloat": lambda: _ms(
        "MatMulIntegerToFloat", [("a", "uint8", (4, 32))],
        {"b": R.integers(-128, 128, (32, 8)).astype(np.int8), "as": np.float32(0.02),
         "bs": R.uniform(0.01, 0.03, 8).astype(np.float32), "az": np.array(120, np.uint8),
         "bias": R.standard_normal(8).astype(np.float32)},
        [("y", "float32", (4, 8))], order=["a", "b", "as", "bs", "az", "", "bias"]),
    "DynamicQuantizeMatMul": lambda: _ms(
        "DynamicQuantizeMatMul", [("A", "float32", (2, 5, 32))],
        {"b": R.integers(-128, 128, (32, 8)).astype(np.int8), "bs": np.float32(0.02),
         "bz": np.array(3, np.int8), "bias": R.standard_normal(8).astype(np.float32)},
        [("y", "float32", (2, 5, 8))], order=["A", "b", "bs", "bz", "bias"]),
}


def _integer_matmul_as_defined(model, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """MatMulIntegerToFloat's or DynamicQuantizeMatMul's output by its definition, in int64 and float64: the
    reference where onnxruntime is not exact (on CPUs without VNNI its uint8 x int8 kernel sums byte pairs in
    int16 with saturation, vpmaddubsw's: off by up to 6.7 of 25 on a Zen 3)."""
    node, init = model.graph.node[0], {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    if node.op_type == "MatMulIntegerToFloat":
        a, b, a_scale, b_scale, a_zero, _, bias = (inputs.get(n, init.get(n)) for n in node.input)
    else:  # DynamicQuantizeMatMul: A quantized as DynamicQuantizeLinear does (round half to even, saturated)
        x, b, b_scale, b_zero, bias = (inputs.get(n, init.get(n)) for n in node.input)
        lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
        a_scale = np.float32((hi - lo) / 255)
        a_zero = np.clip(np.round(-lo / a_scale), 0, 255)
        a = np.clip(np.round(x / a_scale) + a_zero, 0, 255)
    b_zero = b_zero if node.op_type == "DynamicQuantizeMatMul" else 0
    acc = (a.astype(np.int64) - np.int64(a_zero)) @ (b.astype(np.int64) - np.int64(b_zero))
    return (acc * (np.float64(a_scale) * b_scale.astype(np.float64)) + bias).astype(np.float32)


@pytest.mark.parametrize("case", list(FUSED_CASES))
def test_onnxruntimes_fused_integer_and_block_quantized_matmuls_match_it(case: str) -> None:
    """Matched against onnxruntime, and the integer products also against their definition: onnxruntime is
    exact only on CPUs with VNNI (``has_dot_u8s8``), so elsewhere only the definition is the reference."""
    model = FUSED_CASES[case]()
    inputs = {vi.name: (_u8(*[d.dim_value for d in vi.type.tensor_type.shape.dim])
                        if vi.type.tensor_type.elem_type == onnx.TensorProto.UINT8 else
                        R.standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.float32))
              for vi in model.graph.input}
    got, want = _run(model, inputs)[0][0], run_onnxruntime(model, inputs)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    integer = not case.startswith("MatMulNBits")
    if integer:
        defined = _integer_matmul_as_defined(model, inputs)
        np.testing.assert_allclose(got, defined, rtol=2e-5, atol=2e-5 * np.abs(defined).max())
    if not integer or Target("llvm").cpu.dot_u8s8:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
@pytest.mark.parametrize("rows", [1, 24])
def test_4_bit_weights_stay_4_bit_and_are_dequantized_in_the_kernel(cpu: str, rows: int) -> None:
    """MatMulNBits of 4-bit weights imports as nn.dense_int4: the built model holds them at half a byte a value
    (not dequantized floats, 8x the bytes a decode step reads); a step's row dequantizes them in the kernel's
    loop, a prompt's rows once per call into the packed GEMM's panel. Equal to onnxruntime (accuracy_level 0)
    where this machine runs the code."""
    k, n = 256, 48
    model = _nbits(k, n, 32, lead=(1, rows))
    target = f"llvm -mcpu={cpu}"
    mod, params = from_onnx(model)
    graph_json, lib, built = relay.build(mod, target=target, params=params)
    assert [x["name"] for x in json.loads(graph_json)["nodes"] if "dense_int4" in x["name"]]
    weights = [v for v in built.values() if np.asarray(v).size >= k * n // 2]
    assert weights and all(np.asarray(v).dtype == np.uint8 and np.asarray(v).nbytes == k * n // 2 for v in weights)
    if host_runs(target):
        x = {"A": R.standard_normal((1, rows, k)).astype(np.float32)}
        m = GraphModule(graph_json, lib, built)
        m.set_input(**x)
        m.run()
        want = run_onnxruntime(model, x)[0]
        np.testing.assert_allclose(np.asarray(m.get_output(0)), want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


QUANTIZED_OPS = {"MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLinear"} | {
    f"com.microsoft.{case.split()[0].rstrip(',')}" for case in [*MS_CASES, *FUSED_CASES]}


# ------------------------------------------------------------------ the relay side
def test_out_dtype_sums_int8_products_in_int32_and_integer_filters_stay_direct() -> None:
    """relay.nn.conv2d/dense(..., out_dtype="int32") on uint8/int8 operands sum in int32 (TVM's meaning; the
    argument used to be dropped), through the blocked layouts; two 64-channel 3x3 convolutions, where float
    filters would take Winograd's fractions, stay direct and exact."""
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 64, 16, 16), dtype="uint8")
    w1, w2 = rng.integers(-8, 8, (2, 64, 64, 3, 3)).astype(np.int8)
    y = relay.nn.conv2d(x, relay.const(w1), padding=(1, 1), out_dtype="int32")
    y = relay.nn.conv2d(y, relay.const(w2.astype(np.int32)), padding=(1, 1), out_dtype="int32")
    d = relay.var("d", shape=(8, 64), dtype="int8")
    z = relay.nn.dense(d, relay.const(w1[:, :, 0, 0]), out_dtype="int32")
    graph_json, lib, params = relay.build(relay.IRModule.from_expr(relay.Function([x, d], relay.Tuple([y, z]))),
                                          target="llvm")
    assert not [n for n in json.loads(graph_json)["nodes"] if "winograd" in n["name"]]
    m = GraphModule(graph_json, lib, params)
    xv, dv = rng.integers(0, 256, (1, 64, 16, 16)).astype(np.uint8), rng.integers(-128, 128, (8, 64)).astype(np.int8)
    m.set_input(x=xv, d=dv)
    m.run()

    def conv(a, w):
        p = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
        return sum(np.einsum("nchw,oc->nohw", p[:, :, i:i + 16, j:j + 16], w[:, :, i, j].astype(np.int64))
                   for i in range(3) for j in range(3))

    want = conv(conv(xv.astype(np.int64), w1), w2)
    got = np.asarray(m.get_output(0))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32))
    np.testing.assert_array_equal(np.asarray(m.get_output(1)), dv.astype(np.int32) @ w1[:, :, 0, 0].T.astype(np.int32))


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512", "icelake-server"])
def test_an_int8_dense_runs_vpdpbusd_where_the_cpu_has_vnni_and_float32_kernels_elsewhere(cpu: str) -> None:
    """relay.nn.dense(uint8, int8, out_dtype="int32"): for a CPU with AVX-512 VNNI, AlterOpLayout packs the
    weight for nn.dense_vnni (four bytes of 16 columns side by side: one vpdpbusd per step); elsewhere a float32
    dense (every partial sum an integer below 2^24, so exact). Run where this machine can: equal to numpy."""
    rng = np.random.default_rng(5)
    x = relay.var("x", shape=(3, 20, 128), dtype="uint8")
    w = rng.integers(-128, 128, (48, 128)).astype(np.int8)
    y = relay.nn.dense(x, relay.const(w), out_dtype="int32")
    target = f"llvm -mcpu={cpu}"
    graph_json, lib, params = relay.build(relay.IRModule.from_expr(relay.Function([x], y)), target=target)
    vnni = has_dot_u8s8(cpu, "")
    assert vnni == (cpu == "icelake-server") == Target(target).cpu.dot_u8s8
    names = [n["name"] for n in json.loads(graph_json)["nodes"] if n["op"] != "null"]
    assert any("dense_vnni" in n for n in names) == vnni
    assert ("llvm.x86.avx512.vpdpbusd.512" in lib.get_source("ll")) == vnni
    if host_runs(target):
        m = GraphModule(graph_json, lib, params)
        xv = rng.integers(0, 256, (3, 20, 128)).astype(np.uint8)
        m.set_input(x=xv)
        m.run()
        np.testing.assert_array_equal(np.asarray(m.get_output(0)), xv.astype(np.int64) @ w.T.astype(np.int64))


def _int_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int, pad_value: int = 0) -> np.ndarray:
    """numpy's int64 convolution of NCHW ``x`` by OIHW ``w``, the padding ``pad_value``."""
    p = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=pad_value)
    k = w.shape[2]
    span = ((p.shape[2] - k) // stride) * stride + 1  # the rows (columns) one tap reads, a stride apart
    return sum(np.einsum("nchw,oc->nohw", p[:, :, i:i + span:stride, j:j + span:stride], w[:, :, i, j].astype(np.int64))
               for i in range(k) for j in range(k))


def _requantize(acc, scale: float):
    """An int32 accumulator scaled, rounded and saturated to uint8: relay, and numpy's float32 twin."""
    if isinstance(acc, np.ndarray):
        return np.clip(np.round(acc.astype(np.float32) * np.float32(scale)), 0, 255).astype(np.uint8)
    scaled = relay.multiply(relay.cast(acc, "float32"), relay.const(np.float32(scale)))
    return relay.cast(relay.clip(relay.round(scaled), 0.0, 255.0), "uint8")


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512", "icelake-server"])
def test_int8_convolutions_run_vpdpbusd_where_the_cpu_has_vnni_and_int16_pmaddwd_elsewhere(cpu: str) -> None:
    """A quantized CNN's convolutions, relay.nn.conv2d(uint8, int8, out_dtype="int32"): for a CPU with AVX-512
    VNNI, AlterOpLayout packs each filter for nn.conv2d_nchwc_vnni (a 3-channel stem given a fourth channel of
    zeros; a zero point's padding an nn.pad kept in the blocked layout); elsewhere nn.conv2d_nchwc_i16 (the
    activations widened to int16, pmaddwd on pairs of channels) but for the stem, a blocked float32 kernel. A
    chain of a 7x7/2 stem, a 3x3, a strided 3x3 padded with a zero point of 9 and a 1x1 in blocks of 8, equal to
    numpy's integers where this machine runs the code."""
    rng = np.random.default_rng(11)
    layers = [(3, 32, 7, 2, 3, 0), (32, 48, 3, 1, 1, 0), (48, 64, 3, 2, 1, 9), (64, 16, 1, 1, 0, 0)]
    ws = [rng.integers(-128, 128, (o, c, k, k)).astype(np.int8) for c, o, k, _, _, _ in layers]
    x = relay.var("x", shape=(1, 3, 29, 29), dtype="uint8")
    y = x
    for w, (_, _, _, s, p, zp) in zip(ws, layers):
        if zp:
            y = relay.nn.pad(y, [(0, 0), (0, 0), (p, p), (p, p)], pad_value=float(zp))
        y = relay.nn.conv2d(y, relay.const(w), strides=(s, s), padding=(0, 0) if zp else (p, p), out_dtype="int32")
        y = _requantize(y, 2.0 ** -12) if w is not ws[-1] else y
    target = f"llvm -mcpu={cpu}"
    graph_json, lib, params = relay.build(relay.IRModule.from_expr(relay.Function([x], y)), target=target)
    vnni = cpu == "icelake-server"
    names = [n["name"] for n in json.loads(graph_json)["nodes"] if n["op"] != "null"]
    assert sum("conv2d_nchwc_vnni" in n for n in names) == (4 if vnni else 0), names
    assert sum("conv2d_nchwc_i16" in n for n in names) == (0 if vnni else 3), names
    assert sum("conv2d_nchwc" in n for n in names) == 4, names  # blocked either way
    assert ("llvm.x86.avx512.vpdpbusd.512" in lib.get_source("ll")) == vnni
    assert ("vpmaddwd" in lib.get_source("asm")) == (not vnni)
    if host_runs(target):
        m = GraphModule(graph_json, lib, params)
        xv = rng.integers(0, 256, (1, 3, 29, 29)).astype(np.uint8)
        m.set_input(x=xv)
        m.run()
        want = xv
        for w, (_, _, _, s, p, zp) in zip(ws, layers):
            want = _int_conv(want, w, s, p, zp)
            want = _requantize(want, 2.0 ** -12) if w is not ws[-1] else want
        np.testing.assert_array_equal(np.asarray(m.get_output(0)), want)


@pytest.mark.parametrize("int16", [True, False])
@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
def test_int8_convolutions_too_large_for_float32_are_exact(cpu: str, int16: bool) -> None:
    """Without VNNI, a uint8 convolution whose sums may pass 2^24 (255 x 576 taps x 127) is exact: in int16
    pairs (pmaddwd sums in int32), or with ``relay.int16_products`` off in float32 on the data less 128
    (padded before it is shifted; the 128s added back per output channel), where sums stay below 2^24, not
    int32's slow multiplies. Near-maximal bytes make float32 of the raw data round."""
    target = f"llvm -mcpu={cpu}"
    skip_unless_host_runs(target)
    rng = np.random.default_rng(12)
    w = rng.integers(120, 128, (16, 64, 3, 3)).astype(np.int8)
    w[::2] *= -1
    x = relay.var("x", shape=(1, 64, 6, 6), dtype="uint8")
    y = relay.nn.conv2d(x, relay.const(w), padding=(1, 1), out_dtype="int32")
    with relay.transform.PassContext(config={"relay.int16_products": int16}):
        graph_json, lib, params = relay.build(relay.IRModule.from_expr(relay.Function([x], y)), target=target)
    names = [n["name"] for n in json.loads(graph_json)["nodes"] if n["op"] != "null"]
    assert any("conv2d_nchwc_i16" in n for n in names) == int16, names
    assert any("subtract" in n for n in names) == (not int16), names  # the data less 128
    m = GraphModule(graph_json, lib, params)
    xv = rng.integers(250, 256, (1, 64, 6, 6)).astype(np.uint8)
    m.set_input(x=xv)
    m.run()
    want = _int_conv(xv, w, 1, 1)
    assert np.abs(want).max() > 2 ** 24
    np.testing.assert_array_equal(np.asarray(m.get_output(0)), want)


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
def test_an_int8_dense_too_large_for_float32_runs_int16_pairs(cpu: str) -> None:
    """Without VNNI, a uint8 x int8 dense whose sums may pass 2^24 (255 x 1024 x 127) becomes nn.dense_i16: the
    operands widened to int16 (the weight at build time, packed [units/x, in/2, x, 2]), a pmaddwd per pair of
    k; exact. (Where float32 is exact it stays in the float GEMM, faster inside a model.)"""
    target = f"llvm -mcpu={cpu}"
    rng = np.random.default_rng(7)
    w = rng.integers(120, 128, (48, 1024)).astype(np.int8)
    w[::3] *= -1
    x = relay.var("x", shape=(2, 12, 1024), dtype="uint8")
    y = relay.nn.dense(x, relay.const(w), out_dtype="int32")
    graph_json, lib, params = relay.build(relay.IRModule.from_expr(relay.Function([x], y)), target=target)
    names = [n["name"] for n in json.loads(graph_json)["nodes"] if n["op"] != "null"]
    assert any("dense_i16" in n for n in names), names
    assert "vpmaddwd" in lib.get_source("asm")
    if host_runs(target):
        m = GraphModule(graph_json, lib, params)
        xv = rng.integers(250, 256, (2, 12, 1024)).astype(np.uint8)
        m.set_input(x=xv)
        m.run()
        want = xv.astype(np.int64) @ w.T.astype(np.int64)
        assert np.abs(want).max() > 2 ** 24
        np.testing.assert_array_equal(np.asarray(m.get_output(0)), want)


def test_the_int16_ops_name_operands_that_do_not_match() -> None:
    """nn.conv2d_nchwc_i16 and nn.dense_i16 called on bytes (not widened) or on a weight of the wrong packing:
    a relay error naming the op and the layouts it takes."""
    x = relay.var("x", shape=(1, 2, 6, 6, 8), dtype="uint8")
    w = relay.const(np.zeros((1, 2, 3, 3, 4, 8, 2), np.int16))
    with pytest.raises(relay.RelayError, match=r"nn.conv2d_nchwc_i16: int16 data NCHW\[x\]c .*uint8"):
        relay.transform.InferType()(relay.IRModule.from_expr(relay.Function(
            [x], relay.op.make_call("nn.conv2d_nchwc_i16", [x, w], data_layout="NCHW8c"))))
    d = relay.var("d", shape=(4, 64), dtype="int16")
    with pytest.raises(relay.RelayError, match=r"nn.dense_i16: data \[..., in\] int16 and weight \[units/x, in/2"):
        relay.transform.InferType()(relay.IRModule.from_expr(relay.Function(
            [d], relay.op.make_call("nn.dense_i16", [d, relay.const(np.zeros((2, 16, 16, 2), np.int16))]))))


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
def test_the_vnni_dense_is_exact_on_cpus_without_vnni(cpu: str) -> None:
    """nn.dense_vnni built for a CPU without VNNI (as a searched schedule or a shared library might be) widens
    the bytes and adds each lane's four products: the same int32 sums."""
    target = f"llvm -mcpu={cpu}"
    skip_unless_host_runs(target)  # names the extensions this CPU lacks
    rng = np.random.default_rng(6)
    w = rng.integers(-128, 128, (32, 64)).astype(np.int8)
    packed = np.ascontiguousarray(w.reshape(2, 16, 16, 4).transpose(0, 2, 1, 3))
    x = relay.var("x", shape=(5, 64), dtype="uint8")
    y = relay.op.make_call("nn.dense_vnni", [x, relay.const(packed)])
    graph_json, lib, params = relay.build(relay.IRModule.from_expr(relay.Function([x], y)), target=target)
    assert "vpdpbusd" not in lib.get_source("ll")
    m = GraphModule(graph_json, lib, params)
    xv = rng.integers(0, 256, (5, 64)).astype(np.uint8)
    m.set_input(x=xv)
    m.run()
    np.testing.assert_array_equal(np.asarray(m.get_output(0)), xv.astype(np.int64) @ w.T.astype(np.int64))


def _requantized(y):
    """A quantized layer's epilogue as the importer writes it: scale, round, zero point, saturate, and back to
    float32 less the next layer's zero point."""
    c = lambda v: relay.const(np.float32(v))  # noqa: E731
    q = relay.clip(relay.add(relay.round(relay.multiply(y, c(0.0045))), c(-128.0)), -128.0, 127.0)
    return relay.subtract(relay.cast(relay.cast(q, "int8"), "float32"), c(-128.0))


@pytest.mark.compile_only  # the kernels' LLVM IR is read, not run
@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
@pytest.mark.parametrize("layer", ["conv3x3", "conv1x1", "dense_4_rows", "gemm_128_rows"])
def test_a_requantizing_epilogue_keeps_the_register_tile_out_of_memory(cpu: str, layer: str) -> None:
    """The epilogue runs over the register tile unrolled, so the tile's accumulators have constant indices and
    LLVM keeps them in registers: the kernels' parallel bodies allocate no stack. Left rolled, LLVM kept a long
    epilogue's loop and the tile in memory, and a quantized ResNet-50's convolutions took 2.2x their time (80
    -> 39 ms on Emerald Rapids)."""
    rng = np.random.default_rng(0)
    if layer.startswith("conv"):
        k = 3 if layer == "conv3x3" else 1
        x = relay.var("x", shape=(1, 64, 28, 28))
        w = relay.const(np.round(rng.standard_normal((64, 64, k, k)) * 20).astype(np.float32))
        y = relay.nn.conv2d(x, w, padding=(k // 2, k // 2))
    else:
        x = relay.var("x", shape=(4 if layer == "dense_4_rows" else 128, 256))
        y = relay.nn.dense(x, relay.const(np.round(rng.standard_normal((256, 256)) * 20).astype(np.float32)))
    _, lib, _ = relay.build(relay.IRModule.from_expr(relay.Function([x], _requantized(y))),
                            target=f"llvm -mcpu={cpu}")
    bodies = [f for f in lib.get_source("ll").split("\ndefine ") if f.split("(")[0].endswith("_par.1")]
    assert bodies and all("= alloca " not in f for f in bodies)


def test_relay_reductions_under_their_tvm_names_and_a_scalar_output() -> None:
    """relay.max / relay.min / relay.sum / relay.mean as in TVM; a 0-d result (a tensor's range, as
    DynamicQuantizeLinear computes its scale) builds and runs."""
    x = relay.var("x", shape=(4, 33))
    span = relay.subtract(relay.max(x), relay.min(x))
    body = relay.Tuple([span, relay.sum(x, axis=[1]), relay.mean(x, axis=[0], keepdims=True)])
    graph_json, lib, params = relay.build(relay.IRModule.from_expr(relay.Function([x], body)), target="llvm")
    m = GraphModule(graph_json, lib, params)
    xv = np.random.default_rng(2).standard_normal((4, 33)).astype(np.float32)
    m.set_input(x=xv)
    m.run()
    assert np.asarray(m.get_output(0)).shape == ()
    np.testing.assert_allclose(np.asarray(m.get_output(0)), xv.max() - xv.min(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(m.get_output(1)), xv.sum(1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(m.get_output(2)), xv.mean(0, keepdims=True), rtol=1e-5, atol=1e-6)
