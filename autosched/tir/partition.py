"""Loop partitioning: guards that are linear in a loop variable stop costing anything inside the loop.

Padding read in place (a convolution or pooling window over the edge of its input) and split tails leave
guards such as ``x.outer*14 + x.c + kw >= 1`` in a loop nest. Two rewrites of serial loops (unrolled loops
need none: their variable is a constant in each copy, so their guards fold):

- **tightening**: a serial loop whose whole body is ``if (c)`` runs only where ``c`` holds, so conjuncts of
  ``c`` linear in the loop variable become its bounds (``for kh: if (y + kh >= 1)`` starts at ``max(0, 1-y)``);
- **partitioning**: a loop containing guards linear in its variable (and in inner loops of constant extent)
  splits into a prefix, an interior where every such guard provably holds (the simplifier then drops them)
  and a suffix; a one-iteration prefix or suffix gets its variable as a constant, so guards inside it fold
  when inner loops are unrolled (TVM's LoopPartition does the same for ``likely`` conditions).

Guards are ``if`` statements and ``select`` conditions (a concatenation's choice of input, padding at the
root): partitioning a loop over the concatenated axis leaves one plain copy per input.

Partitions copy loop bodies, so each function gets a budget of copied statements (outer loops first).
"""

from __future__ import annotations

from autosched.te import expr as E
from autosched.te.expr import Expr, IntImm, Var
from autosched.tir import stmt as S
from autosched.tir.arith import interval, linear, simplify
from autosched.tir.transform import substitute_stmt

#: stores and loops (counted once per iteration of the unrolled loops around them) partitioning may copy per
#: function. Each copied loop costs LLVM's loop passes a full pass over it, so a candidate whose partitions
#: multiply compiles for seconds; the fastest kernels of the shipped logs stay well under the budget (the
#: figures: docs/measured_choices.md)
PARTITION_BUDGET = 1024
#: a loop whose every iteration has guards is split into single iterations when it has at most this many
PEEL_ITERATIONS = 4


def partition_loops(body: S.Stmt, budget: int = PARTITION_BUDGET) -> S.Stmt:
    """``body`` with guarded loops tightened and partitioned (run :func:`simplify_stmt` afterwards)."""
    return _Partitioner(budget).stmt(body)


def _conjuncts(c: Expr) -> list[Expr]:
    return _conjuncts(c.a) + _conjuncts(c.b) if isinstance(c, E.And) else [c]


def _as_nonneg(c: Expr) -> Expr | None:
    """An integer comparison as ``f >= 0`` (returns ``f``), or None."""
    if not isinstance(c, (E.LT, E.LE, E.GT, E.GE)) or not E.is_int(c.a.dtype):
        return None
    a, b = c.a, c.b
    if isinstance(c, E.GE):
        return simplify(a - b)
    if isinstance(c, E.GT):
        return simplify(a - b - 1)
    if isinstance(c, E.LE):
        return simplify(b - a)
    return simplify(b - a - 1)


def _split_linear(f: Expr, v: Var) -> tuple[int, Expr] | None:
    """``f = coef * v + rest`` with ``rest`` free of ``v``: ``(coef, rest)``; None when ``f`` is not linear in
    ``v`` or does not involve it."""
    lin = linear(f)
    coef = 0
    rest_terms = {}
    for k, (c, atom) in lin.terms.items():
        if atom is v:
            coef = c
        elif v in E.free_vars(atom):
            return None
        else:
            rest_terms[k] = [c, atom]
    if coef == 0:
        return None
    return coef, type(lin)(rest_terms, lin.const, lin.dtype).to_expr()


def _floordiv(a: int, b: int) -> int:
    return a // b


class _Partitioner:
    def __init__(self, budget: int):
        self.budget = budget
        # a guard is met again at every loop around it: its normal form and its guards are computed once
        # (keyed by the node's identity; the node is kept so its id stays its own)
        self._forms: dict[int, tuple[Expr, Expr | None]] = {}
        self._store_guards: dict[int, tuple[S.BufferStore, list[Expr]]] = {}

    def _nonneg(self, c: Expr) -> Expr | None:
        hit = self._forms.get(id(c))
        if hit is None:
            hit = self._forms[id(c)] = (c, _as_nonneg(c))
        return hit[1]

    def _guards(self, s: S.Stmt, ranges: dict):
        """Every guard conjunct (of an ``if`` or a ``select``) under ``s`` with the constant ranges of the
        loops between ``s`` and it."""
        if isinstance(s, S.BufferStore):
            hit = self._store_guards.get(id(s))
            if hit is None:
                hit = self._store_guards[id(s)] = (s, [c for e in (s.value, *s.indices) for c in _selects(e)])
            for c in hit[1]:
                yield c, ranges
        elif isinstance(s, S.For):
            inner = dict(ranges)
            if isinstance(s.extent, IntImm):
                inner[s.var] = (IntImm(0, s.var.dtype), IntImm(s.extent.value - 1, s.var.dtype))
            yield from self._guards(s.body, inner)
        elif isinstance(s, S.IfThenElse):
            for c in _conjuncts(s.cond):
                yield c, ranges
            yield from self._guards(s.then_case, ranges)
            if s.else_case is not None:
                yield from self._guards(s.else_case, ranges)
        elif isinstance(s, S.SeqStmt):
            for x in s.seq:
                yield from self._guards(x, ranges)
        elif isinstance(s, (S.Allocate, S.LetStmt)):
            yield from self._guards(s.body, ranges)

    def stmt(self, s: S.Stmt) -> S.Stmt:
        if isinstance(s, S.For):
            if s.kind == "serial":  # unrolled loops need nothing: their guards fold once the variable is constant
                tight = self._tighten(s)
                if tight is not None:
                    return self.stmt(tight)
                parts = self._partition(s)
                if parts is not None:
                    return S.seq([self.stmt(p) for p in parts])
            return S.For(s.var, s.extent, s.kind, self.stmt(s.body), s.thread_tag)
        if isinstance(s, S.SeqStmt):
            return S.seq([self.stmt(x) for x in s.seq])
        if isinstance(s, S.IfThenElse):
            return S.IfThenElse(s.cond, self.stmt(s.then_case),
                                self.stmt(s.else_case) if s.else_case is not None else None)
        if isinstance(s, S.Allocate):
            return S.Allocate(s.buffer, self.stmt(s.body))
        if isinstance(s, S.LetStmt):
            return S.LetStmt(s.var, s.value, self.stmt(s.body))
        return s

    # ------------------------------------------------------------ tightening
    def _tighten(self, s: S.For) -> S.Stmt | None:
        """``for v in [0, n): if (c) B`` -> ``for v in [lo, hi): if (rest of c) B``."""
        body = s.body
        if not isinstance(body, S.IfThenElse) or body.else_case is not None:
            return None
        v = s.var
        lo: Expr = IntImm(0, v.dtype)
        hi: Expr = s.extent
        keep = []
        used = False
        for c in _conjuncts(body.cond):
            f = self._nonneg(c)
            split = _split_linear(f, v) if f is not None else None
            if split is None:
                keep.append(c)
                continue
            coef, rest = split
            used = True
            if coef > 0:  # coef*v + rest >= 0  <=>  v >= ceil(-rest / coef)
                bound = simplify(E.FloorDiv(-rest + (coef - 1), IntImm(coef, v.dtype)))
                lo = simplify(E.Max(lo, bound))
            else:  # v <= floor(rest / -coef)
                bound = simplify(E.FloorDiv(rest, IntImm(-coef, v.dtype)) + 1)
                hi = simplify(E.Min(hi, bound))
        if not used:
            return None
        inner = body.then_case
        for c in keep:
            inner = S.IfThenElse(c, inner)
        nv = Var(v.name, v.dtype)
        return S.For(nv, simplify(hi - lo), s.kind, substitute_stmt(inner, {v: nv + lo}), s.thread_tag)

    # ---------------------------------------------------------- partitioning
    def _partition(self, s: S.For) -> list[S.Stmt] | None:
        """Cut ``s`` where a guard linear in its variable changes from always false to depending on inner
        loops (mixed) to always true over the inner loops' values: a guard is then decided in each piece
        (the simplifier drops it) or mixed in a piece that, if short, is peeled into constant iterations."""
        if not isinstance(s.extent, IntImm) or s.extent.value < 2:
            return None
        v, n = s.var, s.extent.value
        cuts: set[int] = set()
        mixed: list[tuple[int, int]] = []  # the ranges of v where some guard depends on the inner loops
        for c, ranges in self._guards(s.body, {}):
            f = self._nonneg(c)
            split = _split_linear(f, v) if f is not None else None
            if split is None:
                continue
            coef, rest = split
            iv = interval(rest, ranges)
            if iv is None or not isinstance(iv[0], IntImm) or not isinstance(iv[1], IntImm):
                continue  # depends on outer variables (or is unbounded): not decidable here
            rmin, rmax = iv[0].value, iv[1].value
            if coef > 0:  # coef*v + rest >= 0: false below ceil(-rmax/coef), true from ceil(-rmin/coef)
                a, b = -(rmax // coef), -(rmin // coef)
            else:  # true up to floor(rmin/-coef), false from floor(rmax/-coef) + 1
                a, b = _floordiv(rmin, -coef) + 1, _floordiv(rmax, -coef) + 1
            a, b = max(0, min(n, a)), max(0, min(n, b))
            cuts.update(x for x in (a, b) if 0 < x < n)
            if a < b:
                mixed.append((a, b))
        if not cuts:
            if mixed and n <= PEEL_ITERATIONS:
                # every iteration has guards that depend on inner loops, but there are few: one copy each, its
                # variable a constant, so the guards fold where inner loops are unrolled (an edge tile)
                cost = (n - 1) * S.emitted_size(s.body)
                if cost <= self.budget:
                    self.budget -= cost
                    return [_piece(s, k, k + 1) for k in range(n)]
            return None
        bounds = [0, *sorted(cuts), n]
        cost = (len(bounds) - 2) * S.emitted_size(s.body)
        if cost > self.budget:
            return None
        self.budget -= cost
        return [_piece(s, lo, hi) for lo, hi in zip(bounds, bounds[1:])]


def _piece(s: S.For, begin: int, end: int) -> S.Stmt | None:
    """The iterations ``[begin, end)`` of loop ``s``: its body with the variable a constant when there is
    one iteration, else a loop of ``end - begin``."""
    if end <= begin:
        return None
    v = s.var
    if end - begin == 1:
        return substitute_stmt(s.body, {v: IntImm(begin, v.dtype)})
    nv = Var(v.name, v.dtype)
    shifted = nv + IntImm(begin, v.dtype) if begin else nv
    return S.For(nv, IntImm(end - begin, s.extent.dtype), s.kind, substitute_stmt(s.body, {v: shifted}),
                 s.thread_tag)


def _selects(e: Expr):
    for x in E.walk(e):
        if isinstance(x, E.Select):
            yield from _conjuncts(x.cond)
