"""The building blocks of the networks: each declares its weights as named inputs with their shapes."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Expr, Function, RelayError, Var, free_vars, var


def check_layout(layout: str) -> None:
    if layout != "NCHW":
        raise RelayError(f"relay.testing: layout {layout!r} is not supported: autosched's convolutions take NCHW "
                         f"(AlterOpLayout then blocks the channels for the target); use layout='NCHW'")


def conv_bn_relu(x: Expr, name: str, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
                 relu: bool = True, dtype: str = "float32") -> Expr:
    """A convolution (no bias), inference batch norm, and ReLU unless ``relu=False``."""
    w = var(f"{name}_weight", shape=(cout, cin // groups, kernel, kernel), dtype=dtype)
    y = op.nn.conv2d(x, w, strides=(stride, stride), padding=(kernel // 2, kernel // 2), groups=groups,
                     channels=cout, kernel_size=(kernel, kernel))
    y = batch_norm(y, f"{name}_bn", cout, dtype)
    return op.nn.relu(y) if relu else y


def batch_norm(x: Expr, name: str, channels: int, dtype: str = "float32") -> Expr:
    args = [var(f"{name}_{p}", shape=(channels,), dtype=dtype) for p in ("gamma", "beta", "moving_mean", "moving_var")]
    return op.nn.batch_norm(x, *args, epsilon=2e-5)[0]


def dense_bias(x: Expr, name: str, cin: int, units: int, dtype: str = "float32") -> Expr:
    w = var(f"{name}_weight", shape=(units, cin), dtype=dtype)
    return op.nn.bias_add(op.nn.dense(x, w, units=units), var(f"{name}_bias", shape=(units,), dtype=dtype))


def classifier(x: Expr, channels: int, num_classes: int, dtype: str, **unused: Any) -> Expr:
    """Global average pooling, a dense layer and the softmax of the class scores."""
    y = op.nn.batch_flatten(op.nn.global_avg_pool2d(x))
    return op.nn.softmax(dense_bias(y, "fc", channels, num_classes, dtype))


def function(data: Var, out: Expr) -> Function:
    """The network as a function of ``data`` first, then its weights in the order they are used."""
    return Function([data] + [v for v in free_vars(out) if v is not data], out)
