"""TVM's relay functions that hand-written graphs use (split, squeeze, expand_dims, stack, the comparisons,
zeros and full, layout_transform, nn.leaky_relu, nn.layer_norm on one axis, nn.conv1d, ...), built and run
against numpy. ``tvm`` is autosched, mapped by name."""

import numpy as np
import pytest

import autosched as tvm
from autosched import relay
from autosched.contrib import graph_executor
from autosched.relay.frontend import OnnxImportError, from_onnx

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 6, 1, 4)).astype("float32")
Y = RNG.standard_normal((2, 6, 1, 4)).astype("float32")


def run(body, **inputs):
    """Build ``body(vars...)`` over relay vars shaped like ``inputs`` and run it; the outputs as numpy arrays."""
    args = [relay.var(k, shape=v.shape, dtype=str(v.dtype)) for k, v in inputs.items()]
    out = body(*args)
    mod = tvm.IRModule.from_expr(relay.Function(args, out.astuple() if isinstance(out, relay.Tuple) else out))
    m = graph_executor.GraphModule(relay.build(mod, "llvm")["default"](tvm.cpu()))
    m.run(**inputs)
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


@pytest.mark.parametrize("name, body, ref", [
    ("squeeze", lambda x: relay.squeeze(x), lambda x: np.squeeze(x)),
    ("squeeze axis", lambda x: relay.squeeze(x, axis=[2]), lambda x: np.squeeze(x, 2)),
    ("expand_dims", lambda x: relay.expand_dims(x, 1, num_newaxis=2), lambda x: x[:, None, None]),
    ("expand_dims -1", lambda x: relay.expand_dims(x, -1), lambda x: x[..., None]),
    ("stack", lambda x: relay.stack([x, relay.negative(x)], axis=1), lambda x: np.stack([x, -x], 1)),
    ("repeat", lambda x: relay.repeat(x, 3, axis=1), lambda x: np.repeat(x, 3, 1)),
    ("reverse", lambda x: relay.reverse(x, axis=1), lambda x: x[:, ::-1]),
    ("reshape_like", lambda x: relay.reshape_like(x, relay.zeros((12, 4), "float32")), lambda x: x.reshape(12, 4)),
    ("zeros_like", lambda x: relay.add(x, relay.zeros_like(x)), lambda x: x),
    ("ones_like", lambda x: relay.multiply(x, relay.ones_like(x)), lambda x: x),
    ("full", lambda x: relay.add(x, relay.full(relay.const(2.5), (6, 1, 4))), lambda x: x + 2.5),
    ("full_like", lambda x: relay.subtract(relay.full_like(x, 7), x), lambda x: 7 - x),
    ("arange", lambda x: relay.add(x, relay.arange(4, dtype="float32")), lambda x: x + np.arange(4)),
    ("rsqrt", lambda x: relay.rsqrt(relay.abs(x)), lambda x: 1 / np.sqrt(np.abs(x))),
    ("leaky_relu", lambda x: relay.nn.leaky_relu(x, alpha=0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    ("global_max_pool2d", lambda x: relay.nn.global_max_pool2d(x), lambda x: x.max(axis=(2, 3), keepdims=True)),
    ("global_max_pool2d NHWC", lambda x: relay.nn.global_max_pool2d(x, layout="NHWC"),
     lambda x: x.max(axis=(1, 2), keepdims=True)),
    ("dropout", lambda x: relay.nn.relu(relay.nn.dropout(x, rate=0.3)), lambda x: np.maximum(x, 0)),
    ("layout_transform NHWC", lambda x: relay.layout_transform(x, "NCHW", "NHWC"), lambda x: x.transpose(0, 2, 3, 1)),
    ("layout_transform blocked", lambda x: relay.layout_transform(
        relay.layout_transform(x, "NCHW", "NCHW2c"), "NCHW2c", "NCHW"), lambda x: x),
    ("shape_of", lambda x: relay.add(relay.cast(relay.shape_of(x), "float32"), relay.sum(x) * relay.const(0.0)),
     lambda x: np.array(x.shape, "float32")),
])
def test_shape_functions_match_numpy(name, body, ref):
    (got,) = run(body, x=X)
    np.testing.assert_allclose(got, ref(X), rtol=1e-6, atol=1e-6)


def test_split_gives_sections_or_cuts_and_a_tuple():
    parts = run(lambda x: relay.split(x, 3, axis=1).astuple(), x=X)
    for got, want in zip(parts, np.split(X, 3, axis=1), strict=True):
        np.testing.assert_array_equal(got, want)
    (got,) = run(lambda x: relay.add(relay.split(x, [1, 4], axis=1)[1], relay.const(1.0)), x=X)
    np.testing.assert_array_equal(got, X[:, 1:4] + 1)
    with pytest.raises(relay.RelayError, match="does not divide into 4 equal parts"):
        relay.split(relay.var("x", shape=(2, 6)), 4, axis=1)
    with pytest.raises(relay.RelayError, match="axes \\[1\\] of shape \\[2, 6\\] are not of size 1"):
        relay.squeeze(relay.var("x", shape=(2, 6)), axis=[1])


@pytest.mark.parametrize("name, numpy_fn", [
    ("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less), ("less_equal", np.less_equal),
    ("greater", np.greater), ("greater_equal", np.greater_equal)])
def test_comparisons_give_bool_tensors(name, numpy_fn):
    y = Y.copy()
    y[0, 0] = X[0, 0]  # some equal elements
    (got,) = run(lambda a, b: getattr(relay, name)(a, b), x=X, y=y)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, numpy_fn(X, y))


@pytest.mark.parametrize("name, numpy_fn", [
    ("logical_and", np.logical_and), ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)])
def test_logical_ops_of_comparisons(name, numpy_fn):
    (got,) = run(lambda a, b: getattr(relay, name)(relay.greater(a, relay.const(0.0)),
                                                    relay.less(b, relay.const(0.0))), x=X, y=Y)
    np.testing.assert_array_equal(got, numpy_fn(X > 0, Y < 0))


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm_normalises_one_axis_as_tvm(axis):
    gamma = RNG.standard_normal(X.shape[axis]).astype("float32")
    beta = RNG.standard_normal(X.shape[axis]).astype("float32")
    (got,) = run(lambda x: relay.nn.layer_norm(x, relay.const(gamma), relay.const(beta), axis=axis, epsilon=1e-5),
                 x=X)
    mean, var = X.mean(axis=axis, keepdims=True), X.var(axis=axis, keepdims=True)
    shape = [1] * X.ndim
    shape[axis] = -1
    want = (X - mean) / np.sqrt(var + 1e-5) * gamma.reshape(shape) + beta.reshape(shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    (got,) = run(lambda x: relay.nn.layer_norm(x, relay.const(gamma), relay.const(beta), axis=axis, center=False,
                                               scale=False), x=X)
    np.testing.assert_allclose(got, (X - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)


def test_conv1d_is_the_sliding_dot_product():
    x = RNG.standard_normal((2, 3, 20)).astype("float32")
    w = RNG.standard_normal((5, 3, 4)).astype("float32")
    (got,) = run(lambda d: relay.nn.conv1d(d, relay.const(w), strides=2, padding=(1, 2)), x=x)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 2)))
    win = np.lib.stride_tricks.sliding_window_view(xp, 4, axis=2)[:, :, ::2]
    np.testing.assert_allclose(got, np.einsum("ncwk,ock->now", win, w), rtol=1e-4, atol=1e-5)


def test_const_keeps_a_numpy_scalars_type_as_tvm():
    """TVM's rule: Python ints and floats are int32 / float32, numpy scalars keep their type but for the 64-bit
    ones, lists are int32 / float32, arrays keep theirs."""
    cases = [(3, "int32"), (2.5, "float32"), (True, "bool"), (np.uint8(4), "uint8"), (np.int8(-1), "int8"),
             (np.float16(1), "float16"), (np.int64(3), "int32"), (np.float64(2), "float32"), ([1, 2], "int32"),
             ([1.5, 2], "float32"), (np.arange(3), "int64")]
    assert [str(relay.const(v).data.dtype) for v, _ in cases] == [want for _, want in cases]
    x = np.arange(256, dtype="uint8").reshape(16, 16)
    (got,) = run(lambda a: relay.right_shift(a, relay.const(np.uint8(4))), x=x)
    np.testing.assert_array_equal(got, x >> 4)


def test_reinterpret_and_onnx_bitcast_keep_the_bits():
    x = RNG.standard_normal((4, 8)).astype("float32")
    (got,) = run(lambda a: relay.reinterpret(a, "int32"), x=x)
    np.testing.assert_array_equal(got, x.view(np.int32))
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32),
                               helper.make_node("BitwiseAnd", ["y", "mask"], ["z"])], "bits",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.INT32, None)],
                              initializer=[helper.make_tensor("mask", TensorProto.INT32, [], [0x7FFFFFFF])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    mod, params = from_onnx(model)
    m = graph_executor.GraphModule(relay.build(mod, "llvm", params=params)["default"](tvm.cpu()))
    m.run(x=x)
    np.testing.assert_array_equal(m.get_output(0).numpy().view(np.float32), np.abs(x))  # the sign bit cleared
    graph.node[0].attribute[0].i = TensorProto.INT64
    with pytest.raises(OnnxImportError, match="float32 and int64 must have one width"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)]))


def _pass_example():
    c = relay.const(np.full((1, 4, 6, 6), 1.5, "float32"))
    x = relay.var("x", shape=(1, 4, 6, 6))
    y = relay.add(c, c)
    y = relay.multiply(y, relay.const(2, "float32"))
    z = relay.add(relay.add(x, y), relay.add(x, y))
    return tvm.IRModule.from_expr(relay.Function([x], z))


def test_users_passes_instruments_and_expr_mutators():
    """TVM's pass infrastructure as its use_pass_infra tutorial writes it: function passes (function and class
    forms) with an ExprMutator, module passes, Sequential under opt_level and disabled_pass, PrintIR, and
    pass instruments told about every pass (relay.build's too)."""

    @relay.transform.function_pass(opt_level=1)
    class ScaleConstants:
        def __init__(self, multiplier):
            self.multiplier = multiplier

        def transform_function(self, func, mod, ctx):
            outer = self

            class Replace(relay.ExprMutator):
                def visit_constant(self, c):
                    return relay.multiply(outer.multiplier, c)

            return Replace().visit(func)

    scale = ScaleConstants(relay.const(3, "float32"))
    assert scale.info.name == "ScaleConstants" and scale.info.opt_level == 1
    mod = scale(_pass_example())

    class CountConstants(relay.ExprVisitor):
        def __init__(self):
            super().__init__()
            self.n = 0

        def visit_constant(self, c):
            self.n += 1

    counter = CountConstants()
    counter.visit(mod["main"])
    assert counter.n == 3  # the two constants and the one multiplier (each node is visited once)
    ex = relay.create_executor("graph", mod=mod, target="llvm").evaluate()
    x = np.random.default_rng(0).random((1, 4, 6, 6), dtype=np.float32)
    np.testing.assert_allclose(ex(x).numpy(), 2 * (x + (3 * 1.5 + 3 * 1.5) * (3 * 2)), rtol=1e-5)

    @tvm.transform.module_pass(opt_level=0)
    def rename(mod, ctx):
        return tvm.IRModule({"main": mod["main"], "copy": mod["main"]})

    seen, skipped = [], []

    @tvm.instrument.pass_instrument
    class Recorder:
        def run_before_pass(self, mod, info):
            seen.append(info.name)

        def should_run(self, mod, info):
            if info.name == "DeadCodeElimination":
                skipped.append(info.name)
                return False
            return True

    timing = tvm.instrument.PassTimingInstrument()
    seq = tvm.transform.Sequential([relay.transform.FoldConstant(), tvm.transform.PrintIR("folded"),
                                    relay.transform.EliminateCommonSubexpr(), rename])
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["EliminateCommonSubexpr"],
                                   instruments=[Recorder(), timing]):
        out = seq(_pass_example())
        relay.build(_pass_example(), target="llvm")
    assert "copy" in out and seen[:4] == ["sequential", "FoldConstant", "PrintIR", "rename"]
    assert "FuseOps" in seen and skipped == ["DeadCodeElimination"]  # relay.build's passes are told too
    assert "FoldConstant" in timing.render()
    with pytest.raises(TypeError, match="is not a pass"):
        tvm.transform.Sequential([lambda m: m])
