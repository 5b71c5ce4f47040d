"""Passes over the loop IR: simplification with loop ranges, substitution, free variables; and TVM's
``tir.transform.prim_func_pass``, by which users write their own (run by ``lower`` when a ``PassContext``
lists them under ``"tir.add_lower_pass"``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autosched.te import expr as E
from autosched.te.expr import Expr, IntImm, Var
from autosched.tir import stmt as S
from autosched.tir.arith import ANY_RANGES, Lin, Simplifier, linear, simplify
from autosched.transform import Pass, PassContext


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
    if isinstance(s, S.Evaluate):
        return S.Evaluate(fn(s.value))
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
            used |= E.free_var_set(e)
    return used - bound


def simplify_stmt(s: S.Stmt, ranges: dict) -> S.Stmt:
    """Simplify every expression knowing each loop variable's range; drop proven guards and
    single-iteration loops (their variable becomes 0)."""
    return _StmtSimplifier().stmt(s, _Scope(ranges), _Zero({}))


class _Scope:
    """The ranges of one loop scope and one simplifier for all its expressions (they share subtrees),
    made on first use: most scopes hold only the next loop, whose extent is usually a constant."""

    __slots__ = ("ranges", "_simp")

    def __init__(self, ranges: dict):
        self.ranges = ranges
        self._simp: Simplifier | None = None

    def simp(self, e: Expr) -> Expr:
        if type(e) is IntImm or type(e) is Var:
            return e
        if self._simp is None:
            self._simp = Simplifier(self.ranges)
        return self._simp.run(e)


class _Zero:
    """Variables of removed single-iteration loops, replaced by 0 lazily (one pass per expression, memoised)
    instead of rewriting the whole loop body once per removed loop.

    A canonical sum of variables (marked as simplifying to itself) becomes directly the canonical sum of the
    remaining terms: what simplifying the substituted sum gives, already marked, so the scope's simplifier
    does not walk it again."""

    __slots__ = ("vmap", "keys", "memo")

    def __init__(self, vmap: dict):
        self.vmap = vmap
        self.keys = frozenset(vmap)
        self.memo: dict[int, tuple[Expr, Expr]] = {}

    def __call__(self, e: Expr) -> Expr:
        if not self.vmap:
            return e
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        if E.free_var_set(e).isdisjoint(self.keys):
            r = e
        elif isinstance(e, Var):
            r = self.vmap[e]
        elif getattr(e, "_fix", None) is ANY_RANGES and type(e) in (E.Add, E.Sub, E.Mul):
            lin = linear(e)
            if all(type(self.vmap[a]) is IntImm and self.vmap[a].value == 0 and self.vmap[a].dtype == lin.dtype
                   for _, a in lin.terms.values() if a in self.keys):
                r = Lin({k: v for k, v in lin.terms.items() if v[1] not in self.keys}, lin.const, lin.dtype).to_expr()
            else:
                r = E.substitute(e, self.vmap)
        else:
            kids = E.children(e)
            new = [self(c) for c in kids]
            r = E.rebuild(e, new) if any(n is not o for n, o in zip(new, kids)) else e
        self.memo[id(e)] = (e, r)
        return r


class _StmtSimplifier:
    def stmt(self, s: S.Stmt, sc: _Scope, zero: _Zero) -> S.Stmt:
        simp = sc.simp
        if isinstance(s, S.For):
            ext = simp(zero(s.extent))
            if isinstance(ext, IntImm) and ext.value == 1 and s.kind != "thread_binding":
                return self.stmt(s.body, sc, _Zero({**zero.vmap, s.var: IntImm(0)}))
            if isinstance(ext, IntImm) and ext.value <= 0:
                return S.SeqStmt([])
            inner = dict(sc.ranges)
            if type(ext) is IntImm:  # what simplify(ext - 1) gives, without building it
                inner[s.var] = (IntImm(0), IntImm(ext.value - 1, ext.dtype))
            else:
                inner[s.var] = (IntImm(0), simplify(ext - 1, sc.ranges))
            return S.For(s.var, ext, s.kind, self.stmt(s.body, _Scope(inner), zero), s.thread_tag)
        if isinstance(s, S.BufferStore):
            return S.BufferStore(s.buffer, simp(zero(s.value)), [simp(zero(i)) for i in s.indices])
        if isinstance(s, S.Allocate):
            return S.Allocate(s.buffer, self.stmt(s.body, sc, zero))
        if isinstance(s, S.IfThenElse):
            c = simp(zero(s.cond))
            if isinstance(c, IntImm):
                if c.value:
                    return self.stmt(s.then_case, sc, zero)
                return self.stmt(s.else_case, sc, zero) if s.else_case is not None else S.SeqStmt([])
            return S.IfThenElse(c, self.stmt(s.then_case, sc, zero),
                                self.stmt(s.else_case, sc, zero) if s.else_case is not None else None)
        if isinstance(s, S.LetStmt):
            return S.LetStmt(s.var, simp(zero(s.value)), self.stmt(s.body, sc, zero))
        if isinstance(s, S.Evaluate):
            return S.Evaluate(simp(zero(s.value)))
        if isinstance(s, S.SeqStmt):
            return S.seq([self.stmt(x, sc, zero) for x in s.seq if not (isinstance(x, S.SeqStmt) and not x.seq)])
        return s


def loop_vars(s: S.Stmt) -> list[Var]:
    return [x.var for x in S.walk_stmts(s) if isinstance(x, S.For)]


class PrimFuncPass(Pass):
    """A pass over lowered functions: ``pass_(func)`` is ``pass_func(func, func, pass_context)`` (TVM's
    arguments: the function, its module, the context; here the module is the function itself)."""

    def __init__(self, pass_func: Callable, opt_level: int, name: str):
        self.pass_func = pass_func
        super().__init__(name, opt_level, self._run)

    def _run(self, func: S.PrimFunc) -> S.PrimFunc:
        out = self.pass_func(func, func, PassContext.current())
        if not isinstance(out, S.PrimFunc):
            raise TypeError(f"pass {self.name}: must return the (new) PrimFunc, e.g. f.with_body(body); got {out!r}")
        return out


def prim_func_pass(pass_func: Callable | None = None, opt_level: int = 0, name: str | None = None,
                   required: Any = None) -> Any:
    """TVM's decorator that makes ``pass_func(func, mod, ctx) -> func`` a pass over lowered functions."""

    def make(fn: Callable) -> PrimFuncPass:
        if not callable(fn):
            raise TypeError(f"prim_func_pass: {fn!r} is not callable")
        return PrimFuncPass(fn, opt_level, name or fn.__name__)

    return make(pass_func) if pass_func is not None else make
