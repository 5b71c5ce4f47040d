"""The values of constant expressions (calls of ops on constants), as FoldConstant needs them: the ops' te
computes joined into one kernel, compiled with the default schedule and run once. It lives with the ops, below
the passes, so that a pass evaluates without reaching up to ``relay.build``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched import te
from autosched.relay.ir.expr import Call, Constant, Expr, Function, RelayError, Tuple, TupleGetItem, post_order
from autosched.relay.ir.type_infer import infer_type
from autosched.tir.lower import lower


def _tensors(exprs: Sequence[Expr]) -> tuple[list[te.Tensor], list[np.ndarray], list[Any]]:
    """``(placeholders, their arrays, one te value per expression)``: constants become placeholders (0-d ones
    te constants, as in a fused kernel), calls their op's compute."""
    placeholders: list[te.Tensor] = []
    arrays: list[np.ndarray] = []
    vals: dict[int, list[Any]] = {}
    for node in post_order(Tuple(list(exprs))):
        if isinstance(node, Constant):
            if node.data.ndim == 0:
                vals[id(node)] = [te.const(node.data.item(), str(node.data.dtype))]
            else:
                p = te.placeholder(node.data.shape, str(node.data.dtype), name=f"c{len(arrays)}")
                placeholders.append(p)
                arrays.append(np.ascontiguousarray(node.data))
                vals[id(node)] = [p]
        elif isinstance(node, Tuple):
            vals[id(node)] = [t for f in node.fields for t in vals[id(f)]]
        elif isinstance(node, TupleGetItem):
            vals[id(node)] = [vals[id(node.tuple_value)][node.index]]
        elif isinstance(node, Call) and not isinstance(node.op, Function):
            out = node.op.compute([t for a in node.args for t in vals[id(a)]], node.attrs, node.checked_type)
            vals[id(node)] = list(out) if isinstance(out, (list, tuple)) else [out]
        else:
            raise RelayError(f"evaluate: {node!r} is not a call of ops on constants")
    return placeholders, arrays, [vals[id(e)][0] for e in exprs]


def evaluate(exprs: Expr | Sequence[Expr], target: Any = "llvm") -> Any:
    """Values of closed expressions (ops applied to constants, no free variables), computed in one kernel: a list
    of arrays, or one array for one expression given alone."""
    if isinstance(exprs, Expr) and not isinstance(exprs, Tuple):
        return evaluate([exprs], target)[0]
    exprs = list(exprs)
    for e in exprs:
        infer_type(e)
    placeholders, arrays, outs = _tensors(exprs)
    inputs = {id(p): k for k, p in enumerate(placeholders)}
    computed = [t for t in outs if isinstance(t, te.Tensor) and id(t) not in inputs]
    results: dict[int, np.ndarray] = {}
    if computed:
        from autosched.codegen.build import build  # llvmlite, needed only to compile

        unique = list({id(t): t for t in computed}.values())
        sch = te.create_schedule([t.op for t in unique])
        mod = build(lower(sch, placeholders + unique, name="fold_constant"), target=target)
        bufs = [np.empty(tuple(int(d) for d in t.shape), t.dtype) for t in unique]
        mod(*arrays, *bufs)
        results = {id(t): b for t, b in zip(unique, bufs)}
    values = []
    for e, t in zip(exprs, outs):
        if id(t) in results:
            values.append(results[id(t)])
        elif id(t) in inputs:  # the value of an input itself
            values.append(arrays[inputs[id(t)]].reshape(e.checked_type.shape).copy())
        else:
            raise RelayError(f"evaluate: {e!r} computes no tensor")
    return values


__all__ = ["evaluate"]
