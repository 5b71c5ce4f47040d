"""The ONNX frontend end to end: models built in the test (seeded weights) are imported with
``relay.frontend.from_onnx``, compiled with ``relay.build`` and run by the graph executor, and every output is
compared with onnxruntime's. Op by op (small parametrised cases), then ResNet-18- and MobileNetV2-shaped networks
at small input sizes; and the importer's errors (all unsupported ops listed at once, non-constant shapes, inputs
without static shapes)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from _onnx_models import (  # noqa: E402
    GraphBuilder,
    make_mobilenet_v2,
    make_resnet18,
    make_single_op,
    random_inputs,
    run_onnxruntime,
)
from _transformer_models import OP_CASES as TRANSFORMER_CASES  # noqa: E402
from _transformer_models import make_typed_op  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.relay.frontend import OnnxImportError, OpNotImplemented, from_onnx  # noqa: E402
from autosched.relay.frontend.onnx import importer  # noqa: E402

R = np.random.default_rng(1234)


def _f32(*shape: int, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    if lo is not None:
        return R.uniform(lo, hi, shape).astype(np.float32)
    return R.standard_normal(shape).astype(np.float32)


def run_relay(model, inputs: dict[str, np.ndarray], **kwargs) -> list[np.ndarray]:
    """Import, build for llvm and run with the graph executor; all outputs as numpy arrays."""
    from autosched.runtime.graph_executor import GraphModule

    mod, params = from_onnx(model, shape={k: v.shape for k, v in inputs.items()}, **kwargs)
    graph_json, lib, params = relay.build(mod, target="llvm", params=params)
    m = GraphModule(graph_json, lib, params)
    for name, value in inputs.items():
        m.set_input(name, value)
    m.run()
    outs = []
    for i in range(len(model.graph.output)):
        o = m.get_output(i)
        outs.append(np.asarray(o.numpy() if hasattr(o, "numpy") else o))
    return outs


def check_against_onnxruntime(model, inputs: dict[str, np.ndarray] | None = None, atol: float = 1e-4,
                              rtol: float = 1e-5) -> float:
    """Asserts relay's outputs equal onnxruntime's; returns the largest absolute difference."""
    inputs = inputs if inputs is not None else random_inputs(model)
    expected = run_onnxruntime(model, inputs)
    got = run_relay(model, inputs)
    worst = 0.0
    for e, g in zip(expected, got):
        assert g.shape == e.shape, f"shape {g.shape} != onnxruntime's {e.shape}"
        np.testing.assert_allclose(g, e, atol=atol, rtol=rtol)
        worst = max(worst, float(np.abs(g.astype(np.float64) - e).max()) if e.size else 0.0)
    return worst


# ------------------------------------------------------------------------------------------- op by op
def _conv(x_shape, w_shape, bias=False, **attrs):
    inits = {"w": _f32(*w_shape)}
    extra = ["w"]
    if bias:
        inits["b"] = _f32(w_shape[0])
        extra.append("b")
    return make_single_op("Conv", [("x", x_shape)], initializers=inits, extra_inputs=extra, **attrs)


def _binary(op, a_shape, b_shape, b_init=False, positive_b=False):
    b = _f32(*b_shape, lo=0.5, hi=2.0) if positive_b else _f32(*b_shape)
    if b_init:
        return make_single_op(op, [("a", a_shape)], initializers={"b": b}, extra_inputs=["b"])
    return make_single_op(op, [("a", a_shape), ("b", b_shape)])


def _clip13(lo, hi):
    inits, extra = {}, []
    for name, v in (("lo", lo), ("hi", hi)):
        if v is None:
            extra.append("")
        else:
            inits[name] = np.array(v, np.float32)
            extra.append(name)
    while extra and extra[-1] == "":
        extra.pop()
    return make_single_op("Clip", [("x", (2, 3, 4, 5))], initializers=inits, extra_inputs=extra)


def _bn():
    c = 6
    inits = {"s": _f32(c, lo=0.5, hi=1.5), "bb": _f32(c), "m": _f32(c), "v": _f32(c, lo=0.5, hi=2.0)}
    return make_single_op("BatchNormalization", [("x", (2, 6, 5, 7))], initializers=inits,
                          extra_inputs=["s", "bb", "m", "v"], epsilon=1e-3)


def _channel_norm(op, x_shape, n, opset=13, **attrs):
    """InstanceNormalization / GroupNormalization with ``n`` seeded scales and biases."""
    b = GraphBuilder(opset=opset)
    b.init("s", _f32(n, lo=0.5, hi=1.5))
    b.init("bb", _f32(n))
    y = b.node(op, ["x", "s", "bb"], name="y", **attrs)
    return b.model([("x", x_shape)], [(y, x_shape)])  # (onnx infers no shape for GroupNormalization)


def _reshape_const_node():
    b = GraphBuilder()
    shape = b.node("Constant", [], name="shape", value=numpy_helper.from_array(np.array([0, -1, 4], np.int64)))
    b.node("Reshape", ["x", shape], name="y")
    return b.model([("x", (2, 3, 8))], ["y"])


def _shape_arithmetic():
    """What exporters emit around Reshape: the target shape computed from Shape(x) by Gather, Unsqueeze, Slice,
    Squeeze, Cast, Concat, ConstantOfShape and Size; all of it is constant once the input shapes are static."""
    b = GraphBuilder(opset=15)  # Shape's start attribute
    i64 = lambda v: b.init(b.fresh("c"), np.array(v, np.int64))
    s = b.node("Shape", ["x"])  # [2, 3, 4, 5]
    n = b.node("Unsqueeze", [b.node("Gather", [s, i64(0)], axis=0), i64([0])])  # [2]
    hw = b.node("Slice", [s, i64([2]), i64([4])])  # [4, 5]
    c = b.node("Squeeze", [b.node("Slice", [s, i64([1]), i64([2])]), i64([0])])  # 3
    c = b.node("Unsqueeze", [b.node("Cast", [c], to=TensorProto.INT64), i64([0])])  # [3]
    flat = b.node("Reshape", ["x", b.node("Concat", [n, i64([-1])], axis=0)])  # (2, 60)
    back = b.node("Reshape", [flat, b.node("Concat", [n, c, hw], axis=0)])  # (2, 3, 4, 5) again
    ones = b.node("ConstantOfShape", [b.node("Shape", [back], start=1)],
                  value=numpy_helper.from_array(np.array([0.5], np.float32)))  # (3, 4, 5) of 0.5
    size = b.node("Cast", [b.node("Size", ["x"])], to=TensorProto.FLOAT)  # 120.0
    y = b.node("Mul", [b.node("Add", [back, ones]), b.node("Div", [size, b.init("d", np.float32(60.0))])])
    return b.model([("x", (2, 3, 4, 5))], [(y, (2, 3, 4, 5))])


def _sqrt_of_square():
    """Sqrt of x*x + 0.1 (its input must be positive)."""
    b = GraphBuilder()
    sq = b.node("Add", [b.node("Mul", ["x", "x"]), b.init("eps", np.float32(0.1))])
    b.node("Sqrt", [sq], name="y")
    return b.model([("x", (2, 3, 5))], ["y"])


def _constant_add():
    b = GraphBuilder()
    c = b.node("Constant", [], name="c", value=numpy_helper.from_array(_f32(3, 1)))
    b.node("Add", ["x", c], name="y")
    return b.model([("x", (2, 3, 5))], ["y"])


def _pad13(pads, value=None, axes=None, opset=13):
    inits = {"pads": np.array(pads, np.int64)}
    extra = ["pads"]
    if value is not None or axes is not None:
        if value is not None:
            inits["cv"] = np.array(value, np.float32)
        extra.append("cv" if value is not None else "")
    if axes is not None:
        inits["axes"] = np.array(axes, np.int64)
        extra.append("axes")
    return make_single_op("Pad", [("x", (1, 2, 3, 4))], initializers=inits, extra_inputs=extra, opset=opset)


def _after_relu(op, opset=13, n_outputs=1, extra_inputs=(), **kwargs):
    """``op`` applied to Relu(x) (relay.build refuses a graph whose output is its input, so identity-like ops get
    something to pass through)."""
    b = GraphBuilder(opset=opset)
    for name, value in kwargs.pop("initializers", {}).items():
        b.init(name, value)
    x = b.node("Relu", ["x"])
    y = b.node(op, [x, *extra_inputs], name="y", n_outputs=n_outputs, **kwargs)
    return b.model([("x", (3, 4))], [y])


def _scaled_into(op, scale=3.0, opset=13, **attrs):
    """``op`` of ``x * scale``: a wider range than the standard normal (roundings, large softplus arguments)."""
    b = GraphBuilder(opset=opset)
    b.init("k", np.array(scale, np.float32))
    y = b.node(op, [b.node("Mul", ["x", "k"])], name="y", **attrs)
    return b.model([("x", (2, 3, 17))], [y])


def _positive_into(op, opset=13):
    """``op`` of ``x * x + 1e-3`` (Log's domain), spanning small and large values."""
    b = GraphBuilder(opset=opset)
    b.init("eps", np.array(1e-3, np.float32))
    y = b.node(op, [b.node("Add", [b.node("Mul", ["x", "x"]), "eps"])], name="y")
    return b.model([("x", (2, 3, 17))], [y])


def _gemm(a_shape, b_shape, c_shape=None, **attrs):
    inits = {"b": _f32(*b_shape)}
    extra = ["b"]
    if c_shape is not None:
        inits["c"] = _f32(*c_shape)
        extra.append("c")
    return make_single_op("Gemm", [("a", a_shape)], initializers=inits, extra_inputs=extra, **attrs)


def _prelu(x_shape, slope_shape, opset=13):
    return make_single_op("PRelu", [("x", x_shape)], initializers={"s": _f32(*slope_shape) * 0.5},
                          extra_inputs=["s"], opset=opset)


def _lrn(x_shape, scale=1.0, **attrs):
    """LRN of x * scale (a scale of a few makes the sum of squares matter next to bias)."""
    b = GraphBuilder()
    x = b.node("Mul", ["x", b.init("k", np.float32(scale))])
    b.node("LRN", [x], name="y", **attrs)
    return b.model([("x", x_shape)], ["y"])


def _split(x_shape, n_outputs, opset=13, split=None, split_input=False, **attrs):
    """Split with every output a graph output (sizes as an input from opset 13, an attribute before)."""
    b = GraphBuilder(opset=opset)
    ins = ["x"]
    if split is not None and split_input:
        ins.append(b.init("split", np.array(split, np.int64)))
    elif split is not None:
        attrs["split"] = split
    b.node("Split", ins, name="y", n_outputs=n_outputs, **attrs)
    return b.model([("x", x_shape)], [f"y_out{i}" for i in range(n_outputs)])


def _slice(x_shape, starts, ends, axes=None, steps=None, opset=13):
    inits = {"starts": np.array(starts, np.int64), "ends": np.array(ends, np.int64)}
    extra = ["starts", "ends"]
    for name, v in (("axes", axes), ("steps", steps)):
        if v is not None:
            inits[name] = np.array(v, np.int64)
            extra.append(name)
        elif name == "axes" and steps is not None:
            extra.append("")
    return make_single_op("Slice", [("x", x_shape)], initializers=inits, extra_inputs=extra, opset=opset)


def _resize(x_shape, scales=None, sizes=None, opset=13, **attrs):
    """Resize with constant scales or sizes (roi omitted, or empty before opset 13 where it is required)."""
    inits, extra = {}, []
    if opset < 11:
        inits["scales"] = np.array(scales, np.float32)
        extra = ["scales"]
    else:
        if opset < 13:
            inits["roi"] = np.zeros(0, np.float32)
        extra.append("roi" if opset < 13 else "")
        if scales is not None:
            inits["scales"] = np.array(scales, np.float32)
            extra.append("scales")
        else:
            if opset < 13:
                inits["no_scales"] = np.zeros(0, np.float32)
            extra.append("no_scales" if opset < 13 else "")
            inits["sizes"] = np.array(sizes, np.int64)
            extra.append("sizes")
    attrs.setdefault("mode", "nearest")
    return make_single_op("Resize", [("x", x_shape)], initializers=inits, extra_inputs=extra, opset=opset, **attrs)


OP_CASES = {
    # Conv
    "conv3x3": lambda: _conv((1, 4, 9, 9), (8, 4, 3, 3), pads=[1, 1, 1, 1]),
    "conv_bias_stride2_asym_pads": lambda: _conv((2, 3, 10, 11), (5, 3, 3, 3), bias=True, strides=[2, 2],
                                                 pads=[0, 1, 2, 0]),
    "conv_dilation2": lambda: _conv((1, 3, 12, 12), (4, 3, 3, 3), dilations=[2, 2], pads=[2, 2, 2, 2]),
    "conv_group2": lambda: _conv((1, 4, 8, 8), (6, 2, 3, 3), group=2, pads=[1, 1, 1, 1]),
    "conv_depthwise": lambda: _conv((1, 8, 9, 9), (8, 1, 3, 3), bias=True, group=8, strides=[2, 2],
                                    pads=[1, 1, 1, 1]),
    "conv_1x5_kernel": lambda: _conv((1, 3, 7, 9), (4, 3, 1, 5), pads=[0, 2, 0, 2]),
    "conv_same_upper": lambda: _conv((1, 3, 9, 10), (4, 3, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2]),
    "conv_same_upper_even_kernel": lambda: _conv((1, 3, 8, 8), (4, 3, 2, 2), auto_pad="SAME_UPPER"),
    "conv_same_lower": lambda: _conv((1, 3, 9, 10), (4, 3, 4, 4), auto_pad="SAME_LOWER", strides=[2, 2]),
    "conv_valid": lambda: _conv((1, 3, 9, 9), (4, 3, 3, 3), auto_pad="VALID", strides=[2, 2]),
    # Gemm / MatMul
    "gemm_transB_bias": lambda: _gemm((3, 7), (5, 7), (5,), transB=1),
    "gemm_plain": lambda: _gemm((3, 7), (7, 5)),
    "gemm_transA_alpha_beta_2d_c": lambda: _gemm((7, 3), (7, 5), (3, 5), transA=1, alpha=0.5, beta=2.0),
    "gemm_transA_transB_scalar_c": lambda: _gemm((7, 3), (5, 7), (1,), transA=1, transB=1, beta=0.25),
    "matmul_2d": lambda: make_single_op("MatMul", [("a", (4, 6)), ("b", (6, 3))]),
    "matmul_3d_2d": lambda: make_single_op("MatMul", [("a", (2, 4, 6))], initializers={"w": _f32(6, 3)},
                                           extra_inputs=["w"]),
    "matmul_batch": lambda: make_single_op("MatMul", [("a", (2, 3, 4, 6)), ("b", (2, 3, 6, 5))]),
    "matmul_batch_broadcast_a": lambda: make_single_op("MatMul", [("a", (1, 4, 6)), ("b", (3, 6, 5))]),
    "matmul_vector": lambda: make_single_op("MatMul", [("a", (6,)), ("b", (2, 6, 5))]),
    # Einsum
    "einsum_attention_scores": lambda: make_single_op("Einsum", [("q", (2, 3, 5, 4)), ("k", (2, 3, 6, 4))],
                                                      equation="bhid,bhjd->bhij"),
    "einsum_attention_values": lambda: make_single_op("Einsum", [("p", (2, 3, 5, 6)), ("v", (2, 3, 6, 4))],
                                                      equation="bhij,bhjd->bhid"),
    "einsum_linear_weight": lambda: make_single_op("Einsum", [("x", (2, 5, 6))], initializers={"w": _f32(7, 6)},
                                                   extra_inputs=["w"], equation="bid,jd->bij"),
    "einsum_implicit_matmul": lambda: make_single_op("Einsum", [("a", (4, 6)), ("b", (6, 3))], equation="ij,jk"),
    "einsum_transpose": lambda: make_single_op("Einsum", [("a", (2, 3, 4))], equation="ijk->kij"),
    "einsum_sum_and_outer": lambda: make_single_op("Einsum", [("a", (3, 4)), ("b", (5, 2))], equation="ij,kl->ik"),
    "einsum_batch_out_of_order": lambda: make_single_op("Einsum", [("a", (3, 2, 4)), ("b", (2, 4, 5))],
                                                        equation="ibk,bkj->jbi"),
    "einsum_ellipsis_batched_matmul": lambda: make_single_op("Einsum", [("a", (2, 3, 4, 5)), ("b", (2, 3, 5, 6))],
                                                             equation="...ij,...jk->...ik"),
    "einsum_ellipsis_implicit_transpose": lambda: make_single_op("Einsum", [("a", (2, 3, 4))], equation="...ji"),
    # elementwise, broadcasting
    "add_same": lambda: _binary("Add", (2, 3, 4), (2, 3, 4)),
    "add_channel_bias": lambda: _binary("Add", (2, 3, 4, 5), (3, 1, 1), b_init=True),
    "sub_broadcast_both": lambda: _binary("Sub", (2, 1, 4), (3, 1)),
    "mul_scalar": lambda: _binary("Mul", (2, 3, 4), (), b_init=True),
    "mul_row": lambda: _binary("Mul", (2, 3, 4), (4,)),
    "div_broadcast": lambda: _binary("Div", (2, 3, 4), (3, 1), b_init=True, positive_b=True),
    "relu": lambda: make_single_op("Relu", [("x", (2, 3, 4, 5))]),
    "sigmoid": lambda: make_single_op("Sigmoid", [("x", (2, 3, 17))]),
    "tanh": lambda: make_single_op("Tanh", [("x", (2, 3, 17))]),
    "clip_0_6": lambda: _clip13(0.0, 6.0),
    "clip_min_only": lambda: _clip13(-0.5, None),
    "clip_max_only": lambda: _clip13(None, 0.25),
    "clip_no_bounds": lambda: _clip13(None, None),
    "clip_opset10_attrs": lambda: make_single_op("Clip", [("x", (2, 3, 4))], opset=10, min=-0.5, max=0.75),
    "exp": lambda: make_single_op("Exp", [("x", (2, 3, 5))]),
    "sqrt": _sqrt_of_square,
    "neg": lambda: make_single_op("Neg", [("x", (2, 3, 5))]),
    "max_variadic": lambda: make_single_op("Max", [("a", (2, 3, 4)), ("b", (3, 1)), ("c", (4,))]),
    "min_two": lambda: make_single_op("Min", [("a", (2, 3, 4)), ("b", (2, 3, 4))]),
    "sum_variadic": lambda: make_single_op("Sum", [("a", (2, 3)), ("b", (2, 3)), ("c", (1, 3))]),
    "leaky_relu": lambda: make_single_op("LeakyRelu", [("x", (2, 3, 5))], alpha=0.1),
    "leaky_relu_negative_alpha": lambda: make_single_op("LeakyRelu", [("x", (2, 3, 5))], alpha=-1.5),
    "hard_sigmoid": lambda: make_single_op("HardSigmoid", [("x", (2, 3, 5))], alpha=0.3, beta=0.4),
    "hard_swish": lambda: make_single_op("HardSwish", [("x", (2, 3, 5))], opset=14),
    "log": lambda: _positive_into("Log"),
    "abs": lambda: make_single_op("Abs", [("x", (2, 3, 17))]),
    "floor": lambda: _scaled_into("Floor"),
    "ceil": lambda: _scaled_into("Ceil"),
    "round": lambda: _scaled_into("Round"),
    "sign": lambda: _scaled_into("Sign"),
    "sin": lambda: _scaled_into("Sin"),
    "cos": lambda: _scaled_into("Cos"),
    "tan": lambda: make_single_op("Tan", [("x", (2, 3, 17))]),
    "elu": lambda: make_single_op("Elu", [("x", (2, 3, 17))], alpha=0.7),
    "selu_defaults": lambda: make_single_op("Selu", [("x", (2, 3, 17))]),
    "selu_attrs": lambda: make_single_op("Selu", [("x", (2, 3, 17))], alpha=1.5, gamma=2.0),
    "celu": lambda: make_single_op("Celu", [("x", (2, 3, 17))], opset=12, alpha=0.6),
    "softplus": lambda: _scaled_into("Softplus", 30.0),
    "softsign": lambda: make_single_op("Softsign", [("x", (2, 3, 17))]),
    "mish": lambda: _scaled_into("Mish", 10.0, opset=18),
    "thresholded_relu": lambda: make_single_op("ThresholdedRelu", [("x", (2, 3, 17))], opset=10, alpha=0.4),
    "shrink": lambda: make_single_op("Shrink", [("x", (2, 3, 17))], opset=9, bias=0.25, lambd=0.6),
    # pooling, normalisation
    "maxpool_3x3_s2_p1": lambda: make_single_op("MaxPool", [("x", (1, 3, 11, 11))], kernel_shape=[3, 3],
                                                strides=[2, 2], pads=[1, 1, 1, 1]),
    "maxpool_ceil": lambda: make_single_op("MaxPool", [("x", (1, 2, 10, 10))], kernel_shape=[3, 3],
                                           strides=[2, 2], ceil_mode=1),
    "maxpool_same_upper": lambda: make_single_op("MaxPool", [("x", (1, 2, 9, 10))], kernel_shape=[3, 3],
                                                 strides=[2, 2], auto_pad="SAME_UPPER"),
    "avgpool_pads_exclude": lambda: make_single_op("AveragePool", [("x", (1, 3, 8, 8))], kernel_shape=[3, 3],
                                                   strides=[2, 2], pads=[1, 1, 1, 1]),
    "avgpool_pads_include": lambda: make_single_op("AveragePool", [("x", (1, 3, 8, 8))], kernel_shape=[3, 3],
                                                   strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
    "avgpool_2x2": lambda: make_single_op("AveragePool", [("x", (2, 3, 8, 6))], kernel_shape=[2, 2],
                                          strides=[2, 2]),
    "global_avg_pool": lambda: make_single_op("GlobalAveragePool", [("x", (2, 5, 7, 6))]),
    "global_max_pool": lambda: make_single_op("GlobalMaxPool", [("x", (2, 5, 7, 6))]),
    "global_avg_pool_1d": lambda: make_single_op("GlobalAveragePool", [("x", (2, 5, 9))]),
    "global_max_pool_3d": lambda: make_single_op("GlobalMaxPool", [("x", (1, 3, 4, 5, 6))]),
    "reduce_mean_hw_keepdims": lambda: make_single_op("ReduceMean", [("x", (2, 5, 7, 6))], axes=[2, 3]),
    "reduce_mean_hw_opset18": lambda: make_single_op("ReduceMean", [("x", (2, 5, 7, 6))], opset=18,
                                                     initializers={"ax": np.array([-1, -2], np.int64)},
                                                     extra_inputs=["ax"], keepdims=0),
    "reduce_prod_axis1": lambda: make_single_op("ReduceProd", [("x", (2, 5, 3))], axes=[1]),
    "reduce_l1_all_no_keep": lambda: make_single_op("ReduceL1", [("x", (2, 5, 3))], keepdims=0),
    "reduce_l2_last": lambda: make_single_op("ReduceL2", [("x", (2, 5, 7))], axes=[-1]),
    "reduce_sum_square_opset18": lambda: make_single_op("ReduceSumSquare", [("x", (2, 5, 3))], opset=18,
                                                        initializers={"ax": np.array([0, 2], np.int64)},
                                                        extra_inputs=["ax"], keepdims=0),
    "reduce_log_sum": lambda: _positive_into("ReduceLogSum"),
    "reduce_log_sum_exp_keep": lambda: _scaled_into("ReduceLogSumExp", 40.0, axes=[1, 2]),
    "reduce_log_sum_exp_no_keep": lambda: _scaled_into("ReduceLogSumExp", 40.0, axes=[0], keepdims=0),
    "argmax_axis1": lambda: make_typed_op("ArgMax", [("x", "float32", (2, 5, 3))], opset=13, axis=1),
    "argmax_last_no_keep": lambda: make_typed_op("ArgMax", [("x", "float32", (4, 9))], opset=13, axis=-1,
                                                 keepdims=0),
    "argmin_axis0": lambda: make_typed_op("ArgMin", [("x", "float32", (6, 4))], opset=13),
    "batch_norm": _bn,
    "instance_norm": lambda: _channel_norm("InstanceNormalization", (2, 3, 5, 6), 3, epsilon=1e-3),
    "instance_norm_1d": lambda: _channel_norm("InstanceNormalization", (2, 4, 7), 4),
    "group_norm_opset21": lambda: _channel_norm("GroupNormalization", (2, 6, 4, 5), 6, opset=21, num_groups=2,
                                                epsilon=1e-4),
    "lp_norm_l2": lambda: make_single_op("LpNormalization", [("x", (3, 7))]),
    "lp_norm_l1_axis1": lambda: make_single_op("LpNormalization", [("x", (2, 5, 3))], axis=1, p=1),
    "mean_variance_norm": lambda: make_single_op("MeanVarianceNormalization", [("x", (2, 3, 4, 5))],
                                                 axes=[0, 2, 3]),
    "mean_variance_norm_axes": lambda: make_single_op("MeanVarianceNormalization", [("x", (2, 3, 4))], axes=[1]),
    "softmax_last": lambda: make_single_op("Softmax", [("x", (3, 10))]),
    "softmax_axis1_opset13": lambda: make_single_op("Softmax", [("x", (2, 4, 3, 5))], axis=1),
    "softmax_axis1_opset11_flattens": lambda: make_single_op("Softmax", [("x", (2, 4, 5))], opset=11, axis=1),
    # shapes and data movement
    "reshape_init_zero_minus1": lambda: make_single_op("Reshape", [("x", (2, 3, 4, 5))],
                                                       initializers={"s": np.array([0, -1, 5], np.int64)},
                                                       extra_inputs=["s"]),
    "reshape_constant_node": _reshape_const_node,
    "flatten_axis1": lambda: make_single_op("Flatten", [("x", (2, 3, 4, 5))], axis=1),
    "flatten_axis2": lambda: make_single_op("Flatten", [("x", (2, 3, 4, 5))], axis=2),
    "flatten_axis0": lambda: make_single_op("Flatten", [("x", (2, 3, 4))], axis=0),
    "flatten_axis_neg1": lambda: make_single_op("Flatten", [("x", (2, 3, 4))], axis=-1),
    "unsqueeze": lambda: make_single_op("Unsqueeze", [("x", (2, 3))], initializers={"ax": np.array([0, -1])},
                                        extra_inputs=["ax"]),
    "unsqueeze_opset11_attr": lambda: make_single_op("Unsqueeze", [("x", (2, 3))], opset=11, axes=[1]),
    "squeeze": lambda: make_single_op("Squeeze", [("x", (2, 1, 3, 1))], initializers={"ax": np.array([3])},
                                      extra_inputs=["ax"]),
    "squeeze_all_unit_axes": lambda: make_single_op("Squeeze", [("x", (1, 2, 1, 3))]),
    "transpose_perm": lambda: make_single_op("Transpose", [("x", (2, 3, 4, 5))], perm=[0, 2, 3, 1]),
    "transpose_default": lambda: make_single_op("Transpose", [("x", (2, 3, 4))]),
    "concat_axis1": lambda: make_single_op("Concat", [("a", (2, 3, 4)), ("b", (2, 5, 4)), ("c", (2, 1, 4))],
                                           axis=1),
    "concat_axis_neg1_with_init": lambda: make_single_op("Concat", [("a", (2, 3))],
                                                         initializers={"k": _f32(2, 4)}, extra_inputs=["k"],
                                                         axis=-1),
    "pad_constant": lambda: _pad13([0, 0, 1, 2, 0, 1, 2, 0]),
    "pad_value": lambda: _pad13([0, 1, 0, 1, 0, 0, 1, 3], value=1.5),
    "pad_axes_opset18": lambda: _pad13([1, 2, 0, 3], value=-2.0, axes=[2, -1], opset=18),
    "pad_opset10_attrs": lambda: make_single_op("Pad", [("x", (1, 2, 3, 4))], opset=10,
                                                pads=[0, 0, 1, 1, 0, 0, 2, 0], value=0.5),
    "tile": lambda: make_single_op("Tile", [("x", (2, 3, 4))], initializers={"r": np.array([2, 1, 3], np.int64)},
                                   extra_inputs=["r"]),
    "tile_unit_axis": lambda: make_single_op("Tile", [("x", (1, 3))], initializers={"r": np.array([4, 2], np.int64)},
                                             extra_inputs=["r"]),
    "depth_to_space_dcr": lambda: make_single_op("DepthToSpace", [("x", (2, 12, 3, 4))], blocksize=2),
    "depth_to_space_crd": lambda: make_single_op("DepthToSpace", [("x", (1, 18, 2, 3))], opset=13, blocksize=3,
                                                 mode="CRD"),
    "space_to_depth": lambda: make_single_op("SpaceToDepth", [("x", (2, 3, 4, 6))], blocksize=2),
    "constant": _constant_add,
    "shape_arithmetic_folded": _shape_arithmetic,
    "identity": lambda: _after_relu("Identity"),
    "dropout": lambda: _after_relu("Dropout", initializers={"r": np.array(0.5, np.float32)}, extra_inputs=["r"]),
    "dropout_opset7_two_outputs": lambda: _after_relu("Dropout", opset=7, n_outputs=2),
    # classifier ops: Mean, PRelu, LogSoftmax, LRN, Split, Slice on tensors, Resize / Upsample (nearest)
    "mean_variadic": lambda: make_single_op("Mean", [("a", (2, 3, 4)), ("b", (3, 1)), ("c", (4,))]),
    "mean_two": lambda: make_single_op("Mean", [("a", (2, 3)), ("b", (2, 3))]),
    "prelu_channel_slope": lambda: _prelu((2, 3, 4, 5), (3, 1, 1)),
    "prelu_vector_slope_2d": lambda: _prelu((4, 6), (6,)),
    "prelu_one_slope": lambda: _prelu((2, 3, 4), (1,)),
    "prelu_general_broadcast": lambda: _prelu((2, 3, 4, 5), (3, 1, 5)),
    "log_softmax_last": lambda: make_single_op("LogSoftmax", [("x", (3, 10))]),
    "log_softmax_axis1_opset13": lambda: make_single_op("LogSoftmax", [("x", (2, 4, 3, 5))], axis=1),
    "log_softmax_axis1_opset11_flattens": lambda: make_single_op("LogSoftmax", [("x", (2, 4, 5))], opset=11,
                                                                 axis=1),
    "lrn_alexnet": lambda: _lrn((1, 8, 5, 6), scale=4.0, size=5, alpha=1e-4, beta=0.75, bias=1.0),
    "lrn_strong": lambda: _lrn((2, 7, 3, 4), scale=2.0, size=3, alpha=0.9, beta=0.6, bias=2.0),
    "split_equal_axis1": lambda: _split((2, 6, 4), 3, axis=1),
    "split_sizes_input": lambda: _split((2, 6, 4), 3, split=[1, 3, 2], split_input=True, axis=1),
    "split_attr_opset11_last_axis": lambda: _split((2, 3, 7), 2, opset=11, split=[4, 3], axis=-1),
    "split_uneven_opset18": lambda: _split((7, 3), 3, opset=18, num_outputs=3),
    "slice_negative_and_clamped": lambda: _slice((4, 5, 6), [1, -4], [3, 2**63 - 1], axes=[0, 2]),
    "slice_steps": lambda: _slice((5, 6, 7), [0, -1, 1], [5, -2**63, 7], axes=[0, 1, 2], steps=[2, -2, 3]),
    "slice_default_axes": lambda: _slice((4, 5), [1, 0], [-1, 3]),
    "slice_opset9_attrs": lambda: make_single_op("Slice", [("x", (4, 5, 6))], opset=9, starts=[-3], ends=[-1],
                                                 axes=[1]),
    "resize_nearest_scales_default_modes": lambda: _resize((1, 3, 4, 5), scales=[1, 1, 2, 2]),
    "resize_nearest_sizes_x3_asymmetric_floor": lambda: _resize((1, 2, 3, 4), sizes=[1, 2, 9, 12],
                                                                coordinate_transformation_mode="asymmetric",
                                                                nearest_mode="floor"),
    "resize_nearest_opset11_roi_input": lambda: _resize((2, 2, 3, 3), scales=[1, 1, 2, 4], opset=11),
    "resize_nearest_opset10": lambda: _resize((1, 2, 3, 4), scales=[1, 1, 3, 2], opset=10),
    "resize_nearest_asymmetric_round_x3": lambda: _resize((1, 2, 3, 4), scales=[1, 1, 3, 3],
                                                          coordinate_transformation_mode="asymmetric"),
    "resize_nearest_downsample": lambda: _resize((1, 2, 8, 9), scales=[1, 1, 0.5, 0.5]),
    "resize_nearest_channels_and_fractional": lambda: _resize((1, 2, 4, 5), sizes=[1, 4, 6, 7]),
    "resize_linear_half_pixel_x2": lambda: _resize((1, 3, 5, 6), scales=[1, 1, 2, 2], mode="linear"),
    "resize_linear_align_corners": lambda: _resize((2, 2, 5, 4), sizes=[2, 2, 9, 11], mode="linear",
                                                   coordinate_transformation_mode="align_corners"),
    "resize_linear_pytorch_half_pixel_down": lambda: _resize((1, 2, 9, 8), sizes=[1, 2, 4, 1], mode="linear",
                                                             coordinate_transformation_mode="pytorch_half_pixel"),
    "resize_linear_asymmetric_3d": lambda: _resize((2, 3, 7), scales=[1, 1, 1.5], mode="linear",
                                                   coordinate_transformation_mode="asymmetric"),
    "resize_linear_axes_opset18": lambda: _resize((1, 2, 5, 6), scales=[1.6, 0.5], opset=18, mode="linear",
                                                  axes=[2, 3]),
    "resize_cubic_half_pixel_x2": lambda: _resize((1, 2, 5, 6), scales=[1, 1, 2, 2], mode="cubic"),
    "resize_cubic_align_corners_a05": lambda: _resize((2, 1, 6, 5), sizes=[2, 1, 11, 4], mode="cubic",
                                                      cubic_coeff_a=-0.5,
                                                      coordinate_transformation_mode="align_corners"),
    "resize_cubic_exclude_outside_down": lambda: _resize((1, 2, 9, 8), scales=[1, 1, 0.6, 1.3], mode="cubic",
                                                         exclude_outside=1),
    "resize_cubic_asymmetric_2d": lambda: _resize((6, 7), sizes=[9, 4], mode="cubic",
                                                  coordinate_transformation_mode="asymmetric"),
    "upsample_linear_opset9": lambda: make_single_op("Upsample", [("x", (1, 2, 3, 4))], opset=9,
                                                     initializers={"s": np.array([1, 1, 2, 3], np.float32)},
                                                     extra_inputs=["s"], mode="linear"),
    "upsample_opset9": lambda: make_single_op("Upsample", [("x", (1, 2, 3, 4))], opset=9,
                                              initializers={"s": np.array([1, 1, 2, 2], np.float32)},
                                              extra_inputs=["s"], mode="nearest"),
}


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_op_matches_onnxruntime(case: str) -> None:
    check_against_onnxruntime(OP_CASES[case]())


SPECIAL = np.array([0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e-3, -1e-3, 1e-40, 3e38, -3e38, 100.0, -100.0,
                    np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("op,attrs", [
    ("Round", {}), ("Sign", {}), ("Floor", {}), ("Ceil", {}), ("Abs", {}), ("Log", {}), ("Softplus", {}),
    ("IsNaN", {}), ("IsInf", {}), ("IsInf", {"detect_negative": 0}), ("IsInf", {"detect_positive": 0}),
    ("IsInf", {"detect_positive": 0, "detect_negative": 0}), ("Elu", {}), ("Softsign", {}),
])
def test_special_values_match_onnxruntime(op: str, attrs: dict) -> None:
    """Halves (rounded to even), signed zeros, subnormals, the largest floats, infinities and NaN."""
    model = make_typed_op(op, [("x", "float32", SPECIAL.shape)], opset=13, **attrs)
    x = {"x": SPECIAL}
    (expected,), (got,) = run_onnxruntime(model, x), run_relay(model, x)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-37)  # (exp of -100 is subnormal, flushed to 0)
    if op in ("Round", "Sign", "Floor", "Ceil", "Abs"):  # exact, the zeros' signs included
        assert np.array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_extremes_of_ties_take_the_first_or_last(op: str, last: int) -> None:
    model = make_typed_op(op, [("x", "float32", (3, 6))], opset=12, axis=1, keepdims=0, select_last_index=last)
    x = {"x": np.array([[1, 3, 3, 0, 3, 0], [2, 2, 2, 2, 2, 2], [-1, 5, -7, 5, -7, 0]], np.float32)}
    (expected,), (got,) = run_onnxruntime(model, x), run_relay(model, x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)


def test_group_norm_opset18_scales_per_group() -> None:
    """Opset 18's GroupNormalization (scale and bias per group; onnx's checker calls it deprecated since 21, which
    made them per channel, but exporters of opset 18-20 write it and onnxruntime runs it)."""
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-4)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 4, 5])],
                              initializer=[numpy_helper.from_array(_f32(3, lo=0.5, hi=1.5), "s"),
                                           numpy_helper.from_array(_f32(3), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    check_against_onnxruntime(model)


def test_xor_matches_onnxruntime() -> None:
    model = make_typed_op("Xor", [("a", "bool", (3, 4)), ("b", "bool", (4,))], opset=13)
    rng = np.random.default_rng(5)
    x = {"a": rng.random((3, 4)) < 0.5, "b": np.array([True, False, True, False])}
    np.testing.assert_array_equal(run_relay(model, x)[0], run_onnxruntime(model, x)[0])


def test_every_supported_op_has_a_case() -> None:
    """Each converter is tested against onnxruntime: here, in test_relay_transformers.py (transformer ops),
    test_relay_onnx_conv.py (1-D and transposed convolutions), test_relay_onnx_quantized.py (quantized
    models' ops, also against onnx's reference evaluator), test_relay_onnx_contrib.py (onnxruntime's fused
    transformer ops), test_relay_onnx_signal.py (DFT, STFT, windows), test_relay_onnx_random.py (random draws) or
    test_relay_onnx_llm_ops.py (opset 24-28 LLM blocks, against onnx's reference evaluator)."""
    from test_relay_onnx_contrib import CONTRIB_OPS
    from test_relay_onnx_conv import CONV_CASES  # (here: it imports this module's helpers)
    from test_relay_onnx_llm_ops import LLM_OPS
    from test_relay_onnx_quantized import QUANTIZED_OPS
    from test_relay_onnx_random import RANDOM_OPS
    from test_relay_onnx_signal import SIGNAL_OPS

    cases = list(OP_CASES.values()) + list(TRANSFORMER_CASES.values()) + list(CONV_CASES.values())
    covered = {n.op_type for make in cases for n in make().graph.node}
    covered |= {"IsNaN", "IsInf", "Xor"}  # bool tests with inputs of their own, above
    covered |= {"GridSample"}  # every mode and padding: test_grid_sample_matches_onnxruntime, below
    # below: ops whose inputs must lie in their domain, a QDQ convolution, EyeLike feeding an Add
    covered |= {op for op, _, _ in RANGED_CASES}
    covered |= {n.op_type for model in (_qdq_conv_model(True, True), _eye_like_model()) for n in model.graph.node}
    covered |= QUANTIZED_OPS | CONTRIB_OPS  # quantized and fused ops (com.microsoft ones as domain.op_type)
    covered |= SIGNAL_OPS  # DFT, STFT, windows, mel filters: test_relay_onnx_signal.py
    covered |= RANDOM_OPS | LLM_OPS
    covered |= {"If", "Loop", "Scan"}  # control flow decided at import: test_if_on_a_shape_check..., test_loop_...,
    # test_scan_..., below
    covered |= {"Col2Im", "MaxUnpool"}  # test_relay_onnx_conv.py: test_col2im_..., test_max_pool_indices_and_...
    covered |= {"DeformConv"}  # test_relay_onnx_deform_conv.py
    covered |= {"BitCast"}  # test_relay_tvm_api.py: test_reinterpret_and_onnx_bitcast_keep_the_bits
    covered |= {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}  # test_relay_onnx_losses.py
    covered |= {"Det"}  # test_relay_onnx_linalg.py
    covered |= {"RoiAlign", "MaxRoiPool"}  # test_relay_onnx_vision.py
    covered |= {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
                "SequenceLength", "ConcatFromSequence", "SplitToSequence"}  # test_sequences_..., below
    assert covered == set(relay.frontend.SUPPORTED_OPS)


def test_every_supported_op_is_in_the_docs_table() -> None:
    """docs/relay_onnx.md's table of supported operators lists exactly the converters there are."""
    text = (Path(__file__).parent.parent / "docs" / "relay_onnx.md").read_text()
    table = text[text.index("## Supported operators"):text.index("Any node whose inputs")]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| ") and "ONNX op" not in line]
    listed = {name.strip().split(" ")[0] for row in rows for name in row.split(",")}
    assert listed == set(relay.frontend.SUPPORTED_OPS)


# ------------------------------------------------------------------------------------------ small graphs
def test_auto_pad_same_upper_model() -> None:
    """A chain where every spatial op pads SAME_UPPER on odd sizes, so the extra pixel goes at the end each time."""
    b = GraphBuilder(seed=3)
    w1 = b.init("w1", _f32(6, 3, 3, 3) * 0.3)
    w2 = b.init("w2", _f32(4, 6, 5, 5) * 0.2)
    x = b.node("Conv", ["data", w1], name="c1", auto_pad="SAME_UPPER", strides=[2, 2])
    x = b.node("Relu", [x])
    x = b.node("MaxPool", [x], name="p1", auto_pad="SAME_UPPER", kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Conv", [x, w2], name="c2", auto_pad="SAME_UPPER")
    b.node("AveragePool", [x], name="out", auto_pad="SAME_UPPER", kernel_shape=[3, 3], strides=[2, 2])
    model = b.model([("data", (1, 3, 21, 19))], ["out"])
    check_against_onnxruntime(model)


def test_shapes_from_relay_when_onnx_inference_fails(caplog) -> None:
    """Without ONNX's shape inference (it raises on some models) the shapes that SAME padding, Flatten, Gemm and
    Softmax need come from relay's type inference."""
    b = GraphBuilder(seed=6)
    x = b.node("Conv", ["data", b.init("w", _f32(4, 3, 3, 3))], auto_pad="SAME_UPPER", strides=[2, 2])
    x = b.node("MaxPool", [x], auto_pad="SAME_UPPER", kernel_shape=[3, 3], strides=[2, 2])
    x = b.node("Flatten", [x], axis=1)
    x = b.gemm_fc(x, 4 * 3 * 3, 5)
    b.node("Softmax", [x], name="prob", axis=1)
    model = b.model([("data", (1, 3, 11, 9))], ["prob"])
    inputs = random_inputs(model)
    expected = run_onnxruntime(model, inputs)
    # without an opset import for the default domain ONNX's shape inference fails; the importer is told the opset
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    del broken.opset_import[:]
    broken.opset_import.add(domain="x.y", version=1)
    with pytest.raises(onnx.shape_inference.InferenceError):
        onnx.shape_inference.infer_shapes(broken, data_prop=True)
    with caplog.at_level(logging.WARNING, logger="autosched.relay"):
        (got,) = run_relay(broken, inputs, opset=13)
    assert "ONNX shape inference failed" in caplog.text
    np.testing.assert_allclose(got, expected[0], atol=1e-4, rtol=1e-5)


def test_initializers_listed_as_graph_inputs_are_weights() -> None:
    """Models of IR version < 4 list initializers among the graph inputs too; they stay weights, not inputs."""
    model = OP_CASES["conv3x3"]()
    model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 4, 3, 3]))
    mod, params = from_onnx(model)
    assert [p.name_hint for p in mod["main"].params] == ["x", "w"] and set(params) == {"w"}
    check_against_onnxruntime(model)


def test_gemm_transb_classifier_with_softmax() -> None:
    """Flatten -> Gemm(transB=1) -> Softmax: the classifier head as PyTorch exports it."""
    b = GraphBuilder(seed=4)
    x = b.node("Flatten", ["data"], axis=1)
    x = b.gemm_fc(x, 2 * 3 * 4, 10)
    b.node("Softmax", [x], name="prob", axis=1)
    model = b.model([("data", (2, 2, 3, 4))], ["prob"])
    check_against_onnxruntime(model)


def test_two_outputs_and_initializer_params() -> None:
    """Two graph outputs come back in order; initializers become params after the graph inputs, named as in ONNX."""
    b = GraphBuilder(seed=5)
    w = b.init("conv.weight", _f32(4, 3, 3, 3))
    y = b.node("Conv", ["data", w], name="conv", pads=[1, 1, 1, 1])
    b.node("Relu", [y], name="relu")
    b.node("Sigmoid", [y], name="sig")
    model = b.model([("data", (1, 3, 6, 6))], ["relu", "sig"])
    mod, params = from_onnx(model, shape={"data": (1, 3, 6, 6)})
    assert [p.name_hint for p in mod["main"].params] == ["data", "conv.weight"]
    assert set(params) == {"conv.weight"}
    np.testing.assert_array_equal(params["conv.weight"], numpy_helper.to_array(model.graph.initializer[0]))
    check_against_onnxruntime(model)


def test_freeze_params_embeds_weights() -> None:
    model = OP_CASES["conv_bias_stride2_asym_pads"]()
    mod, params = from_onnx(model, shape={"x": (2, 3, 10, 11)}, freeze_params=True)
    assert params == {} and [p.name_hint for p in mod["main"].params] == ["x"]
    graph_json, lib, built = relay.build(mod, target="llvm", params=params)
    from autosched.runtime.graph_executor import GraphModule

    x = _f32(2, 3, 10, 11)
    m = GraphModule(graph_json, lib, built)
    m.set_input("x", x)
    m.run()
    out = m.get_output(0)
    out = np.asarray(out.numpy() if hasattr(out, "numpy") else out)
    np.testing.assert_allclose(out, run_onnxruntime(model, {"x": x})[0], atol=1e-4, rtol=1e-5)


def test_dynamic_batch_input_takes_shape_from_argument() -> None:
    b = GraphBuilder()
    b.node("Relu", ["x"], name="y")
    model = b.model([("x", ("N", 3, 4))], ["y"])
    with pytest.raises(OnnxImportError, match=r"graph input 'x' has no static shape.*\['N', 3, 4\].*shape="):
        from_onnx(model)
    mod, _ = from_onnx(model, shape={"x": (5, 3, 4)})
    mod = relay.transform.InferType()(mod)
    assert tuple(mod["main"].body.checked_type.shape) == (5, 3, 4)
    with pytest.raises(OnnxImportError, match=r"\['nope'\].*not graph inputs.*\['x'\]"):
        from_onnx(model, shape={"x": (5, 3, 4), "nope": (1,)})


# --------------------------------------------------------------------------------------------- errors
def test_unsupported_ops_are_all_listed_in_one_error() -> None:
    t = TensorProto
    nodes = [helper.make_node("Relu", ["boxes"], ["r"])]
    nodes += [helper.make_node("NonMaxSuppression", ["r", "scores"], [f"nms{k}"]) for k in range(3)]
    nodes += [helper.make_node("TfIdfVectorizer", ["ids"], [f"tf{k}"], mode="TF", min_gram_length=1,
                               max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0],
                               pool_int64s=[1]) for k in range(2)]
    nodes.append(helper.make_node("StringNormalizer", ["words"], ["norm"]))
    inputs = [helper.make_tensor_value_info("boxes", t.FLOAT, [1, 2, 4]),
              helper.make_tensor_value_info("scores", t.FLOAT, [1, 1, 2]),
              helper.make_tensor_value_info("ids", t.INT64, [4]), helper.make_tensor_value_info("words", t.STRING, [2])]
    outputs = [helper.make_tensor_value_info(f"nms{k}", t.INT64, None) for k in range(3)]
    outputs += [helper.make_tensor_value_info(f"tf{k}", t.FLOAT, None) for k in range(2)]
    outputs.append(helper.make_tensor_value_info("norm", t.STRING, None))
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OpNotImplemented) as info:
        from_onnx(model)
    msg = str(info.value)
    assert "3 unsupported operator type(s) in 6 node(s)" in msg
    assert "NonMaxSuppression (x3)" in msg and "TfIdfVectorizer (x2)" in msg and "StringNormalizer (x1)" in msg
    assert "Relu" not in info.value.unsupported
    assert info.value.unsupported == {"NonMaxSuppression": 3, "TfIdfVectorizer": 2, "StringNormalizer": 1}
    assert isinstance(info.value, NotImplementedError)


@pytest.mark.parametrize("equation,shapes,match", [
    ("ii,ij->j", [(3, 3), (3, 3)], "distinct letters"),
    ("...ij,...jk->...ik", [(1, 3, 3), (2, 3, 3)], r"index 'A' has sizes 1 and 2"),  # (ellipsis axes broadcast)
])
def test_einsum_forms_without_a_converter_are_refused(equation: str, shapes: list, match: str) -> None:
    """(Only equations ONNX accepts: onnx 1.23's shape inference loops on some malformed ones, 'ij,jk->iz'.)"""
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Einsum", ["a", "b"], ["y"], name="y", equation=equation)], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, shapes[0]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, shapes[1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"node 'y' \(Einsum\): .*" + match):
        from_onnx(model, shape={"a": shapes[0], "b": shapes[1]})


def test_ops_of_other_domains_are_listed_with_their_domain() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MyOp", ["r"], ["y"], domain="com.example")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
    with pytest.raises(OpNotImplemented, match=r"com\.example\.MyOp \(x1\)"):
        from_onnx(model)


def test_unnamed_node_is_named_by_index_and_output() -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Pad", ["r", "p"], ["y"], mode="edge")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(np.zeros(4, np.int64), "p")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"node #1 \(output 'y'\) \(Pad\): mode 'edge' is not supported"):
        from_onnx(model)


def test_from_path_and_input_dtype(tmp_path) -> None:
    """A path loads like a ModelProto; an untyped input takes ``dtype``."""
    model = make_single_op("Relu", [("x", (2, 3))])
    model.graph.input[0].type.tensor_type.elem_type = 0  # the model leaves the input's type to the caller
    onnx.save(model, tmp_path / "m.onnx")
    mod, params = from_onnx(str(tmp_path / "m.onnx"), shape={"x": (2, 3)}, dtype="float64")
    assert params == {}
    assert mod["main"].params[0].type_annotation.dtype == "float64"


def test_non_constant_reshape_shape_names_the_node() -> None:
    b = GraphBuilder()
    b.node("Reshape", ["x", "target"], name="my_reshape")
    model = helper.make_model(
        helper.make_graph(b.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                                         helper.make_tensor_value_info("target", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("my_reshape", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"node 'my_reshape' \(Reshape\): the target shape \(input 'target'\) "
                                              r"must be a constant"):
        from_onnx(model, shape={"x": (2, 6), "target": (2,)})


def test_shape_op_on_a_computed_tensor_is_refused() -> None:
    from _transformer_models import make_typed_op

    model = make_typed_op("ConstantOfShape", [("s", "int64", (2,))])
    with pytest.raises(OnnxImportError, match=r"node 'node' \(ConstantOfShape\): supported only on values known at "
                                              r"import time .* input 's' is computed"):
        from_onnx(model)


def test_used_second_output_is_refused() -> None:
    b = GraphBuilder()  # (Dropout's mask: inference has none)
    b.node("Dropout", ["x"], name="drop", n_outputs=2)
    model = helper.make_model(
        helper.make_graph(b.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("drop_out1", TensorProto.BOOL, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"node 'drop' \(Dropout\): output 'drop_out1'.*is used"):
        from_onnx(model)


def test_non_constant_pad_mode_is_refused() -> None:
    model = make_single_op("Pad", [("x", (1, 2, 3, 4))], initializers={"p": np.zeros(8, np.int64)},
                           extra_inputs=["p"], mode="reflect")
    with pytest.raises(OnnxImportError, match=r"node 'y' \(Pad\): mode 'reflect' is not supported"):
        from_onnx(model)


@pytest.mark.parametrize("attrs,match", [
    ({"mode": "area"}, r"mode 'area' is not supported \(nearest, linear and cubic are\)"),
    ({"mode": "linear", "antialias": 1}, r"antialias=1 .* is not supported"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"},
     r"coordinate_transformation_mode 'tf_crop_and_resize' is not supported"),
])
def test_resize_modes_without_a_converter_are_refused(attrs: dict, match: str) -> None:
    model = _resize((1, 2, 3, 4), scales=[1, 1, 3, 3], opset=18 if "antialias" in attrs else 13, **attrs)
    with pytest.raises(OnnxImportError, match=r"node 'y' \(Resize\): " + match):
        from_onnx(model)


def test_resize_replication_is_upsampling_and_other_resizes_are_gathers() -> None:
    """Integer nearest replication of H and W stays ``nn.upsampling`` (it keeps a blocked layout); a linear or
    downsampling resize is gathers at constant indices: a downsampling one kernel, a bilinear one kernel across
    the rows (the last axis) and one of whole rows, not a pass per axis of several kernels each."""
    def ops(model):
        mod, _ = from_onnx(model)
        return {n.op.name for n in relay.ir.expr.post_order(mod["main"].body) if isinstance(n, relay.Call)}

    def kernels(model):
        mod, params = from_onnx(model)
        graph_json, _, _ = relay.build(mod, "llvm", params=params)
        return [n["name"] for n in json.loads(graph_json)["nodes"] if n["op"] == "tvm_op"]

    assert ops(_resize((1, 2, 3, 4), scales=[1, 1, 2, 2])) == {"nn.upsampling"}
    bilinear = _resize((1, 2, 3, 4), scales=[1, 1, 2, 2], mode="linear")
    assert ops(bilinear) == {"take", "add", "multiply"}
    assert len(set(kernels(bilinear))) == 2, kernels(bilinear)
    downsample = _resize((1, 2, 4, 4), scales=[1, 1, 0.5, 0.5])
    assert ops(downsample) == {"take"} and len(kernels(downsample)) == 1


def test_split_into_unequal_parts_before_opset_18_is_refused() -> None:
    graph = helper.make_graph(  # made by hand: onnx's strict shape inference refuses it too
        [helper.make_node("Split", ["x"], ["a", "b"], name="y", axis=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "ab"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"node 'y' \(Split\): axis 1 of size 7 does not split into 2 equal"):
        from_onnx(model)


def test_an_empty_slice_adds_nothing_to_a_concat_and_is_refused_elsewhere() -> None:
    """phi-3's partial rotary (legacy exporter) slices past the end of each head and concatenates the empty rest:
    the empty part is dropped; used anywhere else it is refused by name (tensors here are never empty)."""
    b = GraphBuilder()
    rest = b.node("Slice", ["x", b.init("s", np.array([5], np.int64)), b.init("e", np.array([2 ** 62], np.int64)),
                            b.init("a", np.array([1], np.int64))], name="rest")
    y = b.node("Concat", [b.node("Relu", ["x"]), rest], axis=1)
    check_against_onnxruntime(b.model([("x", (4, 5))], [y]))
    with pytest.raises(OnnxImportError, match=r"input 'y' is empty \(shape \[4, 0\]\)"):
        from_onnx(_slice((4, 5), [3], [1], axes=[1]))


def test_prelu_opset6_slope_per_channel() -> None:
    """Before opset 7 a 1-D slope of C values is per channel of an NCHW input (onnxruntime has no PRelu-6 kernel
    to compare with; numpy is the reference)."""
    slope = _f32(3)
    model = _prelu((2, 3, 4, 5), (3,), opset=6)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(slope, "s"))
    x = _f32(2, 3, 4, 5)
    (got,) = run_relay(model, {"x": x})
    np.testing.assert_allclose(got, np.where(x < 0, x * slope[None, :, None, None], x), rtol=1e-6)


def test_lrn_even_size_matches_the_spec() -> None:
    """onnxruntime refuses an even LRN size (and onnx's reference evaluator only normalises channel 0), so numpy
    written from the spec is the reference: channels c - (size - 1) // 2 .. c + size // 2, here c - 1 .. c + 2."""
    size, alpha, beta, bias = 4, 0.5, 0.75, 1.5
    model = _lrn((1, 6, 4, 4), scale=1.0, size=size, alpha=alpha, beta=beta, bias=bias)
    x = _f32(1, 6, 4, 4) * 2
    sq = np.stack([(x[:, max(0, c - 1):c + 3] ** 2).sum(axis=1) for c in range(6)], axis=1)
    (got,) = run_relay(model, {"x": x})
    np.testing.assert_allclose(got, x / (bias + alpha / size * sq) ** beta, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------------- whole models
@pytest.mark.slow
@pytest.mark.parametrize("batch,image,width", [(1, 56, 64), (2, 32, 16)])
def test_resnet18_matches_onnxruntime(batch: int, image: int, width: int) -> None:
    model = make_resnet18(batch=batch, image=image, width=width)
    t0 = time.perf_counter()
    err = check_against_onnxruntime(model, atol=1e-3, rtol=0)
    print(f"resnet18 {batch}x3x{image}x{image} width {width}: max abs error vs onnxruntime {err:.2e}, "
          f"import+build+run {time.perf_counter() - t0:.1f} s")


@pytest.mark.slow
@pytest.mark.parametrize("batch_norm", [False, True], ids=["folded_bn", "bn_nodes"])
def test_mobilenet_v2_matches_onnxruntime(batch_norm: bool) -> None:
    model = make_mobilenet_v2(image=64, batch_norm=batch_norm)
    assert sum(n.op_type == "Conv" and any(a.name == "group" and a.i > 1 for a in n.attribute)
               for n in model.graph.node) == 17  # a depthwise conv in every inverted-residual block
    t0 = time.perf_counter()
    err = check_against_onnxruntime(model, atol=1e-3, rtol=0)
    print(f"mobilenet_v2 1x3x64x64 ({'BN nodes' if batch_norm else 'BN folded'}): max abs error vs onnxruntime "
          f"{err:.2e}, import+build+run {time.perf_counter() - t0:.1f} s")


def test_resnet18_import_signature() -> None:
    """The main function takes the input then every weight in the model's order (ResNet-18: 20 conv weights,
    4 tensors per BN of 20, the fc weight and bias: 102)."""
    model = make_resnet18(image=32, width=8, num_classes=10)
    mod, params = from_onnx(model, shape={"data": (1, 3, 32, 32)})
    names = [p.name_hint for p in mod["main"].params]
    assert names[0] == "data"
    assert names[1:] == [t.name for t in model.graph.initializer] and len(names) == 1 + 102
    assert set(params) == set(names[1:])
    mod = relay.transform.InferType()(mod)
    assert tuple(mod["main"].body.checked_type.shape) == (1, 10)


def test_shape_inference_sees_the_weights_as_typed_inputs_and_the_small_constants_as_values():
    """ONNX's shape inference gets a copy without the big weights (each a typed graph input instead), so a
    model's import does not serialise its megabytes twice; shapes that data propagation follows stay values."""
    w = numpy_helper.from_array(np.ones((64, 4096), "float32"), "W")
    shape = numpy_helper.from_array(np.array([1, 64, 64], "int64"), "shape")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Reshape", ["y", "shape"], ["out"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], [w, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    copy = importer._without_big_weights(model)
    assert [t.name for t in copy.graph.initializer] == ["shape"]
    typed = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in copy.graph.input}
    assert typed == {"x": [1, 64], "W": [64, 4096]}
    assert len(model.graph.initializer) == 2 and copy.opset_import[0].version == 13  # the model is untouched
    mod, params = from_onnx(model)
    ret = relay.transform.InferType()(mod)["main"].checked_type.ret_type
    assert tuple(int(d) for d in ret.shape) == (1, 64, 64) and "W" in params


# --------------------------------------------------------------------------- quantized (QDQ) models, more math
def _qdq_conv_model(per_axis: bool, signed: bool) -> onnx.ModelProto:
    """onnxruntime's QDQ format: the activations through QuantizeLinear -> DequantizeLinear, an int8 weight (per
    output channel or per tensor) dequantized into the Conv, the output quantized and dequantized again."""
    b = GraphBuilder(seed=3)
    qt = np.int8 if signed else np.uint8
    rng = np.random.default_rng(3)
    w = rng.integers(-100, 100, (8, 4, 3, 3)).astype(np.int8)
    w_scale = (rng.random(8) * 0.01 + 0.002).astype(np.float32) if per_axis else np.float32(0.004)
    x_scale, x_zp = np.float32(0.02), qt(-3 if signed else 120)
    xq = b.node("QuantizeLinear", ["data", b.init("xs", x_scale), b.init("xz", np.array(x_zp))])
    xd = b.node("DequantizeLinear", [xq, "xs", "xz"])
    wd = b.node("DequantizeLinear", [b.init("wq", w), b.init("ws", np.array(w_scale)),
                                     b.init("wz", np.zeros(np.shape(w_scale), np.int8))], axis=0)
    y = b.node("Conv", [xd, wd, b.init("bias", rng.standard_normal(8).astype(np.float32))], pads=[1, 1, 1, 1])
    yq = b.node("QuantizeLinear", [y, b.init("ys", np.float32(0.05)), b.init("yz", np.array(qt(0)))])
    return b.model([("data", (1, 4, 9, 9))], [b.node("DequantizeLinear", [yq, "ys", "yz"])])


@pytest.mark.parametrize("per_axis, signed", [(True, True), (False, False)])
def test_a_qdq_quantized_conv_matches_onnxruntime(per_axis: bool, signed: bool) -> None:
    """A QDQ model runs in float between its quantize/dequantize pairs (rounding halves to even, saturating),
    and every output equals onnxruntime's as the ONNX operators define it (its graph optimisations off: with
    them it fuses the pattern into an integer convolution whose requantization moves some outputs by several
    steps), quantization steps included. With int8 activations the weights are dequantized at build; uint8
    activations by int8 filters run on the integers (the rewrite of QDQ products: their filters stay integers),
    scaled after the sum."""
    import onnxruntime as ort

    model = _qdq_conv_model(per_axis, signed)
    inputs = {"data": (np.random.default_rng(0).standard_normal((1, 4, 9, 9)) * 2).astype(np.float32)}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
        None, inputs)[0]
    np.testing.assert_array_equal(run_relay(model, inputs)[0], want)
    mod, params = from_onnx(model)
    with relay.transform.PassContext(opt_level=3):
        fused = relay.optimize(mod, params)
    (conv,) = [f for f in relay.ir.expr.post_order(fused["main"].body)
               if isinstance(f, relay.Call) and isinstance(f.op, relay.Function) and "conv2d" in str(f.op.body)]
    weights = [a.data for a in conv.args if isinstance(a, relay.Constant) and a.data.ndim >= 6]  # packed filters
    assert len(weights) == 1 and np.array_equal(weights[0], np.round(weights[0])) == (not signed)


RANGED_CASES = [  # op, attributes, the input (in the op's domain; halves for rounding)
    ("QuantizeLinear", {}, lambda r: r.standard_normal((3, 8)).astype(np.float32) * 3),
    ("Swish", {"alpha": 1.5}, lambda r: r.standard_normal((3, 8)).astype(np.float32) * 3),
    ("Sinh", {}, lambda r: r.standard_normal((3, 8)).astype(np.float32)),
    ("Cosh", {}, lambda r: r.standard_normal((3, 8)).astype(np.float32)),
    ("Asinh", {}, lambda r: r.standard_normal((3, 8)).astype(np.float32) * 100),
    ("Acosh", {}, lambda r: np.abs(r.standard_normal((3, 8))).astype(np.float32) * 10 + 1),
    ("Atanh", {}, lambda r: np.tanh(r.standard_normal((3, 8))).astype(np.float32) * 0.99),
    ("Atan", {}, lambda r: np.concatenate([r.standard_normal(16) * 10, [0, -0.0, 0.4142135, -0.4142136, 2.4142134,
                                                                       -2.4142137, 1e7, -3e38]]).astype(np.float32)),
    ("Asin", {}, lambda r: np.concatenate([np.tanh(r.standard_normal(20)), [-1, 1, 0.9999999, 1e-8]]
                                          ).astype(np.float32)),
    ("Acos", {}, lambda r: np.concatenate([np.tanh(r.standard_normal(20)), [-1, 1, 0.9999999, -0.9999999]]
                                          ).astype(np.float32)),
    ("Hardmax", {"axis": 1}, lambda r: np.round(r.standard_normal((3, 8, 2))).astype(np.float32)),
    ("GlobalLpPool", {}, lambda r: r.standard_normal((2, 3, 5, 4)).astype(np.float32)),
    ("GlobalLpPool", {"p": 3}, lambda r: r.standard_normal((2, 3, 5, 4)).astype(np.float32)),
    ("LpPool", {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]},
     lambda r: r.standard_normal((1, 3, 7, 6)).astype(np.float32)),
    ("LpPool", {"kernel_shape": [2, 2], "p": 1, "auto_pad": "SAME_UPPER", "strides": [2, 2]},
     lambda r: r.standard_normal((2, 2, 5, 5)).astype(np.float32)),
    ("LpPool", {"kernel_shape": [3], "p": 3, "strides": [2], "dilations": [2], "ceil_mode": 1},
     lambda r: r.standard_normal((1, 4, 12)).astype(np.float32)),
    ("LpPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
     lambda r: r.standard_normal((1, 2, 8, 9)).astype(np.float32)),
]


@pytest.mark.parametrize("op, attrs, make_x", RANGED_CASES)
def test_more_elementwise_and_pooling_ops_match_onnxruntime(op: str, attrs: dict, make_x) -> None:
    x = make_x(np.random.default_rng(1))
    extra = {}
    if op == "QuantizeLinear":  # the default zero point: uint8 0; halves (0.1 * k.5) round to even
        extra = {"initializers": {"s": np.float32(0.1)}, "extra_inputs": ["s"]}
        x[0, :4] = [0.05, 0.15, -0.25, 30.0]
    opset = 13
    if op == "Swish":
        opset = 24
    if op == "LpPool":  # (dilations and ceil_mode came in opset 18)
        opset = 18
    model = make_typed_op(op, [("x", "float32", x.shape)], opset=opset, **extra, **attrs)
    check_against_onnxruntime(model, {"x": x}, atol=1e-5, rtol=1e-5)


def _eye_like_model() -> onnx.ModelProto:
    b = GraphBuilder()
    eye = b.node("EyeLike", ["x"], k=1)
    return b.model([("x", (3, 5))], [b.node("Add", [eye, "x"])])


def test_eye_like_is_a_constant_of_the_input_shape() -> None:
    check_against_onnxruntime(_eye_like_model(), {"x": np.zeros((3, 5), np.float32)}, atol=0, rtol=0)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_matches_onnxruntime(mode: str, padding: str, align_corners: int) -> None:
    """Grid positions inside and well outside the image (to 2.5x its half-size, so reflections turn more than
    once), with exact pixel centres and halves among them (nearest rounds halves to even)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = rng.uniform(-2.5, 2.5, (2, 4, 6, 2)).astype(np.float32)
    grid[0, 0, :, 0] = (np.arange(6) * 2 / 7 - 1 + 1 / 7)  # pixel centres (align_corners 0) along x
    grid[0, 1, :, :] = [[-1, -1], [1, 1], [0, 0], [-1, 1], [0.5, -0.25], [1 / 6, -1 / 4]]
    model = make_typed_op("GridSample", [("x", "float32", x.shape), ("grid", "float32", grid.shape)], opset=16,
                          mode=mode, padding_mode=padding, align_corners=align_corners)
    check_against_onnxruntime(model, {"x": x, "grid": grid}, atol=2e-5, rtol=1e-5)


def test_grid_sample_under_tvm_name_and_opset_20_modes() -> None:
    """relay.image.grid_sample takes TVM's [N, 2, H_out, W_out] grid; ONNX opset 20's mode names (linear,
    cubic) are opset 16's bilinear and bicubic; 5-D sampling is refused by name."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    grid = rng.uniform(-1, 1, (1, 3, 5, 2)).astype(np.float32)
    for mode in ("linear", "cubic"):
        model = make_typed_op("GridSample", [("x", "float32", x.shape), ("grid", "float32", grid.shape)], opset=20,
                              mode=mode)
        check_against_onnxruntime(model, {"x": x, "grid": grid}, atol=2e-5, rtol=1e-5)
    data, g = relay.var("data", shape=(1, 2, 4, 4)), relay.var("grid", shape=(1, 2, 3, 5))
    out = relay.evaluate([relay.image.grid_sample(relay.const(x), relay.const(grid.transpose(0, 3, 1, 2)),
                                                  align_corners=False)])[0]
    model = make_typed_op("GridSample", [("x", "float32", x.shape), ("grid", "float32", grid.shape)], opset=16)
    np.testing.assert_allclose(out, run_onnxruntime(model, {"x": x, "grid": grid})[0], atol=2e-5, rtol=1e-5)
    with pytest.raises(relay.RelayError, match=r"grid \(1, 3, 2, 5\) \[N, 2, H_out, W_out\]"):
        relay.ir.type_infer.infer_type(relay.image.grid_sample(data, relay.var("g2", shape=(1, 3, 2, 5))))
    assert relay.ir.type_infer.infer_type(relay.image.grid_sample(data, g)).shape == (1, 2, 3, 5)
    model = make_typed_op("GridSample", [("x", "float32", (1, 1, 2, 2, 2)), ("grid", "float32", (1, 2, 2, 2, 3))],
                          opset=20)
    with pytest.raises(OnnxImportError, match=r"3-D sampling is not supported"):
        from_onnx(model)


# ------------------------------------------------------------------------------------- control flow at import
def _control_model(nodes: list, inputs: list, outputs: list, inits: dict | None = None, opset: int = 17):
    graph = helper.make_graph(nodes, "control", inputs, outputs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _vi(name: str, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _if_on_width(limit: int):
    """If the input's last dimension exceeds ``limit`` (a shape check, as exporters write it): relu(x) + w, else
    -x; each branch reads outer values."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "w"], ["t"])],
                             "then", [], [_vi("t", None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", None)])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "last"], ["width"], axis=0),
             helper.make_node("Greater", ["width", "limit"], ["wide"]),
             helper.make_node("If", ["wide"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Mul", ["y", "two"], ["out"])]
    inits = {"last": np.array(1, np.int64), "limit": np.array(limit, np.int64), "w": _f32(6),
             "two": np.array(2, np.float32)}
    return _control_model(nodes, [_vi("x", [3, 6])], [_vi("out", [3, 6])], inits)


@pytest.mark.parametrize("limit", [4, 8])
def test_if_on_a_shape_check_becomes_its_taken_branch(limit: int) -> None:
    model = _if_on_width(limit)
    x = {"x": _f32(3, 6)}
    np.testing.assert_allclose(run_relay(model, x)[0], run_onnxruntime(model, x)[0], rtol=1e-6)


def test_loop_with_a_known_trip_count_is_unrolled_with_its_scan_output() -> None:
    """y <- 0.5 y + x + i, three times; the scan output stacks each step's y; the condition is carried as is."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["y_in", "half"], ["h"]),
         helper.make_node("Add", ["h", "x"], ["hx"]),
         helper.make_node("Add", ["hx", "fi"], ["y_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["y_out"], ["scan"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("y_in", [2, 3])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("y_out", [2, 3]), _vi("scan", [2, 3])])
    nodes = [helper.make_node("Loop", ["trips", "go", "y0"], ["y", "ys"], body=body)]
    inits = {"trips": np.array(3, np.int64), "go": np.array(True), "y0": np.zeros((2, 3), np.float32),
             "half": np.array(0.5, np.float32)}
    model = _control_model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 3]), _vi("ys", [3, 2, 3])], inits)
    x = {"x": _f32(2, 3)}
    for got, want in zip(run_relay(model, x), run_onnxruntime(model, x)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def _scan_rnn(**scan_attrs):
    """A Scan as tf2onnx writes a recurrent layer: h <- tanh(x_t W + h U) over x's time axis (axis 1 of [B, T, D]),
    a second scan input read from the end (axis 0 of [T, H]) added in, and two scan outputs: h on axis 0, and
    h + 1 stacked on axis 1 in reverse order; the final h is the state output."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "W"], ["xw"]), helper.make_node("MatMul", ["h_in", "U"], ["hu"]),
         helper.make_node("Add", ["xw", "hu"], ["s"]), helper.make_node("Add", ["s", "b_t"], ["sb"]),
         helper.make_node("Tanh", ["sb"], ["h_out"]), helper.make_node("Identity", ["h_out"], ["y_t"]),
         helper.make_node("Add", ["h_out", "one"], ["z_t"])],
        "cell", [_vi("h_in", [2, 5]), _vi("x_t", [2, 4]), _vi("b_t", [5])],
        [_vi("h_out", [2, 5]), _vi("y_t", [2, 5]), _vi("z_t", [2, 5])])
    nodes = [helper.make_node("Scan", ["h0", "x", "b"], ["h", "ys", "zs"], body=body, num_scan_inputs=2,
                              **scan_attrs)]
    rng = np.random.default_rng(0)
    inits = {"W": rng.standard_normal((4, 5)).astype(np.float32) * 0.5,
             "U": rng.standard_normal((5, 5)).astype(np.float32) * 0.5, "one": np.array(1, np.float32),
             "h0": np.zeros((2, 5), np.float32)}
    return _control_model(nodes, [_vi("x", [2, 6, 4]), _vi("b", [6, 5])],
                          [_vi("h", [2, 5]), _vi("ys", None), _vi("zs", None)], inits)


def test_scan_is_unrolled_over_its_inputs_axes_and_directions() -> None:
    model = _scan_rnn(scan_input_axes=[1, 0], scan_input_directions=[0, 1], scan_output_axes=[0, 1],
                      scan_output_directions=[0, 1])
    x = {"x": _f32(2, 6, 4), "b": _f32(6, 5)}
    got, want = run_relay(model, x), run_onnxruntime(model, x)
    assert [g.shape for g in got] == [(2, 5), (6, 2, 5), (2, 6, 5)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    with pytest.raises(OnnxImportError, match=r"different lengths along their scan axes: \[2, 6\]"):
        from_onnx(_scan_rnn(scan_input_axes=[0, 0]))


def test_control_flow_decided_at_run_time_is_refused_by_name() -> None:
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [_vi("t", None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", None)])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["pos"]),
             helper.make_node("If", ["pos"], ["y"], then_branch=then, else_branch=other)]
    model = _control_model(nodes, [_vi("x", [4])], [_vi("y", [4])], {"zero": np.array(0, np.float32)})
    with pytest.raises(OnnxImportError, match=r"\(If\): the condition \('pos'\) is computed from the inputs at run "
                                              r"time"):
        from_onnx(model)
    branch = helper.make_graph([helper.make_node("StringNormalizer", ["x"], ["u"])], "odd", [], [_vi("u", None)])
    nodes = [helper.make_node("If", ["yes"], ["y"], then_branch=branch, else_branch=other)]
    model = _control_model(nodes, [_vi("x", [4])], [_vi("y", None)], {"yes": np.array(True)})
    with pytest.raises(OnnxImportError, match=r"its body 'odd' uses unsupported operator type\(s\): "
                                              r"StringNormalizer \(x1\)"):
        from_onnx(model)


def test_sequences_are_lists_known_at_import() -> None:
    """SplitToSequence, SequenceAt, SequenceLength, SequenceConstruct, SequenceInsert, SequenceErase and
    ConcatFromSequence (stacking on a new axis), against onnxruntime."""
    nodes = [helper.make_node("SplitToSequence", ["x", "two"], ["parts"], axis=0),
             helper.make_node("SequenceAt", ["parts", "minus_one"], ["last"]),
             helper.make_node("Mul", ["last", "last"], ["y1"]),
             helper.make_node("SequenceLength", ["parts"], ["y3"]),
             helper.make_node("SequenceConstruct", ["a", "b"], ["ab"]),
             helper.make_node("SequenceInsert", ["ab", "last", "one"], ["alb"]),
             helper.make_node("SequenceErase", ["alb", "zero"], ["lb"]),
             helper.make_node("ConcatFromSequence", ["lb"], ["y2"], axis=1, new_axis=1),
             helper.make_node("SplitToSequence", ["a"], ["rows"], axis=1, keepdims=0),
             helper.make_node("ConcatFromSequence", ["rows"], ["y4"], axis=0)]
    inits = {"two": np.array(2, np.int64), "minus_one": np.array(-1, np.int64), "one": np.array(1, np.int64),
             "zero": np.array(0, np.int64)}
    model = _control_model(nodes, [_vi("x", [6, 4]), _vi("a", [2, 4]), _vi("b", [2, 4])],
                           [_vi("y1", [2, 4]), _vi("y2", [2, 2, 4]), _vi("y3", [], TensorProto.INT64),
                            _vi("y4", [8])], inits)
    x = {"x": _f32(6, 4), "a": _f32(2, 4), "b": _f32(2, 4)}
    for got, want in zip(run_relay(model, x), run_onnxruntime(model, x)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_list_built_in_a_loop_is_the_unrolled_steps() -> None:
    """A Loop appending x * i to a sequence three times, then the sequence stacked: what a scripted loop over
    a Python list exports."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "fi"], ["t"]),
         helper.make_node("SequenceInsert", ["s_in", "t"], ["s_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL),
                 helper.make_tensor_sequence_value_info("s_in", TensorProto.FLOAT, None)],
        [_vi("cond_out", [], TensorProto.BOOL), helper.make_tensor_sequence_value_info("s_out", TensorProto.FLOAT,
                                                                                       None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["s0"], dtype=TensorProto.FLOAT),
             helper.make_node("Loop", ["trips", "go", "s0"], ["s"], body=body),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)]
    model = _control_model(nodes, [_vi("x", [2, 3])], [_vi("y", [3, 2, 3])],
                           {"trips": np.array(3, np.int64), "go": np.array(True)})
    x = {"x": _f32(2, 3)}
    np.testing.assert_allclose(run_relay(model, x)[0], run_onnxruntime(model, x)[0], rtol=1e-6)
    bad = _control_model(nodes[:2], [_vi("x", [2, 3])], [helper.make_tensor_sequence_value_info(
        "s", TensorProto.FLOAT, None)], {"trips": np.array(3, np.int64), "go": np.array(True)})
    with pytest.raises(OnnxImportError, match=r"graph output 's' is not a tensor \(OnnxSequence\)"):
        from_onnx(bad, shape={"x": (2, 3)})
