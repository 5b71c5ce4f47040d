"""ONNX's random ops: drawn once at import from a seeded generator (the seed attribute, else the node's name), so
a built model is a pure function; the draws have their distributions, Bernoulli and Multinomial sample the
probabilities computed at run time, and the importer warns that every run uses the same numbers."""

import logging

import numpy as np
import pytest
from onnx import TensorProto, helper

import autosched as tvm
from autosched import relay
from autosched.contrib import graph_executor
from autosched.relay.frontend import from_onnx


def run(nodes, inputs, outputs):
    """Import, build and run a one-graph model; its outputs as numpy arrays."""
    def info(name, value):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)

    graph = helper.make_graph(nodes, "random", [info(k, v) for k, v in inputs.items()],
                              [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs])
    mod, params = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    m = graph_executor.GraphModule(relay.build(mod, "llvm", params=params)["default"](tvm.cpu()))
    m.run(**inputs)
    return [m.get_output(i).numpy() for i in range(len(outputs))]


X = np.zeros((400, 250), "float32")
#: the ops these tests cover (test_relay_onnx.py checks that every converter has a test)
RANDOM_OPS = {"RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Bernoulli", "Multinomial"}


def test_uniform_and_normal_draws_have_their_distributions_and_repeat_by_seed(caplog):
    nodes = [helper.make_node("RandomUniform", [], ["u"], shape=[400, 250], low=-2.0, high=3.0, seed=3.0),
             helper.make_node("RandomNormalLike", ["x"], ["n"], mean=1.0, scale=2.0),
             helper.make_node("Add", ["u", "x"], ["y1"]), helper.make_node("Add", ["n", "x"], ["y2"])]
    with caplog.at_level(logging.WARNING, logger="autosched.relay"):
        u, n = run(nodes, {"x": X}, ["y1", "y2"])
    assert -2 <= u.min() and u.max() < 3 and abs(u.mean() - 0.5) < 0.02 and abs(u.std() - 5 / 12 ** 0.5) < 0.02
    assert abs(n.mean() - 1) < 0.02 and abs(n.std() - 2) < 0.02 and n.dtype == np.float32
    assert any("RandomNormalLike 'n': random numbers drawn once at import" in r.getMessage() for r in caplog.records)
    again, _ = run(nodes, {"x": X}, ["y1", "y2"])
    np.testing.assert_array_equal(again, u)  # the same seed, the same numbers
    nodes[0] = helper.make_node("RandomUniform", [], ["u"], shape=[400, 250], low=-2.0, high=3.0, seed=4.0)
    other, _ = run(nodes, {"x": X}, ["y1", "y2"])
    assert not np.array_equal(other, u)


def test_bernoulli_samples_probabilities_computed_at_run_time():
    p = np.linspace(0, 1, 100000, dtype="float32").reshape(100, 1000)
    nodes = [helper.make_node("Sigmoid", ["p"], ["q"]), helper.make_node("Bernoulli", ["q"], ["b"], seed=1.0)]
    (b,) = run(nodes, {"p": p}, ["b"])
    q = 1 / (1 + np.exp(-p))
    assert b.dtype == np.float32 and set(np.unique(b)) <= {0.0, 1.0}
    assert abs(b.mean() - q.mean()) < 0.01
    assert abs(b[:, :100].mean() - q[:, :100].mean()) < 0.02 and abs(b[:, -100:].mean() - q[:, -100:].mean()) < 0.02


def test_multinomial_picks_classes_by_their_probabilities():
    probs = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]], "float32")
    nodes = [helper.make_node("Multinomial", ["l"], ["m"], sample_size=40000, seed=2.0,
                              dtype=TensorProto.INT64)]
    (m,) = run(nodes, {"l": np.log(probs)}, ["m"])
    assert m.shape == (2, 40000) and m.dtype == np.int64
    freq = np.stack([np.bincount(row, minlength=4) / 40000 for row in m])
    np.testing.assert_allclose(freq, probs, atol=0.01)


def test_random_ops_refuse_what_they_cannot_draw():
    with pytest.raises(relay.frontend.OnnxImportError, match="shape attribute is required"):
        run([helper.make_node("RandomNormal", [], ["n"]), helper.make_node("Add", ["n", "x"], ["y"])],
            {"x": X}, ["y"])
    with pytest.raises(relay.frontend.OnnxImportError, match=r"must be \[batch, classes\]"):
        run([helper.make_node("Multinomial", ["x3"], ["m"])], {"x3": np.zeros((2, 3, 4), "float32")}, ["m"])
