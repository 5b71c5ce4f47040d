"""TVM's rearrangements of pixels between space, channels and the batch (``relay.nn.depth_to_space``,
``space_to_depth``, ``space_to_batch_nd``, ``batch_to_space_nd``): each a reshape, a transpose and a reshape (with
a pad or a crop), which fuse into one copy kernel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.relay.ir.expr import RelayError
from autosched.relay.op.nn.nn import pad
from autosched.relay.op.tensor import _shape_of, reshape, strided_slice, transpose


def _nchw(data: Any, layout: str, op: str) -> tuple[Any, tuple[int, ...]]:
    """``data`` as NCHW (transposed from NHWC) and its NCHW shape."""
    shape = _shape_of(data, op)
    if len(shape) != 4 or layout not in ("NCHW", "NHWC"):
        raise RelayError(f"{op}: data must be 4-D NCHW or NHWC, got shape {shape} with layout {layout!r}")
    if layout == "NHWC":
        return transpose(data, (0, 3, 1, 2)), (shape[0], shape[3], shape[1], shape[2])
    return data, shape


def _back(x: Any, layout: str) -> Any:
    return transpose(x, (0, 2, 3, 1)) if layout == "NHWC" else x


def depth_to_space(data: Any, block_size: int, layout: str = "NCHW", mode: str = "DCR") -> Any:
    """Channels to ``block_size`` x ``block_size`` blocks of pixels (a super-resolution model's pixel shuffle):
    [N, C, H, W] to [N, C / b^2, H b, W b]; ``mode`` DCR takes the block index before the channel (ONNX's
    default, TensorFlow's), CRD after it (PyTorch's PixelShuffle)."""
    op = "nn.depth_to_space"
    x, (n, c, h, w) = _nchw(data, layout, op)
    b = int(block_size)
    if b < 1 or c % (b * b):
        raise RelayError(f"{op}: the {c} channels must be a multiple of block_size^2 = {b * b} (block_size >= 1)")
    if mode == "DCR":
        x = transpose(reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    elif mode == "CRD":
        x = transpose(reshape(x, (n, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
    else:
        raise RelayError(f"{op}: unknown mode {mode!r} (DCR or CRD)")
    return _back(reshape(x, (n, c // (b * b), h * b, w * b)), layout)


def space_to_depth(data: Any, block_size: int, layout: str = "NCHW") -> Any:
    """Blocks of ``block_size`` x ``block_size`` pixels to channels, the inverse of DCR ``depth_to_space``:
    [N, C, H, W] to [N, C b^2, H / b, W / b]."""
    op = "nn.space_to_depth"
    x, (n, c, h, w) = _nchw(data, layout, op)
    b = int(block_size)
    if b < 1 or h % b or w % b:
        raise RelayError(f"{op}: the height {h} and width {w} must be multiples of block_size {b} (>= 1)")
    x = transpose(reshape(x, (n, c, h // b, b, w // b, b)), (0, 3, 5, 1, 2, 4))
    return _back(reshape(x, (n, c * b * b, h // b, w // b)), layout)


def _blocks(shape: Sequence[int], block_shape: Sequence[int], op: str) -> list[int]:
    blocks = [int(v) for v in np.asarray(block_shape).reshape(-1)]
    if not blocks or len(blocks) > len(shape) - 1 or any(v < 1 for v in blocks):
        raise RelayError(f"{op}: block_shape {blocks} must give 1 to {len(shape) - 1} positive factors for data of "
                         f"shape {tuple(shape)} (batch first, then the blocked axes)")
    return blocks


def space_to_batch_nd(data: Any, block_shape: Sequence[int], paddings: Sequence[Sequence[int]],
                      pad_value: float = 0.0) -> Any:
    """TensorFlow's SpaceToBatchND: the M axes after the batch padded by ``paddings`` [[before, after]] * M, then
    cut into ``block_shape`` blocks that go to the batch: [N, S1, ..., SM, rest] to [N prod(b), (S1 + p1) / b1,
    ..., rest]."""
    op = "nn.space_to_batch_nd"
    shape = _shape_of(data, op)
    blocks = _blocks(shape, block_shape, op)
    m = len(blocks)
    pads = [[int(v) for v in p] for p in paddings]
    if len(pads) != m or any(len(p) != 2 or min(p) < 0 for p in pads):
        raise RelayError(f"{op}: paddings {pads} must be {m} non-negative [before, after] pairs")
    padded = [shape[1 + k] + sum(pads[k]) for k in range(m)]
    if any(s % b for s, b in zip(padded, blocks)):
        raise RelayError(f"{op}: the padded extents {padded} must be multiples of block_shape {blocks}")
    x = pad(data, [[0, 0], *pads, *[[0, 0]] * (len(shape) - 1 - m)], pad_value) if any(map(any, pads)) else data
    rest = list(shape[1 + m:])
    split = [shape[0]] + [v for s, b in zip(padded, blocks) for v in (s // b, b)] + rest
    # the block offsets first, then the batch, then each axis's block index
    order = [2 + 2 * k for k in range(m)] + [0] + [1 + 2 * k for k in range(m)] + [1 + 2 * m + k
                                                                                   for k in range(len(rest))]
    x = transpose(reshape(x, split), order)
    return reshape(x, [shape[0] * int(np.prod(blocks))] + [s // b for s, b in zip(padded, blocks)] + rest)


def batch_to_space_nd(data: Any, block_shape: Sequence[int], crops: Sequence[Sequence[int]]) -> Any:
    """TensorFlow's BatchToSpaceND, the inverse of :func:`space_to_batch_nd`: the batch's ``block_shape`` blocks
    back into the M axes after it, then ``crops`` [[begin, end]] * M cut off: [N prod(b), S1, ..., rest] to
    [N, S1 b1 - c1, ..., rest]."""
    op = "nn.batch_to_space_nd"
    shape = _shape_of(data, op)
    blocks = _blocks(shape, block_shape, op)
    m, count = len(blocks), int(np.prod(blocks))
    cuts = [[int(v) for v in c] for c in crops]
    if shape[0] % count:
        raise RelayError(f"{op}: the batch {shape[0]} must be a multiple of prod(block_shape) = {count}")
    if len(cuts) != m or any(len(c) != 2 or min(c) < 0 for c in cuts) or \
            any(sum(c) >= shape[1 + k] * b for k, (c, b) in enumerate(zip(cuts, blocks))):
        raise RelayError(f"{op}: crops {cuts} must be {m} non-negative [begin, end] pairs leaving each axis "
                         f"non-empty")
    rest = list(shape[1 + m:])
    x = reshape(data, blocks + [shape[0] // count] + list(shape[1:]))
    order = [m] + [v for k in range(m) for v in (m + 1 + k, k)] + [2 * m + 1 + k for k in range(len(rest))]
    full = [s * b for s, b in zip(shape[1:1 + m], blocks)]
    x = reshape(transpose(x, order), [shape[0] // count] + full + rest)
    if not any(map(any, cuts)):
        return x
    return strided_slice(x, begin=[c[0] for c in cuts], end=[f - c[1] for f, c in zip(full, cuts)],
                         axes=list(range(1, 1 + m)))


__all__ = ["batch_to_space_nd", "depth_to_space", "space_to_batch_nd", "space_to_depth"]
