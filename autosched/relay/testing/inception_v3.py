"""Inception v3 (Szegedy et al. 2015) on 299x299 images: a stem of five convolutions and two max poolings, three
35x35 blocks (1x1, 5x5 and double-3x3 branches beside a pooled one), a reduction to 17x17, four 17x17 blocks
whose 7x7 convolutions are factored into 1x7 and 7x1, a reduction to 8x8, two 8x8 blocks with branches split
into 1x3 and 3x1, then global average pooling and the classes. Every convolution is followed by batch norm and
ReLU; the branches of a block are concatenated along the channels."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Expr, Function, IRModule, RelayError, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import check_layout, classifier, conv_bn_relu, function
from autosched.runtime.ndarray import NDArray


class _Block:
    """Builds one block's branches: each ``conv`` names its layer and tracks the channels flowing through it."""

    def __init__(self, name: str, dtype: str):
        self.name, self.dtype, self.count = name, dtype, 0

    def conv(self, x: tuple[Expr, int], cout: int, kernel: int | tuple[int, int], stride: int = 1,
             padding: int | tuple[int, int] | None = None) -> tuple[Expr, int]:
        self.count += 1
        y = conv_bn_relu(x[0], f"{self.name}_conv{self.count}", x[1], cout, kernel, stride, dtype=self.dtype,
                         padding=padding)
        return y, cout


def _avg3(x: tuple[Expr, int]) -> tuple[Expr, int]:
    return op.nn.avg_pool2d(x[0], pool_size=(3, 3), strides=(1, 1), padding=(1, 1), count_include_pad=True), x[1]


def _max3(x: tuple[Expr, int]) -> tuple[Expr, int]:
    return op.nn.max_pool2d(x[0], pool_size=(3, 3), strides=(2, 2)), x[1]


def _concat(*branches: tuple[Expr, int]) -> tuple[Expr, int]:
    return op.concatenate([b[0] for b in branches], axis=1), sum(b[1] for b in branches)


def _block_35(x: tuple[Expr, int], name: str, pool_width: int, dtype: str) -> tuple[Expr, int]:
    b = _Block(name, dtype)
    return _concat(b.conv(x, 64, 1), b.conv(b.conv(x, 48, 1), 64, 5),
                   b.conv(b.conv(b.conv(x, 64, 1), 96, 3), 96, 3), b.conv(_avg3(x), pool_width, 1))


def _reduce_35(x: tuple[Expr, int], dtype: str) -> tuple[Expr, int]:
    b = _Block("mixed_3", dtype)
    return _concat(b.conv(x, 384, 3, 2, padding=0), b.conv(b.conv(b.conv(x, 64, 1), 96, 3), 96, 3, 2, padding=0),
                   _max3(x))


def _block_17(x: tuple[Expr, int], name: str, width: int, dtype: str) -> tuple[Expr, int]:
    b = _Block(name, dtype)
    seven = b.conv(b.conv(b.conv(x, width, 1), width, (1, 7)), 192, (7, 1))
    twice = b.conv(x, width, 1)
    for cout, kernel in ((width, (7, 1)), (width, (1, 7)), (width, (7, 1)), (192, (1, 7))):
        twice = b.conv(twice, cout, kernel)
    return _concat(b.conv(x, 192, 1), seven, twice, b.conv(_avg3(x), 192, 1))


def _reduce_17(x: tuple[Expr, int], dtype: str) -> tuple[Expr, int]:
    b = _Block("mixed_8", dtype)
    three = b.conv(b.conv(x, 192, 1), 320, 3, 2, padding=0)
    seven = b.conv(b.conv(b.conv(b.conv(x, 192, 1), 192, (1, 7)), 192, (7, 1)), 192, 3, 2, padding=0)
    return _concat(three, seven, _max3(x))


def _block_8(x: tuple[Expr, int], name: str, dtype: str) -> tuple[Expr, int]:
    b = _Block(name, dtype)

    def split(y: tuple[Expr, int]) -> tuple[Expr, int]:
        return _concat(b.conv(y, 384, (1, 3)), b.conv(y, 384, (3, 1)))

    return _concat(b.conv(x, 320, 1), split(b.conv(x, 384, 1)), split(b.conv(b.conv(x, 448, 1), 384, 3)),
                   b.conv(_avg3(x), 192, 1))


def get_net(batch_size: int, num_classes: int, image_shape: tuple = (3, 299, 299),
            dtype: str = "float32") -> Function:
    """The network as a relay function of ``data`` and its weights."""
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    stem = _Block("stem", dtype)
    x = stem.conv(stem.conv(stem.conv((data, image_shape[0]), 32, 3, 2, padding=0), 32, 3, padding=0), 64, 3)
    x = _max3(x)
    x = _max3(stem.conv(stem.conv(x, 80, 1), 192, 3, padding=0))
    for k, pool_width in enumerate((32, 64, 64)):
        x = _block_35(x, f"mixed_{k}", pool_width, dtype)
    x = _reduce_35(x, dtype)
    for k, width in enumerate((128, 160, 160, 192)):
        x = _block_17(x, f"mixed_{k + 4}", width, dtype)
    x = _reduce_17(x, dtype)
    for k in range(2):
        x = _block_8(x, f"mixed_{k + 9}", dtype)
    y = classifier(op.nn.dropout(x[0], rate=0.2), x[1], num_classes, dtype)
    return function(data, y)


def get_workload(batch_size: int = 1, num_classes: int = 1000, image_shape: tuple = (3, 299, 299),
                 dtype: str = "float32", layout: str = "NCHW",
                 **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of Inception v3 with random weights (NCHW only, as TVM's; 299x299 images by default)."""
    check_layout(layout)
    if layout != "NCHW":
        raise RelayError("inception_v3: only the NCHW layout is provided (as in TVM)")
    return create_workload(get_net(batch_size, num_classes, tuple(image_shape), dtype))
