"""An LSTM unrolled over ``iterations`` steps (Hochreiter and Schmidhuber 1997), each step with its own weights:
the gates ``i, f, g, o = split(x W_i^T + b_i + h W_h^T + b_h, 4)``, then ``c = sigmoid(f) c + sigmoid(i) tanh(g)``
and ``h = sigmoid(o) tanh(c)`` from zero states; every step reads the input ``data`` and the output is the last
``h``."""

from __future__ import annotations

from typing import Any

from autosched.relay import op
from autosched.relay.ir.expr import Function, IRModule, RelayError, var
from autosched.relay.testing.init import create_workload
from autosched.relay.testing.layers import dense_bias, function
from autosched.runtime.ndarray import NDArray


def get_net(iterations: int, num_hidden: int, batch_size: int = 1, dtype: str = "float32") -> Function:
    """The unrolled network as a relay function of ``data`` ([batch, num_hidden]) and its weights."""
    if iterations < 1:
        raise RelayError(f"lstm: iterations must be at least 1, got {iterations}")
    data = var("data", shape=(batch_size, num_hidden), dtype=dtype)
    h = c = op.zeros((batch_size, num_hidden), dtype)
    for k in range(iterations):
        gates = op.add(dense_bias(data, f"i2h_{k}", num_hidden, 4 * num_hidden, dtype),
                       dense_bias(h, f"h2h_{k}", num_hidden, 4 * num_hidden, dtype))
        i, f, g, o = op.split(gates, 4, axis=1)
        c = op.add(op.multiply(op.sigmoid(f), c), op.multiply(op.sigmoid(i), op.tanh(g)))
        h = op.multiply(op.sigmoid(o), op.tanh(c))
    return function(data, h)


def get_workload(iterations: int, num_hidden: int, batch_size: int = 1,
                 dtype: str = "float32", **unused: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the unrolled LSTM with random weights."""
    return create_workload(get_net(iterations, num_hidden, batch_size, dtype))
