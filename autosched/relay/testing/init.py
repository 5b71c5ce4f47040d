"""Random parameters for a relay network: ``create_workload(net)`` infers its types and draws a value for every
input but ``data``: Xavier-uniform weights, zero biases, betas and means, unit gammas and variances."""

from __future__ import annotations

import math

import numpy as np

from autosched.relay.ir.expr import Expr, Function, IRModule
from autosched.relay.transform import InferType
from autosched.runtime.ndarray import NDArray


def _value(name: str, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    if name.endswith(("gamma", "moving_var")):
        return np.ones(shape, dtype)
    if name.endswith(("beta", "moving_mean", "bias")) or len(shape) < 2:
        return np.zeros(shape, dtype)
    receptive = math.prod(shape[2:])
    fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, shape).astype(dtype)


def create_workload(net: Function | Expr, initializer: object = None, seed: int = 0
                    ) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)``: ``net`` as a type-inferred module and a seeded random value (an NDArray, as TVM's) for
    each of its inputs except ``data``. ``initializer`` is TVM's and has no effect (the rule is above)."""
    mod = InferType()(IRModule.from_expr(net))
    rng = np.random.default_rng(seed)
    params = {}
    for p in mod["main"].params:
        if p.name_hint == "data":
            continue
        t = p.checked_type
        params[p.name_hint] = NDArray(_value(p.name_hint, tuple(int(d) for d in t.shape), t.dtype, rng))
    return mod, params


__all__ = ["create_workload"]
