"""Integer arithmetic on expressions: simplification, intervals and proofs.

Index expressions are canonicalised as linear sums ``c0 + c1*t1 + c2*t2 ...``
over atoms (variables and non-linear subterms). Intervals are pairs of
expressions, possibly symbolic; ``ranges`` maps a loop variable to the closed
interval ``(lo, hi)`` it takes, and a variable absent from it is a fixed point.
"""

from __future__ import annotations

from autosched.te import expr as E
from autosched.te.expr import Expr, IntImm, is_int

Interval = tuple  # (lo: Expr, hi: Expr)
Ranges = dict  # Var -> (lo: Expr, hi: Expr)


def skey(e: Expr):
    """A structural key: equal for structurally equal expressions (variables by identity)."""
    from autosched.tir.stmt import BufferLoad

    if isinstance(e, E.Var):
        return ("v", id(e))
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return ("c", e.value, e.dtype)
    extra = ()
    if isinstance(e, E.Call):
        extra = (e.name,)
    elif isinstance(e, E.Cast):
        extra = (e.dtype,)
    elif isinstance(e, BufferLoad):
        extra = (id(e.buffer),)
    elif isinstance(e, E.TensorLoad):
        extra = (id(e.tensor),)
    return (type(e).__name__, extra) + tuple(skey(c) for c in E.children(e))


class Lin:
    """``const + sum(coef * atom)`` with integer coefficients; atoms keyed structurally."""

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
        dt = self.dtype
        pos = [(c, a) for c, a in self.terms.values() if c > 0]
        neg = [(-c, a) for c, a in self.terms.values() if c < 0]
        out: Expr | None = None

        def term(c, a):
            return a if c == 1 else E.Mul(a, IntImm(c, dt), dt)

        for c, a in pos:
            out = term(c, a) if out is None else E.Add(out, term(c, a), dt)
        if out is None:
            if not neg:
                return IntImm(self.const, dt)
            if self.const != 0:
                out = IntImm(self.const, dt)
                for c, a in neg:
                    out = E.Sub(out, term(c, a), dt)
                return out
            c, a = neg[0]
            out = E.Mul(a, IntImm(-c, dt), dt)
            neg = neg[1:]
        for c, a in neg:
            out = E.Sub(out, term(c, a), dt)
        if self.const > 0:
            out = E.Add(out, IntImm(self.const, dt), dt)
        elif self.const < 0:
            out = E.Sub(out, IntImm(-self.const, dt), dt)
        return out


def _atom(e: Expr) -> Lin:
    return Lin({skey(e): [1, e]}, 0, e.dtype)


def linear(e: Expr) -> Lin:
    """The linear form of an (already simplified) integer expression."""
    if isinstance(e, IntImm):
        return Lin({}, e.value, e.dtype)
    if isinstance(e, E.Add):
        return linear(e.a).plus(linear(e.b))
    if isinstance(e, E.Sub):
        return linear(e.a).plus(linear(e.b), -1)
    if isinstance(e, E.Mul):
        la, lb = linear(e.a), linear(e.b)
        if lb.is_const():
            return la.scaled(lb.const)
        if la.is_const():
            return lb.scaled(la.const)
    return _atom(e)


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
    return _Simplifier(ranges or {}).run(e)


class _Simplifier:
    def __init__(self, ranges: Ranges):
        self.ranges = ranges
        self.memo: dict[int, Expr] = {}

    def run(self, e: Expr) -> Expr:
        k = id(e)
        r = self.memo.get(k)
        if r is None:
            r = self._visit(e)
            self.memo[k] = r
        return r

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

    def _const_interval(self, e: Expr):
        iv = self._interval(e)
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
                    d = self._const_interval(simplify_lin(E.Sub(a, b, a.dtype)))
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
                    d = self._const_interval(simplify_lin(E.Sub(a, b, a.dtype)))
                    if d is not None:
                        lo, hi = d
                        if hi <= 0:
                            return a if t is E.Min else b
                        if lo >= 0:
                            return b if t is E.Min else a
                return e
            # floating point
            if ca is not None and cb is not None:
                import numpy as np

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


def simplify_lin(e: Expr) -> Expr:
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
    if not any(isinstance(x, E.Var) and x in ranges for x in E.walk(e)):
        return (e, e)
    t = type(e)
    dt = e.dtype
    if t is E.Add or t is E.Sub:
        ia, ib = interval(e.a, ranges), interval(e.b, ranges)
        if ia is None or ib is None:
            return None
        if t is E.Add:
            return (simplify_lin(E.Add(ia[0], ib[0], dt)), simplify_lin(E.Add(ia[1], ib[1], dt)))
        return (simplify_lin(E.Sub(ia[0], ib[1], dt)), simplify_lin(E.Sub(ia[1], ib[0], dt)))
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
