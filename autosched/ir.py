"""TVM's ``tvm.ir`` names that te code uses: ``save_json`` / ``load_json`` of te tensors, operations and schedules
(:mod:`autosched.te.serialize`), ``structural_equal`` of expressions, ``Op`` (what a ``tir.Call`` calls:
``call.op.name == "tir.exp"``) and ``Range``."""

from __future__ import annotations

from typing import Any

from autosched.te import expr as E
from autosched.te.expr import Op
from autosched.te.serialize import load_json, save_json
from autosched.te.tensor import Range
from autosched.tir.arith import skey


def _key(x: Any, free: dict | None) -> Any:
    """A structural key of an expression, a number or a list of them; with ``free``, variables by the order
    they are first met (TVM's ``map_free_vars``) instead of by identity."""
    if isinstance(x, (list, tuple)):
        return ("list",) + tuple(_key(v, free) for v in x)
    if isinstance(x, E.IterVar):
        x = x.var
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        x = E.convert(x)
    if not isinstance(x, E.Expr):
        raise TypeError(f"structural_equal compares te expressions (and lists of them), got {type(x).__name__}")
    if free is None:
        return skey(x)
    if isinstance(x, E.Var):
        return ("var", x.dtype, free.setdefault(id(x), len(free)))
    if isinstance(x, (E.IntImm, E.FloatImm)):
        return skey(x)
    return skey(x)[:2] + tuple(_key(c, free) for c in E.children(x))  # the node's kind and what it names


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """Whether two expressions are the same tree (TVM's ``tvm.ir.structural_equal``): the same nodes, constants
    and variables; ``map_free_vars`` lets variables differ by name and identity as long as they correspond."""
    if map_free_vars:
        return _key(lhs, {}) == _key(rhs, {})
    return _key(lhs, None) == _key(rhs, None)


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """Raise, showing both, where :func:`structural_equal` is false."""
    if not structural_equal(lhs, rhs, map_free_vars):
        raise ValueError(f"not structurally equal:\n  {lhs}\n  {rhs}")


__all__ = ["Op", "Range", "assert_structural_equal", "load_json", "save_json", "structural_equal"]
