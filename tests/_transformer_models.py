"""Transformer models built in memory with ``onnx.helper``, in the node patterns PyTorch's exporter writes at
opset 17 (seeded random weights, nothing downloaded).

``make_encoder``: a BERT-style encoder (token and position embeddings by Gather, a padding mask from an int64
``attention_mask``, post-norm layers of multi-head attention and a GELU feed-forward written with Erf, a pooler
and a classifier). ``make_decoder``: a GPT-style decoder (pre-norm layers, one fused QKV projection split in
three, a causal mask from Trilu, GELU's tanh form with Pow, a language-model head tied to the token embedding).
Both carry the shape arithmetic an export leaves in the graph (Shape, Gather, Unsqueeze, Concat, Range, Mod),
which a frontend folds at build time. Tests use small sizes; ``BERT_BASE`` and ``GPT2_SMALL`` give the real
shapes to the benchmarks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from _onnx_models import IR_VERSION, GraphBuilder

OPSET = 17
BERT_BASE = dict(layers=12, d_model=768, heads=12, seq=128, vocab=30522, ffn=3072)
GPT2_SMALL = dict(layers=12, d_model=768, heads=12, seq=64, vocab=50257, ffn=3072)


class _Builder(GraphBuilder):
    """GraphBuilder with the helpers of a transformer export."""

    def const(self, value: np.ndarray | float | int | Sequence[int], dtype: str | None = None) -> str:
        arr = np.asarray(value, dtype=dtype)
        return self.node("Constant", [], value=numpy_helper.from_array(arr))

    def linear(self, x: str, din: int, dout: int, name: str, std: float | None = None) -> str:
        """MatMul by a [din, dout] weight and Add of a bias, as an export of nn.Linear on a 3-D input."""
        std = std if std is not None else 1.0 / np.sqrt(din)
        w = (self.rng.standard_normal((din, dout)) * std).astype(np.float32)
        bias = (self.rng.standard_normal(dout) * 0.02).astype(np.float32)
        y = self.node("MatMul", [x, self.init(f"{name}.weight", w)], name=f"{name}.matmul")
        return self.node("Add", [y, self.init(f"{name}.bias", bias)], name=f"{name}.add")

    def layer_norm(self, x: str, d: int, name: str) -> str:
        g = (1.0 + self.rng.standard_normal(d) * 0.05).astype(np.float32)
        b = (self.rng.standard_normal(d) * 0.05).astype(np.float32)
        return self.node("LayerNormalization", [x, self.init(f"{name}.weight", g), self.init(f"{name}.bias", b)],
                         name=name, axis=-1, epsilon=1e-5)

    def dim(self, x: str, axis: int) -> str:
        """``x.shape[axis]`` as a 1-element int64 tensor (Shape, Gather, Unsqueeze), as exports compute it."""
        s = self.node("Shape", [x])
        g = self.node("Gather", [s, self.const(axis, "int64")], axis=0)
        return self.node("Unsqueeze", [g, self.const([0], "int64")])

    def heads(self, x: str, heads: int, dh: int) -> str:
        """[B, S, H*dh] -> [B, H, S, dh]: Reshape to a shape built from the input's own dims, then Transpose."""
        shape = self.node("Concat", [self.dim(x, 0), self.dim(x, 1), self.const([heads, dh], "int64")], axis=0)
        return self.node("Transpose", [self.node("Reshape", [x, shape])], perm=[0, 2, 1, 3])

    def merge_heads(self, x: str, d: int) -> str:
        """[B, H, S, dh] -> [B, S, H*dh]."""
        t = self.node("Transpose", [x], perm=[0, 2, 1, 3])
        shape = self.node("Concat", [self.dim(t, 0), self.dim(t, 1), self.const([d], "int64")], axis=0)
        return self.node("Reshape", [t, shape])

    def attention(self, q: str, k: str, v: str, heads: int, d: int, mask_add: str | None = None,
                  causal: str | None = None) -> str:
        """Scaled dot-product attention over [B, H, S, dh] heads; ``mask_add`` is added to the scores,
        ``causal`` (bool [S, S], True where attending is allowed) selects them with Where."""
        dh = d // heads
        kt = self.node("Transpose", [k], perm=[0, 1, 3, 2])
        scores = self.node("MatMul", [q, kt])
        scores = self.node("Div", [scores, self.node("Sqrt", [self.const(float(dh), "float32")])])
        if mask_add is not None:
            scores = self.node("Add", [scores, mask_add])
        if causal is not None:
            scores = self.node("Where", [causal, scores, self.const(np.finfo(np.float32).min, "float32")])
        probs = self.node("Softmax", [scores], axis=-1)
        return self.node("MatMul", [probs, v])

    def gelu_erf(self, x: str) -> str:
        """GELU as PyTorch exports it at opset 17: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        e = self.node("Erf", [self.node("Div", [x, self.const(1.4142135381698608, "float32")])])
        y = self.node("Mul", [x, self.node("Add", [e, self.const(1.0, "float32")])])
        return self.node("Mul", [y, self.const(0.5, "float32")])

    def gelu_tanh(self, x: str) -> str:
        """GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the cube by Pow."""
        cube = self.node("Pow", [x, self.const(3.0, "float32")])
        inner = self.node("Add", [x, self.node("Mul", [cube, self.const(0.044715, "float32")])])
        t = self.node("Tanh", [self.node("Mul", [inner, self.const(0.7978845608028654, "float32")])])
        y = self.node("Mul", [self.node("Mul", [x, self.const(0.5, "float32")]),
                              self.node("Add", [t, self.const(1.0, "float32")])])
        return y

    def embeddings(self, ids: str, vocab: int, d: int, max_pos: int, name: str) -> str:
        """Token embedding by Gather on the int64 ids plus a position embedding gathered at
        ``Range(0, S) mod max_pos`` (S read from the ids' shape)."""
        wte = self.init(f"{name}.word", (self.rng.standard_normal((vocab, d)) * 0.02).astype(np.float32))
        wpe = self.init(f"{name}.position", (self.rng.standard_normal((max_pos, d)) * 0.02).astype(np.float32))
        tok = self.node("Gather", [wte, ids], axis=0)
        seq = self.node("Squeeze", [self.dim(ids, 1), self.const([0], "int64")])
        pos = self.node("Range", [self.const(0, "int64"), seq, self.const(1, "int64")])
        pos = self.node("Mod", [pos, self.const(max_pos, "int64")])
        return self.node("Add", [tok, self.node("Gather", [wpe, pos], axis=0)]), wte

    def typed_model(self, inputs: Sequence[tuple[str, int, Sequence[int | str]]], outputs: Sequence[str],
                    name: str) -> onnx.ModelProto:
        ins = [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in inputs]
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        graph = helper.make_graph(self.nodes, name, ins, outs, initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="autosched-tests")
        model.ir_version = IR_VERSION
        inferred = onnx.shape_inference.infer_shapes(model)
        for vi, typed in zip(model.graph.output, inferred.graph.output):
            if typed.type.tensor_type.HasField("shape"):
                vi.CopyFrom(typed)
        onnx.checker.check_model(model, full_check=True)
        return model


def make_encoder(layers: int = 2, d_model: int = 64, heads: int = 4, seq: int | str = 16, vocab: int = 100,
                 ffn: int | None = None, num_classes: int = 2, seed: int = 0) -> onnx.ModelProto:
    """A BERT-style encoder: inputs ``input_ids`` and ``attention_mask`` (int64 [1, seq]; a string ``seq``
    leaves the sequence axis symbolic), output ``logits`` [1, num_classes]."""
    ffn = ffn or 4 * d_model
    b = _Builder(seed, opset=OPSET)
    x, _ = b.embeddings("input_ids", vocab, d_model, 512, "embeddings")
    x = b.layer_norm(x, d_model, "embeddings.norm")
    # the padding mask: (1 - mask) * -10000, shaped [B, 1, 1, S] to add to every head's scores
    m = b.node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    m = b.node("Mul", [b.node("Sub", [b.const(1.0, "float32"), m]), b.const(-10000.0, "float32")])
    mask_add = b.node("Unsqueeze", [m, b.const([1, 2], "int64")])
    for i in range(layers):
        p = f"encoder.layer.{i}"
        q = b.heads(b.linear(x, d_model, d_model, f"{p}.attn.q"), heads, d_model // heads)
        k = b.heads(b.linear(x, d_model, d_model, f"{p}.attn.k"), heads, d_model // heads)
        v = b.heads(b.linear(x, d_model, d_model, f"{p}.attn.v"), heads, d_model // heads)
        a = b.merge_heads(b.attention(q, k, v, heads, d_model, mask_add=mask_add), d_model)
        a = b.linear(a, d_model, d_model, f"{p}.attn.out")
        x = b.layer_norm(b.node("Add", [x, a]), d_model, f"{p}.norm1")
        h = b.gelu_erf(b.linear(x, d_model, ffn, f"{p}.ffn.up"))
        h = b.linear(h, ffn, d_model, f"{p}.ffn.down")
        x = b.layer_norm(b.node("Add", [x, h]), d_model, f"{p}.norm2")
    first = b.node("Gather", [x, b.const(0, "int64")], axis=1)  # [B, d]: the first token
    pooled = b.node("Tanh", [b.gemm_fc(first, d_model, d_model, name="pooler")])
    logits = b.gemm_fc(pooled, d_model, num_classes, name="classifier")
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))
    return b.typed_model([("input_ids", TensorProto.INT64, [1, seq]), ("attention_mask", TensorProto.INT64, [1, seq])],
                         ["logits"], "bert_encoder")


def make_decoder(layers: int = 2, d_model: int = 64, heads: int = 4, seq: int | str = 16, vocab: int = 100,
                 ffn: int | None = None, seed: int = 0) -> onnx.ModelProto:
    """A GPT-style decoder (cache-free forward): input ``input_ids`` (int64 [1, seq]), output ``logits``
    [1, seq, vocab]."""
    ffn = ffn or 4 * d_model
    b = _Builder(seed, opset=OPSET)
    x, wte = b.embeddings("input_ids", vocab, d_model, 1024, "transformer.w")
    # the causal mask: lower triangle of an [S, S] block of ones (Expand of a scalar to the ids' length)
    seq_dim = b.dim("input_ids", 1)
    square = b.node("Concat", [seq_dim, seq_dim], axis=0)
    ones = b.node("Expand", [b.const(1, "int64"), square])
    causal = b.node("Equal", [b.node("Trilu", [ones], upper=0), b.const(1, "int64")])
    dh = d_model // heads
    for i in range(layers):
        p = f"transformer.h.{i}"
        h = b.layer_norm(x, d_model, f"{p}.ln_1")
        qkv = b.linear(h, d_model, 3 * d_model, f"{p}.attn.c_attn")
        q, k, v = (b.heads(t, heads, dh) for t in _split3(b, qkv, d_model))
        a = b.merge_heads(b.attention(q, k, v, heads, d_model, causal=causal), d_model)
        x = b.node("Add", [x, b.linear(a, d_model, d_model, f"{p}.attn.c_proj")])
        h = b.layer_norm(x, d_model, f"{p}.ln_2")
        h = b.linear(b.gelu_tanh(b.linear(h, d_model, ffn, f"{p}.mlp.c_fc")), ffn, d_model, f"{p}.mlp.c_proj")
        x = b.node("Add", [x, h])
    x = b.layer_norm(x, d_model, "transformer.ln_f")
    wte_t = b.node("Transpose", [wte], perm=[1, 0])  # the head is tied to the token embedding
    b.nodes.append(helper.make_node("MatMul", [x, wte_t], ["logits"], name="lm_head"))
    return b.typed_model([("input_ids", TensorProto.INT64, [1, seq])], ["logits"], "gpt_decoder")


def _split3(b: _Builder, x: str, d: int) -> list[str]:
    """Split the fused QKV projection in three along the last axis (the sizes as an input, opset 13+)."""
    name = b.fresh("split")
    outs = [f"{name}_q", f"{name}_k", f"{name}_v"]
    b.nodes.append(helper.make_node("Split", [x, b.const([d, d, d], "int64")], outs, name=name, axis=-1))
    return outs


def token_inputs(model: onnx.ModelProto, seq: int, vocab: int, seed: int = 0, padding: int = 3
                 ) -> dict[str, np.ndarray]:
    """Seeded token ids (and, where the model takes one, an attention mask with ``padding`` padded positions
    at the end)."""
    rng = np.random.default_rng(seed)
    names = [i.name for i in model.graph.input]
    out = {"input_ids": rng.integers(0, vocab, size=(1, seq), dtype=np.int64)}
    if "attention_mask" in names:
        mask = np.ones((1, seq), np.int64)
        if padding:
            mask[:, seq - padding:] = 0
        out["attention_mask"] = mask
    return out
