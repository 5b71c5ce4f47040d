"""VGG (Simonyan and Zisserman 2014): five stages of 3x3 convolutions with ReLU (and batch norm with
``batch_norm=True``), each ending in 2x2 max pooling, then three dense layers."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Function, IRModule, RelayError, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import batch_norm, channels_of, check_layout, conv, dense_bias, function
from autosched.runtime.ndarray import NDArray

#: convolutions per stage, by depth
DEPTHS = {11: [1, 1, 2, 2, 2], 13: [2, 2, 2, 2, 2], 16: [2, 2, 3, 3, 3], 19: [2, 2, 4, 4, 4]}
WIDTHS = [64, 128, 256, 512, 512]


def get_net(batch_size: int, num_classes: int, num_layers: int = 11, image_shape: tuple = (3, 224, 224),
            dtype: str = "float32", batch_norm_: bool = False, layout: str = "NCHW") -> Function:
    check_layout(layout)
    if num_layers not in DEPTHS:
        raise RelayError(f"vgg: num_layers {num_layers} is not one of {sorted(DEPTHS)}")
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    x, channels, size = data, channels_of(image_shape, layout), image_shape[1]
    for stage, (n, width) in enumerate(zip(DEPTHS[num_layers], WIDTHS)):
        for k in range(n):
            name = f"conv{stage + 1}_{k + 1}"
            x = op.nn.bias_add(conv(x, name, channels, width, 3, dtype=dtype, layout=layout),
                               var(f"{name}_bias", shape=(width,), dtype=dtype), axis=3 if layout == "NHWC" else 1)
            if batch_norm_:
                x = batch_norm(x, f"{name}_bn", width, dtype, layout)
            x = op.nn.relu(x)
            channels = width
        x = op.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), layout=layout)
        size //= 2
    x = op.nn.batch_flatten(x)
    x = op.nn.relu(dense_bias(x, "fc6", channels * size * size, 4096, dtype))
    x = op.nn.relu(dense_bias(x, "fc7", 4096, 4096, dtype))
    y = op.nn.softmax(dense_bias(x, "fc8", 4096, num_classes, dtype))
    return function(data, y)


def get_workload(batch_size: int = 1, num_classes: int = 1000, image_shape: tuple = (3, 224, 224),
                 dtype: str = "float32", num_layers: int = 11, batch_norm: bool = False, layout: str = "NCHW",
                 **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of VGG with ``num_layers`` layers (11, 13, 16 or 19) and random weights."""
    return create_workload(get_net(batch_size, num_classes, num_layers, tuple(image_shape), dtype, batch_norm,
                                   layout))
