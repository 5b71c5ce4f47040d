"""TOPI's helpers for te code: constant shapes as Python ints, and walking a computation's stages."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from autosched import te
from autosched.errors import AutoschedError
from autosched.te.expr import IntImm
from autosched.tir.arith import simplify
from autosched.topi.tag import is_injective


def get_const_int(expr: Any) -> int:
    """``expr`` as a Python int (an IntImm, or an expression that simplifies to one)."""
    if isinstance(expr, int):
        return expr
    e = simplify(te.const(expr) if not isinstance(expr, te.expr.Expr) else expr)
    if not isinstance(e, IntImm):
        raise AutoschedError(f"expected a constant integer, got {expr}")
    return int(e.value)


def get_const_tuple(in_tuple: Sequence[Any]) -> tuple:
    """A shape as a tuple of ints; a dimension that is not constant (a ``te.var``) stays as it is, as in TVM."""
    out = []
    for d in in_tuple:
        try:
            out.append(get_const_int(d))
        except AutoschedError:
            out.append(d)
    return tuple(out)


def _layout_axes(layout: str) -> list[str]:
    """``"NCHW16c"`` as ``["N", "C", "H", "W", "16c"]``: primal axes are capitals, a split axis is its factor
    and the small letter."""
    out, num = [], ""
    for ch in layout:
        if ch.isdigit():
            num += ch
        elif ch.isupper() and not num:
            out.append(ch)
        elif ch.islower() and num:
            out.append(num + ch)
            num = ""
        else:
            raise AutoschedError(f"layout {layout!r}: expected capitals and factor-letter pairs such as 16c")
    if num:
        raise AutoschedError(f"layout {layout!r} ends with a factor and no axis letter")
    return out


def get_shape(src_shape: Sequence[Any], src_layout: str, dst_layout: str) -> tuple:
    """``src_shape`` (in ``src_layout``) reordered into ``dst_layout``, which names the same axes."""
    src, dst = _layout_axes(src_layout), _layout_axes(dst_layout)
    if len(src) != len(src_shape) or sorted(src) != sorted(dst):
        raise AutoschedError(f"get_shape: {src_layout!r} ({len(src)} axes) and {dst_layout!r} must name the same "
                             f"axes as the {len(src_shape)}-D shape")
    shape = get_const_tuple(src_shape)
    return tuple(shape[src.index(ax)] for ax in dst)


def const_shape(t: te.Tensor, who: str) -> list[int]:
    """``t``'s shape as Python ints, or an error saying that ``who`` needs a constant shape."""
    dims = get_const_tuple(t.shape)
    if not all(isinstance(d, int) for d in dims):
        raise AutoschedError(f"{who}: {t.name} needs a constant shape, got {tuple(t.shape)}")
    return list(dims)


def is_static(shape: Sequence[Any]) -> bool:
    """Whether every dimension of ``shape`` is a constant."""
    return all(isinstance(d, int) for d in get_const_tuple(shape))


def prod(shape: Sequence[Any]) -> Any:
    """The product of a shape's dimensions (an expression if one is symbolic)."""
    dims = get_const_tuple(shape)
    if all(isinstance(d, int) for d in dims):
        return math.prod(dims)
    out: Any = 1
    for d in dims:
        out = out * d
    return out


def nchw_pack_layout(layout_info: str) -> bool:
    """Whether a layout is NCHW with both batch and channels blocked (``NCHW8n16c``)."""
    return layout_info[:4] == "NCHW" and "c" in layout_info and "n" in layout_info


def flat_load(data: te.Tensor, i: Any) -> Any:
    """Element ``i`` of ``data`` in row-major order (how a flattened tensor reads it)."""
    idx = []
    for d in reversed(list(data.shape)):
        idx.append(i % d)
        i = i // d
    return data(*reversed(idx))


def traverse_inline(s: Any, final_op: Any, callback: Callable[[Any], None]) -> None:
    """Call ``callback(op)`` on every compute op reachable from ``final_op`` (a Tensor or its op), producers
    after consumers, inlining on the way those whose tag is injective (TVM's helper for writing schedules)."""
    root = final_op.op if isinstance(final_op, te.Tensor) else final_op
    seen: set[int] = set()
    stack = [root]
    while stack:
        op = stack.pop()
        if id(op) in seen or not isinstance(op, te.ComputeOp):
            continue
        seen.add(id(op))
        if is_injective(op.tag) and op is not root and not op.reduce_axis:
            s[op].compute_inline()
        callback(op)
        stack.extend(t.op for t in op.input_tensors)
