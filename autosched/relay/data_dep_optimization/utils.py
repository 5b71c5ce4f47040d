"""What the weight-dependent rewrites share: reading a parameter's value, and applying a rewrite of a Function to
an IRModule's ``main``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autosched.relay.ir.expr import Constant, Expr, Function, IRModule, RelayError, Var


def as_array(value: Any) -> np.ndarray:
    """A parameter as a numpy array (params may hold NDArrays or arrays)."""
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def weight_value(e: Expr, params: dict[str, Any]) -> tuple[str, np.ndarray] | None:
    """``(name, value)`` of a weight that is a parameter (a Var named in ``params``) or a constant (name "");
    None for a computed weight, which no rewrite here can look into."""
    if isinstance(e, Var) and e.name_hint in params:
        return e.name_hint, as_array(params[e.name_hint])
    if isinstance(e, Constant):
        return "", e.data
    return None


def on_function(func: Function | IRModule, params: dict[str, Any],
                rewrite: Callable[[Function, dict[str, Any]], tuple[Function, dict[str, Any]]]) -> tuple[Any, dict]:
    """Apply ``rewrite`` to ``func`` (or to an IRModule's ``main``, returning a module)."""
    if isinstance(func, IRModule):
        main, new_params = rewrite(func["main"], dict(params))
        return IRModule({**func.functions, "main": main}), new_params
    if not isinstance(func, Function):
        raise RelayError(f"expected a relay Function (mod['main']) or an IRModule, got {type(func).__name__}")
    return rewrite(func, dict(params))
