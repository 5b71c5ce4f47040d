"""onnxruntime's fused transformer ops (com.microsoft SkipLayerNormalization, BiasGelu, FastGelu, ...; the
default-domain SimplifiedLayerNormalization) against onnxruntime, one node at a time and in a BERT-style encoder
as ``onnxruntime.transformers.optimizer`` rewrites it."""

from __future__ import annotations

import logging

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from _llm_models import llm_inputs, make_llama  # noqa: E402
from _onnx_models import IR_VERSION, run_onnxruntime  # noqa: E402
from _transformer_models import make_encoder, token_inputs  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.relay.frontend import OnnxImportError, from_onnx  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402

R = np.random.default_rng(11)
D = 48


def _model(op: str, inputs: dict[str, tuple], inits: dict[str, np.ndarray], order: list[str], outputs: list[str],
           domain: str = "com.microsoft", **attrs):
    node = helper.make_node(op, order, outputs, domain=domain, **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    imports = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = IR_VERSION
    return model


def _vec(scale: float = 1.0) -> np.ndarray:
    return (R.standard_normal(D) * scale).astype(np.float32)


X = {"x": (2, 5, D)}
CASES = {
    "SkipLayerNormalization": lambda: _model(
        "SkipLayerNormalization", {**X, "skip": (2, 5, D)}, {"gamma": _vec(), "beta": _vec(), "bias": _vec()},
        ["x", "skip", "gamma", "beta", "bias"], ["y", "", "", "sum"], epsilon=1e-5),
    "SkipLayerNormalization without beta and bias": lambda: _model(
        "SkipLayerNormalization", {**X, "skip": (2, 5, D)}, {"gamma": _vec()}, ["x", "skip", "gamma"], ["y"]),
    "SkipSimplifiedLayerNormalization": lambda: _model(
        "SkipSimplifiedLayerNormalization", {**X, "skip": (2, 5, D)}, {"gamma": _vec(), "bias": _vec()},
        ["x", "skip", "gamma", "bias"], ["y"], epsilon=1e-6),
    "SimplifiedLayerNormalization": lambda: _model(
        "SimplifiedLayerNormalization", X, {"scale": _vec()}, ["x", "scale"], ["y"], domain="", epsilon=1e-6),
    "Gelu": lambda: _model("Gelu", X, {}, ["x"], ["y"]),
    "BiasGelu": lambda: _model("BiasGelu", X, {"bias": _vec()}, ["x", "bias"], ["y"]),
    "FastGelu": lambda: _model("FastGelu", X, {"bias": _vec()}, ["x", "bias"], ["y"]),
    "QuickGelu": lambda: _model("QuickGelu", X, {}, ["x"], ["y"], alpha=1.5),
    "FusedMatMul, scores": lambda: _model("FusedMatMul", {"q": (2, 4, 5, 8), "k": (2, 4, 6, 8)}, {}, ["q", "k"],
                                          ["y"], transB=1, alpha=0.35),
    "FusedMatMul, transposed A by a weight": lambda: _model(
        "FusedMatMul", {"a": (2, 8, 5)}, {"w": np.ascontiguousarray(_table(8)[:, :7])}, ["a", "w"], ["y"], transA=1),
}

F, I = TensorProto.FLOAT, TensorProto.INT32
B, S, HEADS = 2, 5, 4


def _typed_model(op: str, inputs: dict[str, tuple[tuple, int]], inits: dict[str, np.ndarray], order: list[str],
                 outputs: list[str], **attrs):
    """One com.microsoft node with typed graph inputs (name -> (shape, element type)) and initializers."""
    node = helper.make_node(op, order, outputs, domain="com.microsoft", **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, t, list(shape)) for n, (shape, t) in inputs.items()],
        [helper.make_tensor_value_info(o, F if k != 1 or op != "EmbedLayerNormalization" else I, None)
         for k, o in enumerate(outputs) if o],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = IR_VERSION
    return model


def _weights(cols: int = 3 * D) -> dict[str, np.ndarray]:
    return {"w": (R.standard_normal((D, cols)) / np.sqrt(D)).astype(np.float32),
            "b": (R.standard_normal(cols) * 0.1).astype(np.float32)}


XS = {"x": ((B, S, D), F)}
#: com.microsoft Attention in each mask form, with a past state, a bias on the scores, unequal V size; and
#: EmbedLayerNormalization with and without segments, mask and position ids; inputs made by _attention_inputs
ATTENTION_CASES = {
    "Attention, 2-D mask": lambda: _typed_model("Attention", {**XS, "mask": ((B, S), I)}, _weights(),
                                                ["x", "w", "b", "mask"], ["y"], num_heads=HEADS),
    "Attention, lengths, causal": lambda: _typed_model("Attention", {**XS, "lens": ((B,), I)}, _weights(),
                                                       ["x", "w", "b", "lens"], ["y"], num_heads=HEADS,
                                                       unidirectional=1),
    "Attention, ends and starts": lambda: _typed_model("Attention", {**XS, "ends": ((2 * B,), I)}, _weights(),
                                                       ["x", "w", "b", "ends"], ["y"], num_heads=HEADS),
    "Attention, 3-D mask and a bias": lambda: _typed_model(
        "Attention", {**XS, "mask": ((B, S, S), I), "rel": ((1, HEADS, S, S), F)}, _weights(),
        ["x", "w", "b", "mask", "", "rel"], ["y"], num_heads=HEADS, scale=0.2),
    "Attention, past and present": lambda: _typed_model(
        "Attention", {**XS, "mask": ((B, S + 3), I), "past": ((2, B, HEADS, 3, D // HEADS), F)}, _weights(),
        ["x", "w", "b", "mask", "past"], ["y", "present"], num_heads=HEADS, unidirectional=1),
    "Attention, smaller V": lambda: _typed_model(
        "Attention", XS, _weights(2 * D + 24), ["x", "w", "b"], ["y"], num_heads=HEADS, qkv_hidden_sizes=[D, D, 24]),
    "EmbedLayerNormalization": lambda: _typed_model(
        "EmbedLayerNormalization", {"ids": ((B, S), I), "seg": ((B, S), I), "mask": ((B, S), I)},
        {"word": _table(30), "pos": _table(16), "segt": _table(2), "gamma": _vec(), "beta": _vec()},
        ["ids", "seg", "word", "pos", "segt", "gamma", "beta", "mask"], ["y", "mask_index", "sum"], epsilon=1e-5),
    "EmbedLayerNormalization, position ids, no segments": lambda: _typed_model(
        "EmbedLayerNormalization", {"ids": ((B, S), I), "pos_ids": ((B, S), I)},
        {"word": _table(30), "pos": _table(16), "gamma": _vec(), "beta": _vec()},
        ["ids", "", "word", "pos", "", "gamma", "beta", "", "pos_ids"], ["y", "mask_index"]),
}


def _table(rows: int) -> np.ndarray:
    return (R.standard_normal((rows, D)) * 0.5).astype(np.float32)


def _attention_inputs(model) -> dict[str, np.ndarray]:
    """Inputs in each input's valid range: 0/1 masks with a padded tail, lengths, ends then starts, ids."""
    out = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == F:
            out[vi.name] = R.standard_normal(shape).astype(np.float32)
        elif vi.name == "mask":
            m = (R.random(shape) > 0.3).astype(np.int32)
            m[..., 0] = 1
            m[0, ..., -1] = 0
            out[vi.name] = m
        elif vi.name == "lens":
            out[vi.name] = np.array([S, 2], np.int32)
        elif vi.name == "ends":
            out[vi.name] = np.array([S, 4, 0, 1], np.int32)  # ends of each sample, then starts
        elif vi.name == "seg":
            out[vi.name] = R.integers(0, 2, shape).astype(np.int32)
        elif vi.name == "pos_ids":
            out[vi.name] = R.integers(0, 16, shape).astype(np.int32)
        else:
            out[vi.name] = R.integers(0, 30, shape).astype(np.int32)
    return out


H, KVN, QN = 16, 2, 4  # head size, key/value heads, query heads of the GroupQueryAttention cases


def _rotary_caches(rows: int = 16) -> dict[str, np.ndarray]:
    angles = np.arange(rows)[:, None] / 10000 ** (np.arange(H // 2)[None, :] / (H // 2))
    return {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}


def _gqa(seq: int = 5, past: int = 0, packed: bool = False, lens=None, rotary: bool = False, **attrs):
    """GroupQueryAttention on [B, seq] new tokens after a cache of ``past``; ``lens`` the valid lengths (default:
    all of them), given as seqlens_k = length - 1."""
    total = past + seq
    lens = [total] * B if lens is None else lens
    inputs = {"qkv": ((B, seq, (QN + 2 * KVN) * H), F)} if packed else {
        "q": ((B, seq, QN * H), F), "k": ((B, seq, KVN * H), F), "v": ((B, seq, KVN * H), F)}
    order = ["qkv", "", ""] if packed else ["q", "k", "v"]
    if past:
        inputs.update({"pk": ((B, KVN, past, H), F), "pv": ((B, KVN, past, H), F)})
        order += ["pk", "pv"]
    else:
        order += ["", ""]
    inits = {"seqlens": np.array(lens, np.int32) - 1, "total": np.array(total, np.int32)}
    order += ["seqlens", "total"]
    if rotary:
        inits.update(_rotary_caches())
        order += ["cos", "sin"]
    return _typed_model("GroupQueryAttention", inputs, inits, order, ["y", "present_k", "present_v"],
                        num_heads=QN, kv_num_heads=KVN, do_rotary=int(rotary), **attrs)


GQA_CASES = {
    "GroupQueryAttention, prompt": lambda: _gqa(),
    "GroupQueryAttention, a step after a cache, rotary": lambda: _gqa(seq=1, past=3, rotary=True),
    "GroupQueryAttention, packed, interleaved rotary, softcap": lambda: _gqa(packed=True, rotary=True,
                                                                            rotary_interleaved=1, softcap=2.0),
    "GroupQueryAttention, local window, scale": lambda: _gqa(seq=6, local_window_size=3, scale=0.3),
    "RotaryEmbedding, position ids": lambda: _typed_model(
        "RotaryEmbedding", {"x": ((B, S, QN * H), F), "pos": ((B, S), TensorProto.INT64)}, _rotary_caches(),
        ["x", "pos", "cos", "sin"], ["y"], num_heads=QN),
    "RotaryEmbedding, a start position, interleaved": lambda: _typed_model(
        "RotaryEmbedding", {"x": ((B, QN, S, H), F)}, {"pos": np.array([3], np.int64), **_rotary_caches()},
        ["x", "pos", "cos", "sin"], ["y"], interleaved=1),
}


@pytest.mark.parametrize("case", list(GQA_CASES))
def test_onnxruntimes_llm_attention_matches_it(case: str) -> None:
    model = GQA_CASES[case]()
    inputs = {vi.name: (R.standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.float32)
                        if vi.type.tensor_type.elem_type == F else
                        np.tile(np.arange(S, dtype=np.int64), (B, 1)) + 2)
              for vi in model.graph.input}
    for got, want in zip(_run(model, inputs), run_onnxruntime(model, inputs)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("kw", [{"seq": 8}, {"seq": 1, "past": 8}, {"seq": 8, "bits": 4, "accuracy_level": 0}],
                         ids=["prompt", "a step after a cache", "int4 weights"])
def test_a_llama_as_onnxruntimes_model_builder_writes_it_matches_it(kw: dict) -> None:
    """A 2-layer Llama-style decoder with the builder's ops (GroupQueryAttention with rotary and a cache,
    (Skip)SimplifiedLayerNormalization, MatMulNBits; tests/_llm_models.py): logits and the new cache as
    onnxruntime's (at accuracy_level 0: at the builder's 4, onnxruntime quantizes activations to int8)."""
    model = make_llama(**kw)
    inputs = llm_inputs(model)
    for got, want in zip(_run(model, inputs), run_onnxruntime(model, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6 * np.abs(want).max())


def test_group_query_attention_masks_right_padding() -> None:
    """A prompt whose second sample has 3 tokens of 5: its keys 3 and 4 are masked; the valid queries' outputs
    equal onnxruntime's (what a padded query gives is not used)."""
    model = _gqa(lens=[5, 3])
    inputs = {vi.name: R.standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.float32)
              for vi in model.graph.input}
    got, want = _run(model, inputs), run_onnxruntime(model, inputs)
    np.testing.assert_allclose(got[0][0], want[0][0], rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got[0][1, :3], want[0][1, :3], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("case", list(ATTENTION_CASES))
def test_onnxruntimes_attention_and_embeddings_match_it(case: str) -> None:
    model = ATTENTION_CASES[case]()
    inputs = _attention_inputs(model)
    for got, want in zip(_run(model, inputs), run_onnxruntime(model, inputs)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_an_attention_form_onnxruntime_has_and_autosched_does_not_is_named() -> None:
    model = _typed_model("Attention", {**XS, "mask": ((B, 1, S, S), I)}, _weights(), ["x", "w", "b", "mask"], ["y"],
                         num_heads=HEADS)
    with pytest.raises(OnnxImportError, match=r"mask_index of shape \[2, 1, 5, 5\] is not one of the supported"):
        from_onnx(model)
    model = _typed_model("Attention", XS, _weights(), ["x", "w", "b"], ["y"], num_heads=HEADS, do_rotary=1)
    with pytest.raises(OnnxImportError, match="do_rotary=1 is not supported"):
        from_onnx(model)


#: the converters these tests cover, as the importer names them (domain.op_type outside the default domain)
CONTRIB_OPS = {"SimplifiedLayerNormalization"} | {f"com.microsoft.{case.split()[0].rstrip(',')}"
                                                   for case in [*CASES, *ATTENTION_CASES, *GQA_CASES]
                                                   if case != "SimplifiedLayerNormalization"}


def _run(model, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    mod, params = from_onnx(model)
    m = GraphModule(*relay.build(mod, target="llvm", params=params))
    m.set_input(**inputs)
    m.run()
    return [np.asarray(m.get_output(i)) for i in range(len(model.graph.output))]


@pytest.mark.parametrize("case", list(CASES))
def test_fused_transformer_ops_match_onnxruntime(case: str) -> None:
    model = CASES[case]()
    inputs = {vi.name: (R.standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim]) * 2
                        ).astype(np.float32) for vi in model.graph.input}
    for got, want in zip(_run(model, inputs), run_onnxruntime(model, inputs)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_a_used_training_statistic_is_refused() -> None:
    model = _model("SkipLayerNormalization", {**X, "skip": (2, 5, D)}, {"gamma": _vec()}, ["x", "skip", "gamma"],
                   ["y", "mean"])
    with pytest.raises(OnnxImportError, match=r"SkipLayerNormalization.*output 1 \('mean'"):
        from_onnx(model)


def test_an_encoder_fused_by_onnxruntimes_transformer_optimizer_matches_it(tmp_path, caplog) -> None:
    """``optimize_model(model_type="bert")`` fuses the residual adds and layer norms into SkipLayerNormalization
    and the bias and GELU into BiasGelu; the fused model runs and equals onnxruntime's outputs."""
    from onnxruntime.transformers.optimizer import optimize_model

    caplog.set_level(logging.ERROR, logger="onnxruntime.transformers")
    onnx.save(make_encoder(layers=2, d_model=64, heads=4, seq=16, vocab=100), tmp_path / "enc.onnx")
    optimize_model(str(tmp_path / "enc.onnx"), model_type="bert", num_heads=4, hidden_size=64,
                   opt_level=0).save_model_to_file(str(tmp_path / "enc_fused.onnx"))
    model = onnx.load(tmp_path / "enc_fused.onnx")
    assert {"SkipLayerNormalization", "BiasGelu"} <= {n.op_type for n in model.graph.node if n.domain}
    inputs = token_inputs(model, 16, 100)
    np.testing.assert_allclose(_run(model, inputs)[0], run_onnxruntime(model, inputs)[0], rtol=1e-5, atol=1e-5)
