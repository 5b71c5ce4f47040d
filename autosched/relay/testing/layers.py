"""The building blocks of the networks: each declares its weights as named inputs with their shapes."""

from __future__ import annotations

from autosched.relay import op
from autosched.relay.ir.expr import Expr, Function, RelayError, Var, free_vars, var


def check_layout(layout: str) -> None:
    if layout not in ("NCHW", "NHWC"):
        raise RelayError(f"relay.testing: layout {layout!r} is not one of NCHW, NHWC (NHWC runs as NCHW between "
                         f"transposes: NCHW is the faster layout here)")


def channels_of(image_shape: tuple, layout: str) -> int:
    return image_shape[-1] if layout == "NHWC" else image_shape[0]


def conv(x: Expr, name: str, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
         dtype: str = "float32", layout: str = "NCHW", padding: int | None = None) -> Expr:
    """A convolution without bias; its weight OIHW, or HWIO in NHWC (HWOI for a depthwise one)."""
    if layout == "NHWC":
        depthwise = groups == cin and groups > 1
        shape = (kernel, kernel, cout, cin // groups) if depthwise else (kernel, kernel, cin // groups, cout)
        kernel_layout = "HWOI" if depthwise else "HWIO"
    else:
        shape, kernel_layout = (cout, cin // groups, kernel, kernel), "OIHW"
    w = var(f"{name}_weight", shape=shape, dtype=dtype)
    pad = kernel // 2 if padding is None else padding
    return op.nn.conv2d(x, w, strides=(stride, stride), padding=(pad, pad), groups=groups, channels=cout,
                        kernel_size=(kernel, kernel), data_layout=layout, kernel_layout=kernel_layout)


def conv_bn_relu(x: Expr, name: str, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
                 relu: bool = True, dtype: str = "float32", layout: str = "NCHW") -> Expr:
    """A convolution (no bias), inference batch norm, and ReLU unless ``relu=False``."""
    y = conv(x, name, cin, cout, kernel, stride, groups, dtype, layout)
    y = batch_norm(y, f"{name}_bn", cout, dtype, layout)
    return op.nn.relu(y) if relu else y


def batch_norm(x: Expr, name: str, channels: int, dtype: str = "float32", layout: str = "NCHW") -> Expr:
    args = [var(f"{name}_{p}", shape=(channels,), dtype=dtype) for p in ("gamma", "beta", "moving_mean", "moving_var")]
    return op.nn.batch_norm(x, *args, axis=3 if layout == "NHWC" else 1, epsilon=2e-5)[0]


def dense_bias(x: Expr, name: str, cin: int, units: int, dtype: str = "float32") -> Expr:
    w = var(f"{name}_weight", shape=(units, cin), dtype=dtype)
    return op.nn.bias_add(op.nn.dense(x, w, units=units), var(f"{name}_bias", shape=(units,), dtype=dtype))


def classifier(x: Expr, channels: int, num_classes: int, dtype: str, layout: str = "NCHW") -> Expr:
    """Global average pooling, a dense layer and the softmax of the class scores."""
    y = op.nn.batch_flatten(op.nn.global_avg_pool2d(x, layout=layout))
    return op.nn.softmax(dense_bias(y, "fc", channels, num_classes, dtype))


def function(data: Var, out: Expr) -> Function:
    """The network as a function of ``data`` first, then its weights in the order they are used."""
    return Function([data] + [v for v in free_vars(out) if v is not data], out)
