"""Visiting the loop IR, under TVM's ``tvm.tir.stmt_functor`` names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autosched.te import expr as E
from autosched.tir import stmt as S
from autosched.tir.transform import substitute_stmt


def post_order_visit(node: Any, fvisit: Callable[[Any], Any]) -> None:
    """Call ``fvisit`` on every statement and expression under ``node`` (a Stmt, an Expr, or a PrimFunc's
    body), children before their parent, each node once."""
    seen: set[int] = set()

    def visit_expr(e: E.Expr) -> None:
        if id(e) in seen:
            return
        seen.add(id(e))
        for c in E.children(e):
            visit_expr(c)
        fvisit(e)

    def visit_stmt(s: S.Stmt) -> None:
        if id(s) in seen:
            return
        seen.add(id(s))
        for e in S.stmt_exprs(s):
            visit_expr(e)
        for c in S.stmt_children(s):
            visit_stmt(c)
        fvisit(s)

    if isinstance(node, S.PrimFunc):
        node = node.body
    if isinstance(node, E.Expr):
        visit_expr(node)
    else:
        visit_stmt(node)


def substitute(node: Any, vmap: dict) -> Any:
    """``node`` (a statement or an expression) with variables replaced by the values in ``vmap`` (keys are
    variables; values expressions or numbers)."""
    vmap = {k: E.convert(v) for k, v in vmap.items()}
    if isinstance(node, E.Expr):
        return E.substitute(node, vmap)
    return substitute_stmt(node, vmap)


__all__ = ["post_order_visit", "substitute"]
