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
from autosched.relay.ir.expr import Expr, RelayError
from autosched.relay.op.common import einsum_without_ellipsis
from autosched.relay.op.nn.conv3d import conv3d_transpose_cropped
from autosched.relay.op.nn.conv_transpose import conv_transpose_cropped
from autosched.relay.op.nn.deformable_conv import pack_weight, weight_block

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


def _check_spatial(g: _GraphConverter, node: onnx.NodeProto, nd: int, allowed: Sequence[int] = (1, 2)) -> None:
    """Refuse windows of other than ``allowed`` spatial ranks (1-D: N x C x W, 2-D: N x C x H x W, 3-D: N x C x D x
    H x W), naming the rank of the data."""
    rank = len(g.shape(node.input[0]))
    if nd not in allowed:
        names = {1: "1-D (rank 3, N x C x W)", 2: "2-D (rank 4, N x C x H x W)", 3: "3-D (rank 5, N x C x D x H x W)"}
        g._fail(f"{nd}-D {node.op_type} is not supported (the data {node.input[0]!r} has rank {rank}); only "
                f"{' and '.join(names[a] for a in allowed if a in names)} are")
    if rank != nd + 2:
        g._fail(f"the data {node.input[0]!r} has rank {rank} but the kernel has {nd} spatial dimension(s)")


def _window(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, kernel: Sequence[int],
            allowed: Sequence[int] = (1, 2)) -> tuple[list[int], list[int], list[int]]:
    """strides, dilations and pads (begins, then ends) of a Conv/pool node's window, auto_pad resolved."""
    nd = len(kernel)
    _check_spatial(g, node, nd, allowed)
    strides = [int(v) for v in attrs.get("strides", [1] * nd)]
    dilations = [int(v) for v in attrs.get("dilations", [1] * nd)]
    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad == "NOTSET":
        pads = [int(v) for v in attrs.get("pads", [0] * 2 * nd)]
    elif auto_pad == "VALID":
        pads = [0] * 2 * nd
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        in_size = g.shape(node.input[0])[2:]
        pads = _same_pads(in_size, kernel, strides, dilations, upper=auto_pad == "SAME_UPPER")
    else:
        g._fail(f"unknown auto_pad {auto_pad!r} (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)")
    if len(pads) != 2 * nd or any(p < 0 for p in pads):
        g._fail(f"pads {pads} must be {2 * nd} non-negative integers")
    if len(strides) != nd or len(dilations) != nd:
        g._fail(f"strides {list(strides)} and dilations {list(dilations)} must have {nd} value(s) each")
    return strides, dilations, pads


def _spatial_attrs(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, kernel: Sequence[int]
                   ) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    """strides, dilations and (top, left, bottom, right) padding of a 1-D or 2-D Conv/pool node as the 2-D
    window that computes it (a 1-D window is one of height 1), auto_pad resolved."""
    strides, dilations, pads = _window(g, node, attrs, kernel)
    if len(kernel) == 1:
        return (1, strides[0]), (1, dilations[0]), (0, pads[0], 0, pads[1])
    return (strides[0], strides[1]), (dilations[0], dilations[1]), (pads[0], pads[1], pads[2], pads[3])


def _to_2d(g: _GraphConverter, name: str) -> Expr:
    """The data ``name`` as 4-D: a 1-D problem's [N, C, W] becomes [N, C, 1, W]."""
    shape = g.shape(name)
    x = g.tensor(name)
    return x if len(shape) == 4 else relay_op.reshape(x, (shape[0], shape[1], 1, shape[2]))


def _from_2d(out: Expr, nd: int) -> Expr:
    """A 2-D window's [N, C, 1, W] result back as the 1-D [N, C, W] (2-D and 3-D results as they are)."""
    return out if nd in (2, 3) else relay_op.reshape(out, (0, 0, -1))


def _weight(g: _GraphConverter, name: str, np_fn, relay_fn) -> Expr:
    """Weight ``name`` rearranged for relay: in numpy at import when its value is embedded (a frozen initializer, a
    Constant), else by relay ops on the parameter, which relay.build folds once the params are bound."""
    if name in g.consts or (g.freeze and name in g.initializers):
        return relay_ir.const(np.ascontiguousarray(np_fn(g.value(name, "the weight"))))
    return relay_fn(g.tensor(name))


@register("Conv")
def _conv(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """2-D as nn.conv2d; 1-D as the nn.conv2d of height 1 (data [N, C, 1, W], weight [O, I/g, 1, k]); 3-D as
    nn.conv3d (itself one nn.conv2d over the depth-unfolded data)."""
    wname = node.input[1]
    wshape = g.shape(wname)
    weight = _weight(g, wname, lambda w: w, lambda w: w)
    if len(wshape) == 5:
        kernel = tuple(int(k) for k in attrs.get("kernel_shape", wshape[2:]))
        if kernel != tuple(wshape[2:]):
            g._fail(f"kernel_shape {list(kernel)} does not match the weight's shape {list(wshape)}")
        strides, dilations, pads = _window(g, node, attrs, kernel, allowed=(1, 2, 3))
        try:
            out = relay_op.nn.conv3d(g.tensor(node.input[0]), weight, strides=strides, padding=pads,
                                     dilation=dilations, groups=int(attrs.get("group", 1)), channels=wshape[0])
        except RelayError as e:
            g._fail(str(e).removeprefix("nn.conv3d: "))
    else:
        out = conv_of(g, node, attrs, g.tensor(node.input[0]), weight, wshape)
    bias = g.optional(node, 2)
    if bias is not None:
        out = relay_op.nn.bias_add(out, g.tensor(bias), axis=1)
    return _from_2d(out, len(g.shape(wname)) - 2)


def conv_of(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, x: Expr, weight: Expr,
            wshape: Sequence[int]) -> Expr:
    """The nn.conv2d of a Conv-like node (its attributes, data ``node.input[0]``'s shape) on the expressions
    ``x`` and ``weight``: 1-D as the conv2d of height 1, its result still 4-D (``_from_2d`` restores it)."""
    nd = len(wshape) - 2
    _check_spatial(g, node, nd)
    kernel = tuple(attrs.get("kernel_shape", wshape[2:]))
    if kernel != tuple(wshape[2:]):
        g._fail(f"kernel_shape {list(kernel)} does not match the weight's shape {list(wshape)}")
    strides, dilations, padding = _spatial_attrs(g, node, attrs, kernel)
    if nd == 1:
        shape4 = (wshape[0], wshape[1], 1, wshape[2])
        weight = relay_ir.const(weight.data.reshape(shape4)) if isinstance(weight, relay_ir.Constant) else \
            relay_op.reshape(weight, shape4)
        n, c, w = g.shape(node.input[0])
        x = relay_op.reshape(x, (n, c, 1, w))
        kernel = (1, kernel[0])
    return relay_op.nn.conv2d(x, weight, strides=strides, padding=padding, dilation=dilations,
                              groups=int(attrs.get("group", 1)), channels=wshape[0], kernel_size=kernel)


@register("DeformConv")
def _deform_conv(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """2-D DeformConv (opset 19) as nn.deformable_conv2d: offset_group as its deformable_groups, the optional mask
    (DCNv2) as its fourth input, the optional bias added after it (nn.bias_add)."""
    xshape, wshape = g.shape(node.input[0]), g.shape(node.input[1])
    if len(xshape) != 4 or len(wshape) != 4:
        g._fail(f"{len(xshape) - 2}-D DeformConv is not supported (data {node.input[0]!r} {list(xshape)}, weight "
                f"{list(wshape)}); only 2-D (N x C x H x W) is")
    kernel = tuple(int(k) for k in attrs.get("kernel_shape", wshape[2:]))
    if kernel != tuple(wshape[2:]):
        g._fail(f"kernel_shape {list(kernel)} does not match the weight's shape {list(wshape)}")
    strides, dilations, pads = _window(g, node, attrs, kernel, allowed=(2,))
    mask = g.optional(node, 4)
    groups = int(attrs.get("group", 1))
    o, i, kh, kw = wshape
    if groups < 1 or o % groups:
        g._fail(f"the weight's {o} output channels do not divide into group={groups}")
    # in blocks of output channels, the layout the kernel reads: in numpy when the weight is frozen, else a
    # reshape and transpose of the parameter that relay.build folds once the params are bound
    b = weight_block(o // groups)
    weight = _weight(g, node.input[1], lambda w: pack_weight(w, groups)[0],
                     lambda w: relay_op.transpose(relay_op.reshape(w, (o // b, b, i, kh, kw)), (0, 3, 4, 2, 1)))
    out = relay_op.nn.deformable_conv2d(
        g.tensor(node.input[0]), g.tensor(node.input[2]), weight, strides=strides, padding=pads, dilation=dilations,
        deformable_groups=int(attrs.get("offset_group", 1)), groups=groups, channels=o, kernel_size=kernel,
        kernel_layout=f"OHWI{b}o", mask=None if mask is None else g.tensor(mask))
    bias = g.optional(node, 3)
    if bias is not None:
        out = relay_op.nn.bias_add(out, g.tensor(bias), axis=1)
    try:
        g._relay_shape(out)  # the op's checks (the offset's and the mask's shapes, groups), naming this node
    except RelayError as e:
        g._fail(str(e))
    return out


def _conv_transpose_pads(g: _GraphConverter, attrs: dict, in_size: Sequence[int], kernel: Sequence[int],
                         strides: Sequence[int], dilations: Sequence[int], out_pad: Sequence[int]
                         ) -> tuple[list[int], list[int]]:
    """ConvTranspose's (begin, end) crops of the full output ``stride * (in - 1) + output_padding + (k - 1) * d + 1``
    per axis: from ``pads``, or from ``output_shape`` / auto_pad SAME (ONNX's total padding, the odd pixel cropped
    at the end for SAME_UPPER and at the beginning otherwise). A negative end crop (output_shape above the full
    size, as onnxruntime allows) extends the output with zeros (plus the bias)."""
    nd = len(kernel)
    full = [s * (n - 1) + a + (k - 1) * d + 1 for n, k, s, d, a in zip(in_size, kernel, strides, dilations, out_pad)]
    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        g._fail(f"unknown auto_pad {auto_pad!r} (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)")
    target = attrs.get("output_shape")
    if target is not None:
        target = [int(v) for v in target]
        if len(target) != nd:
            g._fail(f"output_shape {target} must give the {nd} spatial dimension(s) of the output (not N and C)")
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [n * s for n, s in zip(in_size, strides)]
    if target is None:
        pads = [0] * 2 * nd if auto_pad == "VALID" else [int(p) for p in attrs.get("pads", [0] * 2 * nd)]
        if len(pads) != 2 * nd or any(p < 0 for p in pads):
            g._fail(f"pads {pads} must be {2 * nd} non-negative integers")
        return pads[:nd], pads[nd:]
    begins, ends = [], []
    for f, t in zip(full, target):
        total = f - t
        if total < 0 and "output_shape" not in attrs:  # SAME with a stride above the kernel: nothing cropped
            total = 0
        if total < 0:
            begins.append(0)
            ends.append(total)
        elif auto_pad == "SAME_UPPER":
            begins.append(total // 2)
            ends.append(total - total // 2)
        else:
            begins.append(total - total // 2)
            ends.append(total // 2)
    return begins, ends


@register("ConvTranspose")
def _conv_transpose(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """A transposed convolution as ``relay.nn.conv2d_transpose`` runs it (one convolution of all the stride's
    phases, interleaved; see ``relay.op.nn.conv_transpose``), cropped as ``pads`` or ``output_shape`` say.
    1-D as 2-D of height 1; 3-D as ``relay.nn.conv3d_transpose``."""
    xname, wname = node.input[0], node.input[1]
    xshape, wshape = g.shape(xname), g.shape(wname)
    nd = len(wshape) - 2
    _check_spatial(g, node, nd, allowed=(1, 2, 3))
    kernel = tuple(int(k) for k in attrs.get("kernel_shape", wshape[2:]))
    if kernel != tuple(wshape[2:]):
        g._fail(f"kernel_shape {list(kernel)} does not match the weight's shape {wshape}")
    group = int(attrs.get("group", 1))
    if group < 1 or xshape[1] != wshape[0] or wshape[0] % group:
        g._fail(f"the data {xname!r} has {xshape[1]} channels but the weight {wname!r} of shape {wshape} needs "
                f"{wshape[0]}, a multiple of group={group}")
    strides = [int(v) for v in attrs.get("strides", [1] * nd)]
    dilations = [int(v) for v in attrs.get("dilations", [1] * nd)]
    out_pad = [int(v) for v in attrs.get("output_padding", [0] * nd)]
    if not len(strides) == len(dilations) == len(out_pad) == nd or min(strides + dilations) < 1 or min(out_pad) < 0:
        g._fail(f"strides {strides}, dilations {dilations} and output_padding {out_pad} must have {nd} value(s) "
                f"each (strides and dilations positive, output_padding non-negative)")
    begins, ends = _conv_transpose_pads(g, attrs, xshape[2:], kernel, strides, dilations, out_pad)
    if nd == 3:
        weight = _weight(g, wname, lambda w: w, lambda w: w)
        try:
            y = conv3d_transpose_cropped(g.tensor(xname), weight, strides, dilations, group, begins, ends, out_pad)
        except RelayError as e:
            g._fail(str(e).removeprefix("nn.conv3d_transpose: "))
        bias = g.optional(node, 2)
        return y if bias is None else relay_op.nn.bias_add(y, g.tensor(bias), axis=1)
    if nd == 1:
        kernel, strides, dilations = (1, *kernel), [1, *strides], [1, *dilations]
        begins, ends, out_pad = [0, *begins], [0, *ends], [0, *out_pad]
    shape4 = (wshape[0], wshape[1], *kernel)
    weight = _weight(g, wname, lambda w: w.reshape(shape4), lambda w: relay_op.reshape(w, shape4))
    try:
        y = conv_transpose_cropped(_to_2d(g, xname), weight, (*xshape[:2], *([1] if nd == 1 else []), *xshape[2:]),
                                   shape4, strides, dilations, group, begins, ends, out_pad)
    except RelayError as e:
        g._fail(str(e).removeprefix("nn.conv2d_transpose: "))
    bias = g.optional(node, 2)
    if bias is not None:
        y = relay_op.nn.bias_add(y, g.tensor(bias), axis=1)
    return _from_2d(y, nd)


@register("Col2Im")
def _col2im(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Column blocks [N, C * kh * kw, L] summed back into [N, C, H, W] (torch's ``nn.Fold``): the transposed
    convolution, grouped by channel, of the blocks laid out [N, C * kh * kw, oh, ow] by a one-hot kernel (tap
    (i, j) of block channel k is 1 where k = i * kw + j), cropped by the pads."""
    x = node.input[0]
    size = [int(v) for v in np.asarray(g.value(node.input[1], "image_shape")).reshape(-1)]
    block = [int(v) for v in np.asarray(g.value(node.input[2], "block_shape")).reshape(-1)]
    if len(size) != 2 or len(block) != 2:
        g._fail(f"only 2-D images are supported (image_shape {size}, block_shape {block})")
    strides = [int(v) for v in attrs.get("strides", [1, 1])]
    dilations = [int(v) for v in attrs.get("dilations", [1, 1])]
    pads = [int(v) for v in attrs.get("pads", [0, 0, 0, 0])]
    n, ck, length = g.shape(x)
    kk = block[0] * block[1]
    counts = [(s + p0 + p1 - d * (k - 1) - 1) // st + 1 for s, p0, p1, d, k, st in
              zip(size, pads[:2], pads[2:], dilations, block, strides)]
    if ck % kk or min(counts) < 1 or counts[0] * counts[1] != length:
        g._fail(f"the input {[n, ck, length]} must be [N, C * {kk}, {counts[0]} * {counts[1]}] blocks for image "
                f"{size}, block {block}, strides {strides}, dilations {dilations} and pads {pads}")
    channels = ck // kk
    onehot = np.zeros((ck, 1, *block), g.dtype(x))
    for c in range(channels):
        for k in range(kk):
            onehot[c * kk + k, 0, k // block[1], k % block[1]] = 1
    cols = relay_op.reshape(g.tensor(x), (n, ck, *counts))
    full = [(m - 1) * st + d * (k - 1) + 1 for m, st, d, k in zip(counts, strides, dilations, block)]
    ends = [f - p0 - s for f, p0, s in zip(full, pads[:2], size)]  # (below 0: the image's last rows no block reached)
    return conv_transpose_cropped(cols, relay_ir.const(onehot), (n, ck, *counts), onehot.shape, strides, dilations,
                                  channels, pads[:2], ends, (0, 0))


def _pool_common(g: _GraphConverter, node: onnx.NodeProto, attrs: dict):
    """kernel, strides, dilations, padding (as the 2-D window: 1-D pools are of height 1) and ceil_mode."""
    if "kernel_shape" not in attrs:
        g._fail("the kernel_shape attribute is required")
    kernel = tuple(attrs["kernel_shape"])
    strides, dilations, padding = _spatial_attrs(g, node, attrs, kernel)
    kernel2 = kernel if len(kernel) == 2 else (1, kernel[0])
    return kernel2, strides, dilations, padding, bool(attrs.get("ceil_mode", 0))


def _pool3d(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr | None:
    """A 3-D MaxPool / AveragePool as ``relay.nn.max_pool3d`` / ``avg_pool3d``; None for other ranks."""
    if len(attrs.get("kernel_shape", ())) != 3:
        return None
    kernel = tuple(int(k) for k in attrs["kernel_shape"])
    strides, dilations, pads = _window(g, node, attrs, kernel, allowed=(1, 2, 3))
    kw = {"pool_size": kernel, "strides": strides, "padding": pads, "ceil_mode": bool(attrs.get("ceil_mode", 0))}
    if node.op_type == "AveragePool" and any(d != 1 for d in dilations):
        g._fail(f"dilations {dilations} are not supported for AveragePool (only 1)")
    x = g.tensor(node.input[0])
    try:
        if node.op_type == "MaxPool":
            return relay_op.nn.max_pool3d(x, dilation=dilations, **kw)
        return relay_op.nn.avg_pool3d(x, count_include_pad=bool(attrs.get("count_include_pad", 0)), **kw)
    except RelayError as e:
        g._fail(str(e))
        raise


@register("MaxPool")
def _max_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    if attrs.get("storage_order", 0) != 0:
        g._fail("storage_order=1 (column-major Indices) is not supported")
    pooled = _pool3d(g, node, attrs)
    if pooled is not None:
        return pooled
    kernel, strides, dilations, padding, ceil = _pool_common(g, node, attrs)
    out = relay_op.nn.max_pool2d(_to_2d(g, node.input[0]), pool_size=kernel, strides=strides, dilation=dilations,
                                 padding=padding, ceil_mode=ceil)
    nd = len(attrs["kernel_shape"])
    if len(node.output) < 2 or node.output[1] not in g.used:
        return _from_2d(out, nd)
    indices = _max_pool_indices(g, _to_2d(g, node.input[0]), g.dtype(node.input[0]), g._relay_shape(out), kernel,
                                strides, dilations, padding)
    return [_from_2d(out, nd), _from_2d(indices, nd)]


def _tap_grid(count: int, stride: int, offset: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """For outputs 0..count-1 of a window tap at ``offset`` (tap x dilation - pad): the input position each reads,
    clamped into the data, and whether it is inside."""
    pos = np.arange(count) * stride + offset
    return np.clip(pos, 0, size - 1), (pos >= 0) & (pos < size)


def _max_pool_indices(g: _GraphConverter, x: Expr, dtype: str, out_shape: Sequence[int], kernel: Sequence[int],
                      strides: Sequence[int], dilations: Sequence[int], padding: Sequence[int]) -> Expr:
    """MaxPool's Indices: each window's first largest element, as its flat index into the input [N, C, H, W]
    (row-major, padding not counted). The taps compared one by one: a select chain that fuses into one kernel."""
    n, c, h, w = g._relay_shape(x)
    oh, ow = out_shape[2:]
    low = float("-inf") if np.dtype(dtype).kind == "f" else int(np.iinfo(dtype).min)
    best_v = best_i = None
    for i in range(kernel[0]):
        rows, row_in = _tap_grid(oh, strides[0], i * dilations[0] - padding[0], h)
        for j in range(kernel[1]):
            cols, col_in = _tap_grid(ow, strides[1], j * dilations[1] - padding[1], w)
            v = relay_op.take(relay_op.take(x, relay_ir.const(rows.astype(np.int64)), axis=2),
                              relay_ir.const(cols.astype(np.int64)), axis=3)
            inside = row_in[:, None] & col_in[None, :]
            v = relay_op.where(relay_ir.const(inside), v, relay_op.full_like(v, low))
            idx = relay_ir.const((rows[:, None] * w + cols[None, :]).astype(np.int64))
            if best_v is None:
                best_v, best_i = v, relay_op.broadcast_to(idx, (n, c, oh, ow))
                continue
            better = relay_op.compare("greater", v, best_v)
            best_v = relay_op.maximum(v, best_v)
            best_i = relay_op.where(better, idx, best_i)
    base = relay_ir.const((np.arange(n * c, dtype=np.int64) * h * w).reshape(n, c, 1, 1))
    return relay_op.add(best_i, base)


@register("MaxUnpool")
def _max_unpool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """MaxPool undone: zeros, with each pooled value at the flat position its index names. The indices are read as
    MaxPool gives them (each inside its window), so an output position takes the value of the window tap that
    covers it and whose index names it: per tap a gather and a select, no scatter."""
    if "kernel_shape" not in attrs:
        g._fail("the kernel_shape attribute is required")
    kernel = [int(k) for k in attrs["kernel_shape"]]
    nd = len(kernel)
    _check_spatial(g, node, nd)
    strides = [int(v) for v in attrs.get("strides", [1] * nd)]
    pads = [int(v) for v in attrs.get("pads", [0] * 2 * nd)]
    xshape = g.shape(node.input[0])
    if tuple(g.shape(node.input[1])) != tuple(xshape):
        g._fail(f"the indices {list(g.shape(node.input[1]))} must have the data's shape {list(xshape)}")
    size = [(m - 1) * s - p0 - p1 + k for m, s, p0, p1, k in zip(xshape[2:], strides, pads[:nd], pads[nd:], kernel)]
    shape_in = g.optional(node, 2)
    if shape_in is not None:
        target = [int(v) for v in np.asarray(g.value(shape_in, "output_shape")).reshape(-1)]
        if len(target) != nd + 2 or list(target[:2]) != list(xshape[:2]) or any(t < m for t, m in
                                                                                zip(target[2:], size)):
            g._fail(f"output_shape {target} must be [N, C, ...] with spatial sizes at least {size}")
        size = target[2:]
    if nd == 1:
        kernel, strides, pads, size = [1, *kernel], [1, *strides], [0, pads[0], 0, pads[1]], [1, *size]
    n, c, h, w = (*xshape[:2], *([1] if nd == 1 else []), *xshape[2:])
    x = relay_op.reshape(g.tensor(node.input[0]), (n, c, h, w))
    ids = relay_op.reshape(relay_op.cast(g.tensor(node.input[1]), "int64"), (n, c, h, w))
    H, W = size  # noqa: N806
    # an index names image (n, c)'s position p as (n * C + c) * H * W + p: its position is the index less that base
    base = relay_ir.const(np.arange(n * c, dtype=np.int64).reshape(n, c, 1, 1) * H * W)
    position = relay_ir.const(np.arange(H * W, dtype=np.int64).reshape(1, 1, H, W))
    out = relay_op.zeros((n, c, H, W), g.dtype(node.input[0]))
    for i in range(kernel[0]):
        # output row y is tap i of pooled row (y + pad - i) / stride when that divides and is in range
        py = np.arange(H) + pads[0] - i
        rows, row_ok = np.clip(py // strides[0], 0, h - 1), (py % strides[0] == 0) & (py >= 0) & (py // strides[0] < h)
        for j in range(kernel[1]):
            px = np.arange(W) + pads[1] - j
            cols = np.clip(px // strides[1], 0, w - 1)
            col_ok = (px % strides[1] == 0) & (px >= 0) & (px // strides[1] < w)
            gather = [relay_ir.const(rows.astype(np.int64)), relay_ir.const(cols.astype(np.int64))]
            v = relay_op.take(relay_op.take(x, gather[0], axis=2), gather[1], axis=3)
            k = relay_op.take(relay_op.take(ids, gather[0], axis=2), gather[1], axis=3)
            hit = relay_op.logical_and(relay_op.compare("equal", relay_op.subtract(k, base), position),
                                       relay_ir.const(row_ok[:, None] & col_ok[None, :]))
            out = relay_op.where(hit, v, out)
    return out if nd == 2 else relay_op.reshape(out, (n, c, W))


@register("AveragePool")
def _avg_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    pooled = _pool3d(g, node, attrs)
    if pooled is not None:
        return pooled
    kernel, strides, dilations, padding, ceil = _pool_common(g, node, attrs)
    out = relay_op.nn.avg_pool2d(_to_2d(g, node.input[0]), pool_size=kernel, strides=strides, padding=padding,
                                 dilation=dilations,
                                 ceil_mode=ceil, count_include_pad=bool(attrs.get("count_include_pad", 0)))
    return _from_2d(out, len(attrs["kernel_shape"]))


@register("GlobalAveragePool")
def _global_avg_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """NCHW: ``nn.global_avg_pool2d`` (it keeps a blocked layout); any other rank >= 3 (a 1-D audio model's
    [N, C, W]): the mean over the spatial axes, kept as size 1."""
    rank = len(g.shape(node.input[0]))
    if rank < 3:
        g._fail(f"the input needs a batch, a channel and spatial axes, got rank {rank}")
    if rank == 4:
        return relay_op.nn.global_avg_pool2d(g.tensor(node.input[0]))
    return relay_op.make_call("mean", [g.tensor(node.input[0])], axis=tuple(range(2, rank)), keepdims=True)


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
    return matmul_of(g, g.tensor(node.input[0]), g.tensor(node.input[1]), g.shape(node.input[0]),
                     g.shape(node.input[1]), g.is_const(node.input[1]))


def matmul_of(g: _GraphConverter, a: Expr, b: Expr, sa: Sequence[int], sb: Sequence[int], b_const: bool) -> Expr:
    """numpy.matmul of ``a`` (shape ``sa``) and ``b`` (``sb``; ``b_const``: a weight known at import): a 1-D
    operand is promoted to a matrix (and its dimension dropped from the result);
    when b has no batch (or a batch of 1) a's leading dimensions fold into the rows of one matmul; otherwise a
    batch_matmul over equal batch dimensions (or a batch of 1 in a, which it broadcasts)."""
    sa, sb = tuple(sa), tuple(sb)
    if not sa or not sb:
        g._fail("scalar operands are not allowed by MatMul")
    ra, rb = len(sa), len(sb)
    if ra == 1:
        a, sa = relay_op.reshape(a, (1, sa[0])), (1, sa[0])
    if rb == 1:
        b, sb = relay_op.reshape(b, (sb[0], 1)), (sb[0], 1)
    m, k, n = sa[-2], sa[-1], sb[-1]
    if sb[-2] != k:
        g._fail(f"inner dimensions differ: {list(sa)} x {list(sb)}")
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        g._fail(f"batch dimensions of {sa} and {sb} do not broadcast")
    final = batch + ((m,) if ra > 1 else ()) + ((n,) if rb > 1 else ())
    batch_a, batch_b = math.prod(sa[:-2]), math.prod(sb[:-2])
    if batch_b == 1 and rb == 2 and ra >= 2 and (_is_transpose_2d(b) or b_const):
        # a linear layer on [batch, tokens, features] as it is: dense keeps the shape, so its epilogue (bias,
        # GELU, residual add) fuses into it; the weight's transpose is folded at build and the dense packed
        w = b.args[0] if _is_transpose_2d(b) else relay_op.transpose(b, (1, 0))
        return relay_op.nn.dense(a, w)
    if batch_b == 1:  # the rows of every batch of a times one matrix b
        x = a if len(sa) == 2 else relay_op.reshape(a, (batch_a * m, k))
        y = b if len(sb) == 2 else relay_op.reshape(b, (k, n))
        if rb == 2 and _is_transpose_2d(y):  # x @ w.T (a tied LM head): dense on w itself
            out = relay_op.nn.dense(x, y.args[0])
        elif rb == 2 and b_const:  # a weight: dense on w.T, folded at build (then packed)
            out = relay_op.nn.dense(x, relay_op.transpose(y, (1, 0)))
        else:
            out = relay_op.nn.matmul(x, y)
        got = (batch_a * m, n)
    elif ra == rb >= 3 and all(p == q or 1 in (p, q) for p, q in zip(sa[:-2], sb[:-2])):
        # attention's [batch, heads, rows, k] @ [batch, heads, k, cols]: batch_matmul over the batch axes as they
        # are (no reshape between it and its epilogue: the scale and the mask fuse into it); a decode step's
        # few query rows against K^T read K's rows as they are (schedules.batch_matmul: dot products)
        keys = _swapped_last_axes(b, rb)
        if keys is not None and m <= relay_op.schedules.FEW_ROWS:
            out, got = relay_op.nn.batch_matmul(a, keys, transpose_a=False, transpose_b=True), final
        else:
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


@register("Einsum")
def _einsum(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Einsum of one or two operands as transposes, sums and one batch_matmul: indices in one operand only and not
    in the output are summed first; shared ones in the output are the batch, shared ones not in it the
    contraction; the kept indices of each side are its rows or columns (``bhid,bhjd->bhij`` is attention's
    scores). Implicit outputs follow numpy (the indices seen once, sorted); ellipses stand for the leading axes
    (``...ij,...jk->...ik``). Broadcast axes of 1, repeated indices in one operand (diagonals) and three or more
    operands are refused."""
    eq = str(attrs.get("equation", "")).replace(" ", "")
    try:  # ellipses become letters for the axes they stand for
        eq = einsum_without_ellipsis(eq, [len(g.shape(name)) for name in node.input])
    except ValueError as e:
        g._fail(str(e))
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(node.input) or len(terms) not in (1, 2):
        g._fail(f"equation {eq!r}: one or two operands are supported, and it must name one term per input")
    if not arrow:
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    dims: dict[str, int] = {}
    for t, name in zip(terms, node.input):
        shape = g.shape(name)
        if len(t) != len(shape) or len(set(t)) != len(t) or not t.isalpha() and t:
            g._fail(f"equation {eq!r}: term {t!r} does not name the {len(shape)} axes of {name!r} with distinct "
                    "letters (diagonals are not supported)")
        for c, d in zip(t, shape):
            if dims.setdefault(c, d) != d:
                g._fail(f"equation {eq!r}: index {c!r} has sizes {dims[c]} and {d}")
    if set(out) - set(dims) or len(set(out)) != len(out):
        g._fail(f"equation {eq!r}: the output {out!r} names indices no input has, or one twice")

    def keep_only(x: Expr, t: str, keep: set[str]) -> tuple[Expr, str]:
        axes = tuple(i for i, c in enumerate(t) if c not in keep)
        if not axes:
            return x, t
        return relay_op.make_call("sum", [x], axis=axes, keepdims=False), "".join(c for c in t if c in keep)

    def arrange(x: Expr, t: str, order: str) -> Expr:
        return x if t == order else relay_op.transpose(x, tuple(t.index(c) for c in order))

    if len(terms) == 1:
        x, t = keep_only(g.tensor(node.input[0]), terms[0], set(out))
        return arrange(x, t, out)
    a, ta = keep_only(g.tensor(node.input[0]), terms[0], set(terms[1]) | set(out))
    b, tb = keep_only(g.tensor(node.input[1]), terms[1], set(ta) | set(out))
    batch = "".join(c for c in ta if c in tb and c in out)
    contract = "".join(c for c in ta if c in tb and c not in out)
    rows, cols = "".join(c for c in ta if c not in tb), "".join(c for c in tb if c not in ta)

    def size(cs: str) -> int:
        return math.prod(dims[c] for c in cs)

    got = batch + rows + cols
    if not batch and g.is_const(node.input[1]):  # by a weight (a linear layer): dense, its weight packed at build
        x = relay_op.reshape(arrange(a, ta, rows + contract), (size(rows), size(contract)))
        w = relay_op.reshape(arrange(b, tb, cols + contract), (size(cols), size(contract)))
        return arrange(relay_op.reshape(relay_op.nn.dense(x, w), tuple(dims[c] for c in got)), got, out)
    x = relay_op.reshape(arrange(a, ta, batch + rows + contract), (size(batch), size(rows), size(contract)))
    y = relay_op.reshape(arrange(b, tb, batch + contract + cols), (size(batch), size(contract), size(cols)))
    prod = relay_op.nn.batch_matmul(x, y, transpose_a=False, transpose_b=False)
    return arrange(relay_op.reshape(prod, tuple(dims[c] for c in got)), got, out)


def _swapped_last_axes(e: Expr, rank: int) -> Expr | None:
    """x when ``e`` is a transpose of x that swaps its last two axes only (K^T in attention), else None."""
    if not (isinstance(e, relay_ir.Call) and getattr(e.op, "name", "") == "transpose" and len(e.args) == 1):
        return None
    want = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    return e.args[0] if tuple(int(a) for a in (e.attrs.get("axes") or ())) == want else None


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
    """NCHW: a max pool over the whole H x W; any other rank >= 3: the maximum over the spatial axes."""
    shape = g.shape(node.input[0])
    if len(shape) < 3:
        g._fail(f"the input needs a batch, a channel and spatial axes, got shape {list(shape)}")
    if len(shape) == 4:
        return relay_op.nn.max_pool2d(g.tensor(node.input[0]), pool_size=shape[2:], strides=(1, 1))
    return relay_op.make_call("max", [g.tensor(node.input[0])], axis=tuple(range(2, len(shape))), keepdims=True)


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


# ------------------------------------------------------------------ instance, group, Lp and mean-variance normalisation
def _scaled_rows(g: _GraphConverter, y: Expr, node: onnx.NodeProto, size: int) -> Expr:
    """Rows ``y`` ([N, size, row]) times the node's scale (input 1) plus its bias (input 2), ``size`` values each,
    one per row of a sample."""
    cols = []
    for name, what in zip(node.input[1:3], ("scale", "bias")):
        if math.prod(g.shape(name)) != size:
            g._fail(f"{what} {name!r} has shape {list(g.shape(name))}; {size} values are needed")
        cols.append(relay_op.reshape(g.tensor(name), (size, 1)))
    return relay_op.add(relay_op.multiply(y, cols[0]), cols[1])


def _normalised_rows(g: _GraphConverter, name: str, rows: tuple[int, ...], epsilon: float) -> Expr:
    """Input ``name`` reshaped to ``rows`` (the last axis a row), each row normalised to mean 0 and variance 1 by
    ``nn.layer_norm`` (the row-parallel kernel of transformers; gamma 1, the scale comes after)."""
    x = relay_op.reshape(g.tensor(name), rows)
    one = relay_ir.const(np.ones(1, dtype=g.dtype(name)))
    return relay_op.layer_norm(x, one, axis=-1, epsilon=epsilon)


@register("InstanceNormalization")
def _instance_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Each (sample, channel) plane normalised, then scaled and shifted per channel (style transfer, GAN
    generators): a layer norm over rows of the flattened planes."""
    shape = tuple(g.shape(node.input[0]))
    if len(shape) < 3:
        g._fail(f"the input needs a batch, a channel and spatial axes, got shape {list(shape)}")
    n, c = shape[:2]
    y = _normalised_rows(g, node.input[0], (n, c, math.prod(shape[2:])), float(attrs.get("epsilon", 1e-5)))
    return relay_op.reshape(_scaled_rows(g, y, node, c), shape)


@register("GroupNormalization")
def _group_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Each sample's channels normalised in ``num_groups`` groups (diffusion U-Nets), then scaled and shifted: per
    group in opset 18 (scale and bias of num_groups values), per channel from opset 21."""
    shape = tuple(g.shape(node.input[0]))
    if len(shape) < 3:
        g._fail(f"the input needs a batch, a channel and spatial axes, got shape {list(shape)}")
    if "num_groups" not in attrs:
        g._fail("the num_groups attribute is required")
    groups = int(attrs["num_groups"])
    n, c = shape[:2]
    if groups < 1 or c % groups:
        g._fail(f"num_groups {groups} does not divide the {c} channels")
    plane = math.prod(shape[2:])
    y = _normalised_rows(g, node.input[0], (n, groups, c // groups * plane), float(attrs.get("epsilon", 1e-5)))
    if g.opset < 21 and math.prod(g.shape(node.input[1])) == groups:
        return relay_op.reshape(_scaled_rows(g, y, node, groups), shape)
    return relay_op.reshape(_scaled_rows(g, relay_op.reshape(y, (n, c, plane)), node, c), shape)


@register("LpNormalization")
def _lp_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x divided by its L1 or L2 norm along ``axis`` (default -1)."""
    rank = len(g.shape(node.input[0]))
    axis, p = int(attrs.get("axis", -1)), int(attrs.get("p", 2))
    if not -rank <= axis < rank:
        g._fail(f"axis {axis} is out of range for rank {rank}")
    if p not in (1, 2):
        g._fail(f"p={p} is not supported (1 or 2)")
    x = g.tensor(node.input[0])
    v = relay_op.abs(x) if p == 1 else relay_op.multiply(x, x)
    norm = relay_op.make_call("sum", [v], axis=(axis % rank,), keepdims=True)
    return relay_op.divide(x, norm if p == 1 else relay_op.sqrt(norm))


@register("MeanVarianceNormalization")
def _mean_variance_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """(x - mean) / (std + 1e-9) over ``axes`` (default [0, 2, 3]), the variance as E[x^2] - E[x]^2 (ONNX's
    definition)."""
    rank = len(g.shape(node.input[0]))
    axes = [int(a) for a in attrs.get("axes", [0, 2, 3])]
    if any(not -rank <= a < rank for a in axes):
        g._fail(f"axes {axes} are out of range for rank {rank}")
    axes = sorted({a % rank for a in axes})
    x = g.tensor(node.input[0])

    def mean(v: Expr) -> Expr:
        return relay_op.make_call("mean", [v], axis=tuple(axes), keepdims=True)

    m = mean(x)
    std = relay_op.sqrt(relay_op.subtract(mean(relay_op.multiply(x, x)), relay_op.multiply(m, m)))
    eps = relay_ir.const(np.array(1e-9, g.dtype(node.input[0])))
    return relay_op.divide(relay_op.subtract(x, m), relay_op.add(std, eps))


@register("RMSNormalization")
def _rms_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x / sqrt(mean(x^2 over the axes from ``axis``) + epsilon) * scale (opset 23; LLaMA-style models)."""
    if int(attrs.get("stash_type", 1)) != 1:
        g._fail(f"stash_type={attrs['stash_type']} is not supported (only 1: float32 statistics)")
    rank = len(g.shape(node.input[0]))
    axis = int(attrs.get("axis", -1))
    if not -rank <= axis < rank:
        g._fail(f"axis {axis} is out of range for a {rank}-D input")
    x = g.tensor(node.input[0])
    ms = relay_op.make_call("mean", [relay_op.multiply(x, x)], axis=tuple(range(axis % rank, rank)), keepdims=True)
    eps = relay_ir.const(np.array(float(attrs.get("epsilon", 1e-5)), g.dtype(node.input[0])))
    return relay_op.multiply(relay_op.divide(x, relay_op.sqrt(relay_op.add(ms, eps))), g.tensor(node.input[1]))


@register("Hardmax")
def _hardmax(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """1 at the first largest element along ``axis``, 0 elsewhere (before opset 13: of the input flattened to
    [rows, the axes from ``axis``])."""
    shape = g.shape(node.input[0])
    rank = len(shape)
    axis = int(attrs.get("axis", -1 if g.opset >= 13 else 1))
    if not -rank <= axis < rank:
        g._fail(f"axis {axis} is out of range for a {rank}-D input")
    axis %= rank
    x = g.tensor(node.input[0])
    if g.opset < 13:
        x, axis = relay_op.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:]))), 1
    depth = g._relay_shape(x)[axis]
    dtype = g.dtype(node.input[0])
    on, off = relay_ir.const(np.array(1, dtype)), relay_ir.const(np.array(0, dtype))
    hot = relay_op.one_hot(relay_op.reduce.argmax(x, axis=axis), on, off, depth, axis=axis, dtype=dtype)
    return relay_op.reshape(hot, tuple(shape)) if g.opset < 13 else hot


def _lp_power(x: Expr, p: int, dtype: str) -> Expr:
    """|x|^p of an Lp pool (x * x for p 2)."""
    if p == 2:
        return relay_op.multiply(x, x)
    return relay_op.abs(x) if p == 1 else relay_op.power(relay_op.abs(x), relay_ir.const(np.array(p, dtype)))


def _lp_root(total: Expr, p: int, dtype: str) -> Expr:
    """total^(1/p) of an Lp pool's sums."""
    if p == 1:
        return total
    return relay_op.sqrt(total) if p == 2 else relay_op.power(total, relay_ir.const(np.array(1.0 / p, dtype)))


@register("GlobalLpPool")
def _global_lp_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """(sum over the spatial axes of |x|^p)^(1/p), p 2 by default."""
    rank = len(g.shape(node.input[0]))
    p, dtype = int(attrs.get("p", 2)), g.dtype(node.input[0])
    total = relay_op.make_call("sum", [_lp_power(g.tensor(node.input[0]), p, dtype)], axis=tuple(range(2, rank)),
                               keepdims=True)
    return _lp_root(total, p, dtype)


@register("LpPool")
def _lp_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """(sum over each window of |x|^p)^(1/p): the window sums are a depthwise convolution with a kernel of ones
    (padding adds zeros; ceil_mode is more padding at the end, as long as the last window starts inside the
    input or its left padding). 1-D as 2-D of height 1."""
    kernel, strides, dilations, (top, left, bottom, right), ceil = _pool_common(g, node, attrs)
    name = node.input[0]
    shape = g.shape(name)
    size = shape[2:] if len(shape) == 4 else (1, shape[2])
    if ceil:
        extra = []
        for n, lo, hi, k, s, d in zip(size, (top, left), (bottom, right), kernel, strides, dilations):
            reach = d * (k - 1) + 1
            out = -(-(n + lo + hi - reach) // s) + 1
            if (out - 1) * s >= n + lo:
                out -= 1
            extra.append(max(0, (out - 1) * s + reach - (n + lo + hi)))
        bottom, right = bottom + extra[0], right + extra[1]
    p, dtype, channels = int(attrs.get("p", 2)), g.dtype(name), shape[1]
    ones = relay_ir.const(np.ones((channels, 1, *kernel), dtype))
    total = relay_op.nn.conv2d(_lp_power(_to_2d(g, name), p, dtype), ones, strides=strides,
                               padding=(top, left, bottom, right), dilation=dilations, groups=channels,
                               channels=channels, kernel_size=kernel)
    return _from_2d(_lp_root(total, p, dtype), len(attrs["kernel_shape"]))
