"""Integer arithmetic on expressions: simplification, intervals and proofs.

Index expressions are canonicalised as linear sums ``c0 + c1*t1 + c2*t2 ...``
over atoms (variables and non-linear subterms). Intervals are pairs of
expressions, possibly symbolic; ``ranges`` maps a loop variable to the closed
interval ``(lo, hi)`` it takes, and a variable absent from it is a fixed point.

Lowering calls these functions on every candidate the search scores, so they
cache on the (immutable) expression nodes: structural keys, linear forms,
free variables, the simplification without ranges, and a mark on simplifier
results saying under which ranges they are their own simplification. The
results are the same as computing everything afresh; only the work differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched.te import expr as E
from autosched.te.expr import Expr, IntImm, is_int
from autosched.tir.stmt import BufferLoad

Interval = tuple  # (lo: Expr, hi: Expr)
Ranges = dict  # Var -> (lo: Expr, hi: Expr)
ANY_RANGES: dict = {}  # the ``_fix`` of an expression that simplifies to itself whatever the ranges
_NO_VARS: frozenset = frozenset()


def skey(e: Expr):
    """A structural key: equal for structurally equal expressions (variables by identity); cached on the node."""
    k = getattr(e, "_sk", None)
    if k is not None:
        return k
    if isinstance(e, E.Var):
        k = ("v", id(e))
    elif isinstance(e, (E.IntImm, E.FloatImm)):
        k = ("c", e.value, e.dtype)
    else:
        extra = ()
        if isinstance(e, E.Call):
            extra = (e.name,)
        elif isinstance(e, E.Cast):
            extra = (e.dtype,)
        elif isinstance(e, BufferLoad):
            extra = (id(e.buffer),)
        elif isinstance(e, E.TensorLoad):
            extra = (id(e.tensor),)
        k = (type(e).__name__, extra) + tuple(skey(c) for c in E.children(e))
    e._sk = k
    return k


def conj(conds: list[Expr]) -> Expr:
    """The conjunction of ``conds`` (at least one), each structurally distinct condition once, in the order
    first seen: the guard lowering puts on a loop body."""
    uniq: dict = {}
    for c in conds:
        uniq.setdefault(skey(c), c)
    conds = list(uniq.values())
    out = conds[0]
    for c in conds[1:]:
        out = E.And(out, c)
    return out


class Lin:
    """``const + sum(coef * atom)`` with integer coefficients; atoms keyed structurally.

    Treated as immutable once built: :func:`linear` caches it on the expression it describes.
    """

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, terms: dict, const: int, dtype: str):
        self.terms = terms  # key -> [coef, atom]
        self.const = const
        self.dtype = dtype

    def is_const(self) -> bool:
        return not self.terms

    def scaled(self, c: int) -> Lin:
        if c == 0:
            return Lin({}, 0, self.dtype)
        return Lin({k: [v[0] * c, v[1]] for k, v in self.terms.items()}, self.const * c, self.dtype)

    def plus(self, other: Lin, sign: int = 1) -> Lin:
        terms = {k: [v[0], v[1]] for k, v in self.terms.items()}
        for k, (c, a) in other.terms.items():
            if k in terms:
                terms[k][0] += sign * c
                if terms[k][0] == 0:
                    del terms[k]
            else:
                terms[k] = [sign * c, a]
        return Lin(terms, self.const + sign * other.const, self.dtype)

    def to_expr(self) -> Expr:
        """The canonical expression (positive terms, negative terms, constant). Its linear form and the free
        variables of every node built are cached on them, so reading the result back (as the simplifier does
        at every enclosing sum) costs no new walk."""
        dt = self.dtype
        pos = [(c, a) for c, a in self.terms.values() if c > 0]
        neg = [(-c, a) for c, a in self.terms.values() if c < 0]
        if not pos and not neg:
            return IntImm(self.const, dt)
        fvs = E.free_var_set

        def term(c: int, a: Expr) -> tuple[Expr, frozenset]:
            fa = getattr(a, "_fv", None)
            if fa is None:
                fa = fvs(a)
            if c == 1:
                return a, fa
            m = E.Mul(a, IntImm(c, dt), dt)
            m._fv = fa
            return m, fa

        def join(cls: type, x: Expr, fx: frozenset, y: Expr, fy: frozenset) -> tuple[Expr, frozenset]:
            f = fx if (not fy or fy is fx or fy <= fx) else fy if (not fx or fx <= fy) else fx | fy
            n = cls(x, y, dt)
            n._fv = f
            return n, f

        out: Expr | None = None
        fo: frozenset = _NO_VARS
        for c, a in pos:
            t, ft = term(c, a)
            if out is None:
                out, fo = t, ft
            else:
                out, fo = join(E.Add, out, fo, t, ft)
        rest = neg
        if out is None:
            if self.const != 0:
                out = IntImm(self.const, dt)
            else:
                c, a = neg[0]
                out, fo = term(-c, a)  # -c != 1: always a product
                rest = neg[1:]
        for c, a in rest:
            t, ft = term(c, a)
            out, fo = join(E.Sub, out, fo, t, ft)
        if pos or rest is not neg:  # the constant goes last, except after a leading constant
            if self.const > 0:
                out, fo = join(E.Add, out, fo, IntImm(self.const, dt), _NO_VARS)
            elif self.const < 0:
                out, fo = join(E.Sub, out, fo, IntImm(-self.const, dt), _NO_VARS)
        return self._remember(out)

    def normal(self) -> Lin:
        """The linear form of ``self.to_expr()``: the same sum with its positive terms first."""
        terms = self.terms
        seen_neg = False
        for c, _ in terms.values():
            if c < 0:
                seen_neg = True
            elif seen_neg:
                pos = {k: v for k, v in terms.items() if v[0] > 0}
                pos.update((k, v) for k, v in terms.items() if v[0] < 0)
                return Lin(pos, self.const, self.dtype)
        return self

    def _remember(self, out: Expr) -> Expr:
        """Cache on ``out`` the linear form :func:`linear` would read from it. A sum of variables (of its own
        type) is its own simplification under any ranges: the sum rule gives back the same terms in the same
        order and nothing else applies; mark it so that no later simplifier walks it again."""
        if getattr(out, "_lin", None) is None:
            out._lin = self.normal()
        dt = self.dtype
        if getattr(out, "_fix", None) is None and is_int(dt):
            for _, a in self.terms.values():
                if type(a) is not E.Var or a.dtype != dt:
                    return out
            out._fix = ANY_RANGES
            out._simp = out
        return out


def _atom(e: Expr) -> Lin:
    return Lin({skey(e): [1, e]}, 0, e.dtype)


def linear(e: Expr) -> Lin:
    """The linear form of an (already simplified) integer expression; cached on ``e`` (do not change it)."""
    lin = getattr(e, "_lin", None)
    if lin is not None:
        return lin
    if isinstance(e, IntImm):
        lin = Lin({}, e.value, e.dtype)
    elif isinstance(e, E.Add):
        lin = linear(e.a).plus(linear(e.b))
    elif isinstance(e, E.Sub):
        lin = linear(e.a).plus(linear(e.b), -1)
    else:
        lin = None
        if isinstance(e, E.Mul):
            la, lb = linear(e.a), linear(e.b)
            if lb.is_const():
                lin = la.scaled(lb.const)
            elif la.is_const():
                lin = lb.scaled(la.const)
        if lin is None:
            lin = _atom(e)
    e._lin = lin
    return lin


def _floor_mods(lin: Lin) -> dict:
    """The ``a % c`` terms of a sum (c a positive constant), keyed ``(skey(a), c)``: ``(term key, coefficient)``."""
    mods = {}
    for key, (c, atom) in lin.terms.items():
        if type(atom) is E.FloorMod and type(atom.b) is IntImm and atom.b.value > 0:
            mods[(skey(atom.a), atom.b.value)] = (key, c)
    return mods


def _merge_divmod(lin: Lin) -> Lin:
    """``k*c*(a // c) + k*(a % c)`` -> ``k*a`` in a sum: a flattened index split again (a fused loop over
    blocked dimensions, split and vectorized) is the plain index, so its accesses are seen to be contiguous.
    Nested digits merge first (:func:`_merge_nested_mods`), so a fused loop over three or more dimensions
    flattens too."""
    mods = _floor_mods(lin)
    if not mods:
        return lin
    if len(mods) > 1:
        merged = _merge_nested_mods(lin, mods)
        if merged is not lin:
            lin, mods = merged, _floor_mods(merged)
    out = lin
    for key, (c, atom) in lin.terms.items():
        if type(atom) is not E.FloorDiv or type(atom.b) is not IntImm or atom.b.value <= 0:
            continue
        d = atom.b.value
        hit = mods.get((skey(atom.a), d))
        if hit is None or c % d or hit[1] * d != c or key not in out.terms or hit[0] not in out.terms:
            continue
        k = hit[1]
        rest = {kk: list(v) for kk, v in out.terms.items() if kk not in (key, hit[0])}
        out = Lin(rest, out.const, out.dtype).plus(linear(atom.a).scaled(k))
    return out


def _merge_nested_mods(lin: Lin, mods: dict) -> Lin:
    """``k*c*((a // c) % m) + k*(a % c)`` -> ``k*(a % (c*m))`` in a sum (``mods``: its :func:`_floor_mods`),
    until none is left: the lower digits of a fused index (``x // 3 % 3 * 3 + x % 3`` is ``x % 9``), which
    :func:`_merge_divmod` then joins to the top digit. Returns ``lin`` itself when nothing merges."""
    while len(mods) > 1:
        for key, (c, atom) in lin.terms.items():
            if type(atom) is not E.FloorMod or type(atom.a) is not E.FloorDiv or type(atom.a.b) is not IntImm:
                continue
            d, m = atom.a.b.value, atom.b.value
            if d <= 0 or m <= 0:
                continue
            hit = mods.get((skey(atom.a.a), d))
            if hit is None or hit[0] == key or c % d or hit[1] * d != c:
                continue
            merged = E.FloorMod(atom.a.a, IntImm(d * m, atom.b.dtype))
            rest = {kk: list(v) for kk, v in lin.terms.items() if kk not in (key, hit[0])}
            lin = Lin(rest, lin.const, lin.dtype).plus(_atom(merged).scaled(hit[1]))
            mods = _floor_mods(lin)
            break
        else:
            break
    return lin


def _fold_int(op: type, a: int, b: int) -> int | None:
    if op is E.Add:
        return a + b
    if op is E.Sub:
        return a - b
    if op is E.Mul:
        return a * b
    if op is E.FloorDiv:
        return a // b if b != 0 else None
    if op is E.FloorMod:
        return a % b if b != 0 else None
    if op is E.Min:
        return min(a, b)
    if op is E.Max:
        return max(a, b)
    return None


_CMP = {
    E.EQ: lambda a, b: a == b,
    E.NE: lambda a, b: a != b,
    E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b,
    E.GT: lambda a, b: a > b,
    E.GE: lambda a, b: a >= b,
}


def simplify(e: Expr, ranges: Ranges | None = None) -> Expr:
    """Fold constants, canonicalise integer sums, and drop div/mod/min/max/compares decidable over ``ranges``."""
    t = type(e)
    if t is E.Var or t is IntImm:
        return e
    if not ranges:
        r = getattr(e, "_simp", None)
        return r if r is not None else Simplifier({}).run(e)
    return Simplifier(ranges).run(e)


_SUM_TYPES = (E.Add, E.Sub, E.Mul)
_INT_DTYPES = frozenset(E._INT)  # is_int as a set lookup


def _is_sum(e: Expr) -> bool:
    """An integer +, - or *: simplified as a whole linear form (exact types, as the rules match them)."""
    return type(e) in _SUM_TYPES and e.dtype in _INT_DTYPES


class Simplifier:
    """Bottom-up simplification under fixed ``ranges`` (what :func:`simplify` does), reusable.

    Results are memoised per node: without ranges on the node itself (``_simp``: the result depends on the
    node alone), with ranges in this object (keeping the node alive, so its id stays its own). A subtree
    that uses no variable of ``ranges`` simplifies as without ranges, so it shares the node cache. One
    object may serve many expressions under the same ranges (``simplify_stmt`` does so per loop scope).

    Simplification is idempotent (checked on all 61,000 calls made while lowering 60 sampled candidates of
    each built-in workload), so a result is marked as its own simplification (``_fix``: under the ranges that
    produced it; ``_simp`` when no range applies) and is not walked again by a later simplifier whose ranges
    agree on its variables: lowering simplifies the same index expressions in several passes. Were some
    rule not idempotent, an expression would stay less simplified, never wrong.

    A nest of integer +, -, * is combined as linear forms and only its outermost result is built as an
    expression: the same result as simplifying every inner sum to a canonical expression and reading it
    back, without building those inner expressions.
    """

    def __init__(self, ranges: Ranges):
        self.ranges = dict(ranges)  # a snapshot: results keep a reference to it in ``_fix``
        self.keys = frozenset(ranges)
        self.memo: dict[int, tuple[Expr, Expr]] = {}
        self.lmemo: dict[int, tuple[Expr, Lin]] = {}
        self.iv_memo: dict[int, tuple[Expr, tuple | None]] = {}
        self._free: Simplifier | None = self if not self.keys else None

    def _no_ranges(self) -> Simplifier:
        if self._free is None:
            self._free = Simplifier({})
        return self._free

    def _fixed(self, e: Expr, fv: frozenset) -> bool:
        """True when ``e`` is a simplifier's result under ranges that agree with ours on its variables."""
        fx = getattr(e, "_fix", None)
        if fx is None:
            return False
        if fx is self.ranges or fx is ANY_RANGES:
            return True
        mine = self.ranges
        for v in fv:
            a, b = fx.get(v), mine.get(v)
            if a is b:
                continue
            if a is None or b is None or skey(a[0]) != skey(b[0]) or skey(a[1]) != skey(b[1]):
                return False
        return True

    def _done(self, r: Expr, fv: frozenset | None) -> None:
        """Mark ``r`` as a fixed point under our ranges (``fv``: its variables, None when ranges are empty)."""
        if fv is None or fv.isdisjoint(self.keys):
            if getattr(r, "_simp", None) is None:
                r._simp = r
        elif getattr(r, "_fix", None) is None:
            r._fix = self.ranges

    def run(self, e: Expr) -> Expr:
        """The simplified ``e``."""
        t = type(e)
        if t is E.Var or t is IntImm:
            return e
        if not self.keys:
            r = getattr(e, "_simp", None)
            if r is None:
                r = self._sum(e).to_expr() if _is_sum(e) else self._visit(e)
                e._simp = r
                if r is not e:
                    self._done(r, None)
            return r
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        fv = getattr(e, "_fv", None)
        if fv is None:
            fv = E.free_var_set(e)
        if fv.isdisjoint(self.keys):
            r = getattr(e, "_simp", None)
            if r is None:
                r = self._no_ranges().run(e)
        elif self._fixed(e, fv):
            r = e
        else:
            r = self._sum(e).to_expr() if _is_sum(e) else self._visit(e)
            self._done(r, E.free_var_set(r))
        self.memo[id(e)] = (e, r)
        return r

    def proves_lt(self, a: Expr, b: Expr) -> bool:
        """True when ``self.run(a < b)`` would be the constant 1, decided from the bounds of ``a - b`` without
        building the comparison (split-tail guards are mostly such); False means "ask ``run``". Only for an
        integer ``a`` that is already simplified here and uses our ranges, and a constant ``b`` of its type:
        then ``run`` would keep both sides and apply the same bound rule."""
        if type(b) is not IntImm or b.dtype != a.dtype or a.dtype not in _INT_DTYPES or type(a) is IntImm:
            return False
        if E.free_var_set(a).isdisjoint(self.keys) or self.run(a) is not a:
            return False
        d = self._lin_bounds(linear(a).plus(linear(b), -1))
        return d is not None and d[1] < 0

    def _lin_of(self, x: Expr) -> Lin:
        """``linear(self.run(x))``, without building ``run(x)`` when ``x`` is a sum."""
        if not _is_sum(x):
            return linear(self.run(x))
        r = getattr(x, "_simp", None)
        if r is not None:
            return linear(r)
        hit = self.lmemo.get(id(x))
        if hit is not None:
            return hit[1]
        if self.keys:
            r = self.memo.get(id(x))
            if r is not None:
                return linear(r[1])
            fv = getattr(x, "_fv", None)
            if fv is None:
                fv = E.free_var_set(x)
            if fv.isdisjoint(self.keys):
                return linear(self._no_ranges().run(x))
            if self._fixed(x, fv):
                return linear(x)
        lin = self._sum(x).normal()
        self.lmemo[id(x)] = (x, lin)
        return lin

    def _sum(self, e: Expr) -> Lin:
        """The linear form (as simplify_lin gives it) of the simplified integer sum ``e``."""
        la, lb = self._lin_of(e.a), self._lin_of(e.b)
        t = type(e)
        if t is E.Add:
            return _merge_divmod(la.plus(lb))
        if t is E.Sub:
            return _merge_divmod(la.plus(lb, -1))
        if lb.is_const():
            return la.scaled(lb.const)
        if la.is_const():
            return lb.scaled(la.const)
        a, b = self.run(e.a), self.run(e.b)  # a product of two non-constants: an atom
        return linear(e if a is e.a and b is e.b else E.rebuild(e, [a, b]))

    def _visit(self, e: Expr) -> Expr:
        kids = E.children(e)
        if not kids:
            return e
        new = [self.run(c) for c in kids]
        if any(n is not o for n, o in zip(new, kids)):
            e = E.rebuild(e, new)
        return self._rule(e)

    def _interval(self, e: Expr):
        return interval(e, self.ranges)

    def _atom_interval(self, a: Expr):
        hit = self.iv_memo.get(id(a))
        if hit is not None:
            return hit[1]
        iv = interval(a, self.ranges)
        self.iv_memo[id(a)] = (a, iv)
        return iv

    def _const_interval(self, e: Expr):
        """Constant bounds of a canonical sum (``Lin.to_expr`` output), or None."""
        return self._lin_bounds(linear(e), e)

    def _lin_bounds(self, lin: Lin, e: Expr | None = None):
        """Constant bounds of ``lin.to_expr()`` (``e`` when already built), or None.

        Fast path: when every atom has constant bounds the sum's are ``const + sum(coef * bound)``, exactly
        what :func:`interval` computes term by term; otherwise it asks :func:`interval` for the whole."""
        lo = hi = lin.const
        for c, a in lin.terms.values():
            iv = self._atom_interval(a)
            if iv is None or not isinstance(iv[0], IntImm) or not isinstance(iv[1], IntImm):
                break
            if c >= 0:
                lo += c * iv[0].value
                hi += c * iv[1].value
            else:
                lo += c * iv[1].value
                hi += c * iv[0].value
        else:
            return lo, hi
        iv = self._interval(lin.to_expr() if e is None else e)
        if iv is None:
            return None
        lo, hi = iv
        if isinstance(lo, IntImm) and isinstance(hi, IntImm):
            return lo.value, hi.value
        return None

    def _rule(self, e: Expr) -> Expr:
        t = type(e)
        if isinstance(e, E.BinaryOp):
            a, b = e.a, e.b
            ca = a.value if isinstance(a, (IntImm, E.FloatImm)) else None
            cb = b.value if isinstance(b, (IntImm, E.FloatImm)) else None
            if t in _CMP:
                if ca is not None and cb is not None:
                    return IntImm(int(_CMP[t](ca, cb)), "bool")
                if is_int(a.dtype):
                    d = self._lin_bounds(linear(a).plus(linear(b), -1))  # bounds of simplify_lin(a - b)
                    if d is not None:
                        lo, hi = d
                        if t is E.LT:
                            if hi < 0:
                                return IntImm(1, "bool")
                            if lo >= 0:
                                return IntImm(0, "bool")
                        elif t is E.LE:
                            if hi <= 0:
                                return IntImm(1, "bool")
                            if lo > 0:
                                return IntImm(0, "bool")
                        elif t is E.GT:
                            if lo > 0:
                                return IntImm(1, "bool")
                            if hi <= 0:
                                return IntImm(0, "bool")
                        elif t is E.GE:
                            if lo >= 0:
                                return IntImm(1, "bool")
                            if hi < 0:
                                return IntImm(0, "bool")
                        elif t is E.EQ and lo == hi:
                            return IntImm(int(lo == 0), "bool")
                        elif t is E.NE and lo == hi:
                            return IntImm(int(lo != 0), "bool")
                return e
            if t is E.And:
                if ca is not None:
                    return b if ca else a
                if cb is not None:
                    return a if cb else b
                return e
            if t is E.Or:
                if ca is not None:
                    return a if ca else b
                if cb is not None:
                    return b if cb else a
                return e
            if is_int(e.dtype):
                if ca is not None and cb is not None:
                    v = _fold_int(t, ca, cb)
                    if v is not None:
                        return IntImm(v, e.dtype)
                if t in (E.Add, E.Sub, E.Mul):
                    return simplify_lin(e)
                if t in (E.FloorDiv, E.FloorMod) and cb is not None and cb > 0:
                    return self._divmod(e, t, a, cb)
                if t in (E.Min, E.Max):
                    d = self._lin_bounds(linear(a).plus(linear(b), -1))  # bounds of simplify_lin(a - b)
                    if d is not None:
                        lo, hi = d
                        if hi <= 0:
                            return a if t is E.Min else b
                        if lo >= 0:
                            return b if t is E.Min else a
                return e
            # floating point
            if ca is not None and cb is not None:
                ops = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.divide,
                       E.Min: np.minimum, E.Max: np.maximum}
                f = ops.get(t)
                if f is not None:
                    with np.errstate(all="ignore"):
                        return E.FloatImm(float(f(np.dtype(e.dtype).type(ca), np.dtype(e.dtype).type(cb))), e.dtype)
            if t is E.Mul and (cb == 1.0 or ca == 1.0):
                return a if cb == 1.0 else b
            if t is E.Add and (cb == 0.0 or ca == 0.0):
                return a if cb == 0.0 else b
            if t is E.Sub and cb == 0.0:
                return a
            if t is E.Div and cb == 1.0:
                return a
            return e
        if t is E.Not:
            if isinstance(e.a, IntImm):
                return IntImm(1 - e.a.value, "bool")
            return e
        if t is E.Select:
            if isinstance(e.cond, IntImm):
                return e.t if e.cond.value else e.f
            return e
        if t is E.Cast:
            v = e.value
            if isinstance(v, IntImm) and is_int(e.dtype):
                return IntImm(v.value, e.dtype)
            if isinstance(v, (IntImm, E.FloatImm)) and E.is_float(e.dtype):
                return E.FloatImm(float(v.value), e.dtype)
            return e
        return e

    def _divmod(self, e: Expr, t: type, a: Expr, c: int) -> Expr:
        lin = linear(a)
        q_terms, r_terms = {}, {}
        for k, (coef, atom) in lin.terms.items():
            (q_terms if coef % c == 0 else r_terms)[k] = [coef, atom]
        q_const, r_const = divmod(lin.const, c)
        rest = Lin(r_terms, r_const, lin.dtype)
        quot = Lin({k: [v[0] // c, v[1]] for k, v in q_terms.items()}, q_const, lin.dtype)
        rest_e = rest.to_expr()
        rng = self._const_interval(rest_e)
        if rng is not None and 0 <= rng[0] and rng[1] < c:
            # c*q + r with 0 <= r < c
            return quot.to_expr() if t is E.FloorDiv else rest_e
        if rng is not None and rng[0] // c == rng[1] // c and t is E.FloorDiv:
            return simplify_lin(E.Add(quot.to_expr(), IntImm(rng[0] // c, lin.dtype), lin.dtype))
        nested = self._nested_divmod(t, lin, c)
        if nested is not None:
            return nested
        if t is E.FloorMod:
            if not r_terms and not q_terms:
                return IntImm(lin.const % c, lin.dtype)
            if q_terms:
                return E.FloorMod(rest_e, IntImm(c, lin.dtype), lin.dtype)
            return e
        if q_terms and not (rest.is_const() and rest.const == 0):
            return simplify_lin(E.Add(quot.to_expr(), E.FloorDiv(rest_e, IntImm(c, lin.dtype), lin.dtype), lin.dtype))
        if q_terms:
            return quot.to_expr()
        return e


    def _nested_divmod(self, t: type, lin: Lin, c: int) -> Expr | None:
        """``(k*q + r) // (m*k)`` -> ``q // m`` and ``(k*q + r) % (m*k)`` -> ``(q % m)*k + r`` when
        ``0 <= r < k``: a reshape's flattened index (``c*784 + pixel``, the pixel below 784) split again by a
        multiple of 784 gives the channel's quotient, not an expression of the pixel."""
        coefs = [abs(v[0]) for v in lin.terms.values()]
        for k in sorted({d for d in range(2, c) if c % d == 0 and any(x % d == 0 for x in coefs)}, reverse=True):
            q_terms = {key: [v[0] // k, v[1]] for key, v in lin.terms.items() if v[0] % k == 0}
            r_terms = {key: v for key, v in lin.terms.items() if v[0] % k}
            q_const, r_const = divmod(lin.const, k)
            rest = Lin(r_terms, r_const, lin.dtype)
            rng = self._const_interval(rest.to_expr())
            if rng is None or rng[0] < 0 or rng[1] >= k:
                continue
            q = Lin(q_terms, q_const, lin.dtype).to_expr()
            m = IntImm(c // k, lin.dtype)
            if t is E.FloorDiv:
                return self.run(E.FloorDiv(q, m, lin.dtype))
            return self.run(E.Add(E.Mul(E.FloorMod(q, m, lin.dtype), IntImm(k, lin.dtype), lin.dtype),
                                  rest.to_expr(), lin.dtype))
        return None


def simplify_lin(e: Expr) -> Expr:
    """``e`` as a canonical linear sum (only +, - and * by constants are looked through)."""
    return linear(e).to_expr()



# ------------------------------------------------------------------------------ intervals


def _c(v: int, dtype: str = "int64") -> Expr:
    return IntImm(v, dtype)


def interval(e: Expr, ranges: Ranges) -> Interval | None:
    """The closed interval of integer ``e`` as variables in ``ranges`` vary; None when unknown."""
    if isinstance(e, IntImm):
        return (e, e)
    if isinstance(e, E.Var):
        r = ranges.get(e)
        return r if r is not None else (e, e)
    if E.free_var_set(e).isdisjoint(ranges):
        return (e, e)
    t = type(e)
    dt = e.dtype
    if t is E.Add or t is E.Sub or (t is E.Mul and (isinstance(e.a, IntImm) or isinstance(e.b, IntImm))):
        r = _lin_interval(e, ranges)
        return None if r is None else (r[0].to_expr(), r[1].to_expr())
    if t is E.Mul:
        a, b = e.a, e.b
        if isinstance(a, IntImm):
            a, b = b, a
        if isinstance(b, IntImm):
            ia = interval(a, ranges)
            if ia is None:
                return None
            c = b.value
            lo = simplify_lin(E.Mul(ia[0], b, dt))
            hi = simplify_lin(E.Mul(ia[1], b, dt))
            return (lo, hi) if c >= 0 else (hi, lo)
        ia, ib = interval(a, ranges), interval(b, ranges)
        if ia is None or ib is None:
            return None
        vals = [x for x in (ia[0], ia[1], ib[0], ib[1])]
        if all(isinstance(v, IntImm) for v in vals):
            prods = [ia[0].value * ib[0].value, ia[0].value * ib[1].value, ia[1].value * ib[0].value,
                     ia[1].value * ib[1].value]
            return (_c(min(prods), dt), _c(max(prods), dt))
        return None
    if t is E.FloorDiv or t is E.FloorMod:
        if not isinstance(e.b, IntImm) or e.b.value <= 0:
            return None
        c = e.b.value
        ia = interval(e.a, ranges)
        if ia is None:
            return None
        if t is E.FloorDiv:
            return (simplify(E.FloorDiv(ia[0], e.b, dt)), simplify(E.FloorDiv(ia[1], e.b, dt)))
        lo, hi = ia
        if isinstance(lo, IntImm) and isinstance(hi, IntImm) and lo.value // c == hi.value // c:
            return (_c(lo.value % c, dt), _c(hi.value % c, dt))
        return (_c(0, dt), _c(c - 1, dt))
    if t is E.Min or t is E.Max:
        ia, ib = interval(e.a, ranges), interval(e.b, ranges)
        if ia is None or ib is None:
            return None
        return (simplify(t(ia[0], ib[0], dt)), simplify(t(ia[1], ib[1], dt)))
    if t is E.Select:
        it, iff = interval(e.t, ranges), interval(e.f, ranges)
        if it is None or iff is None:
            return None
        return (simplify(E.Min(it[0], iff[0], dt)), simplify(E.Max(it[1], iff[1], dt)))
    if t is E.Cast and is_int(e.value.dtype):
        return interval(e.value, ranges)
    return None


def _lin_interval(e: Expr, ranges: Ranges) -> tuple[Lin, Lin] | None:
    """``interval(e)`` of a sum as the linear forms of its bounds.

    The bounds of ``a + b`` are ``simplify_lin(lo_a + lo_b)`` and so on (and ``c * a`` scales); combining the
    children's linear forms directly (each as read back from its canonical expression: ``normal()``) gives
    the same bounds without building and re-reading an expression at every level of a long sum."""
    t = type(e)
    if (t is E.Add or t is E.Sub or (t is E.Mul and (isinstance(e.a, IntImm) or isinstance(e.b, IntImm)))) and \
            not E.free_var_set(e).isdisjoint(ranges):
        if t is E.Mul:
            a, b = e.a, e.b
            if isinstance(a, IntImm):
                a, b = b, a
            ia = _lin_interval(a, ranges)
            if ia is None:
                return None
            c = b.value
            lo, hi = ia[0].scaled(c).normal(), ia[1].scaled(c).normal()
            return (lo, hi) if c >= 0 else (hi, lo)
        ia, ib = _lin_interval(e.a, ranges), _lin_interval(e.b, ranges)
        if ia is None or ib is None:
            return None
        if t is E.Add:
            return ia[0].plus(ib[0]).normal(), ia[1].plus(ib[1]).normal()
        return ia[0].plus(ib[1], -1).normal(), ia[1].plus(ib[0], -1).normal()
    iv = interval(e, ranges)
    return None if iv is None else (linear(iv[0]), linear(iv[1]))


def const_int(e: Expr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def prove(cond: Expr, ranges: Ranges | None = None) -> bool:
    """True only when ``cond`` provably holds for every value in ``ranges``."""
    r = simplify(cond, ranges)
    return isinstance(r, IntImm) and r.value == 1


def ceildiv(a: Expr, b: int) -> Expr:
    if isinstance(a, IntImm):
        return IntImm(-(-a.value // b), a.dtype)
    return simplify(E.FloorDiv(E.Add(a, IntImm(b - 1, a.dtype), a.dtype), IntImm(b, a.dtype), a.dtype))


class Analyzer:
    """TVM's ``tvm.arith.Analyzer``: simplification and proofs, with the variable ranges given by ``bind`` /
    ``update`` (``Range`` or ``(lo, hi)`` half-open, as TVM's)."""

    def __init__(self) -> None:
        self.ranges: Ranges = {}

    def bind(self, var: E.Var, rng: Any) -> None:
        """``var`` takes values in ``rng`` (a te ``Range`` or ``(begin, end)``)."""
        lo, ext = (rng.min, rng.extent) if hasattr(rng, "extent") else (rng[0], E.convert(rng[1]) - rng[0])
        lo = E.convert(lo)
        self.ranges[var] = (lo, simplify(E.convert(lo) + ext - 1))

    update = bind

    def simplify(self, e: Any) -> Expr:
        return simplify(E.convert(e), self.ranges)

    rewrite_simplify = canonical_simplify = simplify

    def can_prove(self, cond: Any) -> bool:
        return prove(E.convert(cond), self.ranges)
