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

    def embeddings(self, ids: str, vocab: int, d: int, max_pos: int, name: str, roberta: bool = False) -> str:
        """Token embedding by Gather on the int64 ids plus a position embedding gathered at
        ``Range(0, S) mod max_pos`` (S read from the ids' shape), or with ``roberta`` at RoBERTa's positions,
        computed from the ids at run time: padding tokens (id 1) at position 1, the others at 2, 3, ... by a
        CumSum of the real-token mask."""
        wte = self.init(f"{name}.word", (self.rng.standard_normal((vocab, d)) * 0.02).astype(np.float32))
        wpe = self.init(f"{name}.position", (self.rng.standard_normal((max_pos, d)) * 0.02).astype(np.float32))
        tok = self.node("Gather", [wte, ids], axis=0)
        if roberta:
            real = self.node("Cast", [self.node("Not", [self.node("Equal", [ids, self.const(1, "int64")])])],
                             to=TensorProto.INT64)
            pos = self.node("Mul", [self.node("CumSum", [real, self.const(1, "int64")]), real])
            pos = self.node("Add", [pos, self.const(1, "int64")])
            return self.node("Add", [tok, self.node("Gather", [wpe, pos], axis=0)]), wte
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
                 ffn: int | None = None, num_classes: int = 2, seed: int = 0, roberta: bool = False
                 ) -> onnx.ModelProto:
    """A BERT-style encoder: inputs ``input_ids`` and ``attention_mask`` (int64 [1, seq]; a string ``seq``
    leaves the sequence axis symbolic), output ``logits`` [1, num_classes]; ``roberta``: RoBERTa's position
    ids, counted over the non-padding tokens at run time."""
    ffn = ffn or 4 * d_model
    b = _Builder(seed, opset=OPSET)
    x, _ = b.embeddings("input_ids", vocab, d_model, 514 if roberta else 512, "embeddings", roberta=roberta)
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


# ------------------------------------------------------------------------------- one operator, typed inputs
_NP_TO_ONNX = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64, "bool": TensorProto.BOOL,
               "int32": TensorProto.INT32, "uint8": TensorProto.UINT8, "int8": TensorProto.INT8,
               "uint32": TensorProto.UINT32}
_BYTE_RANGES = {TensorProto.UINT8: ("uint8", 0, 256), TensorProto.INT8: ("int8", -128, 128),
                TensorProto.UINT32: ("uint32", 0, 1 << 32)}


def make_typed_op(op: str, inputs: Sequence[tuple[str, str, Sequence[int]]], *, initializers: dict | None = None,
                  extra_inputs: Sequence[str] = (), opset: int = 17, n_outputs: int = 1,
                  outputs: Sequence[str] | None = None, **attrs) -> onnx.ModelProto:
    """A model of one ``op`` node over graph inputs of any dtype (``(name, dtype, shape)``; int64 ids, bool masks;
    ``""`` for an omitted one), then ``extra_inputs`` (initializer names, ``""`` for an omitted one); the node's
    outputs ``outputs`` (``""`` for an omitted one; default ``n_outputs`` of them), their types from shape
    inference."""
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    outs = list(outputs) if outputs is not None else ["y"] if n_outputs == 1 else [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op, [n for n, _, _ in inputs] + list(extra_inputs), outs, name="node", **attrs)
    ins = [helper.make_tensor_value_info(n, _NP_TO_ONNX[dt], list(s)) for n, dt, s in inputs if n]
    graph = helper.make_graph([node], f"single_{op}", ins,
                              [helper.make_empty_tensor_value_info(o) for o in outs if o], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="autosched-tests")
    model.ir_version = IR_VERSION
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for vi, typed in zip(model.graph.output, inferred.graph.output):
        vi.CopyFrom(typed)
    onnx.checker.check_model(model, full_check=True)
    return model


def _after(op: str, const_inputs: dict[str, np.ndarray], opset: int = 17, **attrs) -> onnx.ModelProto:
    """``op`` on initializers only (evaluated at import), its result added to a float graph input ``x``."""
    b = _Builder(0, opset=opset)
    names = [b.init(k, v) for k, v in const_inputs.items()]
    folded = b.node(op, names, **attrs)
    folded = b.node("Cast", [folded], to=TensorProto.FLOAT)
    b.nodes.append(helper.make_node("Add", ["x", folded], ["y"], name="add"))
    return b.typed_model([("x", TensorProto.FLOAT, [2, 6])], ["y"], f"folded_{op}")


def _rng_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs of every graph input's type: normal floats, small ints (1..5, some negative), random bools."""
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        if tt.elem_type == TensorProto.FLOAT:
            out[vi.name] = rng.standard_normal(shape).astype(np.float32)
        elif tt.elem_type == TensorProto.BOOL:
            out[vi.name] = rng.random(shape) < 0.5
        elif tt.elem_type in _BYTE_RANGES:  # bit patterns: the type's whole range
            dtype, lo, hi = _BYTE_RANGES[tt.elem_type]
            out[vi.name] = rng.integers(lo, hi, size=shape).astype(dtype)
        else:
            v = rng.integers(1, 6, size=shape) * rng.choice([-1, 1], size=shape)
            out[vi.name] = v.astype(np.int64 if tt.elem_type == TensorProto.INT64 else np.int32)
    return out


def _f(*shape: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _i64(v) -> np.ndarray:
    return np.asarray(v, np.int64)


F, I, B = "float32", "int64", "bool"

#: name -> () -> (model, inputs): every operator of transformer exports, with its attributes and input forms
OP_CASES: dict = {
    "layer_norm_last_axis": lambda: make_typed_op(
        "LayerNormalization", [("x", F, (2, 5, 16))], initializers={"g": _f(16), "b": _f(16, seed=2)},
        extra_inputs=["g", "b"], epsilon=1e-5),
    "layer_norm_axis1_no_bias": lambda: make_typed_op(
        "LayerNormalization", [("x", F, (2, 3, 4))], initializers={"g": _f(3, 4)}, extra_inputs=["g"], axis=1,
        epsilon=1e-3),
    "erf": lambda: make_typed_op("Erf", [("x", F, (3, 7))]),
    "gelu_opset20": lambda: make_typed_op("Gelu", [("x", F, (3, 9))], opset=20),
    "gelu_tanh_opset20": lambda: make_typed_op("Gelu", [("x", F, (3, 9))], opset=20, approximate="tanh"),
    "pow_cube_constant": lambda: make_typed_op("Pow", [("x", F, (4, 5))], initializers={"e": np.float32(3.0)},
                                               extra_inputs=["e"]),
    "pow_int_exponent_tensor_base": lambda: make_typed_op("Pow", [("x", F, (4, 5))],
                                                          initializers={"e": _i64(2)}, extra_inputs=["e"]),
    "pow_tensors": lambda: make_typed_op("Pow", [("x", F, (4, 5)), ("e", F, (5,))]),
    "mod_int_floor": lambda: make_typed_op("Mod", [("a", I, (3, 5)), ("b", I, (5,))]),
    "mod_int_fmod": lambda: make_typed_op("Mod", [("a", I, (3, 5)), ("b", I, (3, 5))], fmod=1),
    "mod_float_fmod": lambda: make_typed_op("Mod", [("a", F, (3, 5))], initializers={"b": np.float32(0.7)},
                                            extra_inputs=["b"], fmod=1),
    "mod_folded_positions": lambda: _after("Mod", {"a": _i64(np.arange(12).reshape(2, 6)), "b": _i64(5)}),
    "where_broadcast": lambda: make_typed_op("Where", [("c", B, (4, 1)), ("x", F, (4, 6)), ("z", F, (6,))]),
    "where_constant_fill": lambda: make_typed_op("Where", [("c", B, (3, 4)), ("x", F, (2, 3, 4))],
                                                 initializers={"m": np.float32(np.finfo(np.float32).min)},
                                                 extra_inputs=["m"]),
    "expand_tensor": lambda: make_typed_op("Expand", [("x", F, (3, 1))], initializers={"s": _i64([2, 1, 4])},
                                           extra_inputs=["s"]),
    "expand_folded": lambda: _after("Expand", {"v": _i64(1), "s": _i64([2, 6])}),
    "range_folded": lambda: _after("Range", {"a": _i64(0), "n": _i64(6), "d": _i64(1)}),
    "equal_int": lambda: make_typed_op("Equal", [("a", I, (3, 4)), ("b", I, (4,))]),
    "less_float": lambda: make_typed_op("Less", [("a", F, (3, 4)), ("b", F, (3, 4))]),
    "greater_int": lambda: make_typed_op("Greater", [("a", I, (3, 4)), ("b", I, (1, 4))]),
    "less_or_equal": lambda: make_typed_op("LessOrEqual", [("a", I, (3, 4)), ("b", I, (3, 1))]),
    "greater_or_equal": lambda: make_typed_op("GreaterOrEqual", [("a", F, (3, 4)), ("b", F, (4,))]),
    "not": lambda: make_typed_op("Not", [("a", B, (3, 4))]),
    "and": lambda: make_typed_op("And", [("a", B, (3, 4)), ("b", B, (4,))]),
    "or": lambda: make_typed_op("Or", [("a", B, (3, 4)), ("b", B, (3, 4))]),
    "reduce_sum_axes_input": lambda: make_typed_op("ReduceSum", [("x", F, (2, 3, 5))],
                                                   initializers={"ax": _i64([1])}, extra_inputs=["ax"], opset=13),
    "reduce_sum_all_opset18": lambda: make_typed_op("ReduceSum", [("x", F, (2, 3, 5))], opset=18, keepdims=0),
    "reduce_mean_attr_keepdims": lambda: make_typed_op("ReduceMean", [("x", F, (2, 3, 5))], opset=13, axes=[-1]),
    "reduce_mean_axes_input_opset18": lambda: make_typed_op("ReduceMean", [("x", F, (2, 3, 5))], opset=18,
                                                            initializers={"ax": _i64([0, 2])}, extra_inputs=["ax"],
                                                            keepdims=0),
    "reduce_max_attr": lambda: make_typed_op("ReduceMax", [("x", F, (2, 3, 5))], opset=13, axes=[1], keepdims=0),
    "reduce_max_opset18_input": lambda: make_typed_op("ReduceMax", [("x", F, (2, 3, 5))], opset=18,
                                                      initializers={"ax": _i64([-1])}, extra_inputs=["ax"]),
    "reduce_min_all": lambda: make_typed_op("ReduceMin", [("x", F, (2, 3, 5))], opset=13),
    "reduce_min_no_axes_opset18": lambda: make_typed_op("ReduceMin", [("x", F, (2, 3))], opset=18, keepdims=0),
    "reciprocal": lambda: make_typed_op("Reciprocal", [("x", F, (3, 5))]),
    "cumsum_int64_positions": lambda: make_typed_op("CumSum", [("a", I, (2, 7))], initializers={"ax": _i64(1)},
                                                    extra_inputs=["ax"]),
    "cumsum_float_exclusive_reverse": lambda: make_typed_op("CumSum", [("x", F, (3, 5, 4))],
                                                            initializers={"ax": _i64(-2)}, extra_inputs=["ax"],
                                                            exclusive=1, reverse=1),
    "cumsum_exclusive": lambda: make_typed_op("CumSum", [("x", F, (6, 3))], initializers={"ax": _i64(0)},
                                              extra_inputs=["ax"], exclusive=1),
    "cumprod_reverse": lambda: make_typed_op("CumProd", [("x", F, (3, 6))], initializers={"ax": _i64(1)},
                                             extra_inputs=["ax"], reverse=1, opset=26),
    "cumprod_int64_exclusive": lambda: make_typed_op("CumProd", [("a", I, (2, 5))], initializers={"ax": _i64(-1)},
                                                     extra_inputs=["ax"], exclusive=1, opset=26),
    "center_crop_pad_some_axes": lambda: make_typed_op("CenterCropPad", [("x", F, (2, 7, 6))],
                                                       initializers={"s": _i64([4, 9])}, extra_inputs=["s"],
                                                       axes=[1, 2], opset=18),
    "center_crop_pad_all_axes": lambda: make_typed_op("CenterCropPad", [("x", F, (5, 8))],
                                                      initializers={"s": _i64([8, 3])}, extra_inputs=["s"], opset=18),
    "pad_negative_crops": lambda: make_typed_op("Pad", [("x", F, (4, 6))], initializers={"p": _i64([1, -2, -1, 3])},
                                                extra_inputs=["p"]),
    "reverse_sequence_time_first": lambda: make_typed_op("ReverseSequence", [("x", F, (6, 3, 2)), ("lens", I, (3,))],
                                                         time_axis=0, batch_axis=1),
    "reverse_sequence_batch_first": lambda: make_typed_op("ReverseSequence", [("x", F, (3, 5))],
                                                          initializers={"l": _i64([1, 5, 3])}, extra_inputs=["l"],
                                                          time_axis=1, batch_axis=0),
    "affine_grid_2d": lambda: make_typed_op("AffineGrid", [("t", F, (2, 2, 3))],
                                            initializers={"sz": _i64([2, 3, 5, 7])}, extra_inputs=["sz"], opset=20),
    "affine_grid_3d_align_corners": lambda: make_typed_op("AffineGrid", [("t", F, (2, 3, 4))],
                                                          initializers={"sz": _i64([2, 3, 3, 4, 5])},
                                                          extra_inputs=["sz"], align_corners=1, opset=20),
    "bit_shift_left_uint8": lambda: make_typed_op("BitShift", [("a", "uint8", (3, 8))],
                                                  initializers={"n": np.arange(8, dtype=np.uint8)}, extra_inputs=["n"],
                                                  direction="LEFT", opset=11),
    "bit_shift_right_uint32": lambda: make_typed_op("BitShift", [("a", "uint32", (2, 5)), ("b", "uint32", (2, 5))],
                                                    direction="RIGHT", opset=11),
    "bitwise_and_int32": lambda: make_typed_op("BitwiseAnd", [("a", "int32", (2, 6)), ("b", "int32", (2, 6))],
                                               opset=18),
    "bitwise_or_uint8_broadcast": lambda: make_typed_op("BitwiseOr", [("a", "uint8", (4, 6)), ("b", "uint8", (6,))],
                                                        opset=18),
    "bitwise_xor_int64": lambda: make_typed_op("BitwiseXor", [("a", I, (3, 4)), ("b", I, (3, 4))], opset=18),
    "bitwise_not_int8": lambda: make_typed_op("BitwiseNot", [("a", "int8", (5, 7))], opset=18),
    "trilu_upper": lambda: make_typed_op("Trilu", [("x", F, (2, 5, 6))]),
    "trilu_lower_k": lambda: make_typed_op("Trilu", [("x", F, (5, 6))], initializers={"k": _i64(-1)},
                                           extra_inputs=["k"], upper=0),
    "trilu_folded_causal_mask": lambda: _after("Trilu", {"o": np.ones((2, 6), np.int64)}, upper=0),
    "non_zero_folded": lambda: _after("NonZero", {"m": np.array([[0, 3, 0, 1, 2, 0], [5, 0, 0, 0, 7, 4]])}),
    "compress_folded": lambda: _after("Compress", {"v": np.arange(18).reshape(3, 6),
                                                   "c": np.array([True, False, True])}, axis=0),
    "unique_folded": lambda: _after("Unique", {"v": np.array([4, 1, 4, 9, 2, 7, 1, 3])}),
    "cast_int64_to_float": lambda: make_typed_op("Cast", [("a", I, (3, 4))], to=TensorProto.FLOAT),
    "cast_bool_to_float": lambda: make_typed_op("Cast", [("a", B, (3, 4))], to=TensorProto.FLOAT),
    "cast_float_to_int64": lambda: make_typed_op("Cast", [("x", F, (3, 4))], to=TensorProto.INT64),
    "cast_int64_to_bool": lambda: make_typed_op("Cast", [("a", I, (3, 4))], to=TensorProto.BOOL),
    "gather_embedding_int64_ids": lambda: _gather_embedding(),
    "gather_constant_index_axis1": lambda: make_typed_op("Gather", [("x", F, (2, 5, 4))],
                                                         initializers={"i": _i64(-5)}, extra_inputs=["i"], axis=1),
    "gather_constant_indices": lambda: make_typed_op("Gather", [("x", F, (6, 4))],
                                                     initializers={"i": _i64([[0, 5], [-1, 2]])},
                                                     extra_inputs=["i"]),
    # indices as graph inputs are seeded ints in [-5, 5]: in range (negatives from the end) on axes of 6
    "gather_elements_axis1": lambda: make_typed_op("GatherElements", [("x", F, (3, 6, 4)), ("i", I, (3, 5, 2))],
                                                   axis=1),
    "gather_elements_last_axis": lambda: make_typed_op("GatherElements", [("x", F, (4, 6)), ("i", I, (2, 3))],
                                                       axis=-1),
    "gather_nd_index_pairs": lambda: make_typed_op("GatherND", [("x", F, (6, 6, 3)), ("i", I, (2, 4, 2))]),
    "gather_nd_batch_dims": lambda: make_typed_op("GatherND", [("x", F, (2, 6, 4)), ("i", I, (2, 3, 1))],
                                                  batch_dims=1),
    "scatter_nd_rows": lambda: make_typed_op("ScatterND", [("x", F, (6, 4)), ("i", I, (2, 2, 1)),
                                                           ("u", F, (2, 2, 4))]),
    "scatter_nd_add_input_indices": lambda: make_typed_op("ScatterND", [("x", F, (6, 6, 2)), ("i", I, (3, 2)),
                                                                        ("u", F, (3, 2))], opset=16,
                                                          reduction="add"),
    "scatter_nd_folded_mask": lambda: _after("ScatterND", {"d": np.zeros((2, 6), np.int64),
                                                           "i": _i64([[0, 1], [1, 4], [1, 5]]), "u": _i64([7, 8, 9])}),
    "scatter_elements_axis1": lambda: make_typed_op("ScatterElements", [("x", F, (4, 6)), ("i", I, (4, 2)),
                                                                        ("u", F, (4, 2))], axis=1),
    "scatter_elements_add_partial": lambda: make_typed_op("ScatterElements", [("x", F, (5, 6)), ("i", I, (3, 4)),
                                                                              ("u", F, (3, 4))], opset=16, axis=1,
                                                          reduction="add"),
    "scatter_opset9": lambda: make_typed_op("Scatter", [("x", F, (6, 3)), ("i", I, (2, 3)), ("u", F, (2, 3))],
                                            opset=9),
    "one_hot_axis1": lambda: make_typed_op("OneHot", [("i", I, (3, 4))], initializers={
        "d": _i64(6), "v": np.array([0.0, 1.0], np.float32)}, extra_inputs=["d", "v"], axis=1),
    "one_hot_float_indices": lambda: make_typed_op("OneHot", [("x", F, (2, 5))], initializers={
        "d": np.float32(4), "v": np.array([-2.0, 3.5], np.float32)}, extra_inputs=["d", "v"]),
    "topk_largest_axis1": lambda: make_typed_op("TopK", [("x", F, (3, 7, 4))], initializers={"k": _i64([3])},
                                                extra_inputs=["k"], n_outputs=2, axis=1),
    "topk_smallest_ties": lambda: make_typed_op("TopK", [("x", F, (2, 6))], initializers={"k": _i64([4])},
                                                extra_inputs=["k"], n_outputs=2, largest=0),
    "topk_largest_ties_opset9_attr": lambda: make_typed_op("TopK", [("x", F, (2, 6))], n_outputs=2, opset=9, k=5),
    "rms_norm_opset23": lambda: make_typed_op("RMSNormalization", [("x", F, (2, 5, 16))],
                                              initializers={"g": _f(16)}, extra_inputs=["g"], opset=23,
                                              epsilon=1e-5),
    "rms_norm_two_axes": lambda: make_typed_op("RMSNormalization", [("x", F, (2, 3, 8))],
                                               initializers={"g": _f(3, 8)}, extra_inputs=["g"], opset=23, axis=1),
    # Attention (opset 23/24): MHA 4-D causal; GQA 3-D with a KV cache, a bool mask and every output; a float mask
    # with softcap and a scale (scores after the mask out); run-time padding lengths with the offset-aware causal
    # mask; a constant mask with a row that sees nothing (zeros, not NaN)
    "attention_mha_causal": lambda: make_typed_op(
        "Attention", [("q", F, (2, 4, 5, 8)), ("k", F, (2, 4, 7, 8)), ("v", F, (2, 4, 7, 6))], opset=23,
        is_causal=1),
    "attention_gqa_3d_cache_bool_mask": lambda: make_typed_op(
        "Attention", [("q", F, (2, 3, 32)), ("k", F, (2, 3, 16)), ("v", F, (2, 3, 16)), ("m", B, (3, 7)),
                      ("pk", F, (2, 2, 4, 8)), ("pv", F, (2, 2, 4, 8))], opset=23, is_causal=1, q_num_heads=4,
        kv_num_heads=2, n_outputs=4, qk_matmul_output_mode=3),
    "attention_float_mask_softcap_scale": lambda: make_typed_op(
        "Attention", [("q", F, (1, 2, 4, 8)), ("k", F, (1, 2, 6, 8)), ("v", F, (1, 2, 6, 8)), ("m", F, (4, 6))],
        opset=23, softcap=2.0, scale=0.3, outputs=["y", "", "", "qk"], qk_matmul_output_mode=2),
    "attention_nonpad_kv_seqlen_causal": lambda: make_typed_op(
        "Attention", [("q", F, (2, 2, 3, 8)), ("k", F, (2, 2, 6, 8)), ("v", F, (2, 2, 6, 8)), ("", B, ()),
                      ("", F, ()), ("", F, ()), ("n", I, (2,))], opset=24, is_causal=1),
    "attention_row_that_sees_nothing": lambda: make_typed_op(
        "Attention", [("q", F, (1, 2, 3, 8)), ("k", F, (1, 2, 4, 8)), ("v", F, (1, 2, 4, 8)), ("m", B, (1, 1, 3, 4))],
        opset=23, outputs=["y", "", "", "qk"], qk_matmul_output_mode=3),
    "rotary_embedding_4d": lambda: make_typed_op(
        "RotaryEmbedding", [("x", F, (2, 3, 5, 8)), ("c", F, (2, 5, 4)), ("s", F, (2, 5, 4))], opset=23),
    "rotary_embedding_3d_positions_interleaved_partial": lambda: _rotary_at_positions(),
    "cast_like_int64": lambda: make_typed_op("CastLike", [("x", F, (3, 4)), ("t", I, (1,))], opset=15),
    # recurrent layers, unrolled at import: X [seq 5, batch 2, input 3], hidden 4 (outputs Y, Y_h[, Y_c])
    "lstm_forward_bias_initial_states": lambda: make_typed_op(
        "LSTM", [("x", F, (5, 2, 3))], initializers=rnn_weights(4, 4, 3, 1, initial=2), n_outputs=3,
        extra_inputs=["w", "r", "b", "", "h0", "c0"], hidden_size=4),
    "lstm_bidirectional_peepholes_clip": lambda: make_typed_op(
        "LSTM", [("x", F, (5, 2, 3))], initializers={**rnn_weights(4, 4, 3, 2), "p": _f(2, 12, seed=7)},
        n_outputs=3, extra_inputs=["w", "r", "b", "", "", "", "p"], hidden_size=4, direction="bidirectional",
        clip=2.5),
    "lstm_reverse_no_bias": lambda: make_typed_op(
        "LSTM", [("x", F, (5, 2, 3))], initializers=rnn_weights(4, 4, 3, 1, bias=False), n_outputs=3,
        extra_inputs=["w", "r"], hidden_size=4, direction="reverse"),
    "gru_linear_before_reset_as_torch": lambda: make_typed_op(
        "GRU", [("x", F, (5, 2, 3))], initializers=rnn_weights(3, 4, 3, 1, initial=1), n_outputs=2,
        extra_inputs=["w", "r", "b", "", "h0"], hidden_size=4, linear_before_reset=1),
    "gru_bidirectional_reset_first": lambda: make_typed_op(
        "GRU", [("x", F, (5, 2, 3))], initializers=rnn_weights(3, 4, 3, 2), n_outputs=2,
        extra_inputs=["w", "r", "b"], hidden_size=4, direction="bidirectional"),
    "rnn_relu_sequence_lens": lambda: make_typed_op(
        "RNN", [("x", F, (5, 2, 3))], initializers={**rnn_weights(1, 4, 3, 1), "n": np.array([5, 5], np.int32)},
        n_outputs=2, extra_inputs=["w", "r", "b", "n"], hidden_size=4, activations=["Relu"]),
    "split_sizes_input_last_axis": lambda: make_typed_op("Split", [("x", F, (2, 9))],
                                                         initializers={"s": _i64([3, 3, 3])}, extra_inputs=["s"],
                                                         axis=-1, n_outputs=3),
}


def rnn_weights(gates: int, hidden: int, inputs: int, directions: int, bias: bool = True,
                 initial: int = 0) -> dict[str, np.ndarray]:
    """W, R (and B; ``initial`` initial states h0[, c0] for batch 2) of a recurrent layer, seeded, scaled so the
    gates are not saturated."""
    out = {"w": _f(directions, gates * hidden, inputs, seed=3) * 0.5,
           "r": _f(directions, gates * hidden, hidden, seed=4) * 0.5}
    if bias:
        out["b"] = _f(directions, 2 * gates * hidden, seed=5) * 0.5
    for k, name in enumerate(["h0", "c0"][:initial]):
        out[name] = _f(directions, 2, hidden, seed=6 + k)
    return out


def _rotary_at_positions() -> onnx.ModelProto:
    """RotaryEmbedding of a 3-D input (3 heads of 8), the first 4 features of each head rotated as interleaved
    pairs, the angles picked from constant caches of 10 positions by ``position_ids``, a graph input."""
    node = helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], name="node", num_heads=3, interleaved=1,
                            rotary_embedding_dim=4)
    g = helper.make_graph([node], "rotary_at_positions",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 24]),
                           helper.make_tensor_value_info("p", TensorProto.INT64, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 24])],
                          initializer=[numpy_helper.from_array(_f(10, 2), "c"),
                                       numpy_helper.from_array(_f(10, 2, seed=2), "s")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def _gather_embedding() -> onnx.ModelProto:
    """Gather(weight, ids): the token embedding, int64 ids as the graph input (negative ids count from the end)."""
    g = helper.make_graph([helper.make_node("Gather", ["w", "ids"], ["y"], name="node", axis=0)], "embedding",
                          [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
                          initializer=[numpy_helper.from_array(_f(10, 4), "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = IR_VERSION
    return model


def op_case(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The model of ``OP_CASES[name]`` and seeded inputs of its types (token ids within the embedding's rows)."""
    model = OP_CASES[name]()
    inputs = _rng_inputs(model)
    if name.startswith("gather_embedding"):
        inputs["ids"] = np.array([[0, 9, 3], [-1, 4, 4]], np.int64)
    if name.startswith("mod_int"):
        inputs = {k: v if k == "a" else np.where(v == 0, 3, v) for k, v in inputs.items()}
    if name == "pow_tensors":
        inputs["x"] = np.abs(inputs["x"]) + 0.1
    inputs.update(_FIXED_INPUTS.get(name, {}))
    return model, inputs


#: inputs that seeded values would not make valid: a scatter's indices without duplicates (where they land is
#: then undefined), float indices that are whole numbers and not, ties for TopK
_FIXED_INPUTS = {
    "bit_shift_right_uint32": {"a": np.array([[1, 2 ** 31, 7, 255, 4096]] * 2, np.uint32),
                               "b": np.array([[0, 31, 1, 4, 12], [3, 1, 2, 8, 0]], np.uint32)},
    "reverse_sequence_time_first": {"lens": _i64([6, 1, 4])},
    "attention_nonpad_kv_seqlen_causal": {"n": _i64([2, 6])},
    "attention_row_that_sees_nothing": {"m": np.array([[[[True, False, True, False], [False] * 4, [True] * 4]]])},
    "rotary_embedding_3d_positions_interleaved_partial": {"p": _i64([[0, 1, 2, 3, 4], [9, 7, 5, 3, 1]])},
    "scatter_nd_rows": {"i": _i64([[[1], [4]], [[-1], [0]]])},
    "scatter_elements_axis1": {"i": _i64([[0, 5], [-1, 2], [3, 4], [1, -6]])},
    "scatter_opset9": {"i": _i64([[4, 0, 1], [2, 5, 3]])},
    "topk_smallest_ties": {"x": np.array([[1, 3, 3, 2, 3, 0], [5, 5, 5, 5, 1, 2]], np.float32)},
    "topk_largest_ties_opset9_attr": {"x": np.array([[1, 3, 3, 2, 3, 0], [5, 5, 5, 5, 1, 2]], np.float32)},
    "one_hot_float_indices": {"x": np.array([[0.0, 2.0, -1.0, 1.7, 3.0], [2.9, -0.5, 1.0, 0.2, -4.0]], np.float32)},
}
