"""ONNX converters of the attention ops of opset 23 and later: ``Attention`` (torch.onnx writes
``scaled_dot_product_attention`` as one such node from opset 23), ``RotaryEmbedding`` (LLaMA-style position
rotation), ``TensorScatter`` (a KV cache's update, opset 24), ``CausalConvWithState`` (the stateful depthwise
convolution of Mamba and Gated DeltaNet layers, opset 27) and ``LinearAttention`` (their recurrence, opset 27,
unrolled over the tokens). Attention becomes the relay ops of the MatMul ->
Softmax -> MatMul pattern of older exports, so the scale and the masks fuse into the score batch_matmul's epilogue
and the kernels tune as those of any transformer. Masks known at import (causal, sliding window, constant
``attn_mask``) are one constant; masks computed at run time (a bool ``attn_mask`` input, ``nonpad_kv_seqlen``) are
comparisons that fuse the same way.
"""

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

_FLOATS = ("float32", "float16", "float64")


def _const(value, dtype: str) -> Expr:
    return relay_ir.const(np.asarray(value, dtype))


def _split_heads(x: Expr, shape: tuple[int, ...], heads: int) -> Expr:
    """[batch, seq, heads * size] -> [batch, heads, seq, size]."""
    b, s, hidden = shape
    return relay_op.transpose(relay_op.reshape(x, (b, s, heads, hidden // heads)), (0, 2, 1, 3))


def _as_4d(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1,) * (4 - len(shape)) + tuple(shape)


class _Masks:
    """Which scores take part: a constant (bool, broadcastable to [batch, heads, q, keys]) and run-time bool
    expressions, all 4-D; and a float bias (an ``attn_mask`` of floats) added to the scores."""

    def __init__(self, g: _GraphConverter, q_len: int, total: int):
        self.g, self.q_len, self.total = g, q_len, total
        self.static: np.ndarray | None = None
        self.dynamic: list[Expr] = []
        self.bias: Expr | None = None

    def allow(self, allowed) -> None:
        if isinstance(allowed, np.ndarray):
            allowed = allowed.reshape(_as_4d(allowed.shape))
            self.static = allowed if self.static is None else np.logical_and(self.static, allowed)
        else:
            self.dynamic.append(allowed)

    def positional(self, offset, causal: bool, left: int, right: int) -> None:
        """Causal and sliding-window limits aligned to the cache: query ``i`` sits at position ``p = i + offset``
        (``offset`` an int, a constant [batch, 1, 1, 1] array, or such a run-time int64 expression) and sees key
        ``j`` iff ``j <= p`` (causal) and ``p - left <= j <= p + right`` (a bound of -1: none)."""
        rel = np.arange(self.q_len)[:, None] - np.arange(self.total)[None, :]  # i - j
        # each limit as (sign, bound): allowed iff sign * (p - j) >= bound
        limits = ([(1, 0)] if causal else []) + ([(-1, -left)] if left >= 0 else []) + \
            ([(1, -right)] if right >= 0 else [])
        if not isinstance(offset, Expr):
            for sign, bound in limits:
                self.allow(sign * (rel + offset) >= bound)
            return
        p_minus_j = relay_op.add(_const(rel.reshape(1, 1, self.q_len, self.total), "int64"), offset)
        for sign, bound in limits:
            self.allow(relay_op.compare("greater_equal", relay_op.multiply(p_minus_j, _const(sign, "int64")),
                                        _const(bound, "int64")))

    def attn_mask(self, name: str, dtype: str) -> None:
        """ONNX's ``attn_mask``: bool (True takes part) or floats added to the scores, broadcastable to
        [batch, heads, q, keys]; a last axis shorter than the keys is padded as masked."""
        g = self.g
        shape = tuple(g.shape(name))
        mdtype = g.dtype(name)
        if len(shape) > 4 or not shape:
            g._fail(f"attn_mask of shape {list(shape)} does not broadcast to [batch, heads, q, keys]")
        if mdtype != "bool" and mdtype != dtype:
            g._fail(f"attn_mask of type {mdtype} is neither bool nor Q's type {dtype}")
        shape4 = _as_4d(shape)
        width = shape4[3]
        if width > self.total:
            g._fail(f"attn_mask's last axis ({width}) is longer than the {self.total} keys")
        if width < self.total:  # the keys past the mask take no part
            self.allow(np.arange(self.total) < width)
        pad = self.total - width
        if g.is_const(name):
            m = np.asarray(g.value(name, "attn_mask")).reshape(shape4)
            m = np.pad(m, [(0, 0)] * 3 + [(0, pad)])
            if mdtype == "bool":
                self.allow(m)
                return
            self.allow(~np.isneginf(m))  # -inf in a constant mask: masked, so a row of them gives zeros
            m = np.where(np.isneginf(m), 0, m).astype(dtype)
            if m.any():
                self.bias = relay_ir.const(m)
            return
        m = relay_op.reshape(g.tensor(name), shape4)
        if pad:
            fill = np.zeros(shape4[:3] + (pad,), mdtype)
            m = relay_op.concatenate([m, relay_ir.const(fill)], axis=3)
        if mdtype == "bool":
            self.allow(m)
        else:
            self.bias = m


@register("Attention")
def _attention(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> tuple[Expr, ...]:
    """Scaled dot-product attention (opset 23-25): 3-D inputs split into ``q_num_heads`` / ``kv_num_heads``
    heads, grouped-query heads by broadcasting K and V over each group (no copy), ``past_key`` / ``past_value``
    concatenated ahead of K and V, a bool or float ``attn_mask`` (a last axis shorter than the keys is padded
    as masked), ``is_causal`` and the sliding window aligned to the cache's offset, ``nonpad_kv_seqlen``,
    ``softcap`` and every ``qk_matmul_output_mode``. A query that sees no key gives zeros, as the spec says."""
    qn, kn, vn = node.input[:3]
    sq, sk, sv = (tuple(g.shape(n)) for n in (qn, kn, vn))
    rank = len(sq)
    if rank not in (3, 4) or len(sk) != rank or len(sv) != rank:
        g._fail(f"Q, K and V must all be 3-D or all 4-D, got shapes {list(sq)}, {list(sk)}, {list(sv)}")
    dtype = g.dtype(qn)
    if dtype not in _FLOATS:
        g._fail(f"Q of type {dtype} is not supported (float32, float16, float64)")
    q, k, v = g.tensor(qn), g.tensor(kn), g.tensor(vn)
    if rank == 3:
        if "q_num_heads" not in attrs or "kv_num_heads" not in attrs:
            g._fail("3-D Q, K and V need the q_num_heads and kv_num_heads attributes")
        qh, kvh = int(attrs["q_num_heads"]), int(attrs["kv_num_heads"])
        for name, shape, heads in (("Q", sq, qh), ("K", sk, kvh), ("V", sv, kvh)):
            if heads < 1 or shape[2] % heads:
                g._fail(f"{name}'s hidden size {shape[2]} is not a multiple of its {heads} heads")
        q, k, v = _split_heads(q, sq, qh), _split_heads(k, sk, kvh), _split_heads(v, sv, kvh)
        sq = (sq[0], qh, sq[1], sq[2] // qh)
        sk = (sk[0], kvh, sk[1], sk[2] // kvh)
        sv = (sv[0], kvh, sv[1], sv[2] // kvh)
    for a, got in (("q_num_heads", sq[1]), ("kv_num_heads", sk[1])):
        if a in attrs and int(attrs[a]) != got:
            g._fail(f"{a}={attrs[a]} differs from the {got} heads of the 4-D input")
    batch, qh, q_len, size = sq
    kvh, dv = sk[1], sv[3]
    if sk[0] != batch or sv[0] != batch or sv[1] != kvh or sv[2] != sk[2] or sk[3] != size:
        g._fail(f"Q {list(sq)}, K {list(sk)} and V {list(sv)} (as [batch, heads, seq, size]) do not match")
    if qh % kvh:
        g._fail(f"the {qh} query heads are not a multiple of the {kvh} key/value heads")

    past_k, past_v, nonpad = g.optional(node, 4), g.optional(node, 5), g.optional(node, 6)
    if (past_k is None) != (past_v is None):
        g._fail("past_key and past_value must be given together")
    if past_k is not None and nonpad is not None:
        g._fail("nonpad_kv_seqlen cannot be combined with past_key and past_value")
    past = 0
    if past_k is not None:
        pk, pv = tuple(g.shape(past_k)), tuple(g.shape(past_v))
        if len(pk) != 4 or pk[:2] != (batch, kvh) or pk[3] != size or pv != (batch, kvh, pk[2], dv):
            g._fail(f"past_key {list(pk)} and past_value {list(pv)} must be [batch {batch}, kv heads {kvh}, "
                    f"past, {size}] and [.., {dv}]")
        past = pk[2]
        k = relay_op.concatenate([g.tensor(past_k), k], axis=2)
        v = relay_op.concatenate([g.tensor(past_v), v], axis=2)
    total = past + sk[2]
    present_k, present_v = k, v

    # heads as [batch, kv heads, group] when query heads share key/value heads: K and V broadcast over the group
    reps = qh // kvh
    heads = (batch, kvh, reps) if reps > 1 else (batch, qh)

    if reps > 1:
        k, v = relay_op.reshape(k, (batch, kvh, 1, total, size)), relay_op.reshape(v, (batch, kvh, 1, total, dv))
    scale = float(attrs["scale"]) if "scale" in attrs else 1.0 / math.sqrt(size)
    # K as it is ([.., keys, size]): on CPUs AlterOpLayout gives it a transposed copy unless the queries are few
    scores = relay_op.nn.batch_matmul(q if reps == 1 else relay_op.reshape(q, heads + (q_len, size)), k,
                                      transpose_a=False, transpose_b=True)
    scores = raw = relay_op.multiply(scores, _const(scale, dtype))
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0:
        cap = _const(softcap, dtype)
        scores = relay_op.multiply(relay_op.tanh(relay_op.divide(scores, cap)), cap)
    capped = scores

    masks = _Masks(g, q_len, total)
    mask = g.optional(node, 3)
    if mask is not None:
        masks.attn_mask(mask, dtype)
    offset: int | np.ndarray | Expr = past
    if nonpad is not None:  # keys from each sample's length on are padding; the causal frontier ends there
        if g.is_const(nonpad):
            lens = np.asarray(g.value(nonpad, "nonpad_kv_seqlen"), np.int64).reshape(-1, 1, 1, 1)
            masks.allow(np.arange(total) < lens)
        else:
            lens = relay_op.reshape(relay_op.cast(g.tensor(nonpad), "int64"), (batch, 1, 1, 1))
            masks.allow(relay_op.compare("less", _const(np.arange(total), "int64"), lens))
        offset = relay_op.subtract(lens, _const(q_len, "int64")) if isinstance(lens, Expr) else lens - q_len
    masks.positional(offset, bool(int(attrs.get("is_causal", 0))), int(attrs.get("left_window_size", -1)),
                     int(attrs.get("right_window_size", -1)))

    def grouped(x: Expr) -> Expr:
        """A 4-D [b, h, q, keys] value (b and h possibly 1) in the heads layout."""
        b, h, r, c = g._relay_shape(x)
        if reps == 1:
            return x
        return relay_op.reshape(x, (b, kvh, reps, r, c) if h == qh else (b, 1, 1, r, c))

    if masks.bias is not None:
        scores = relay_op.add(scores, grouped(masks.bias))
    allowed = relay_ir.const(masks.static) if masks.static is not None else None
    for d in masks.dynamic:
        allowed = d if allowed is None else relay_op.compare("logical_and", allowed, d)
    with_bias = scores
    if allowed is not None:
        allowed = grouped(allowed)
        # masked scores at the lowest finite value, not -inf: a row's maximum stays finite
        with_bias = relay_op.where(allowed, scores, _const(-np.inf, dtype))
        scores = relay_op.where(allowed, scores, _const(np.finfo(dtype).min, dtype))

    precision = attrs.get("softmax_precision")
    soft_dtype = dtype
    if precision is not None:
        from onnx import helper

        soft_dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(int(precision))))
        if soft_dtype not in _FLOATS:
            g._fail(f"softmax_precision of type {soft_dtype} is not supported")
    probs = relay_op.nn.softmax(scores if soft_dtype == dtype else relay_op.cast(scores, soft_dtype), axis=-1)
    if soft_dtype != dtype:
        probs = relay_op.cast(probs, dtype)
    # a query that sees no key gives zeros, not the uniform weights of its all-masked row
    seen = None
    if masks.dynamic:
        last = len(g._relay_shape(allowed)) - 1
        seen = relay_op.make_call("max", [relay_op.cast(allowed, "int32")], axis=(last,), keepdims=True)
        seen = relay_op.compare("greater", seen, _const(0, "int32"))
    elif masks.static is not None and not masks.static.any(axis=-1).all():
        seen = grouped(relay_ir.const(masks.static.any(axis=-1, keepdims=True)))
    if seen is not None:
        probs = relay_op.where(seen, probs, _const(0, dtype))
    out = relay_op.nn.batch_matmul(probs, v, transpose_a=False, transpose_b=False)
    if reps > 1:
        out = relay_op.reshape(out, (batch, qh, q_len, dv))
    if rank == 3:
        out = relay_op.reshape(relay_op.transpose(out, (0, 2, 1, 3)), (batch, q_len, qh * dv))

    mode = int(attrs.get("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        g._fail(f"qk_matmul_output_mode={mode} is not one of 0, 1, 2, 3")
    qk = (raw, capped, with_bias, probs)[mode]
    if reps > 1:
        qk = relay_op.reshape(qk, (batch, qh, q_len, total))
    return out, present_k, present_v, qk


@register("RotaryEmbedding")
def _rotary_embedding(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Rotary position embedding (opset 23): the first ``rotary_embedding_dim`` features of each head (all by
    default) rotated in pairs by the angles of ``cos_cache`` / ``sin_cache`` ([batch, seq, dim / 2], or rows
    picked by ``position_ids``), pairs as the two halves or, with ``interleaved``, as even and odd features.
    The input is 4-D [batch, heads, seq, size] or 3-D [batch, seq, heads * size] with ``num_heads``; the
    rotation runs in that layout, without a transpose."""
    xn, cn, sn = node.input[:3]
    shape = tuple(g.shape(xn))
    dtype = g.dtype(xn)
    if dtype not in _FLOATS:
        g._fail(f"an input of type {dtype} is not supported (float32, float16, float64)")
    x = g.tensor(xn)
    if len(shape) == 3:
        heads = int(attrs.get("num_heads", 0))
        if heads < 1 or shape[2] % heads:
            g._fail(f"a 3-D input needs num_heads dividing its hidden size {shape[2]}, got {heads}")
        batch, seq, size = shape[0], shape[1], shape[2] // heads
        x = relay_op.reshape(x, (batch, seq, heads, size))
        angle_shape = (batch, seq, 1)  # the angles broadcast over the heads axis, after seq
    elif len(shape) == 4:
        batch, _, seq, size = shape
        angle_shape = (batch, 1, seq)
    else:
        g._fail(f"the input must be 3-D or 4-D, got shape {list(shape)}")
    dim = int(attrs.get("rotary_embedding_dim", 0)) or size
    if dim % 2 or dim > size:
        g._fail(f"rotary_embedding_dim {dim} must be even and at most the head size {size}")
    half = dim // 2
    pos = g.optional(node, 3)

    def angles(name: str) -> Expr:
        cshape = tuple(g.shape(name))
        want = (None, half) if pos is not None else (batch, seq, half)
        if len(cshape) != len(want) or any(w is not None and c != w for c, w in zip(cshape, want)):
            g._fail(f"{name!r} has shape {list(cshape)}, expected {['max_position' if w is None else w for w in want]}")
        if pos is not None and g.is_const(name) and g.is_const(pos):
            t = relay_ir.const(np.asarray(g.value(name, name))[np.asarray(g.value(pos, "position_ids"))])
        elif pos is not None:
            if tuple(g.shape(pos)) != (batch, seq):
                g._fail(f"position_ids has shape {list(g.shape(pos))}, expected {[batch, seq]}")
            t = relay_op.take(g.tensor(name), g.tensor(pos), axis=0)
        else:
            t = g.tensor(name)
        return relay_op.reshape(t, angle_shape + (half,))

    cos, sin = angles(cn), angles(sn)
    last = 3

    def features(begin: int, end: int, step: int = 1) -> Expr:
        return relay_op.strided_slice(x, begin=[begin], end=[end], strides=[step], axes=[last])

    interleaved = bool(int(attrs.get("interleaved", 0)))
    x1, x2 = (features(0, dim, 2), features(1, dim, 2)) if interleaved else (features(0, half), features(half, dim))
    real = relay_op.subtract(relay_op.multiply(cos, x1), relay_op.multiply(sin, x2))
    imag = relay_op.add(relay_op.multiply(sin, x1), relay_op.multiply(cos, x2))
    lead = g._relay_shape(x1)[:3]
    if interleaved:
        pairs = [relay_op.reshape(t, lead + (half, 1)) for t in (real, imag)]
        rotated = relay_op.reshape(relay_op.concatenate(pairs, axis=4), lead + (dim,))
    else:
        rotated = relay_op.concatenate([real, imag], axis=last)
    out = rotated if dim == size else relay_op.concatenate([rotated, features(dim, size)], axis=last)
    return relay_op.reshape(out, shape) if len(shape) == 3 else out


@register("TensorScatter")
def _tensor_scatter(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The cache with ``update`` written along ``axis`` from each batch row's write index (0 without
    ``write_indices``; modulo the cache length in ``circular`` mode): at each cache position, the update's element
    ``position - index`` where that is in the update, else the cache's own (a select, the indices read at run time)."""
    cache, update = node.input[0], node.input[1]
    cshape, ushape = g.shape(cache), g.shape(update)
    rank = len(cshape)
    axis = int(attrs.get("axis", -2))
    if not -rank <= axis < rank or axis % rank == 0:
        g._fail(f"axis {axis} must name a non-batch axis of the rank-{rank} cache")
    axis %= rank
    mode = attrs.get("mode", "linear")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("linear", "circular"):
        g._fail(f"mode {mode!r} is not one of linear, circular")
    if len(ushape) != rank or any(u != c for k, (u, c) in enumerate(zip(ushape, cshape)) if k != axis) or \
            ushape[axis] > cshape[axis]:
        g._fail(f"the update {list(ushape)} must be the cache's shape {list(cshape)} but along axis {axis} (at most "
                f"{cshape[axis]} long)")
    length, steps = cshape[axis], ushape[axis]
    pos_shape = [1] * rank
    pos_shape[axis] = length
    positions = _const(np.arange(length).reshape(pos_shape), "int64")
    where = g.optional(node, 2)
    if where is None:
        start: Expr = _const(0, "int64")
    else:
        start = relay_op.reshape(relay_op.cast(g.tensor(where), "int64"), [cshape[0]] + [1] * (rank - 1))
    offset = relay_op.subtract(positions, start)  # [B, 1.., L, 1..]: the update's element at each cache position
    if mode == "circular":
        offset = relay_op.mod(offset, _const(length, "int64"))
    inside = relay_op.logical_and(relay_op.compare("greater_equal", offset, _const(0, "int64")),
                                  relay_op.compare("less", offset, _const(steps, "int64")))
    clamped = relay_op.clip(offset, 0, steps - 1)
    index_shape = list(cshape)
    picked = relay_op.gather(g.tensor(update), axis, relay_op.broadcast_to(clamped, index_shape))
    return relay_op.where(relay_op.broadcast_to(inside, index_shape), picked, g.tensor(cache))


@register("CausalConvWithState")
def _causal_conv_with_state(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Expr]:
    """The depthwise 1-D convolution of [past_state (zeros without one), input] without padding (one output per
    input position), the bias added and SiLU applied when asked; the present state is the last k - 1 positions of
    that concatenation."""
    x, w = node.input[0], node.input[1]
    (batch, channels, length), wshape = g.shape(x), g.shape(w)
    if len(wshape) != 3 or wshape[0] != channels or wshape[1] != 1:
        g._fail(f"the weight {list(wshape)} must be [channels={channels}, 1, k] (depthwise)")
    k = wshape[2]
    if k < 2:
        g._fail("a kernel of 1 tap carries an empty state, and tensors here are never empty")
    activation = attrs.get("activation", "none")
    activation = activation.decode() if isinstance(activation, bytes) else activation
    if activation not in ("none", "silu", "swish"):
        g._fail(f"activation {activation!r} is not one of none, silu, swish")
    dtype = g.dtype(x)
    past = g.optional(node, 3)
    state = g.tensor(past) if past is not None else _const(np.zeros((batch, channels, k - 1)), dtype)
    padded = relay_op.concatenate([state, g.tensor(x)], axis=2)
    y = relay_op.nn.conv2d(relay_op.reshape(padded, (batch, channels, 1, length + k - 1)),
                           relay_op.reshape(g.tensor(w), (channels, 1, 1, k)), groups=channels, channels=channels,
                           kernel_size=(1, k))
    bias = g.optional(node, 2)
    if bias is not None:
        y = relay_op.nn.bias_add(y, g.tensor(bias), axis=1)
    y = relay_op.reshape(y, (batch, channels, length))
    if activation != "none":
        y = relay_op.multiply(y, relay_op.sigmoid(y))
    present = relay_op.strided_slice(padded, [length], [length + k - 1], axes=[2])
    return [y, present]


#: the most tokens a LinearAttention node's recurrence is unrolled over
LINEAR_ATTENTION_MAX_TOKENS = 1024


def _heads_first(g: _GraphConverter, e: Expr, batch: int, steps: int, heads: int, size: int) -> Expr:
    """[B, T, H * D] -> [B, H, T, D]."""
    return relay_op.transpose(relay_op.reshape(e, (batch, steps, heads, size)), (0, 2, 1, 3))


def _step(e: Expr, t: int) -> Expr:
    """Token t of [B, H, T, D], as [B, H, 1, D]."""
    return relay_op.strided_slice(e, [t], [t + 1], axes=[2])


@register("LinearAttention")
def _linear_attention(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> list[Expr]:
    """The recurrence token by token, as the spec states it: the state S [B, H_kv, d_k, d_v] decays by exp(g_t)
    ('gated', 'gated_delta'), v_t is replaced by beta_t (v_t - S^T k_t) ('delta', 'gated_delta'), S += k_t v_t^T,
    and o_t = scale q_t^T S, each query head reading its KV head's state (grouped-query). Unrolled over the T
    tokens (a decode step is one); the products are batch_matmuls."""
    q, k, v = node.input[0], node.input[1], node.input[2]
    if "q_num_heads" not in attrs or "kv_num_heads" not in attrs:
        g._fail("q_num_heads and kv_num_heads are required")
    hq, hkv = int(attrs["q_num_heads"]), int(attrs["kv_num_heads"])
    rule = attrs.get("update_rule", "gated_delta")
    rule = rule.decode() if isinstance(rule, bytes) else rule
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        g._fail(f"update_rule {rule!r} is not one of linear, gated, delta, gated_delta")
    if hq < 1 or hkv < 1 or hq % hkv:
        g._fail(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
    shapes = [g.shape(n) for n in (q, k, v)]
    if any(len(sh) != 3 for sh in shapes):
        g._fail(f"query, key and value must be [B, T, H * D], got {[list(sh) for sh in shapes]}")
    (batch, steps, qw), (_, _, kw), (_, _, vw) = shapes
    if qw % hq or kw != hkv * (qw // hq) or vw % hkv:
        g._fail(f"query {list(shapes[0])}, key {list(shapes[1])} and value {list(shapes[2])} do not split into "
                f"{hq} query and {hkv} key/value heads of one key size")
    if steps > LINEAR_ATTENTION_MAX_TOKENS:
        g._fail(f"{steps} tokens, more than the recurrence is unrolled over ({LINEAR_ATTENTION_MAX_TOKENS})")
    dk, dv, group = qw // hq, vw // hkv, hq // hkv
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    past, decay, beta = g.optional(node, 3), g.optional(node, 4), g.optional(node, 5)
    if gating != (decay is not None) or delta != (beta is not None):
        g._fail(f"update_rule {rule!r} {'needs' if gating else 'forbids'} decay and {'needs' if delta else 'forbids'}"
                " beta")
    dtype = g.dtype(q)
    scale = float(attrs.get("scale", 0.0)) or 1.0 / math.sqrt(dk)
    qs, ks, vs = (_heads_first(g, g.tensor(n), batch, steps, h, d) for n, h, d in ((q, hq, dk), (k, hkv, dk),
                                                                                   (v, hkv, dv)))
    if gating:
        width = g.shape(decay)[-1]
        if width not in (hkv, hkv * dk):
            g._fail(f"decay's last axis ({width}) must be kv_num_heads ({hkv}) or kv_num_heads * d_k ({hkv * dk})")
        gs = relay_op.exp(_heads_first(g, g.tensor(decay), batch, steps, hkv, width // hkv))
    if delta:
        width = g.shape(beta)[-1]
        if width not in (hkv, 1):
            g._fail(f"beta's last axis ({width}) must be kv_num_heads ({hkv}) or 1")
        bs = _heads_first(g, g.tensor(beta), batch, steps, width, 1)
    if past is not None:
        if tuple(g.shape(past)) != (batch, hkv, dk, dv):
            g._fail(f"past_state {list(g.shape(past))} must be [{batch}, {hkv}, {dk}, {dv}]")
        state = g.tensor(past)
    else:
        state = _const(np.zeros((batch, hkv, dk, dv)), dtype)
    flat = (batch * hkv, dk, dv)
    outs = []
    for t in range(steps):
        k_t, v_t = _step(ks, t), _step(vs, t)  # [B, H_kv, 1, d]
        if gating:  # a per-head or per-key-dimension decay, [B, H_kv, 1, 1 or d_k] -> [B, H_kv, 1 or d_k, 1]
            state = relay_op.multiply(state, relay_op.transpose(_step(gs, t), (0, 1, 3, 2)))
        if delta:
            read = relay_op.nn.batch_matmul(relay_op.reshape(k_t, (batch * hkv, 1, dk)), relay_op.reshape(state, flat),
                                            transpose_b=False)
            v_t = relay_op.multiply(_step(bs, t), relay_op.subtract(v_t, relay_op.reshape(read, (batch, hkv, 1, dv))))
        state = relay_op.add(state, relay_op.multiply(relay_op.transpose(k_t, (0, 1, 3, 2)), v_t))
        q_t = relay_op.reshape(_step(qs, t), (batch * hkv, group, dk))  # query head h reads KV head h // group
        o_t = relay_op.nn.batch_matmul(q_t, relay_op.reshape(state, flat), transpose_b=False)
        outs.append(relay_op.reshape(o_t, (batch, 1, hq * dv)))
    out = outs[0] if steps == 1 else relay_op.concatenate(outs, axis=1)
    return [relay_op.multiply(out, _const(scale, dtype)), state]
