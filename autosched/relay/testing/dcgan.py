"""The generator of DCGAN (Radford et al. 2015): a random vector projected by a dense layer to a 4x4 image of
``ngf * 2^(n-1)`` channels, then transposed convolutions (4x4, stride 2) doubling the size and halving the channels,
with batch norm and ReLU, up to the output image, whose last layer ends in tanh instead."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Expr, Function, IRModule, RelayError, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import batch_norm, check_layout, function
from autosched.runtime.ndarray import NDArray


def _deconv(x: Expr, name: str, cin: int, cout: int, dtype: str) -> Expr:
    w = var(f"{name}_weight", shape=(cin, cout, 4, 4), dtype=dtype)
    return op.nn.conv2d_transpose(x, w, strides=(2, 2), padding=(1, 1), channels=cout, kernel_size=(4, 4))


def get_net(batch_size: int, random_len: int = 100, oshape: tuple = (3, 64, 64), ngf: int = 128,
            dtype: str = "float32") -> Function:
    """The generator as a relay function of ``data`` ([batch, random_len]) and its weights."""
    channels_out, height, width = (int(d) for d in oshape)
    doublings = (height // 4).bit_length() - 1
    if height != width or height < 8 or height != 4 << doublings:
        raise RelayError(f"dcgan: oshape {tuple(oshape)} must be square with a size of 4 times a power of 2 (>= 8)")
    data = var("data", shape=(batch_size, random_len), dtype=dtype)
    channels = ngf * 2 ** (doublings - 1)
    x = op.nn.dense(data, var("g1_weight", shape=(channels * 16, random_len), dtype=dtype), units=channels * 16)
    x = op.nn.relu(batch_norm(op.reshape(x, (batch_size, channels, 4, 4)), "g1_bn", channels, dtype))
    for k in range(doublings - 1):
        x = op.nn.relu(batch_norm(_deconv(x, f"g{k + 2}", channels, channels // 2, dtype), f"g{k + 2}_bn",
                                  channels // 2, dtype))
        channels //= 2
    y = op.tanh(_deconv(x, f"g{doublings + 1}", channels, channels_out, dtype))
    return function(data, y)


def get_workload(batch_size: int = 1, oshape: tuple = (3, 64, 64), ngf: int = 128, random_len: int = 100,
                 layout: str = "NCHW", dtype: str = "float32", **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the DCGAN generator with random weights: ``data`` [batch, random_len] to an image of
    ``oshape`` (NCHW only: transposed convolutions are)."""
    check_layout(layout)
    if layout != "NCHW":
        raise RelayError("dcgan: only the NCHW layout is provided (transposed convolutions are NCHW here)")
    return create_workload(get_net(batch_size, random_len, tuple(oshape), ngf, dtype))
