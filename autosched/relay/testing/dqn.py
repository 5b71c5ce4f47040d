"""The Deep Q-Network of Mnih et al. (2015) for Atari: three convolutions with ReLU (8x8 stride 4, 4x4 stride 2,
3x3) on a stack of four 84x84 frames, a dense layer of 512 units with ReLU and one output per action (its Q
value; no softmax)."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Function, IRModule, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import channels_of, check_layout, conv, dense_bias, function
from autosched.runtime.ndarray import NDArray

#: (output channels, kernel, stride) of the convolutions
CONVS = [(32, 8, 4), (64, 4, 2), (64, 3, 1)]


def get_net(batch_size: int, num_actions: int = 18, image_shape: tuple = (4, 84, 84), dtype: str = "float32",
            layout: str = "NCHW") -> Function:
    """The network as a relay function of ``data`` and its weights."""
    check_layout(layout)
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    x, channels = data, channels_of(image_shape, layout)
    size = list(image_shape[1:] if layout == "NCHW" else image_shape[:2])
    for k, (cout, kernel, stride) in enumerate(CONVS):
        x = op.nn.relu(conv(x, f"conv{k + 1}", channels, cout, kernel, stride, dtype=dtype, layout=layout, padding=0,
                            bias=True))
        channels, size = cout, [(s - kernel) // stride + 1 for s in size]
    x = op.nn.relu(dense_bias(op.nn.batch_flatten(x), "dense1", channels * size[0] * size[1], 512, dtype))
    return function(data, dense_bias(x, "dense2", 512, num_actions, dtype))


def get_workload(batch_size: int = 1, num_actions: int = 18, image_shape: tuple = (4, 84, 84),
                 dtype: str = "float32", layout: str = "NCHW", **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the Q-network with random weights: ``data`` [batch, 4, 84, 84] to [batch, actions]."""
    return create_workload(get_net(batch_size, num_actions, tuple(image_shape), dtype, layout))
