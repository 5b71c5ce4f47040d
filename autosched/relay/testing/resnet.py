"""ResNet v1 (He et al. 2015): a 7x7 stem, four stages of residual blocks (basic blocks for 18 and 34 layers,
bottlenecks for 50, 101 and 152), each convolution followed by batch norm, the sum by ReLU."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Expr, Function, IRModule, RelayError, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import channels_of, check_layout, classifier, conv_bn_relu, function
from autosched.runtime.ndarray import NDArray

#: blocks per stage, and whether they are bottlenecks, by depth
DEPTHS = {18: ([2, 2, 2, 2], False), 34: ([3, 4, 6, 3], False), 50: ([3, 4, 6, 3], True),
          101: ([3, 4, 23, 3], True), 152: ([3, 8, 36, 3], True)}


def _block(x: Expr, name: str, cin: int, width: int, stride: int, bottleneck: bool, dtype: str,
           layout: str) -> tuple[Expr, int]:
    cout = width * 4 if bottleneck else width
    kw = {"dtype": dtype, "layout": layout}
    if bottleneck:
        y = conv_bn_relu(x, f"{name}_conv1", cin, width, 1, **kw)
        y = conv_bn_relu(y, f"{name}_conv2", width, width, 3, stride, **kw)
        y = conv_bn_relu(y, f"{name}_conv3", width, cout, 1, relu=False, **kw)
    else:
        y = conv_bn_relu(x, f"{name}_conv1", cin, width, 3, stride, **kw)
        y = conv_bn_relu(y, f"{name}_conv2", width, width, 3, relu=False, **kw)
    skip = x if stride == 1 and cin == cout else conv_bn_relu(x, f"{name}_sc", cin, cout, 1, stride, relu=False,
                                                             **kw)
    return op.nn.relu(op.add(y, skip)), cout


def get_net(batch_size: int, num_classes: int, num_layers: int = 18, image_shape: tuple = (3, 224, 224),
            layout: str = "NCHW", dtype: str = "float32") -> Function:
    """The network as a relay function of ``data`` and its weights."""
    check_layout(layout)
    if num_layers not in DEPTHS:
        raise RelayError(f"resnet: num_layers {num_layers} is not one of {sorted(DEPTHS)}")
    blocks, bottleneck = DEPTHS[num_layers]
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    x = conv_bn_relu(data, "stem", channels_of(image_shape, layout), 64, 7, 2, dtype=dtype, layout=layout)
    x = op.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1), layout=layout)
    channels = 64
    for stage, n in enumerate(blocks):
        for k in range(n):
            x, channels = _block(x, f"stage{stage + 1}_unit{k + 1}", channels, 64 * 2 ** stage,
                                 2 if k == 0 and stage > 0 else 1, bottleneck, dtype, layout)
    y = classifier(x, channels, num_classes, dtype, layout)
    return function(data, y)


def get_workload(batch_size: int = 1, num_classes: int = 1000, num_layers: int = 18,
                 image_shape: tuple = (3, 224, 224), layout: str = "NCHW", dtype: str = "float32",
                 **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of a ResNet with ``num_layers`` layers (18, 34, 50, 101 or 152) and random weights."""
    return create_workload(get_net(batch_size, num_classes, num_layers, tuple(image_shape), layout, dtype))
