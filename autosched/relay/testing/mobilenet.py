"""MobileNet v1 (Howard et al. 2017): a 3x3 stem and 13 depthwise-separable blocks (a 3x3 depthwise convolution
and a 1x1 convolution, each with batch norm and ReLU), widths scaled by ``alpha``."""

from __future__ import annotations

from typing import Any

from autosched.relay.ir.expr import Function, IRModule, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import channels_of, check_layout, classifier, conv_bn_relu, function
from autosched.runtime.ndarray import NDArray

#: (output channels, stride) of the separable blocks
BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]


def get_net(batch_size: int, num_classes: int, image_shape: tuple = (3, 224, 224), layout: str = "NCHW",
            dtype: str = "float32", alpha: float = 1.0) -> Function:
    check_layout(layout)
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    channels = int(32 * alpha)
    x = conv_bn_relu(data, "conv0", channels_of(image_shape, layout), channels, 3, 2, dtype=dtype, layout=layout)
    for k, (width, stride) in enumerate(BLOCKS):
        cout = int(width * alpha)
        x = conv_bn_relu(x, f"sep{k + 1}_dw", channels, channels, 3, stride, groups=channels, dtype=dtype,
                         layout=layout)
        x = conv_bn_relu(x, f"sep{k + 1}_pw", channels, cout, 1, dtype=dtype, layout=layout)
        channels = cout
    y = classifier(x, channels, num_classes, dtype, layout)
    return function(data, y)


def get_workload(batch_size: int = 1, num_classes: int = 1000, image_shape: tuple = (3, 224, 224),
                 dtype: str = "float32", layout: str = "NCHW", alpha: float = 1.0,
                 **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of MobileNet v1 with random weights."""
    return create_workload(get_net(batch_size, num_classes, tuple(image_shape), layout, dtype, alpha))
