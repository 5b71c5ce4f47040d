"""Visiting the loop IR, under TVM's ``tvm.tir.stmt_functor`` names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


def _replacer(kids: list, done: list) -> Callable[[S.Stmt], S.Stmt]:
    table = {id(k): d for k, d in zip(kids, done)}
    return lambda k: table[id(k)]


def ir_transform(stmt: S.Stmt, preorder: Callable[[Any], Any] | None, postorder: Callable[[Any], Any] | None,
                 only_enable: Sequence[str] | None = None) -> S.Stmt:
    """Rewrite statements (TVM's ``ir_transform``): ``preorder(s)`` may return a replacement, which is kept
    as it is; otherwise the children are rewritten and ``postorder(new s)`` may return a replacement (None
    keeps it). ``only_enable`` limits both to statement kinds named as TVM does (``["tir.For"]``)."""
    kinds = {k.removeprefix("tir.") for k in only_enable} if only_enable else None

    def enabled(s: S.Stmt) -> bool:
        return kinds is None or type(s).__name__ in kinds

    def go(s: S.Stmt) -> S.Stmt:
        if preorder is not None and enabled(s):
            r = preorder(s)
            if r is not None:
                return r
        kids = S.stmt_children(s)
        done = [go(k) for k in kids]
        # unchanged children keep the node itself (a pass may look nodes up by identity)
        new = s if all(a is b for a, b in zip(kids, done)) else S.map_children(s, _replacer(kids, done))
        if postorder is not None and enabled(new):
            r = postorder(new)
            if r is not None:
                return r
        return new

    return go(stmt)


def substitute(node: Any, vmap: dict) -> Any:
    """``node`` (a statement or an expression) with variables replaced by the values in ``vmap`` (keys are
    variables; values expressions or numbers)."""
    vmap = {k: E.convert(v) for k, v in vmap.items()}
    if isinstance(node, E.Expr):
        return E.substitute(node, vmap)
    return substitute_stmt(node, vmap)


__all__ = ["ir_transform", "post_order_visit", "substitute"]
