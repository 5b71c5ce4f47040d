"""A Llama-style decoder as onnxruntime's model builder (onnxruntime-genai) writes it, built with ``onnx.helper``
(seeded random weights): token embeddings, per layer SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization,
Q, K, V and output projections, com.microsoft GroupQueryAttention with the rotary embedding and a KV cache, a SiLU
gated MLP, and the LM head; the projections as MatMul (fp32) or com.microsoft MatMulNBits (``bits=4``: weights
quantized per block of 32 along K, with packed zero points). Inputs ``input_ids`` [1, seq], ``attention_mask``
[1, past + seq], ``past_key_values.{i}.key/value`` [1, kv heads, past, head size]; outputs ``logits`` and
``present.{i}.key/value``, as the builder names them.

Checked against a model the builder wrote from a HF LlamaForCausalLM (the op set and wiring match), used by
tests/test_relay_onnx_contrib.py and benchmarks/bench_llm.py.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from _onnx_models import IR_VERSION

#: the benchmark's sizes: 4 layers of hidden 512, 8 query heads on 2 key/value heads of 64
LLAMA_SMALL = {"layers": 4, "hidden": 512, "heads": 8, "kv_heads": 2, "ffn": 1536, "vocab": 1024}
_MS = "com.microsoft"


def _quantize_4bit(w: np.ndarray, block: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``w`` [K, N] as MatMulNBits' inputs: packed 4-bit values [N, blocks, block / 2], scales [N * blocks] and
    packed zero points, each block by its range."""
    k, n = w.shape
    blocks = -(-k // block)
    wt = np.pad(w.T, ((0, 0), (0, blocks * block - k))).reshape(n, blocks, block)
    lo, hi = np.minimum(wt.min(axis=2), 0), np.maximum(wt.max(axis=2), 0)
    scale = np.where(hi > lo, (hi - lo) / 15, 1).astype(np.float32)
    zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.round(wt / scale[..., None]) + zp[..., None], 0, 15).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    zp = np.pad(zp, ((0, 0), (0, blocks % 2)))
    return packed, scale.reshape(-1), (zp[:, 0::2] | (zp[:, 1::2] << 4)).astype(np.uint8).reshape(-1)


class _Llm:
    def __init__(self, seed: int, bits: int | None, accuracy_level: int):
        self.rng = np.random.default_rng(seed)
        self.bits, self.accuracy_level = bits, accuracy_level
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def init(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: int | list[str] = 1, domain: str = "", **attrs) -> list[str]:
        self.n += 1
        names = outputs if isinstance(outputs, list) else [f"{op}_{self.n}_{k}" for k in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=f"{op}_{self.n}", domain=domain, **attrs))
        return names

    def proj(self, x: str, k: int, n: int, name: str) -> str:
        w = (self.rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        if self.bits is None:
            return self.node("MatMul", [x, self.init(f"{name}.weight", w)])[0]
        packed, scales, zp = _quantize_4bit(w)
        ins = [x, self.init(f"{name}.qweight", packed), self.init(f"{name}.scales", scales),
               self.init(f"{name}.qzeros", zp)]
        return self.node("MatMulNBits", ins, domain=_MS, K=k, N=n, bits=4, block_size=32,
                         accuracy_level=self.accuracy_level)[0]

    def weight(self, name: str, d: int) -> str:
        return self.init(name, (1 + 0.1 * self.rng.standard_normal(d)).astype(np.float32))


def make_llama(layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2, ffn: int = 128,
               vocab: int = 100, seq: int = 8, past: int = 0, max_positions: int = 512, bits: int | None = None,
               accuracy_level: int = 4, seed: int = 0) -> onnx.ModelProto:
    """The decoder on ``seq`` new tokens after ``past`` cached ones (static shapes)."""
    size = hidden // heads
    b = _Llm(seed, bits, accuracy_level)
    # seqlens_k = sum(mask) - 1 and the total length, as the builder computes them
    total = b.node("ReduceSum", ["attention_mask", b.init("one_axis", np.array([1], np.int64))], keepdims=0)[0]
    seqlens = b.node("Cast", [b.node("Sub", [total, b.init("one", np.array(1, np.int64))])[0]], to=TensorProto.INT32)[0]
    length = b.node("Gather", [b.node("Shape", ["attention_mask"])[0], b.init("one_index", np.array(1, np.int64))],
                    axis=0)[0]
    total_len = b.node("Cast", [length], to=TensorProto.INT32)[0]
    angles = np.arange(max_positions)[:, None] / 10000 ** (np.arange(size // 2)[None, :] / (size // 2))
    cos, sin = b.init("cos_cache", np.cos(angles).astype(np.float32)), b.init("sin_cache",
                                                                              np.sin(angles).astype(np.float32))
    x = b.node("Gather", [b.init("embed_tokens.weight", (0.5 * b.rng.standard_normal((vocab, hidden))
                                                          ).astype(np.float32)), "input_ids"])[0]
    residual, pending = x, None
    outputs = []
    for i in range(layers):
        p = f"layers.{i}"
        if pending is None:
            h = b.node("SimplifiedLayerNormalization", [x, b.weight(f"{p}.input_layernorm.weight", hidden)],
                       axis=-1, epsilon=1e-6)[0]
        else:
            h, _, _, residual = b.node("SkipSimplifiedLayerNormalization",
                                       [pending, residual, b.weight(f"{p}.input_layernorm.weight", hidden)], 4,
                                       domain=_MS, epsilon=1e-6)
        q, k, v = (b.proj(h, hidden, n, f"{p}.attn.{w}") for w, n in (("q_proj", hidden), ("k_proj", kv_heads * size),
                                                                        ("v_proj", kv_heads * size)))
        present = [f"present.{i}.key", f"present.{i}.value"]
        attn = b.node("GroupQueryAttention", [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value",
                                              seqlens, total_len, cos, sin], [f"{p}.attn.out"] + present,
                      domain=_MS, num_heads=heads, kv_num_heads=kv_heads, do_rotary=1, scale=1 / np.sqrt(size))[0]
        o = b.proj(attn, hidden, hidden, f"{p}.attn.o_proj")
        h2, _, _, residual = b.node("SkipSimplifiedLayerNormalization",
                                    [o, residual, b.weight(f"{p}.post_attention_layernorm.weight", hidden)], 4,
                                    domain=_MS, epsilon=1e-6)
        gate = b.proj(h2, hidden, ffn, f"{p}.mlp.gate_proj")
        act = b.node("Mul", [gate, b.node("Sigmoid", [gate])[0]])[0]
        up = b.proj(h2, hidden, ffn, f"{p}.mlp.up_proj")
        pending = b.proj(b.node("Mul", [act, up])[0], ffn, hidden, f"{p}.mlp.down_proj")
        outputs += present
    h, _, _, _ = b.node("SkipSimplifiedLayerNormalization", [pending, residual, b.weight("norm.weight", hidden)], 4,
                        domain=_MS, epsilon=1e-6)
    logits = b.proj(h, hidden, vocab, "lm_head")
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))
    cache = [1, kv_heads, past, size]
    graph_inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq]),
                    helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, past + seq])]
    graph_inputs += [helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", TensorProto.FLOAT, cache)
                     for i in range(layers) for kv in ("key", "value")]
    graph_outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, seq, vocab])]
    graph_outputs += [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)  # (onnxruntime infers the past's
                      for o in outputs]                                              # length when a past is given)
    graph = helper.make_graph(b.nodes, "llama", graph_inputs, graph_outputs, initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(_MS, 1)])
    model.ir_version = IR_VERSION
    return model


def llm_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Token ids, an all-ones mask and a random cache, in the model's shapes."""
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.name == "input_ids":
            out[vi.name] = rng.integers(0, 100, shape).astype(np.int64)
        elif vi.name == "attention_mask":
            out[vi.name] = np.ones(shape, np.int64)
        else:
            out[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return out
