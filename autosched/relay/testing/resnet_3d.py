"""A 3-D ResNet for video (Tran et al. 2018, R3D): ResNet's stages with 3x3x3 convolutions, a 3x7x7 stem of stride
(1, 2, 2) without max pooling, every axis halved at the first block of stages 2-4 (through a 1x1x1 projection),
batch norm after each convolution, then global average pooling and the classes. At 18 layers and 400 classes
it has torchvision's ``r3d_18`` weights exactly."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Expr, Function, IRModule, RelayError, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import batch_norm, dense_bias, function
from autosched.relay.testing.resnet import DEPTHS
from autosched.runtime.ndarray import NDArray


def _conv_bn(x: Expr, name: str, cin: int, cout: int, kernel: tuple[int, int, int], stride: tuple[int, int, int],
             dtype: str, relu: bool = True) -> Expr:
    w = var(f"{name}_weight", shape=(cout, cin, *kernel), dtype=dtype)
    y = op.nn.conv3d(x, w, strides=stride, padding=tuple(k // 2 for k in kernel), channels=cout, kernel_size=kernel)
    y = batch_norm(y, f"{name}_bn", cout, dtype)
    return op.nn.relu(y) if relu else y


def _block(x: Expr, name: str, cin: int, width: int, stride: int, bottleneck: bool, dtype: str) -> tuple[Expr, int]:
    cout = width * 4 if bottleneck else width
    s = (stride,) * 3
    if bottleneck:
        y = _conv_bn(x, f"{name}_conv1", cin, width, (1, 1, 1), (1, 1, 1), dtype)
        y = _conv_bn(y, f"{name}_conv2", width, width, (3, 3, 3), s, dtype)
        y = _conv_bn(y, f"{name}_conv3", width, cout, (1, 1, 1), (1, 1, 1), dtype, relu=False)
    else:
        y = _conv_bn(x, f"{name}_conv1", cin, width, (3, 3, 3), s, dtype)
        y = _conv_bn(y, f"{name}_conv2", width, width, (3, 3, 3), (1, 1, 1), dtype, relu=False)
    skip = x if stride == 1 and cin == cout else _conv_bn(x, f"{name}_sc", cin, cout, (1, 1, 1), s, dtype, relu=False)
    return op.nn.relu(op.add(y, skip)), cout


def get_net(batch_size: int, num_classes: int, num_layers: int = 18, image_shape: tuple = (3, 16, 112, 112),
            dtype: str = "float32") -> Function:
    """The network as a relay function of ``data`` ([batch, 3, frames, height, width]) and its weights."""
    if num_layers not in DEPTHS:
        raise RelayError(f"resnet_3d: num_layers {num_layers} is not one of {sorted(DEPTHS)}")
    if len(image_shape) != 4:
        raise RelayError(f"resnet_3d: image_shape {tuple(image_shape)} must be (channels, frames, height, width)")
    blocks, bottleneck = DEPTHS[num_layers]
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    x = _conv_bn(data, "stem", image_shape[0], 64, (3, 7, 7), (1, 2, 2), dtype)
    channels = 64
    for stage, n in enumerate(blocks):
        for k in range(n):
            x, channels = _block(x, f"stage{stage + 1}_unit{k + 1}", channels, 64 * 2 ** stage,
                                 2 if k == 0 and stage > 0 else 1, bottleneck, dtype)
    pooled = op.reshape(op.mean(x, axis=[2, 3, 4]), (batch_size, channels))
    return function(data, op.nn.softmax(dense_bias(pooled, "fc", channels, num_classes, dtype)))


def get_workload(batch_size: int = 1, num_classes: int = 1000, num_layers: int = 18,
                 image_shape: tuple = (3, 16, 112, 112), layout: str = "NCDHW", dtype: str = "float32",
                 **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of a 3-D ResNet of ``num_layers`` layers (18, 34, 50, 101 or 152) with random weights
    (NCDHW only)."""
    if layout != "NCDHW":
        raise RelayError(f"resnet_3d: layout {layout!r} is not provided (NCDHW is)")
    return create_workload(get_net(batch_size, num_classes, num_layers, tuple(image_shape), dtype))
