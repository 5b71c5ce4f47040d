"""Reverse-mode differentiation of te computations (TVM's ``te.gradient``).

``gradient(out, inputs, head)`` walks the computes between ``inputs`` and ``out`` from the output back and
gives each tensor its adjoint, a te compute itself (so the gradient is scheduled, tuned and built as any
other computation). Each read ``X[g(v)]`` of a compute over the variables ``v`` (its axes and reduce axes)
adds ``sum over v with g(v) == j of adjoint(v) * d body / d X[g(v)]`` to ``X``'s adjoint at ``j``. The index
equations are solved for as many of ``v`` as are affine in them (Gaussian elimination over the integers, with
divisibility and bounds checks), so a convolution's input gradient sums over the kernel taps and output
channels only, not over the whole output; what cannot be solved (``reshape``'s div/mod, a gathered index)
stays a summed variable with an equality test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from autosched.te import expr as E
from autosched.te.expr import Expr, FloatImm, IntImm, Reduce, TensorLoad, Var, is_float
from autosched.te.stage import _post_order
from autosched.te.tensor import ComputeOp, IterVar, PlaceholderOp, Range, Tensor
from autosched.tir import arith

__all__ = ["gradient"]


# ---- scalar derivatives -------------------------------------------------------------------------------------
# ``None`` stands for an exact zero, so that untouched subtrees cost nothing and no ``0 * x`` reaches the IR.

def _is_zero(e: Expr) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == 0


def _is_one(e: Expr) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == 1


def _add(a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _mul(a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None or b is None or _is_zero(a) or _is_zero(b):
        return None
    if _is_one(a):
        return b
    if _is_one(b):
        return a
    return a * b


def _neg(a: Expr | None) -> Expr | None:
    return None if a is None else -a


def _c(value: float, dtype: str) -> Expr:
    return E.const(value, dtype)


class _Derivative:
    """``d e / d L`` for one load ``L`` (a tensor read at one index, matched structurally), memoised per node."""

    def __init__(self, key: Any):
        self.key = key
        self.memo: dict[int, Expr | None] = {}

    def __call__(self, e: Expr) -> Expr | None:
        got = self.memo.get(id(e), _MISSING)
        if got is _MISSING:
            got = self.memo[id(e)] = self._d(e)
        return got

    def _d(self, e: Expr) -> Expr | None:  # noqa: C901 - one rule per node type
        if not is_float(e.dtype):
            return None  # indices, conditions, integers: piecewise constant
        if isinstance(e, TensorLoad):
            return _c(1.0, e.dtype) if arith.skey(e) == self.key else None
        if isinstance(e, (Var, FloatImm, IntImm)):
            return None
        if isinstance(e, E.Add):
            return _add(self(e.a), self(e.b))
        if isinstance(e, E.Sub):
            db = self(e.b)
            return _add(self(e.a), _neg(db))
        if isinstance(e, E.Mul):
            return _add(_mul(self(e.a), e.b), _mul(e.a, self(e.b)))
        if isinstance(e, E.Div):
            u = _logistic_arg(e)
            if u is not None:  # te.sigmoid: s' = -s (1 - s) du, finite where exp(u) overflows
                du = self(u)
                return None if du is None else -(e * (_c(1.0, e.dtype) - e)) * du
            da, db = self(e.a), self(e.b)
            out = None if da is None else da / e.b
            return out if db is None else _add(out, -(e.a * db) / (e.b * e.b))
        if isinstance(e, (E.Max, E.Min)):
            da, db = self(e.a), self(e.b)
            if da is None and db is None:
                return None
            zero = _c(0.0, e.dtype)
            first = E.GE(e.a, e.b) if isinstance(e, E.Max) else E.LE(e.a, e.b)
            return E.Select(first, da if da is not None else zero, db if db is not None else zero)
        if isinstance(e, E.FloorDiv):
            return None  # floor(a / b): piecewise constant
        if isinstance(e, E.FloorMod):  # a - floor(a / b) * b
            return _add(self(e.a), _neg(_mul(E.floor(e.a / e.b), self(e.b))))
        if isinstance(e, E.Select):
            dt, df = self(e.t), self(e.f)
            if dt is None and df is None:
                return None
            zero = _c(0.0, e.dtype)
            return E.Select(e.cond, dt if dt is not None else zero, df if df is not None else zero)
        if isinstance(e, E.Cast):
            dv = self(e.value)
            return None if dv is None else E.cast(e.dtype, dv)
        if isinstance(e, E.Let):
            return self(E.substitute(e.body, {e.var: e.value}))
        if isinstance(e, E.Call):
            return self._call(e)
        if isinstance(e, Reduce):
            raise ValueError("te.gradient: a reduction inside an expression (reductions are whole compute bodies)")
        raise TypeError(f"te.gradient: cannot differentiate {type(e).__name__} node {e}")

    def _call(self, e: E.Call) -> Expr | None:
        name, args, dt = e.name, e.args, e.dtype
        if name in _PIECEWISE_CONSTANT:
            return None
        if name == "pow":
            x, y = args
            dx, dy = self(x), self(y)
            out = None if dx is None else dx * y * E.power(x, y - _c(1.0, dt))
            return out if dy is None else _add(out, dy * e * E.log(x))
        dx = self(args[0])
        if dx is None:
            return None
        x = args[0]
        local = {
            "exp": lambda: e,
            "log": lambda: _c(1.0, dt) / x,
            "sqrt": lambda: _c(0.5, dt) / e,
            "tanh": lambda: _c(1.0, dt) - e * e,
            "fabs": lambda: E.Select(E.LT(x, _c(0.0, dt)), _c(-1.0, dt), _c(1.0, dt)),
            "erf": lambda: _c(2.0 / math.sqrt(math.pi), dt) * E.exp(-(x * x)),
            "sin": lambda: E.cos(x),
            "cos": lambda: -E.sin(x),
        }.get(name)
        if local is None:
            raise TypeError(f"te.gradient: no derivative known for the intrinsic {name!r} in {e}")
        return _mul(dx, local())


def _logistic_arg(e: E.Div) -> Expr | None:
    """``u`` where ``e`` is ``1 / (1 + exp(u))`` (how ``te.sigmoid`` is written), else None."""
    if not _is_one(e.a) or not isinstance(e.b, E.Add):
        return None
    for one, ex in ((e.b.a, e.b.b), (e.b.b, e.b.a)):
        if _is_one(one) and isinstance(ex, E.Call) and ex.name == "exp":
            return ex.args[0]
    return None


_MISSING = object()
_PIECEWISE_CONSTANT = frozenset({"floor", "ceil", "trunc", "nearbyint", "round", "reinterpret"})


# ---- reductions ---------------------------------------------------------------------------------------------

def _reducer_kind(red: Reduce) -> str:
    """Which of sum / prod / max / min a reduction's combiner is, found by combining two fresh variables."""
    if len(red.sources) != 1:
        raise TypeError(f"te.gradient: the tuple reduction {red.combiner.name!r} (argmax-like) has no gradient")
    x, y = Var("x", red.dtype), Var("y", red.dtype)
    c = red.combiner.combine(x, y)
    kinds = {E.Add: "sum", E.Mul: "prod", E.Max: "max", E.Min: "min"}
    kind = kinds.get(type(c))
    if kind is None or {id(c.a), id(c.b)} != {id(x), id(y)}:
        raise TypeError(f"te.gradient: cannot differentiate the reduction {red.combiner.name!r} "
                        f"(its combiner is {c}; sum, product, max and min are known)")
    return kind


def _reduction_factor(kind: str, source: Expr, result: Expr) -> Expr | None:
    """d (reduction) / d (one reduced value ``source``), with ``result`` the reduction's value."""
    if kind == "sum":
        return None  # 1
    if kind == "prod":
        return result / source
    one, zero = _c(1.0, source.dtype), _c(0.0, source.dtype)
    return E.Select(E.EQ(source, result), one, zero)  # max / min: the chosen values get the gradient


# ---- solving the index equations ------------------------------------------------------------------------------

class _Domain:
    """The summation variables of one read, their ranges, and what has been solved for."""

    def __init__(self, axes: Sequence[IterVar]):
        self.dom = {ax.var: ax.dom for ax in axes}
        self.order = [ax.var for ax in axes]
        self.solved: dict[Var, Expr] = {}
        self.conds: list[Expr] = []

    def free(self) -> list[Var]:
        return [v for v in self.order if v not in self.solved]

    def extent_rank(self, v: Var) -> tuple:
        ext = arith.const_int(arith.simplify(E.convert(self.dom[v].extent)))
        return (1 if ext is None else 0, -(ext or 0))  # symbolic extents first (they are the large ones)

    def ranges(self) -> dict:
        """The free variables' inclusive ranges, for proofs."""
        out = {}
        for v in self.free():
            lo = E.convert(self.dom[v].min)
            out[v] = (lo, arith.simplify(lo + self.dom[v].extent - 1))
        return out

    def solve_radix(self, lin: Any, target: Expr) -> bool:
        """Solve ``index == target`` for all its variables at once where it is a mixed-radix number of them
        (``i0*5 + i1`` with ``i1`` in [0, 5): a flattened index): each is a digit of ``target``."""
        free = set(self.free())
        digits = []
        for coef, atom in lin.terms.values():
            ext = arith.const_int(arith.simplify(E.convert(self.dom[atom].extent))) if atom in free else None
            if ext is None or coef <= 0 or arith.const_int(arith.simplify(E.convert(self.dom[atom].min))) != 0:
                return False
            digits.append((coef, atom, ext))
        digits.sort(key=lambda d: d[0])
        if len(digits) < 2 or digits[0][0] != 1 or any(hi[0] != lo[0] * lo[2] for lo, hi in zip(digits, digits[1:])):
            return False
        dt = lin.dtype
        rest = arith.simplify(E.Sub(E.cast(dt, target), IntImm(lin.const, dt), dt))
        sols = {}
        for k, (coef, v, ext) in enumerate(digits):
            q = E.FloorDiv(rest, IntImm(coef, dt), dt) if coef != 1 else rest
            sols[v] = arith.simplify(q if k == len(digits) - 1 else E.FloorMod(q, IntImm(ext, dt), dt))
        top = sols[digits[-1][1]]
        self.conds += [E.GE(top, IntImm(0, dt)), E.LT(top, IntImm(digits[-1][2], dt))]
        self.solved = {u: E.substitute(x, sols) for u, x in self.solved.items()}
        self.solved.update(sols)
        return True

    def solve(self, index: Expr, target: Expr) -> bool:
        """Eliminate one free variable from ``index == target`` where the index is affine in it."""
        index = arith.simplify(E.substitute(index, self.solved))
        lin = arith.linear(index) if E.is_int(index.dtype) else None
        if lin is None:
            return False
        if self.solve_radix(lin, target):
            return True
        free = set(self.free())
        nonlinear = set()
        for _, atom in lin.terms.values():
            if not isinstance(atom, Var):
                nonlinear |= E.free_var_set(atom)
        cands = [(coef, atom) for coef, atom in lin.terms.values()
                 if isinstance(atom, Var) and atom in free and atom not in nonlinear]
        if not cands:
            return False
        coef, v = min(cands, key=lambda ca: (self.extent_rank(ca[1]), abs(ca[0]) != 1))
        dt = index.dtype
        rest = arith.simplify(E.Sub(E.cast(dt, target), E.Sub(index, E.Mul(v, IntImm(coef, dt), dt), dt), dt))
        if coef < 0:
            rest, coef = arith.simplify(E.Sub(IntImm(0, dt), rest, dt)), -coef
        if coef != 1:
            self.conds.append(E.EQ(E.FloorMod(rest, IntImm(coef, dt), dt), IntImm(0, dt)))
            sol = arith.simplify(E.FloorDiv(rest, IntImm(coef, dt), dt))
        else:
            sol = rest
        rng = self.dom[v]
        lo = E.convert(rng.min)
        self.conds += [E.GE(sol, lo), E.LT(sol, arith.simplify(lo + rng.extent))]
        self.solved = {u: E.substitute(s, {v: sol}) for u, s in self.solved.items()}
        self.solved[v] = sol
        return True


# ---- the adjoint graph ----------------------------------------------------------------------------------------

def _zeros(shape: Sequence[Any], dtype: str, name: str) -> Tensor:
    axes = [IterVar(Range(0, d), Var(f"ax{i}"), "spatial") for i, d in enumerate(shape)]
    return ComputeOp(name, axes, _c(0.0, dtype)).output(0)


def _sum_of(parts: list[Tensor], name: str) -> Tensor:
    if len(parts) == 1:
        return parts[0]
    shape = parts[0].shape
    axes = [IterVar(Range(0, d), Var(f"ax{i}"), "spatial") for i, d in enumerate(shape)]
    idx = [ax.var for ax in axes]
    body = parts[0](*idx)
    for p in parts[1:]:
        body = body + p(*idx)
    return ComputeOp(name, axes, body).output(0)


def _contributions(y: Tensor, body: Expr, adj_y: Tensor, prefix: list[Any], needed: set[int]) -> list[tuple]:
    """``(x, contribution)`` for every differentiable read in ``body`` (the ``y.value_index``-th output)."""
    op: ComputeOp = y.op
    red = body if isinstance(body, Reduce) else None
    source = red.source if red is not None else body
    factor = None
    if red is not None:
        factor = _reduction_factor(_reducer_kind(red), source, y(*[ax.var for ax in op.axis]))
    loads: dict[Any, TensorLoad] = {}
    for node in E.walk(source):
        if isinstance(node, TensorLoad) and id(node.tensor.op) in needed and is_float(node.dtype):
            loads.setdefault(arith.skey(node), node)
    out = []
    for n_read, (key, load) in enumerate(loads.items()):
        d = _Derivative(key)(source)
        if d is None:
            continue
        if factor is not None:
            d = _mul(d, factor)
        x: Tensor = load.tensor
        out.append((x, _one_read(op, y, red, d, load, adj_y, prefix, f"{x.name}_adj_{op.name}_{n_read}")))
    return out


def _digit(index: Expr) -> tuple[Expr, int, int | None]:
    """``index`` as ``(L // stride) % extent`` of some ``L``: (L, stride, extent or None)."""
    ext = None
    if isinstance(index, E.FloorMod) and isinstance(index.b, IntImm):
        index, ext = index.a, index.b.value
    if isinstance(index, E.FloorDiv) and isinstance(index.b, IntImm):
        return index.a, index.b.value, ext
    return index, 1, ext


def _flatten_digits(pending: list[tuple[Expr, Expr]], shape: Sequence[Any], dom: _Domain) -> list[tuple]:
    """A reshape's read, ``X[L // 30 % 4, L // 5 % 6, L % 5]``, is one equation: ``L == j0*30 + j1*5 + j2``
    (every index a digit of one ``L`` in ``X``'s own mixed radix, and ``L`` below ``X``'s size); the rest as
    they are."""
    if len(pending) < 2:
        return pending
    digits = [_digit(index) for index, _ in pending]  # as written: simplifying one digit alone rewrites its L
    flat = arith.simplify(digits[0][0])
    if any(arith.skey(arith.simplify(d[0])) != arith.skey(flat) for d in digits) or not E.is_int(flat.dtype):
        return pending
    dims = [arith.const_int(arith.simplify(E.convert(d))) for d in shape]
    stride = 1
    for k in range(len(pending) - 1, -1, -1):
        _, st, ext = digits[k]
        if dims[k] is None or st != stride or (ext is None) != (k == 0) and not (k == 0 and ext == dims[0]):
            return pending
        if k > 0 and ext != dims[k]:
            return pending
        stride *= dims[k]
    if digits[0][2] is not None and not arith.prove(E.LT(flat, IntImm(stride, flat.dtype)), dom.ranges()):
        return pending  # the first index wraps around: L and its digits are not one number
    dt = flat.dtype
    target: Expr = IntImm(0, dt)
    step = stride
    for k, (_, t) in enumerate(pending):
        step //= dims[k]
        target = E.Add(target, E.Mul(E.cast(dt, t), IntImm(step, dt), dt), dt)
    return [(flat, arith.simplify(target))]


def _one_read(op: ComputeOp, y: Tensor, red: Reduce | None, d: Expr, load: TensorLoad, adj_y: Tensor,
              prefix: list[Any], name: str) -> Tensor:
    """The compute adding ``adj_y * d`` at every element of ``load.tensor`` that ``load`` reads."""
    x = load.tensor
    reduce_axes = list(red.axis) if red is not None else []
    dom = _Domain(list(op.axis) + reduce_axes)
    p_axes = [IterVar(Range(0, e), Var(f"p{i}"), "spatial") for i, e in enumerate(prefix)]
    j_axes = [IterVar(Range(0, e), Var(f"j{i}"), "spatial") for i, e in enumerate(x.shape)]
    pending = _flatten_digits(list(zip(load.indices, [ax.var for ax in j_axes])), x.shape, dom)
    progress = True
    while progress and pending:  # eliminate one variable at a time; solving one may make another affine
        progress = False
        for item in list(pending):
            if dom.solve(*item):
                pending.remove(item)
                progress = True
    for index, target in pending:  # what stays unsolved is summed over, with the equality as a test
        idx = E.substitute(index, dom.solved)
        dom.conds.append(E.EQ(idx, E.cast(idx.dtype, target)))
    for v in dom.free():  # a summed variable of extent 1 is its one value
        if arith.const_int(arith.simplify(E.convert(dom.dom[v].extent))) == 1:
            dom.solved = {u: E.substitute(s, {v: E.convert(dom.dom[v].min)}) for u, s in dom.solved.items()}
            dom.solved[v] = E.convert(dom.dom[v].min)
    free = dom.free()
    new_red = [IterVar(dom.dom[v], Var(f"{v.name}_r"), "reduce") for v in free]
    rename: dict[Var, Expr] = {v: nr.var for v, nr in zip(free, new_red)}
    sol = {v: E.substitute(s, rename) for v, s in dom.solved.items()}
    sol.update(rename)
    if red is not None and red.condition is not None:
        dom.conds.append(red.condition)
    y_idx = [E.substitute(ax.var, sol) for ax in op.axis]
    value = _mul(adj_y(*[ax.var for ax in p_axes], *y_idx), E.substitute(d, sol))
    if value.dtype != x.dtype:
        value = E.cast(x.dtype, value)
    ranges = {ax.var: (IntImm(0), arith.simplify(E.convert(ax.dom.extent) - 1)) for ax in p_axes + j_axes}
    for r in new_red:
        lo = E.convert(r.dom.min)
        ranges[r.var] = (lo, arith.simplify(lo + r.dom.extent - 1))
    conds = []
    for c in dom.conds:
        c = arith.simplify(E.substitute(c, sol), ranges)
        if isinstance(c, IntImm) and c.value == 1:
            continue
        conds.append(c)
    cond = arith.conj(conds) if conds else None
    if new_red:
        body: Expr = Reduce(E.sum, value, new_red, cond)
    elif cond is not None:
        body = E.Select(cond, value, _c(0.0, x.dtype))
    else:
        body = value
    return ComputeOp(name, p_axes + j_axes, body).output(0)


def _identity_head(output: Tensor) -> Tensor:
    """The head TVM uses when none is given: ``I[p..., i...] = (p == i)``, so the result is the Jacobian."""
    shape = list(output.shape) * 2
    axes = [IterVar(Range(0, d), Var(f"ax{i}"), "spatial") for i, d in enumerate(shape)]
    n = len(output.shape)
    eq = E.all(*[E.EQ(axes[i].var, axes[n + i].var) for i in range(n)]) if n else E.const(True)
    body = E.Select(eq, _c(1.0, output.dtype), _c(0.0, output.dtype))
    return ComputeOp(f"{output.name}_head", axes, body).output(0)


def gradient(output: Tensor, inputs: Sequence[Tensor] | Tensor, head: Tensor | None = None) -> list[Tensor]:
    """The adjoints of ``inputs`` given ``head``, the adjoint of ``output`` (TVM's ``te.gradient``).

    ``head`` has the shape ``prefix + output.shape`` and each result ``prefix + input.shape``: with a head of
    ones that is the gradient of ``sum(output)``; without a head, the identity is used and the results are
    the Jacobians (``output.shape + input.shape``). Each result is a te tensor to schedule and build."""
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if not isinstance(output, Tensor) or any(not isinstance(t, Tensor) for t in inputs):
        raise TypeError("te.gradient(output, inputs, head): output and inputs must be te tensors")
    for t in inputs:
        if not is_float(t.dtype):
            raise TypeError(f"te.gradient: input {t.name} is {t.dtype}; only floating-point tensors have gradients")
    if head is None:
        head = _identity_head(output)
    n_out = len(output.shape)
    hs = [arith.const_int(arith.simplify(E.convert(d))) for d in head.shape[len(head.shape) - n_out:]]
    os_ = [arith.const_int(arith.simplify(E.convert(d))) for d in output.shape]
    if len(head.shape) < n_out or any(a is not None and b is not None and a != b for a, b in zip(hs, os_)):
        raise ValueError(f"te.gradient: head {head.name} of shape {tuple(head.shape)} must end with the output "
                         f"{output.name}'s shape {tuple(output.shape)}")
    prefix = list(head.shape[:len(head.shape) - n_out])
    ops = _post_order([output.op])  # producers before consumers
    wanted = {id(t.op) for t in inputs}
    needed: set[int] = set()  # the operations on a path from an input to the output
    for op in ops:
        if id(op) in wanted or any(id(t.op) in needed for t in op.input_tensors):
            needed.add(id(op))
    parts: dict[tuple[int, int], list[Tensor]] = {(id(output.op), output.value_index): [head]}
    adjoint: dict[tuple[int, int], Tensor] = {}
    for op in reversed(ops):
        if id(op) not in needed:
            continue
        for k in range(op.num_outputs):
            key = (id(op), k)
            if key not in parts:
                continue
            adjoint[key] = adj = _sum_of(parts[key], f"{op.name}_adj" if k == 0 else f"{op.name}_adj{k}")
            if isinstance(op, PlaceholderOp):
                continue
            if not isinstance(op, ComputeOp):
                raise TypeError(f"te.gradient: cannot differentiate through {type(op).__name__} {op.name!r} "
                                "(only te.compute operations)")
            y = op.output(k)
            for x, contribution in _contributions(y, op.bodies[k], adj, prefix, needed):
                parts.setdefault((id(x.op), x.value_index), []).append(contribution)
    out = []
    for t in inputs:
        got = adjoint.get((id(t.op), t.value_index))
        out.append(got if got is not None else _zeros(prefix + list(t.shape), t.dtype, f"{t.name}_adj"))
    return out
