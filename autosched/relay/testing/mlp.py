"""A multilayer perceptron on flattened images: dense layers of 128 and 64 units with ReLU, then the classes."""

from __future__ import annotations

import math
from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Function, IRModule, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import dense_bias, function
from autosched.runtime.ndarray import NDArray


def get_net(batch_size: int, num_classes: int = 10, image_shape: tuple = (1, 28, 28),
            dtype: str = "float32") -> Function:
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    x = op.nn.batch_flatten(data)
    x = op.nn.relu(dense_bias(x, "fc1", math.prod(image_shape), 128, dtype))
    x = op.nn.relu(dense_bias(x, "fc2", 128, 64, dtype))
    y = op.nn.softmax(dense_bias(x, "fc3", 64, num_classes, dtype))
    return function(data, y)


def get_workload(batch_size: int = 1, num_classes: int = 10, image_shape: tuple = (1, 28, 28),
                 dtype: str = "float32", **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the perceptron with random weights."""
    return create_workload(get_net(batch_size, num_classes, tuple(image_shape), dtype))
