"""Transformers from ONNX (issue 43): every operator of BERT- and GPT-style exports against onnxruntime, then a
BERT-style encoder with a padding mask and a GPT-style decoder with a causal mask built for llvm and for both
ISAs (AVX2 ``haswell``, AVX-512 ``skylake-avx512``) within 1e-4 of onnxruntime (relative to the logits' scale),
and their tuning tasks: extracted and one dense kernel tuned."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import autosched  # noqa: E402
from _cpus import host_runs, skip_unless_host_runs  # noqa: E402
from _onnx_models import run_onnxruntime  # noqa: E402
from _transformer_models import (  # noqa: E402
    OP_CASES,
    make_decoder,
    make_encoder,
    make_typed_op,
    op_case,
    rnn_weights,
    token_inputs,
)
from autosched import relay  # noqa: E402
from autosched.relay.backend.build_module import _GraphBuilder, extract_tasks, optimize  # noqa: E402
from autosched.relay.frontend import OnnxImportError, from_onnx  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402
from autosched.target import Target  # noqa: E402
from autosched.te import expr as E  # noqa: E402
from test_gpu_relay import executed  # noqa: E402

ISAS = ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"]


def run_relay(model, inputs: dict[str, np.ndarray], target: str = "llvm") -> list[np.ndarray]:
    """Import, build for ``target`` and run with the graph executor (code for a named CPU only where it runs)."""
    mod, params = from_onnx(model, shape={k: v.shape for k, v in inputs.items()})
    m = GraphModule(*relay.build(mod, target=target, params=params))
    if target != "llvm" and not host_runs(target):
        return []
    for name, value in inputs.items():
        m.set_input(name, value)
    m.run()
    return [np.asarray(m.get_output(i)) for i in range(len(model.graph.output))]


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_op_matches_onnxruntime(case: str) -> None:
    model, inputs = op_case(case)
    expected = run_onnxruntime(model, inputs)
    got = run_relay(model, inputs)
    for e, g in zip(expected, got):
        assert g.shape == e.shape and g.dtype == e.dtype, f"{g.shape} {g.dtype} != onnxruntime's {e.shape} {e.dtype}"
        if e.dtype == np.float32:
            np.testing.assert_allclose(g, e, atol=1e-5, rtol=1e-5)
        else:
            np.testing.assert_array_equal(g, e)


def test_roberta_positions_from_the_ids_match_onnxruntime() -> None:
    """RoBERTa's position ids are computed from the token ids at run time (a CumSum of the non-padding mask):
    padded inputs (id 1 at the end) give onnxruntime's logits."""
    model = make_encoder(layers=1, d_model=32, heads=2, seq=12, vocab=50, roberta=True)
    assert "CumSum" in {n.op_type for n in model.graph.node}
    inputs = token_inputs(model, 12, 50, padding=4)
    inputs["input_ids"][:, 8:] = 1
    inputs["input_ids"][:, :8] = np.maximum(inputs["input_ids"][:, :8], 2)
    _check_model(model, inputs, "llvm")


def test_a_linear_layer_on_channels_last_images_does_each_multiply_once() -> None:
    """ConvNeXt's MLP: MatMul of a [1, 14, 14, C] activation by a weight is one packed dense on the image as it is.
    Its row tiles stay inside one image row: a tile of the fused 14 x 14 rows needed a block of whole planes,
    every multiply-add done about 14 times over (the model took 6.4 s instead of 0.1)."""
    w = np.random.default_rng(1).standard_normal((48, 96)).astype(np.float32)
    model = make_typed_op("MatMul", [("x", "float32", (1, 14, 14, 48))], initializers={"w": w}, extra_inputs=["w"])
    mod, params = relay.frontend.from_onnx(model, shape={"x": (1, 14, 14, 48)})
    with Target("llvm"):
        fused = optimize(mod, params)
    gb = _GraphBuilder(fused["main"], "llvm", use_records=False)
    gb.run()
    (dense,) = [f for f in gb.prims if "dense" in f.name]
    # guards counted as taken: the partial last tile of an image row (14 = 6 + 6 + 2) counts as whole
    muls = executed(dense, lambda e: isinstance(e, E.Mul) and e.dtype == "float32")
    assert muls <= 1.5 * 14 * 14 * 96 * 48, f"{muls / (14 * 14 * 96 * 48):.1f}x the product's multiplies"
    inputs = {"x": np.random.default_rng(0).standard_normal((1, 14, 14, 48)).astype(np.float32)}
    np.testing.assert_allclose(run_relay(model, inputs)[0], run_onnxruntime(model, inputs)[0], rtol=1e-5, atol=1e-5)


def _check_model(model, inputs: dict[str, np.ndarray], target: str) -> float:
    ref = run_onnxruntime(model, inputs)[0]
    got = run_relay(model, inputs, target)
    if not got:
        skip_unless_host_runs(target)
    err = float(np.abs(got[0] - ref).max() / np.abs(ref).max())
    assert got[0].shape == ref.shape
    assert err < 1e-4, f"largest difference {err:.2e} of the logits' scale"
    return err


@pytest.mark.parametrize("target", ["llvm"] + ISAS)
def test_encoder_with_padding_mask_matches_onnxruntime(target: str) -> None:
    model = make_encoder(layers=2, d_model=64, heads=4, seq=16, vocab=100)
    inputs = token_inputs(model, 16, 100, padding=5)
    _check_model(model, inputs, target)


@pytest.mark.parametrize("target", ["llvm"] + ISAS)
def test_encoder_on_a_prime_number_of_tokens_matches_onnxruntime(target: str) -> None:
    """13 tokens (ViT's 197 is prime too): every row tile of the dense layers, the attention's batch_matmuls and
    the softmax rows end in a partial tile or vector."""
    model = make_encoder(layers=1, d_model=64, heads=4, seq=13, vocab=100)
    _check_model(model, token_inputs(model, 13, 100, padding=4), target)


@pytest.mark.parametrize("target", ["llvm"] + ISAS)
def test_decoder_with_causal_mask_matches_onnxruntime(target: str) -> None:
    model = make_decoder(layers=2, d_model=64, heads=4, seq=16, vocab=100)
    _check_model(model, token_inputs(model, 16, 100), target)


@pytest.mark.parametrize("op, gates, states", [("LSTM", 4, 2), ("GRU", 3, 1)])
def test_batch_first_recurrent_layers_are_the_transposed_sequence_first_ones(op: str, gates: int, states: int):
    """layout=1 ([batch, seq, input], PyTorch's batch_first; onnxruntime has no kernel for it): the outputs are
    those of layout 0 on the transposed input, transposed, initial states included."""
    weights = rnn_weights(gates, 4, 3, 2, initial=states)
    names = ["w", "r", "b", "", "h0", "c0"][:4 + states]
    x = np.random.default_rng(0).standard_normal((5, 2, 3)).astype(np.float32)
    seq_first = run_relay(make_typed_op(op, [("x", "float32", x.shape)], initializers=weights, extra_inputs=names,
                                        n_outputs=1 + states, hidden_size=4, direction="bidirectional"), {"x": x})
    batch_weights = {k: v.transpose(1, 0, 2) if k in ("h0", "c0") else v for k, v in weights.items()}
    batch_first = run_relay(make_typed_op(op, [("x", "float32", (2, 5, 3))], initializers=batch_weights,
                                          extra_inputs=names, n_outputs=1 + states, hidden_size=4,
                                          direction="bidirectional", layout=1, opset=14),
                            {"x": x.transpose(1, 0, 2)})
    np.testing.assert_allclose(batch_first[0], seq_first[0].transpose(2, 0, 1, 3), rtol=1e-6, atol=1e-6)
    for k in range(1, 1 + states):
        np.testing.assert_allclose(batch_first[k], seq_first[k].transpose(1, 0, 2), rtol=1e-6, atol=1e-6)


def test_recurrent_layers_refuse_what_they_cannot_unroll() -> None:
    """Shorter sequence lengths and unknown activations are refused with the node and the reason."""
    weights = {**rnn_weights(1, 4, 3, 1), "n": np.array([5, 3], np.int32)}
    short = make_typed_op("RNN", [("x", "float32", (5, 2, 3))], initializers=weights, extra_inputs=["w", "r", "b", "n"],
                          n_outputs=2, hidden_size=4)
    with pytest.raises(OnnxImportError, match=r"RNN.*sequence_lens \[5, 3\] shorter than the sequence \(5\)"):
        from_onnx(short)
    odd = make_typed_op("RNN", [("x", "float32", (5, 2, 3))], initializers=rnn_weights(1, 4, 3, 1),
                        extra_inputs=["w", "r", "b"], n_outputs=2, hidden_size=4, activations=["Softsign"])
    with pytest.raises(OnnxImportError, match=r"activations \['Softsign'\] are not supported"):
        from_onnx(odd)


def test_padding_changes_the_encoder_output_as_onnxruntime_does() -> None:
    """The mask is an input, not a folded constant: a second mask on the same build gives onnxruntime's result."""
    model = make_encoder(layers=1, d_model=32, heads=2, seq=8, vocab=50)
    a, b = token_inputs(model, 8, 50, padding=0), token_inputs(model, 8, 50, padding=4)
    mod, params = from_onnx(model)
    m = GraphModule(*relay.build(mod, target="llvm", params=params))
    outs = []
    for inputs in (a, b):
        for k, v in inputs.items():
            m.set_input(k, v)
        m.run()
        outs.append(np.asarray(m.get_output(0)).copy())
        np.testing.assert_allclose(outs[-1], run_onnxruntime(model, inputs)[0], atol=1e-5, rtol=1e-4)
    assert not np.allclose(outs[0], outs[1])


def test_position_and_mask_arithmetic_is_folded_at_import() -> None:
    """Shape/Range/Mod/Expand/Trilu/Equal become constants: no kernel computes positions or the causal mask."""
    mod, _ = from_onnx(make_decoder(layers=1, d_model=32, heads=2, seq=8, vocab=50))
    text = str(mod)
    for op in ("trilu", "mod(", "broadcast_to", "equal("):
        assert op not in text, f"{op} left in the graph"


def test_range_of_a_computed_tensor_names_the_node() -> None:
    nodes = [helper.make_node("ReduceMax", ["n"], ["m"], name="max", keepdims=0),
             helper.make_node("Range", ["zero", "m", "one"], ["y"], name="positions")]
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("zero", 0), ("one", 1))]
    g = helper.make_graph(nodes, "computed_range", [helper.make_tensor_value_info("n", TensorProto.INT64, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)], initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"'positions' \(Range\).*known at import time"):
        from_onnx(model)


def test_nonzero_of_a_computed_tensor_names_the_node() -> None:
    """NonZero's shape depends on its input's values: on a graph input it is refused by name (static shapes)."""
    g = helper.make_graph([helper.make_node("NonZero", ["m"], ["y"], name="where_set")], "computed_nonzero",
                          [helper.make_tensor_value_info("m", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"'where_set' \(NonZero\).*known at import time.*'m'"):
        from_onnx(model)


def test_unsupported_attributes_name_the_node() -> None:
    with pytest.raises(OnnxImportError, match=r"'node' \(Gelu\).*approximate='erf'"):
        from_onnx(make_typed_op("Gelu", [("x", "float32", (2, 3))], opset=20, approximate="erf"))
    with pytest.raises(OnnxImportError, match=r"'node' \(LayerNormalization\).*stash_type=0"):
        from_onnx(_ln_stash0())


@pytest.mark.parametrize("opset, attrs, mask", [
    (24, {}, (2, 1, 4, 4)),  # a bool mask shorter than the 6 keys: the rest are masked
    (23, {}, (2, 1, 1, 6)),  # torch's key padding mask, broadcast over the queries (onnxruntime wants them all)
    (25, {"left_window_size": 2, "right_window_size": 1}, None),  # a sliding window, both sides
    (25, {"is_causal": 1, "left_window_size": 1}, None),  # a causal window of the key itself and one before
])
def test_attention_forms_onnxruntime_lacks_match_the_onnx_reference(opset: int, attrs: dict, mask) -> None:
    """What onnxruntime 1.31 refuses (a mask shorter than the keys or broadcast over the queries, as torch.onnx
    exports a key padding mask; opset 25's sliding windows) against onnx's reference implementation."""
    from onnx.reference import ReferenceEvaluator

    shapes = [("q", "float32", (2, 2, 4, 8)), ("k", "float32", (2, 2, 6, 8)), ("v", "float32", (2, 2, 6, 8))]
    model = make_typed_op("Attention", shapes + ([("m", "bool", mask)] if mask else []), opset=opset, **attrs)
    rng = np.random.default_rng(0)
    inputs = {n: rng.standard_normal(s).astype(np.float32) for n, _, s in shapes}
    if mask:
        inputs["m"] = rng.random(mask) < 0.7
    (expected,) = ReferenceEvaluator(model).run(None, inputs)
    (got,) = run_relay(model, inputs)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_attention_refuses_what_it_cannot_place_naming_the_node() -> None:
    F = "float32"
    with pytest.raises(OnnxImportError, match=r"'node' \(Attention\).*3 query heads are not a multiple of the 2"):
        from_onnx(make_typed_op("Attention", [("q", F, (1, 3, 4, 8)), ("k", F, (1, 2, 4, 8)),
                                              ("v", F, (1, 2, 4, 8))], opset=23))
    with pytest.raises(OnnxImportError, match=r"'node' \(RotaryEmbedding\).*num_heads dividing"):
        from_onnx(make_typed_op("RotaryEmbedding", [("x", F, (1, 3, 8)), ("c", F, (1, 3, 2)), ("s", F, (1, 3, 2))],
                                opset=23, num_heads=3))


def _decode_step_by_matmul() -> onnx.ModelProto:
    """One query against 40 cached keys as older exports write it: MatMul(Q, Transpose(K)), Softmax, MatMul."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    shapes = {"q": [1, 4, 1, 32], "k": [1, 4, 40, 32], "v": [1, 4, 40, 32]}
    g = helper.make_graph(nodes, "decode", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                            for n, s in shapes.items()],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 32])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what onnxruntime releases of the last years read
    return model


@pytest.mark.parametrize("form", ["attention", "matmul"])
def test_a_decode_step_reads_the_cached_keys_without_a_transposed_copy(form: str) -> None:
    """A few queries against a KV cache: the scores are dot products of contiguous rows of Q and K, so no
    kernel copies K transposed (it cost more than the product: 0.39 of a 0.8 ms LLaMA-style decode step), from
    an Attention node or from MatMul(Q, Transpose(K)); the values are onnxruntime's."""
    if form == "attention":
        model = make_typed_op("Attention", [("q", "float32", (1, 8, 1, 32)), ("k", "float32", (1, 2, 1, 32)),
                                            ("v", "float32", (1, 2, 1, 32)), ("", "bool", ()),
                                            ("pk", "float32", (1, 2, 39, 32)), ("pv", "float32", (1, 2, 39, 32))],
                              opset=23, is_causal=1, outputs=["y", "present_key", "present_value"])
    else:
        model = _decode_step_by_matmul()
    rng = np.random.default_rng(0)
    inputs = {vi.name: rng.standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.float32)
              for vi in model.graph.input}
    mod, params = from_onnx(model)
    graph_json, lib, params = relay.build(mod, target="llvm", params=params)
    kernels = {n["attrs"]["func_name"] for n in json.loads(graph_json)["nodes"] if n["op"] == "tvm_op"}
    assert not [k for k in kernels if "transpose" in k], kernels
    for e, g in zip(run_onnxruntime(model, inputs), run_relay(model, inputs)):
        np.testing.assert_allclose(g, e, atol=1e-5, rtol=1e-5)


def _ln_stash0():
    node = helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="node", stash_type=0)
    g = helper.make_graph([node], "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          initializer=[onnx.numpy_helper.from_array(np.ones(3, np.float32), "g")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_tasks_extract_and_one_dense_kernel_tunes(tmp_path) -> None:
    """``relay.extract_tasks`` on the encoder gives its dense, batch_matmul, layer_norm and softmax kernels; one
    dense task tunes for 4 trials in-process and the tuned build still matches onnxruntime."""
    import autosched

    model = make_encoder(layers=1, d_model=32, heads=2, seq=8, vocab=50)
    mod, params = from_onnx(model)
    tasks = relay.extract_tasks(mod, params, target="llvm")
    labels = [t.args.get("graph", "") if isinstance(t.args, dict) else str(t.args) for t in tasks]
    kinds = {k for k in ("dense", "batch_matmul", "layer_norm", "softmax") if any(f'"nn.{k}' in s for s in labels)}
    assert kinds == {"dense", "batch_matmul", "layer_norm", "softmax"}, kinds
    dense = next(t for t, s in zip(tasks, labels) if '"nn.dense' in s)
    db = str(tmp_path / "t.db")
    best = autosched.tune(dense, 4, database=db, backend="local", batch_size=4, seed=0)
    assert best is not None
    inputs = token_inputs(model, 8, 50)
    with autosched.apply_history_best(db):
        lib = relay.build(mod, target="llvm", params=params)
    m = GraphModule(*lib)
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    np.testing.assert_allclose(np.asarray(m.get_output(0)), run_onnxruntime(model, inputs)[0], atol=1e-5, rtol=1e-4)


def test_one_model_with_a_symbolic_sequence_serves_length_buckets() -> None:
    """The sequence length is chosen at build time (one build per length bucket, shape= names it); a shorter
    input padded to a bucket with attention_mask 0 gives the unpadded model's logits (docs/relay_onnx.md)."""
    model = make_encoder(layers=1, d_model=32, heads=2, seq="S", vocab=50)
    short = token_inputs(model, 5, 50, padding=0)
    builds = {}
    for bucket in (8, 16):
        mod, params = from_onnx(model, shape={"input_ids": (1, bucket), "attention_mask": (1, bucket)})
        builds[bucket] = GraphModule(*relay.build(mod, target="llvm", params=params))
    expected = run_onnxruntime(model, short)[0]
    for bucket, m in builds.items():
        pad = bucket - 5
        m.set_input("input_ids", np.pad(short["input_ids"], ((0, 0), (0, pad))))
        m.set_input("attention_mask", np.pad(short["attention_mask"], ((0, 0), (0, pad))))
        m.run()
        np.testing.assert_allclose(np.asarray(m.get_output(0)), expected, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("exponent_shape", [[], [1]])
def test_a_constant_exponent_is_a_scalar_in_the_kernel(exponent_shape) -> None:
    """GELU's ``x ** 3`` with the 3 a constant (a scalar, or a [1]-shaped initializer) is computed as x * x * x
    inside the fused kernel: no pow call per element (it took 28% of GPT-2 small's time), and the scalar
    constant stays a scalar (numpy's ascontiguousarray made every relay scalar constant 1-d, so none was
    inlined into a kernel)."""
    assert relay.const(np.float32(3.0)).data.shape == ()
    nodes = [helper.make_node("Pow", ["x", "three"], ["p"]), helper.make_node("Tanh", ["p"], ["y"])]
    graph = helper.make_graph(
        nodes, "gelu_cube", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor("three", TensorProto.FLOAT, exponent_shape, [3.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(0).standard_normal((2, 64)).astype("float32")
    mod, params = from_onnx(model, shape={"x": x.shape})
    graph_json, lib, params = relay.build(mod, target="llvm", params=params)
    assert "llvm.pow" not in lib.get_source() and not params
    m = GraphModule(graph_json, lib, params)
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0), np.tanh(x ** 3), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target, lanes", [("llvm -mcpu=haswell", 8), ("llvm -mcpu=skylake-avx512", 16)])
@pytest.mark.parametrize("op", ["LayerNormalization", "Softmax"])
@pytest.mark.parametrize("width", [768, 197])
def test_row_statistics_run_in_vector_lanes(op: str, target: str, lanes: int, width: int) -> None:
    """LayerNormalization's sums and Softmax's max and sum over a row of 768 (or ViT's 197 tokens, a partial
    last vector) are accumulated in the target's vector lanes (the reduction loop vectorized: partial results
    per lane in a few accumulators, then the lanes halved onto each other), not one element at a time, and the
    output still matches numpy on the host."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((1, 8, width)) + 3).astype("float32")
    inits = [helper.make_tensor("g", TensorProto.FLOAT, [width], rng.standard_normal(width).astype("float32")),
             helper.make_tensor("b", TensorProto.FLOAT, [width], rng.standard_normal(width).astype("float32"))]
    if op == "Softmax":
        node, inits = helper.make_node("Softmax", ["x"], ["y"], axis=-1), []
    else:
        node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)
    graph = helper.make_graph([node], "row", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod, params = from_onnx(model, shape={"x": x.shape})
    (task,) = extract_tasks(mod, params, target)  # its default schedule is what the build below uses
    sch, args = task.default_schedule()
    tir = str(autosched.lower(sch, args))
    reductions = {"LayerNormalization": ("layer_norm_sum", "layer_norm_sqsum"),
                  "Softmax": ("softmax_max", "softmax_sum")}[op]
    for red in reductions:  # the row's reduction loop itself is vectorized
        assert re.search(rf"vectorized \(k\d, 0, {width}\) {{\n\s+{red}\[0, 0\] = ", tir), tir
    kernel = autosched.build(sch, args, target=target)
    assert kernel.unhonoured == []  # no vectorized loop fell back to scalar code
    # the lanes reduced as a tree: the upper half of the lanes onto the lower, down to one
    assert all(f"<{n} x float>" in kernel.get_source("ll-unopt") for n in (lanes // 2, 2)), target
    graph_json, lib, params = relay.build(mod, target=target, params=params)
    if host_runs(target):
        m = GraphModule(graph_json, lib, params)
        m.set_input("x", x)
        m.run()
        y = np.asarray(m.get_output(0))
        if op == "Softmax":
            e = np.exp(x - x.max(-1, keepdims=True))
            ref = e / e.sum(-1, keepdims=True)
        else:
            ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * inits_value(inits, 0) \
                + inits_value(inits, 1)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def inits_value(inits, i: int) -> np.ndarray:
    return onnx.numpy_helper.to_array(inits[i])
