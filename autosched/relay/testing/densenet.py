"""DenseNet (Huang et al. 2017): a 7x7 stem, four dense blocks whose layers (batch norm, ReLU, a 1x1 bottleneck
convolution to ``bn_size * growth_rate`` channels, batch norm, ReLU, a 3x3 convolution to ``growth_rate``) each
add their channels to everything before them, transitions between blocks halving the channels (1x1) and the
size (2x2 average pooling), then batch norm, ReLU, global average pooling and the classes."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Expr, Function, IRModule, RelayError, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import bn_relu, check_layout, classifier, conv, conv_bn_relu, function
from autosched.runtime.ndarray import NDArray

#: stem width, growth rate and layers per block, by depth
DEPTHS = {121: (64, 32, [6, 12, 24, 16]), 161: (96, 48, [6, 12, 36, 24]), 169: (64, 32, [6, 12, 32, 32]),
          201: (64, 32, [6, 12, 48, 32])}


def _dense_layer(x: Expr, name: str, cin: int, growth: int, bn_size: int, dtype: str) -> Expr:
    y = conv(bn_relu(x, f"{name}_bn1", cin, dtype), f"{name}_conv1", cin, bn_size * growth, 1, dtype=dtype)
    y = conv(bn_relu(y, f"{name}_bn2", bn_size * growth, dtype), f"{name}_conv2", bn_size * growth, growth, 3,
             dtype=dtype)
    return op.concatenate([x, y], axis=1)


def get_net(batch_size: int, num_classes: int, densenet_size: int = 121, image_shape: tuple = (3, 224, 224),
            bn_size: int = 4, dtype: str = "float32") -> Function:
    """The network as a relay function of ``data`` and its weights."""
    if densenet_size not in DEPTHS:
        raise RelayError(f"densenet: densenet_size {densenet_size} is not one of {sorted(DEPTHS)}")
    width, growth, blocks = DEPTHS[densenet_size]
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    x = conv_bn_relu(data, "stem", image_shape[0], width, 7, 2, dtype=dtype)
    x = op.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    channels = width
    for b, layers in enumerate(blocks):
        for k in range(layers):
            x = _dense_layer(x, f"block{b + 1}_layer{k + 1}", channels, growth, bn_size, dtype)
            channels += growth
        if b + 1 < len(blocks):
            x = conv(bn_relu(x, f"transition{b + 1}_bn", channels, dtype), f"transition{b + 1}_conv", channels,
                     channels // 2, 1, dtype=dtype)
            x = op.nn.avg_pool2d(x, pool_size=(2, 2), strides=(2, 2))
            channels //= 2
    y = classifier(bn_relu(x, "final_bn", channels, dtype), channels, num_classes, dtype)
    return function(data, y)


def get_workload(densenet_size: int = 121, classes: int = 1000, batch_size: int = 4,
                 image_shape: tuple = (3, 224, 224), dtype: str = "float32", layout: str = "NCHW",
                 **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of DenseNet-``densenet_size`` (121, 161, 169 or 201) with random weights; TVM's
    argument names and defaults (``classes``, a batch of 4), NCHW only."""
    check_layout(layout)
    if layout != "NCHW":
        raise RelayError("densenet: only the NCHW layout is provided (as in TVM)")
    return create_workload(get_net(batch_size, classes, densenet_size, tuple(image_shape), dtype=dtype))
