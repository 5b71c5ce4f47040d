"""``dense(x, transpose(W))`` with a parameter ``W`` becomes ``dense(x, W_T)`` with the transposed weight stored as
the parameter ``"W.T"`` (TVM's name): what ONNX MatMul and torch Linear exports import as, and the form in which
``bsr_dense.convert`` can see the weight's values."""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched.relay.data_dep_optimization.utils import as_array, on_function
from autosched.relay.ir.expr import Call, Expr, Function, IRModule, Var, free_vars, rewrite, var


def convert(func: Function | IRModule, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Store the transposed weights of dense layers as parameters of their own; returns ``(func, params)``
    (the old parameter stays in params while anything else reads it)."""
    return on_function(func, params, _convert)


def _transposed_param(w: Expr, params: dict[str, Any]) -> Var | None:
    if not (isinstance(w, Call) and w.op.name == "transpose" and len(w.args) == 1):
        return None
    src = w.args[0]
    axes = w.attrs.get("axes")
    if not isinstance(src, Var) or src.name_hint not in params or as_array(params[src.name_hint]).ndim != 2:
        return None
    return src if axes is None or list(axes) == [1, 0] else None


def _convert(func: Function, params: dict[str, Any]) -> tuple[Function, dict[str, Any]]:
    new_vars: dict[str, Var] = {}

    def fn(node: Expr) -> Expr | None:
        if not (isinstance(node, Call) and node.op.name == "nn.dense"):
            return None
        src = _transposed_param(node.args[1], params)
        if src is None:
            return None
        name = f"{src.name_hint}.T"
        if name not in new_vars:
            value = np.ascontiguousarray(as_array(params[src.name_hint]).T)
            params[name] = value
            new_vars[name] = var(name, shape=value.shape, dtype=str(value.dtype))
        return Call(node.op, [node.args[0], new_vars[name]], node.attrs, node.compiler)

    body = rewrite(func.body, fn)
    if body is func.body:
        return func, params
    used = {v.name_hint for v in free_vars(body)}
    kept = [p for p in func.params if p.name_hint in used]
    for name in [n for n in params if n not in used and any(n == p.name_hint for p in func.params)]:
        del params[name]
    return Function(kept + [v for v in new_vars.values()], body, None, func.attrs), params


__all__ = ["convert"]
