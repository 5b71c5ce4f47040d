"""The LLM building blocks of ONNX's newest opsets against onnx's reference evaluator (onnxruntime lacks some):
SwiGLU (28), TensorScatter (24: a KV cache's update, linear and circular, with and without write indices),
CausalConvWithState (27: Mamba's and Gated DeltaNet's stateful depthwise convolution) and LinearAttention (27:
their recurrence, every update rule, grouped-query heads)."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import autosched as tvm
from autosched import relay
from autosched.contrib import graph_executor
from autosched.relay.frontend import OnnxImportError, from_onnx

RNG = np.random.default_rng(0)
#: the ops these tests cover (test_relay_onnx.py checks that every converter has a test)
LLM_OPS = {"SwiGLU", "TensorScatter", "CausalConvWithState", "LinearAttention"}


def _model(node, inputs: dict, n_outputs: int = 1, opset: int = 28):
    def info(name, value):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)

    outs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in node.output[:n_outputs]]
    graph = helper.make_graph([node], "llm_op", [info(k, v) for k, v in inputs.items()], outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(node, inputs: dict, n_outputs: int = 1) -> None:
    """Built and run, every output equals the reference evaluator's."""
    model = _model(node, inputs, n_outputs)
    want = ReferenceEvaluator(model).run(None, inputs)
    mod, params = from_onnx(model)
    m = graph_executor.GraphModule(relay.build(mod, "llvm", params=params)["default"](tvm.cpu()))
    m.run(**inputs)
    for i, w in enumerate(want):
        np.testing.assert_allclose(m.get_output(i).numpy(), w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("alpha", [1.0, 1.702])
def test_swiglu(alpha):
    a, b = RNG.standard_normal((2, 5, 12)).astype("float32"), RNG.standard_normal((2, 5, 12)).astype("float32")
    check(helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=alpha), {"a": a, "b": b})


@pytest.mark.parametrize("mode, axis, with_indices", [("linear", -2, False), ("linear", -2, True),
                                                      ("circular", -2, True), ("linear", 1, True),
                                                      ("circular", 2, True)])
def test_tensor_scatter_updates_each_rows_cache_from_its_index(mode, axis, with_indices):
    cache = RNG.standard_normal((3, 4, 10, 8)).astype("float32")  # [batch, heads, max_seq, head_dim] at axis -2
    ushape = list(cache.shape)
    ushape[axis] = 3
    inputs = {"cache": cache, "update": RNG.standard_normal(ushape).astype("float32")}
    names = ["cache", "update"]
    if with_indices:
        length = cache.shape[axis]  # linear: the update must fit; circular: it wraps around the end
        starts = [0, length - 3, 1] if mode == "linear" else [length - 2, length - 1, 2]
        inputs["where"] = np.array(starts, np.int64)
        names.append("where")
    check(helper.make_node("TensorScatter", names, ["present"], mode=mode, axis=axis), inputs)


@pytest.mark.parametrize("activation, state, bias", [("none", False, False), ("silu", True, True),
                                                     ("swish", True, False)])
def test_causal_conv_with_state_gives_the_output_and_the_next_state(activation, state, bias):
    x, w = RNG.standard_normal((2, 6, 7)).astype("float32"), RNG.standard_normal((6, 1, 4)).astype("float32")
    inputs, names = {"x": x, "w": w}, ["x", "w"]
    names.append("b" if bias else "")
    if bias:
        inputs["b"] = RNG.standard_normal(6).astype("float32")
    if state:
        inputs["s"] = RNG.standard_normal((2, 6, 3)).astype("float32")
        names.append("s")
    node = helper.make_node("CausalConvWithState", names, ["y", "present"], activation=activation)
    check(node, inputs, n_outputs=2)


def test_llm_ops_refuse_what_they_cannot_compute():
    a, b = np.zeros((2, 3), "float32"), np.zeros((3, 2), "float32")
    with pytest.raises(OnnxImportError, match="must have one shape"):
        from_onnx(_model(helper.make_node("SwiGLU", ["a", "b"], ["y"]), {"a": a, "b": b}))
    cache, update = np.zeros((2, 4, 8), "float32"), np.zeros((2, 4, 9), "float32")
    with pytest.raises(OnnxImportError, match="must be the cache's shape"):
        from_onnx(_model(helper.make_node("TensorScatter", ["c", "u"], ["p"], axis=-1), {"c": cache, "u": update}))
    with pytest.raises(OnnxImportError, match="must name a non-batch axis"):
        from_onnx(_model(helper.make_node("TensorScatter", ["c", "u"], ["p"], axis=0), {"c": cache, "u": cache}))
    x, w = np.zeros((1, 2, 5), "float32"), np.zeros((2, 1, 1), "float32")
    with pytest.raises(OnnxImportError, match="empty state"):
        from_onnx(_model(helper.make_node("CausalConvWithState", ["x", "w"], ["y"]), {"x": x, "w": w}))
    qkv = {n: np.zeros((1, 2, 8), "float32") for n in "qkv"}
    with pytest.raises(OnnxImportError, match="q_num_heads and kv_num_heads are required"):
        from_onnx(_model(helper.make_node("LinearAttention", ["q", "k", "v"], ["o"]), qkv))
    with pytest.raises(OnnxImportError, match="'gated' needs decay"):
        from_onnx(_model(helper.make_node("LinearAttention", ["q", "k", "v"], ["o"], q_num_heads=2, kv_num_heads=2,
                                          update_rule="gated"), qkv))


@pytest.mark.parametrize("rule, steps, decay_width, beta_width, past", [
    ("linear", 5, None, None, False), ("gated", 4, "head", None, True), ("gated", 3, "key", None, False),
    ("delta", 4, None, "head", True), ("gated_delta", 5, "head", "one", True), ("gated_delta", 1, "key", "head", True)])
def test_linear_attention_recurrence_for_every_rule(rule, steps, decay_width, beta_width, past):
    """Grouped-query heads (4 query heads on 2 key/value heads), a prefill of several tokens or one decode step."""
    b, hq, hkv, dk, dv = 2, 4, 2, 8, 6
    inputs = {"q": RNG.standard_normal((b, steps, hq * dk)).astype("float32"),
              "k": (RNG.standard_normal((b, steps, hkv * dk)) / np.sqrt(dk)).astype("float32"),
              "v": RNG.standard_normal((b, steps, hkv * dv)).astype("float32")}
    names = ["q", "k", "v", "", "", ""]
    if past:
        inputs["s"] = RNG.standard_normal((b, hkv, dk, dv)).astype("float32")
        names[3] = "s"
    if decay_width:
        width = hkv if decay_width == "head" else hkv * dk
        inputs["g"] = -RNG.uniform(0.01, 0.5, (b, steps, width)).astype("float32")
        names[4] = "g"
    if beta_width:
        inputs["beta"] = RNG.uniform(0.1, 0.9, (b, steps, hkv if beta_width == "head" else 1)).astype("float32")
        names[5] = "beta"
    while names[-1] == "":
        names.pop()
    node = helper.make_node("LinearAttention", names, ["o", "present"], q_num_heads=hq, kv_num_heads=hkv,
                            update_rule=rule)
    check(node, inputs, n_outputs=2)
