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


def conv(x: Expr, name: str, cin: int, cout: int, kernel: int | tuple[int, int], stride: int = 1, groups: int = 1,
         dtype: str = "float32", layout: str = "NCHW", padding: int | tuple[int, int] | None = None,
         bias: bool = False) -> Expr:
    """A convolution, with a bias if ``bias``; its weight OIHW, or HWIO in NHWC (HWOI for a depthwise one). A kernel
    is square or (height, width); the padding keeps the size at stride 1 unless given."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    if layout == "NHWC":
        depthwise = groups == cin and groups > 1
        shape = (kh, kw, cout, cin // groups) if depthwise else (kh, kw, cin // groups, cout)
        kernel_layout = "HWOI" if depthwise else "HWIO"
    else:
        shape, kernel_layout = (cout, cin // groups, kh, kw), "OIHW"
    w = var(f"{name}_weight", shape=shape, dtype=dtype)
    pad = (kh // 2, kw // 2) if padding is None else (padding, padding) if isinstance(padding, int) else padding
    y = op.nn.conv2d(x, w, strides=(stride, stride), padding=pad, groups=groups, channels=cout,
                     kernel_size=(kh, kw), data_layout=layout, kernel_layout=kernel_layout)
    if bias:
        y = op.nn.bias_add(y, var(f"{name}_bias", shape=(cout,), dtype=dtype), axis=3 if layout == "NHWC" else 1)
    return y


def conv_bn_relu(x: Expr, name: str, cin: int, cout: int, kernel: int | tuple[int, int], stride: int = 1,
                 groups: int = 1, relu: bool = True, dtype: str = "float32", layout: str = "NCHW",
                 padding: int | tuple[int, int] | None = None) -> Expr:
    """A convolution (no bias), inference batch norm, and ReLU unless ``relu=False``."""
    y = conv(x, name, cin, cout, kernel, stride, groups, dtype, layout, padding)
    y = batch_norm(y, f"{name}_bn", cout, dtype, layout)
    return op.nn.relu(y) if relu else y


def batch_norm(x: Expr, name: str, channels: int, dtype: str = "float32", layout: str = "NCHW") -> Expr:
    args = [var(f"{name}_{p}", shape=(channels,), dtype=dtype) for p in ("gamma", "beta", "moving_mean", "moving_var")]
    return op.nn.batch_norm(x, *args, axis=3 if layout == "NHWC" else 1, epsilon=2e-5)[0]


def dense_bias(x: Expr, name: str, cin: int, units: int, dtype: str = "float32") -> Expr:
    w = var(f"{name}_weight", shape=(units, cin), dtype=dtype)
    return op.nn.bias_add(op.nn.dense(x, w, units=units), var(f"{name}_bias", shape=(units,), dtype=dtype))


def bn_relu(x: Expr, name: str, channels: int, dtype: str = "float32", layout: str = "NCHW") -> Expr:
    """Inference batch norm then ReLU: the pre-activation of DenseNet's layers."""
    return op.nn.relu(batch_norm(x, name, channels, dtype, layout))


def classifier(x: Expr, channels: int, num_classes: int, dtype: str, layout: str = "NCHW") -> Expr:
    """Global average pooling, a dense layer and the softmax of the class scores."""
    y = op.nn.batch_flatten(op.nn.global_avg_pool2d(x, layout=layout))
    return op.nn.softmax(dense_bias(y, "fc", channels, num_classes, dtype))


def function(data: Var, out: Expr) -> Function:
    """The network as a function of ``data`` first, then its weights in the order they are used."""
    return Function([data] + [v for v in free_vars(out) if v is not data], out)
