"""SqueezeNet (Iandola et al. 2016), versions 1.0 and 1.1: a stem convolution and eight fire modules (a 1x1
squeeze convolution feeding 1x1 and 3x3 expand convolutions side by side, concatenated) between max poolings,
then a 1x1 convolution to the classes and global average pooling. Convolutions have biases and no batch norm."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Expr, Function, IRModule, RelayError, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import check_layout, conv, function
from autosched.runtime.ndarray import NDArray

#: per version: the stem (channels, kernel), then the squeeze widths of the fire modules (each expands to 4x
#: its squeeze width, half by 1x1 and half by 3x3) with "pool" where a 3x3 max pooling of stride 2 stands
VERSIONS = {"1.0": ((96, 7), [16, 16, 32, "pool", 32, 48, 48, 64, "pool", 64]),
            "1.1": ((64, 3), ["pool", 16, 16, "pool", 32, 32, "pool", 48, 48, 64, 64])}


def _fire(x: Expr, name: str, cin: int, squeeze: int, dtype: str) -> tuple[Expr, int]:
    s = op.nn.relu(conv(x, f"{name}_squeeze", cin, squeeze, 1, dtype=dtype, bias=True))
    e1 = op.nn.relu(conv(s, f"{name}_expand1x1", squeeze, 4 * squeeze, 1, dtype=dtype, bias=True))
    e3 = op.nn.relu(conv(s, f"{name}_expand3x3", squeeze, 4 * squeeze, 3, dtype=dtype, bias=True))
    return op.concatenate([e1, e3], axis=1), 8 * squeeze


def get_net(batch_size: int, image_shape: tuple = (3, 224, 224), num_classes: int = 1000, version: str = "1.0",
            dtype: str = "float32") -> Function:
    """The network as a relay function of ``data`` and its weights."""
    if version not in VERSIONS:
        raise RelayError(f"squeezenet: version {version!r} is not one of {sorted(VERSIONS)}")
    (stem, kernel), plan = VERSIONS[version]
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    x = op.nn.relu(conv(data, "conv1", image_shape[0], stem, kernel, 2, dtype=dtype, padding=0, bias=True))
    channels, fires = stem, 0
    if version == "1.0":
        x = op.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2), ceil_mode=True)
    for step in plan:
        if step == "pool":
            x = op.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2), ceil_mode=True)
            continue
        fires += 1
        x, channels = _fire(x, f"fire{fires + 1}", channels, int(step), dtype)
    x = op.nn.dropout(x, rate=0.5)
    x = op.nn.relu(conv(x, "conv_final", channels, num_classes, 1, dtype=dtype, bias=True))
    y = op.nn.softmax(op.nn.batch_flatten(op.nn.global_avg_pool2d(x)))
    return function(data, y)


def get_workload(batch_size: int = 1, num_classes: int = 1000, version: str = "1.0",
                 image_shape: tuple = (3, 224, 224), dtype: str = "float32", layout: str = "NCHW",
                 **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of SqueezeNet ``version`` ("1.0" or "1.1") with random weights (NCHW only, as TVM's)."""
    check_layout(layout)
    if layout != "NCHW":
        raise RelayError("squeezenet: only the NCHW layout is provided (as in TVM)")
    return create_workload(get_net(batch_size, tuple(image_shape), num_classes, version, dtype))
