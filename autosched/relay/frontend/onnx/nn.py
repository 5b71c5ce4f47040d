"""ONNX converters of the neural-network ops: convolution, pooling, normalisation, dense/matmul, softmax."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import register
from autosched.relay.ir.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    import onnx


def _same_pads(in_size: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
               upper: bool) -> list[int]:
    """ONNX SAME_UPPER / SAME_LOWER padding: output = ceil(input / stride); the odd pixel goes to the end (UPPER)
    or the beginning (LOWER). Returns ONNX order ``[begin..., end...]``."""
    begins, ends = [], []
    for n, k, s, d in zip(in_size, kernel, strides, dilations):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if upper else big)
        ends.append(big if upper else small)
    return begins + ends


def _spatial_attrs(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, kernel: Sequence[int]
                   ) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    """strides, dilations and (top, left, bottom, right) padding of a 2-D Conv/pool node, auto_pad resolved."""
    nd = len(kernel)
    if nd != 2:
        g._fail(f"only 2-D (NCHW) inputs are supported; the kernel has {nd} spatial dimension(s)")
    strides = tuple(attrs.get("strides", [1] * nd))
    dilations = tuple(attrs.get("dilations", [1] * nd))
    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad == "NOTSET":
        pads = list(attrs.get("pads", [0] * 2 * nd))
    elif auto_pad == "VALID":
        pads = [0] * 2 * nd
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        in_size = g.shape(node.input[0])[2:]
        pads = _same_pads(in_size, kernel, strides, dilations, upper=auto_pad == "SAME_UPPER")
    else:
        g._fail(f"unknown auto_pad {auto_pad!r} (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)")
    if len(pads) != 2 * nd or any(p < 0 for p in pads):
        g._fail(f"pads {pads} must be {2 * nd} non-negative integers")
    return strides, dilations, (pads[0], pads[1], pads[2], pads[3])


@register("Conv")
def _conv(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    wshape = g.shape(node.input[1])
    if len(wshape) != 4:
        g._fail(f"only 2-D convolutions are supported; the weight {node.input[1]!r} has shape {wshape}")
    kernel = tuple(attrs.get("kernel_shape", wshape[2:]))
    if kernel != tuple(wshape[2:]):
        g._fail(f"kernel_shape {list(kernel)} does not match the weight's shape {wshape}")
    strides, dilations, padding = _spatial_attrs(g, node, attrs, kernel)
    out = relay_op.nn.conv2d(g.tensor(node.input[0]), g.tensor(node.input[1]), strides=strides, padding=padding,
                          dilation=dilations, groups=int(attrs.get("group", 1)), channels=wshape[0],
                          kernel_size=kernel)
    bias = g.optional(node, 2)
    if bias is not None:
        out = relay_op.nn.bias_add(out, g.tensor(bias), axis=1)
    return out


def _pool_common(g: _GraphConverter, node: onnx.NodeProto, attrs: dict):
    if "kernel_shape" not in attrs:
        g._fail("the kernel_shape attribute is required")
    kernel = tuple(attrs["kernel_shape"])
    strides, dilations, padding = _spatial_attrs(g, node, attrs, kernel)
    return kernel, strides, dilations, padding, bool(attrs.get("ceil_mode", 0))


@register("MaxPool")
def _max_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    if attrs.get("storage_order", 0) != 0:
        g._fail("storage_order=1 (column-major Indices) is not supported")
    kernel, strides, dilations, padding, ceil = _pool_common(g, node, attrs)
    return relay_op.nn.max_pool2d(g.tensor(node.input[0]), pool_size=kernel, strides=strides, dilation=dilations,
                               padding=padding, ceil_mode=ceil)


@register("AveragePool")
def _avg_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    kernel, strides, dilations, padding, ceil = _pool_common(g, node, attrs)
    if any(d != 1 for d in dilations):
        g._fail(f"dilations {list(dilations)} are not supported for AveragePool (only 1)")
    return relay_op.nn.avg_pool2d(g.tensor(node.input[0]), pool_size=kernel, strides=strides, padding=padding,
                               ceil_mode=ceil, count_include_pad=bool(attrs.get("count_include_pad", 0)))


@register("GlobalAveragePool")
def _global_avg_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    rank = len(g.shape(node.input[0]))
    if rank != 4:
        g._fail(f"only 4-D (NCHW) inputs are supported, got rank {rank}")
    return relay_op.nn.global_avg_pool2d(g.tensor(node.input[0]))


@register("BatchNormalization")
def _batch_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    if attrs.get("training_mode", 0):
        g._fail("training_mode=1 is not supported (inference only)")
    if not attrs.get("spatial", 1):
        g._fail("spatial=0 (per-activation statistics, opset < 9) is not supported")
    x, scale, bias, mean, var = (g.tensor(n) for n in node.input[:5])
    return relay_op.nn.batch_norm(x, scale, bias, mean, var, axis=1, epsilon=float(attrs.get("epsilon", 1e-5)))[0]


@register("Gemm")
def _gemm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    a, b = g.tensor(node.input[0]), g.tensor(node.input[1])
    for i in (0, 1):
        r = len(g.shape(node.input[i]))
        if r != 2:
            g._fail(f"input {i} ({node.input[i]!r}) must be 2-D, got rank {r}")
    if attrs.get("transA", 0):
        a = relay_op.transpose(a, axes=(1, 0))
    if not attrs.get("transB", 0):  # dense wants the weight as [units, in]
        b = relay_op.transpose(b, axes=(1, 0))
    out = relay_op.nn.dense(a, b)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        out = relay_op.multiply(out, relay_ir.const(alpha, "float32"))
    c_name = g.optional(node, 2)
    if c_name is not None and beta != 0.0:
        c = g.tensor(c_name)
        if beta != 1.0:
            c = relay_op.multiply(c, relay_ir.const(beta, "float32"))
        n_out = g.shape(node.input[1])[0 if attrs.get("transB", 0) else 1]
        out = relay_op.nn.bias_add(out, c, axis=1) if g.shape(c_name) == (n_out,) else relay_op.add(out, c)
    return out


@register("MatMul")
def _matmul(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """numpy.matmul semantics: a 1-D operand is promoted to a matrix (and its dimension dropped from the result);
    when b has no batch (or a batch of 1) a's leading dimensions fold into the rows of one matmul; otherwise a
    batch_matmul over equal batch dimensions (or a batch of 1 in a, which it broadcasts)."""
    sa, sb = g.shape(node.input[0]), g.shape(node.input[1])
    a, b = g.tensor(node.input[0]), g.tensor(node.input[1])
    if not sa or not sb:
        g._fail("scalar operands are not allowed by MatMul")
    ra, rb = len(sa), len(sb)
    if ra == 1:
        a, sa = relay_op.reshape(a, (1, sa[0])), (1, sa[0])
    if rb == 1:
        b, sb = relay_op.reshape(b, (sb[0], 1)), (sb[0], 1)
    m, k, n = sa[-2], sa[-1], sb[-1]
    if sb[-2] != k:
        g._fail(f"inner dimensions differ: {g.shape(node.input[0])} x {g.shape(node.input[1])}")
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        g._fail(f"batch dimensions of {sa} and {sb} do not broadcast")
    final = batch + ((m,) if ra > 1 else ()) + ((n,) if rb > 1 else ())
    batch_a, batch_b = math.prod(sa[:-2]), math.prod(sb[:-2])
    if batch_b == 1 and rb == 2 and ra >= 2 and (_is_transpose_2d(b) or g.is_const(node.input[1])):
        # a linear layer on [batch, tokens, features] as it is: dense keeps the shape, so its epilogue (bias,
        # GELU, residual add) fuses into it; the weight's transpose is folded at build and the dense packed
        w = b.args[0] if _is_transpose_2d(b) else relay_op.transpose(b, (1, 0))
        return relay_op.nn.dense(a, w)
    if batch_b == 1:  # the rows of every batch of a times one matrix b
        x = a if len(sa) == 2 else relay_op.reshape(a, (batch_a * m, k))
        y = b if len(sb) == 2 else relay_op.reshape(b, (k, n))
        if rb == 2 and _is_transpose_2d(y):  # x @ w.T (a tied LM head): dense on w itself
            out = relay_op.nn.dense(x, y.args[0])
        elif rb == 2 and g.is_const(node.input[1]):  # a weight: dense on w.T, folded at build (then packed)
            out = relay_op.nn.dense(x, relay_op.transpose(y, (1, 0)))
        else:
            out = relay_op.nn.matmul(x, y)
        got = (batch_a * m, n)
    elif ra == rb >= 3 and all(p == q or 1 in (p, q) for p, q in zip(sa[:-2], sb[:-2])):
        # attention's [batch, heads, rows, k] @ [batch, heads, k, cols]: batch_matmul over the batch axes as they
        # are (no reshape between it and its epilogue: the scale and the mask fuse into it)
        out, got = relay_op.nn.batch_matmul(a, b, transpose_a=False, transpose_b=False), final
    else:  # batch_matmul broadcasts a batch of 1 in a; otherwise both batch shapes must be the broadcast one
        if batch_a != 1 and (1,) * (len(batch) - len(sa[:-2])) + tuple(sa[:-2]) != batch:
            g._fail(f"broadcasting batch dimensions {sa} x {sb} is not supported (equal batches, or 1 in a)")
        if (1,) * (len(batch) - len(sb[:-2])) + tuple(sb[:-2]) != batch:
            g._fail(f"broadcasting batch dimensions {sa} x {sb} is not supported (equal batches, or 1 in a)")
        x = relay_op.reshape(a, (batch_a, m, k)) if len(sa) != 3 else a
        y = relay_op.reshape(b, (batch_b, k, n)) if len(sb) != 3 else b
        out, got = relay_op.nn.batch_matmul(x, y, transpose_a=False, transpose_b=False), (batch_b, m, n)
    return out if got == final else relay_op.reshape(out, final)


def _is_transpose_2d(e: Expr) -> bool:
    return (isinstance(e, relay_ir.Call) and getattr(e.op, "name", "") == "transpose"
            and tuple(e.attrs.get("axes") or (1, 0)) == (1, 0) and len(e.args) == 1)


@register("Softmax", "LogSoftmax")
def _softmax(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """From opset 13 (Log)Softmax is over one axis (default -1); before, over all axes from ``axis`` (default 1)
    on, which is a (log) softmax of the input flattened to 2-D at ``axis``."""
    fn = relay_op.nn.softmax if node.op_type == "Softmax" else relay_op.log_softmax
    x = g.tensor(node.input[0])
    shape = g.shape(node.input[0])
    if g.opset >= 13:
        return fn(x, axis=int(attrs.get("axis", -1)))
    axis = int(attrs.get("axis", 1)) % len(shape)
    if axis == len(shape) - 1:
        return fn(x, axis=-1)
    flat = relay_op.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
    return relay_op.reshape(fn(flat, axis=1), tuple(shape))


@register("GlobalMaxPool")
def _global_max_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    shape = g.shape(node.input[0])
    if len(shape) != 4:
        g._fail(f"only 4-D (NCHW) inputs are supported, got shape {shape}")
    return relay_op.nn.max_pool2d(g.tensor(node.input[0]), pool_size=shape[2:], strides=(1, 1))


@register("Dropout")
def _dropout(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Inference: Dropout is the identity (its mask output is not available)."""
    mode = g.optional(node, 2)
    if mode is not None and bool(np.asarray(g.value(mode, "training_mode")).reshape(-1)[0]):
        g._fail("training_mode=True is not supported (inference only)")
    return g.tensor(node.input[0])


@register("LRN")
def _lrn(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Across channels: x / (bias + alpha / size * sum of x^2 over the size channels around c) ^ beta."""
    if "size" not in attrs:
        g._fail("the size attribute is required")
    if len(g.shape(node.input[0])) < 3:
        g._fail(f"the input must be (N, C, D1, ...), got shape {list(g.shape(node.input[0]))}")
    return relay_op.lrn(g.tensor(node.input[0]), size=int(attrs["size"]), axis=1, bias=float(attrs.get("bias", 1.0)),
               alpha=float(attrs.get("alpha", 1e-4)), beta=float(attrs.get("beta", 0.75)))


@register("LayerNormalization")
def _layer_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Normalisation over the axes from ``axis`` (default -1) on, scaled and shifted (opset 17); the Mean and
    InvStdDev outputs (training) are refused when used."""
    stash = int(attrs.get("stash_type", 1))
    if stash != 1:
        g._fail(f"stash_type={stash} is not supported (only 1: float32 statistics)")
    rank = len(g.shape(node.input[0]))
    axis = int(attrs.get("axis", -1))
    if not -rank <= axis < rank:
        g._fail(f"axis {axis} is out of range for a {rank}-D input")
    bias = g.optional(node, 2)
    return relay_op.layer_norm(g.tensor(node.input[0]), g.tensor(node.input[1]),
                               g.tensor(bias) if bias else None, axis=axis,
                               epsilon=float(attrs.get("epsilon", 1e-5)))
