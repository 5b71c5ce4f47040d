"""ONNX converters of onnxruntime's fused transformer ops, as ``onnxruntime.transformers.optimizer`` writes them
into BERT- and GPT-style models: com.microsoft Attention, EmbedLayerNormalization, SkipLayerNormalization,
SkipSimplifiedLayerNormalization, BiasGelu, FastGelu, Gelu and QuickGelu, and SimplifiedLayerNormalization
(onnxruntime's, in the default domain).
Each is the composition of default-domain ops it fuses, converted by their converters, so it fuses as they do."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import register
from autosched.relay.ir.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    import onnx

_MS = "com.microsoft."


def _biased(g: _GraphConverter, node: onnx.NodeProto, i: int) -> Expr:
    """Input 0 plus the optional bias at input ``i``."""
    x = g.tensor(node.input[0])
    bias = g.optional(node, i)
    return x if bias is None else relay_op.add(x, g.tensor(bias))


def _skip_norm(simplified: bool):
    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Expr | None]:
        for i in (1, 2):
            if len(node.output) > i and node.output[i] and node.output[i] in g.used:
                g._fail(f"output {i} ({node.output[i]!r}, a training statistic) is used; it is not supported")
        total = relay_op.add(g.tensor(node.input[0]), g.tensor(node.input[1]))
        bias = g.optional(node, 3 if simplified else 4)
        if bias is not None:
            total = relay_op.add(total, g.tensor(bias))
        eps = {"epsilon": float(attrs.get("epsilon", 1e-12))}
        if simplified:
            out = g.convert_as(node, "RMSNormalization", [total, node.input[2]], {"axis": -1, **eps})
        else:
            beta = g.optional(node, 3)
            out = g.convert_as(node, "LayerNormalization", [total, node.input[2]] + ([beta] if beta else []),
                               {"axis": -1, **eps})
        return [out, None, None, total]

    name = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
    convert.__name__ = f"_{name}"
    convert.__doc__ = (f"{name}: {'RMS' if simplified else 'layer'} normalisation of input + skip (+ bias) over the "
                       "last axis; the sum is output 3, the training statistics (outputs 1, 2) are refused if used.")
    return convert


register(_MS + "SkipLayerNormalization")(_skip_norm(simplified=False))
register(_MS + "SkipSimplifiedLayerNormalization")(_skip_norm(simplified=True))


@register("SimplifiedLayerNormalization")
def _simplified_layer_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """onnxruntime's RMS normalisation (in the default domain): RMSNormalization over the axes from ``axis``."""
    if len(node.output) > 1 and node.output[1] and node.output[1] in g.used:
        g._fail(f"output 1 ({node.output[1]!r}, inv_std_var) is used; it is not supported")
    return g.convert_as(node, "RMSNormalization", list(node.input[:2]),
                        {"axis": int(attrs.get("axis", -1)), "epsilon": float(attrs.get("epsilon", 1e-5))})


@register(_MS + "Gelu", _MS + "BiasGelu")
def _gelu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """GELU by erf of input 0 (plus BiasGelu's bias)."""
    return g.convert_as(node, "Gelu", [_biased(g, node, 1)], {"approximate": "none"})


@register(_MS + "FastGelu")
def _fast_gelu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """GELU's tanh approximation of input 0 plus the optional bias."""
    return g.convert_as(node, "Gelu", [_biased(g, node, 1)], {"approximate": "tanh"})


@register(_MS + "QuickGelu")
def _quick_gelu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x sigmoid(alpha x), alpha 1.702 by default (CLIP's activation)."""
    x = g.tensor(node.input[0])
    alpha = relay_ir.const(np.array(attrs.get("alpha", 1.702), dtype=g.dtype(node.input[0])))
    return relay_op.multiply(x, relay_op.sigmoid(relay_op.multiply(x, alpha)))


def _additive_mask(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, batch: int, seq: int, past: int,
                   dtype: str) -> Expr | None:
    """onnxruntime's masks as one float bias added to the scores ([batch or 1, 1, seq or 1, total]):
    ``mask_filter_value`` (-10000) where ``mask_index`` masks a key (a 2-D raw 0/1 mask, 3-D per query, 1-D
    valid lengths, or 1-D ends then starts) and again past the causal frontier with ``unidirectional``, as
    onnxruntime adds them (a fully masked row averages its values, as there)."""
    total = past + seq
    fill = float(attrs.get("mask_filter_value", -10000.0))
    keys = relay_ir.const(np.arange(total, dtype=np.int32).reshape(1, total))
    name = g.optional(node, 3)
    bias = None
    if name is not None:
        shape = tuple(g.shape(name))
        m = relay_op.cast(g.tensor(name), "int32")
        if shape in ((batch, total), (batch, seq, total)):  # 0/1 masks: a key takes part where the mask is > 0
            allowed = relay_op.reshape(relay_op.compare("greater", m, relay_ir.const(np.int32(0))),
                                       (batch, 1, seq if len(shape) == 3 else 1, total))
        elif shape == (batch,):
            allowed = relay_op.compare("less", keys, relay_op.reshape(m, (batch, 1)))
            allowed = relay_op.reshape(allowed, (batch, 1, 1, total))
        elif shape == (2 * batch,):
            ends = relay_op.strided_slice(m, begin=[0], end=[batch], strides=[1], axes=[0])
            starts = relay_op.strided_slice(m, begin=[batch], end=[2 * batch], strides=[1], axes=[0])
            allowed = relay_op.compare("logical_and",
                                       relay_op.compare("less", keys, relay_op.reshape(ends, (batch, 1))),
                                       relay_op.compare("greater_equal", keys, relay_op.reshape(starts, (batch, 1))))
            allowed = relay_op.reshape(allowed, (batch, 1, 1, total))
        else:
            g._fail(f"mask_index of shape {list(shape)} is not one of the supported forms: [batch] lengths, "
                    f"[2 * batch] ends and starts, [batch, total] or [batch, seq, total] 0/1 masks "
                    f"(batch {batch}, seq {seq}, total {total})")
        bias = relay_op.where(allowed, relay_ir.const(np.zeros((), dtype)), relay_ir.const(np.array(fill, dtype)))
    if int(attrs.get("unidirectional", 0)):
        future = np.arange(total)[None, :] > np.arange(seq)[:, None] + past
        causal = relay_ir.const(np.where(future, fill, 0).astype(dtype).reshape(1, 1, seq, total))
        bias = causal if bias is None else relay_op.add(bias, causal)
    return bias


@register(_MS + "Attention")
def _ms_attention(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Expr | None]:
    """onnxruntime's BERT/GPT-2 attention: the input times the packed Q, K, V weights (+ bias), split into
    ``num_heads`` heads, scaled dot-product attention with ``mask_index``, ``unidirectional`` (as an additive
    ``mask_filter_value``), ``attention_bias`` and a ``past`` state [2, batch, heads, past, size] (``present``
    is it with this step's keys and values appended), as the default-domain Attention it generalises."""
    if int(attrs.get("do_rotary", 0)):
        g._fail("do_rotary=1 is not supported (export the rotary embedding as its own op)")
    if int(attrs.get("past_present_share_buffer", 0)):
        g._fail("past_present_share_buffer=1 (a preallocated cache written in place) is not supported")
    heads = int(attrs.get("num_heads", 0))
    xs = tuple(g.shape(node.input[0]))
    ws = tuple(g.shape(node.input[1]))
    if len(xs) != 3 or len(ws) != 2 or ws[0] != xs[2]:
        g._fail(f"input {list(xs)} and weights {list(ws)} must be [batch, seq, hidden] and [hidden, q+k+v sizes]")
    sizes = [int(s) for s in attrs.get("qkv_hidden_sizes", [])] or [ws[1] // 3] * 3
    if sum(sizes) != ws[1] or sizes[0] != sizes[1] or heads < 1 or any(s % heads for s in sizes):
        g._fail(f"qkv_hidden_sizes {sizes} must sum to the weights' {ws[1]} columns, with Q and K alike, each a "
                f"multiple of num_heads={heads}")
    batch, seq = xs[:2]
    dtype = g.dtype(node.input[0])
    qkv = g.convert_as(node, "MatMul", [node.input[0], node.input[1]], {})
    bias = g.optional(node, 2)
    if bias is not None:
        qkv = relay_op.add(qkv, g.tensor(bias))
    ends = np.cumsum([0] + sizes)
    q, k, v = (relay_op.strided_slice(qkv, begin=[int(ends[i])], end=[int(ends[i + 1])], strides=[1], axes=[2])
               for i in range(3))
    past_name = g.optional(node, 4)
    past_k = past_v = ""
    past = 0
    if past_name is not None:
        ps = tuple(g.shape(past_name))
        if len(ps) != 5 or ps[0] != 2 or ps[1] != batch or ps[2] != heads:
            g._fail(f"past of shape {list(ps)} is not [2, batch {batch}, heads {heads}, past, size]")
        past = ps[3]
        p = g.tensor(past_name)
        past_k, past_v = (relay_op.reshape(relay_op.strided_slice(p, begin=[i], end=[i + 1], strides=[1], axes=[0]),
                                           ps[1:]) for i in (0, 1))
    mask = _additive_mask(g, node, attrs, batch, seq, past, dtype)
    extra = g.optional(node, 5)
    if extra is not None:
        mask = g.tensor(extra) if mask is None else relay_op.add(mask, g.tensor(extra))
    sdpa = {"q_num_heads": heads, "kv_num_heads": heads}
    if "scale" in attrs:
        sdpa["scale"] = float(attrs["scale"])
    out, present_k, present_v, _ = g.convert_as(node, "Attention", [q, k, v, mask if mask is not None else "",
                                                                    past_k, past_v], sdpa)
    present = None
    if len(node.output) > 1 and node.output[1]:
        if sizes[0] != sizes[2]:
            g._fail(f"present needs K and V of one size, got qkv_hidden_sizes {sizes}")
        cache = (1, batch, heads, past + seq, sizes[0] // heads)
        present = relay_op.concatenate([relay_op.reshape(present_k, cache), relay_op.reshape(present_v, cache)], 0)
    return [out, present]


@register(_MS + "EmbedLayerNormalization")
def _embed_layer_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Expr | None]:
    """BERT's embeddings: word, position (``position_ids``, else 0..seq-1) and segment embeddings summed, then layer
    normalisation; outputs 1 and 2 are each sample's mask sum (``mask_index``, zeros without a mask) and the sum."""
    ids = node.input[0]
    batch, seq = tuple(g.shape(ids))
    total = relay_op.take(g.tensor(node.input[2]), relay_op.cast(g.tensor(ids), "int32"), axis=0)
    pos_ids = g.optional(node, 8)
    table = g.tensor(node.input[3])
    if pos_ids is not None:
        pos = relay_op.take(table, relay_op.cast(g.tensor(pos_ids), "int32"), axis=0)
    else:
        pos = relay_op.strided_slice(table, begin=[0], end=[seq], strides=[1], axes=[0])
    total = relay_op.add(total, pos)
    seg_ids, seg_table = g.optional(node, 1), g.optional(node, 4)
    if (seg_ids is None) != (seg_table is None):
        g._fail("segment_ids and segment_embedding must be given together")
    if seg_ids is not None:
        total = relay_op.add(total, relay_op.take(g.tensor(seg_table), relay_op.cast(g.tensor(seg_ids), "int32"),
                                                  axis=0))
    out = g.convert_as(node, "LayerNormalization", [total, node.input[5], node.input[6]],
                       {"axis": -1, "epsilon": float(attrs.get("epsilon", 1e-12))})
    mask = g.optional(node, 7)
    mask_index = None
    if len(node.output) > 1 and node.output[1]:
        if mask is None:
            mask_index = relay_ir.const(np.zeros(batch, np.int32))
        else:
            mask_index = relay_op.sum(relay_op.cast(g.tensor(mask), "int32"), axis=1)
    return [out, mask_index, total]


@register(_MS + "FusedMatMul")
def _fused_matmul(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """alpha * A @ B with A and B each transposed in their last two axes when ``transA`` / ``transB`` says: what
    onnxruntime's graph optimisation makes of a MatMul between Transposes and a Mul by a constant."""
    if int(attrs.get("transBatchA", 0)) or int(attrs.get("transBatchB", 0)):
        g._fail("transBatchA / transBatchB (batch axes moved into the matrix) are not supported")
    inputs = []
    for name, flag in ((node.input[0], "transA"), (node.input[1], "transB")):
        rank = len(g.shape(name))
        if int(attrs.get(flag, 0)) and rank >= 2:
            perm = tuple(range(rank - 2)) + (rank - 1, rank - 2)
            inputs.append(relay_op.transpose(g.tensor(name), perm))
        else:
            inputs.append(name)
    y = g.convert_as(node, "MatMul", inputs, {})
    alpha = float(attrs.get("alpha", 1.0))
    return y if alpha == 1.0 else relay_op.multiply(y, relay_ir.const(np.array(alpha, g.dtype(node.input[0]))))


def _positions(g: _GraphConverter, batch: int, seq: int, start: int) -> str:
    """A constant [batch, seq] of positions start .. start + seq - 1, named for ``convert_as``."""
    name = f"/positions/{batch}x{seq}+{start}"
    g.consts[name] = np.broadcast_to(np.arange(start, start + seq, dtype=np.int64), (batch, seq)).copy()
    return name


@register(_MS + "RotaryEmbedding")
def _ms_rotary(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """onnxruntime's rotary embedding, as the default-domain RotaryEmbedding: ``position_ids`` [batch, seq], or one
    value, the position of the first token (the rest follow it)."""
    if float(attrs.get("scale", 1.0)) != 1.0 or int(attrs.get("is_packed_batching", 0)):
        g._fail("scale != 1 and is_packed_batching are not supported")
    x, pos = node.input[0], node.input[1]
    shape = tuple(g.shape(x))
    batch, seq = (shape[0], shape[1]) if len(shape) == 3 else (shape[0], shape[2])
    if math.prod(g.shape(pos)) == 1:
        pos = _positions(g, batch, seq, int(np.asarray(g.value(pos, "a single position_ids")).reshape(-1)[0]))
    rot = {k: int(attrs[k]) for k in ("interleaved", "num_heads", "rotary_embedding_dim") if k in attrs}
    return g.convert_as(node, "RotaryEmbedding", [x, node.input[2], node.input[3], pos], rot)


@register(_MS + "GroupQueryAttention")
def _group_query_attention(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Expr]:
    """onnxruntime's decoder attention (LLM exports of its model builder): query heads sharing ``kv_num_heads``
    key/value heads, Q, K, V given apart or packed in the query, always causal, a KV cache (``past_key`` /
    ``past_value`` [batch, kv heads, past, size], held whole: the past is its full length) returned as ``present``,
    keys past ``seqlens_k`` + 1 masked (right padding), the rotary embedding (``do_rotary``, the positions following
    the past), ``softcap`` and ``local_window_size``; as the default-domain Attention."""
    if int(attrs.get("smooth_softmax", 0)):
        g._fail("smooth_softmax=1 is not supported")
    heads, kv_heads = int(attrs["num_heads"]), int(attrs["kv_num_heads"])
    qn = node.input[0]
    batch, seq, width = tuple(g.shape(qn))
    kn, vn = g.optional(node, 1), g.optional(node, 2)
    if kn is None:  # Q, K and V packed in the query's last axis
        size = width // (heads + 2 * kv_heads)
        cut = np.cumsum([0, heads * size, kv_heads * size, kv_heads * size])
        q, k, v = (relay_op.strided_slice(g.tensor(qn), begin=[int(cut[i])], end=[int(cut[i + 1])], strides=[1],
                                          axes=[2]) for i in range(3))
    else:
        size = width // heads
        q, k, v = g.tensor(qn), g.tensor(kn), g.tensor(vn)
    past_k, past_v = g.optional(node, 3), g.optional(node, 4)
    past = g.shape(past_k)[2] if past_k is not None else 0
    if past == 0:
        past_k = past_v = None
    total_name = g.optional(node, 6)
    if total_name is not None and g.is_const(total_name):
        total = int(np.asarray(g.value(total_name, "")).reshape(-1)[0])
        if total != past + seq:
            g._fail(f"total_sequence_length {total} is not the past's {past} plus the {seq} new tokens (a cache "
                    f"shared with present, written in place, is not supported)")
    if int(attrs.get("do_rotary", 0)):
        pos = _positions(g, batch, seq, past)
        rot = {"interleaved": int(attrs.get("rotary_interleaved", 0))}
        cos, sin = node.input[7], node.input[8]
        q = g.convert_as(node, "RotaryEmbedding", [q, cos, sin, pos], {**rot, "num_heads": heads})
        k = g.convert_as(node, "RotaryEmbedding", [k, cos, sin, pos], {**rot, "num_heads": kv_heads})
    mask = ""
    lens = g.optional(node, 5)
    if lens is not None:
        if g.is_const(lens) and (np.asarray(g.value(lens, "")) + 1 >= past + seq).all():
            pass  # no sample is padded
        else:
            keys = relay_ir.const(np.arange(past + seq, dtype=np.int32).reshape(1, 1, 1, -1))
            last = relay_op.reshape(relay_op.cast(g.tensor(lens), "int32"), (batch, 1, 1, 1))
            mask = relay_op.compare("less_equal", keys, last)
    sdpa: dict = {"q_num_heads": heads, "kv_num_heads": kv_heads, "is_causal": 1}
    if float(attrs.get("scale", 0.0)):
        sdpa["scale"] = float(attrs["scale"])
    if float(attrs.get("softcap", 0.0)):
        sdpa["softcap"] = float(attrs["softcap"])
    window = int(attrs.get("local_window_size", -1))
    if window > 0:
        sdpa["left_window_size"] = window - 1
    out, present_k, present_v, _ = g.convert_as(node, "Attention", [q, k, v, mask, past_k or "", past_v or ""], sdpa)
    return [out, present_k, present_v]
