"""Passes over the loop IR: simplification with loop ranges, substitution, free variables."""

from __future__ import annotations

from collections.abc import Callable

from autosched.te import expr as E
from autosched.te.expr import Expr, IntImm, Var
from autosched.tir import stmt as S
from autosched.tir.arith import simplify


def map_exprs(s: S.Stmt, fn: Callable[[Expr], Expr]) -> S.Stmt:
    """Rebuild a statement tree with ``fn`` applied to every expression it holds."""
    if isinstance(s, S.For):
        return S.For(s.var, fn(s.extent), s.kind, map_exprs(s.body, fn), s.thread_tag)
    if isinstance(s, S.BufferStore):
        return S.BufferStore(s.buffer, fn(s.value), [fn(i) for i in s.indices])
    if isinstance(s, S.Allocate):
        return S.Allocate(s.buffer, map_exprs(s.body, fn))
    if isinstance(s, S.IfThenElse):
        return S.IfThenElse(fn(s.cond), map_exprs(s.then_case, fn),
                            map_exprs(s.else_case, fn) if s.else_case is not None else None)
    if isinstance(s, S.LetStmt):
        return S.LetStmt(s.var, fn(s.value), map_exprs(s.body, fn))
    if isinstance(s, S.SeqStmt):
        return S.SeqStmt([map_exprs(x, fn) for x in s.seq])
    return s


def substitute_stmt(s: S.Stmt, vmap: dict) -> S.Stmt:
    return map_exprs(s, lambda e: E.substitute(e, vmap))


def free_vars_stmt(s: S.Stmt) -> set:
    """Variables used but not bound (by a loop or let) inside ``s``."""
    used: set = set()
    bound: set = set()
    for x in S.walk_stmts(s):
        if isinstance(x, (S.For, S.LetStmt)):
            bound.add(x.var)
        for e in S.stmt_exprs(x):
            used |= E.free_vars(e)
    return used - bound


def simplify_stmt(s: S.Stmt, ranges: dict) -> S.Stmt:
    """Simplify every expression knowing each loop variable's range; drop proven guards and
    single-iteration loops."""
    if isinstance(s, S.For):
        ext = simplify(s.extent, ranges)
        if isinstance(ext, IntImm) and ext.value == 1 and s.kind != "thread_binding":
            return simplify_stmt(substitute_stmt(s.body, {s.var: IntImm(0)}), ranges)
        if isinstance(ext, IntImm) and ext.value <= 0:
            return S.SeqStmt([])
        inner = dict(ranges)
        inner[s.var] = (IntImm(0), simplify(ext - 1, ranges))
        return S.For(s.var, ext, s.kind, simplify_stmt(s.body, inner), s.thread_tag)
    if isinstance(s, S.BufferStore):
        return S.BufferStore(s.buffer, simplify(s.value, ranges), [simplify(i, ranges) for i in s.indices])
    if isinstance(s, S.Allocate):
        return S.Allocate(s.buffer, simplify_stmt(s.body, ranges))
    if isinstance(s, S.IfThenElse):
        c = simplify(s.cond, ranges)
        if isinstance(c, IntImm):
            if c.value:
                return simplify_stmt(s.then_case, ranges)
            return simplify_stmt(s.else_case, ranges) if s.else_case is not None else S.SeqStmt([])
        return S.IfThenElse(c, simplify_stmt(s.then_case, ranges),
                            simplify_stmt(s.else_case, ranges) if s.else_case is not None else None)
    if isinstance(s, S.LetStmt):
        return S.LetStmt(s.var, simplify(s.value, ranges), simplify_stmt(s.body, ranges))
    if isinstance(s, S.SeqStmt):
        return S.seq([simplify_stmt(x, ranges) for x in s.seq if not (isinstance(x, S.SeqStmt) and not x.seq)])
    return s


def loop_vars(s: S.Stmt) -> list[Var]:
    return [x.var for x in S.walk_stmts(s) if isinstance(x, S.For)]
