"""Dataflow patterns over the graph IR, in the spirit of TVM's: describe a subgraph, match it at a node.

    conv = is_op("nn.conv2d")(wildcard(), is_constant())
    conv = conv.optional(lambda x: is_op("nn.bias_add")(x, is_constant()))   # with or without a bias
    conv = conv.optional(is_op("nn.relu"))                                    # ... and a relu tail
    conv.match(expr)  # -> True / False

Patterns: ``wildcard()``, ``is_op(name)`` (called with argument patterns to match a call), ``is_constant()``,
``is_var(name)``, ``is_expr(e)``, ``is_tuple([...])``, ``is_tuple_get_item(p, i)``, alternatives ``p | q``,
``p.optional(f)``, and the checks ``p.has_attr({...})``, ``p.has_shape(...)``, ``p.has_dtype(...)``. A
pattern node that occurs twice must match the same expression both times. ``add`` and ``multiply`` match
their arguments in either order. A pattern table (``register_pattern_table``) lists, per external
target, the named patterns that ``MergeComposite`` turns into composite functions; each target registers its
own table when imported (the built-in ``ccompiler`` with relay.backend.contrib).

Patterns name registered ops, so this module sits above the ops and below the passes (TVM's
``relay.dataflow_pattern``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autosched.relay.ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    RelayError,
    Tuple,
    TupleGetItem,
    Var,
    children,
    post_order,
)
from autosched.relay.ir.type_infer import infer_type
from autosched.relay.op.op import get as get_op

COMMUTATIVE = {"add", "multiply", "maximum", "minimum"}


class DFPattern:
    """Base of patterns: call it with argument patterns to make a call pattern; ``|`` for alternatives."""

    def __call__(self, *args: Any) -> CallPattern:
        return CallPattern(self, [_as_pattern(a) for a in args])

    def __or__(self, other: DFPattern) -> AltPattern:
        return AltPattern(self, _as_pattern(other))

    def optional(self, option: Callable[[DFPattern], DFPattern]) -> AltPattern:
        """This pattern, or ``option`` applied to it: ``p.optional(is_op("nn.relu"))`` matches p and relu(p)."""
        return AltPattern(option(self), self)

    def has_attr(self, attrs: dict[str, Any]) -> AttrPattern:
        """Also require these call attributes (compared after normalising lists and tuples)."""
        return AttrPattern(self, dict(attrs))

    def has_shape(self, shape: Sequence[int]) -> TypePattern:
        return TypePattern(self, shape=tuple(int(d) for d in shape))

    def has_dtype(self, dtype: str) -> TypePattern:
        return TypePattern(self, dtype=str(np.dtype(dtype)))

    def match(self, expr: Expr) -> bool:
        """Whether the pattern matches at ``expr``."""
        return match(self, expr) is not None

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError


class WildcardPattern(DFPattern):
    """Any expression."""

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        return True

    def __repr__(self) -> str:
        return "*"


class OpPattern(DFPattern):
    """A registered op by name; called with argument patterns it matches calls of that op."""

    def __init__(self, name: str):
        get_op(name)  # an unknown op name is an error here, not a pattern that never matches
        self.name = name

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        return getattr(expr, "name", None) == self.name and not isinstance(expr, Expr)

    def __repr__(self) -> str:
        return self.name


class ConstantPattern(DFPattern):
    """A constant (weights, scalars)."""

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        return isinstance(expr, Constant)

    def __repr__(self) -> str:
        return "const"


class VarPattern(DFPattern):
    """A variable, of the given name when one is given."""

    def __init__(self, name: str = ""):
        self.name = name

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        return isinstance(expr, Var) and (not self.name or expr.name_hint == self.name)

    def __repr__(self) -> str:
        return f"%{self.name or '?'}"


class ExprPattern(DFPattern):
    """Exactly this expression (by identity)."""

    def __init__(self, expr: Expr):
        self.expr = expr

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        return expr is self.expr

    def __repr__(self) -> str:
        return f"expr({self.expr!r})"


class CallPattern(DFPattern):
    """A call whose callee matches ``op`` and whose arguments match ``args`` (same number)."""

    def __init__(self, op: DFPattern, args: Sequence[DFPattern]):
        self.op = op
        self.args = list(args)

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        if not isinstance(expr, Call) or isinstance(expr.op, Function) or len(expr.args) != len(self.args):
            return False
        if not _bind(self.op, expr.op, env):
            return False
        if _bind_all(self.args, expr.args, env):
            return True
        if expr.op.name in COMMUTATIVE and len(self.args) == 2:
            return _bind_all(self.args, expr.args[::-1], env)
        return False

    def __repr__(self) -> str:
        return f"{self.op!r}({', '.join(map(repr, self.args))})"


class TuplePattern(DFPattern):
    def __init__(self, fields: Sequence[DFPattern]):
        self.fields = [_as_pattern(f) for f in fields]

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        return isinstance(expr, Tuple) and len(expr.fields) == len(self.fields) and \
            _bind_all(self.fields, expr.fields, env)

    def __repr__(self) -> str:
        return f"({', '.join(map(repr, self.fields))})"


class TupleGetItemPattern(DFPattern):
    def __init__(self, tup: DFPattern, index: int | None = None):
        self.tup = _as_pattern(tup)
        self.index = index

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        return isinstance(expr, TupleGetItem) and (self.index is None or expr.index == self.index) and \
            _bind(self.tup, expr.tuple_value, env)

    def __repr__(self) -> str:
        return f"{self.tup!r}.{'?' if self.index is None else self.index}"


class AltPattern(DFPattern):
    """``left | right``: the first alternative that matches."""

    def __init__(self, left: DFPattern, right: DFPattern):
        self.left = left
        self.right = right

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        for side in (self.left, self.right):
            trial = dict(env)
            if _bind(side, expr, trial):
                env.clear()
                env.update(trial)
                return True
        return False

    def __repr__(self) -> str:
        return f"({self.left!r} | {self.right!r})"


def _norm(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_norm(x) for x in v)
    if isinstance(v, np.generic):
        return v.item()
    return v


class AttrPattern(DFPattern):
    """``pattern`` whose call (or op) also has these attribute values."""

    def __init__(self, pattern: DFPattern, attrs: dict[str, Any]):
        self.pattern = pattern
        self.attrs = attrs

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        have = getattr(expr, "attrs", None)
        if not isinstance(have, dict):
            return False
        for k, v in self.attrs.items():
            if k not in have or _norm(have[k]) != _norm(v):
                return False
        return _bind(self.pattern, expr, env)

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_attr({self.attrs})"


class TypePattern(DFPattern):
    """``pattern`` whose value has this shape and/or dtype (the graph must be type-inferred)."""

    def __init__(self, pattern: DFPattern, shape: tuple[int, ...] | None = None, dtype: str | None = None):
        self.pattern = pattern
        self.shape = shape
        self.dtype = dtype

    def _match(self, expr: Any, env: dict[int, Any]) -> bool:
        t = getattr(expr, "_checked_type", None)
        if t is None and isinstance(expr, Expr):
            t = infer_type(expr)
        if self.shape is not None and getattr(t, "shape", None) != self.shape:
            return False
        if self.dtype is not None and getattr(t, "dtype", None) != self.dtype:
            return False
        return _bind(self.pattern, expr, env)

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_type({self.shape}, {self.dtype})"


def _as_pattern(p: Any) -> DFPattern:
    if isinstance(p, DFPattern):
        return p
    if isinstance(p, Expr):
        return ExprPattern(p)
    if isinstance(p, (list, tuple)):
        return TuplePattern(p)
    raise RelayError(f"{p!r} is not a pattern (use wildcard(), is_op(...), is_constant(), ...)")


def _bind(p: DFPattern, expr: Any, env: dict[int, Any]) -> bool:
    """Match ``p`` at ``expr`` under the bindings ``env`` (pattern id -> expression), adding to them."""
    got = env.get(id(p))
    if got is not None:
        return got is expr
    if not p._match(expr, env):
        return False
    env[id(p)] = expr
    return True


def _bind_all(ps: Sequence[DFPattern], exprs: Sequence[Any], env: dict[int, Any]) -> bool:
    trial = dict(env)
    for p, e in zip(ps, exprs):
        if not _bind(p, e, trial):
            return False
    env.clear()
    env.update(trial)
    return True


class Match:
    """A match of a pattern at ``root``: ``nodes`` are the matched calls/tuples (the subgraph), ``inputs`` the
    expressions bound to leaf patterns (wildcards, constants, variables), in first-use order."""

    def __init__(self, root: Expr, nodes: list[Expr], inputs: list[Expr]):
        self.root = root
        self.nodes = nodes
        self.inputs = inputs


def match(pattern: DFPattern, expr: Expr) -> Match | None:
    """The match of ``pattern`` at ``expr``, or None."""
    env: dict[int, Any] = {}
    if not _bind(pattern, expr, env):
        return None
    body_ids: set[int] = set()
    stack = [pattern]
    seen: set[int] = set()
    while stack:  # the expressions matched by call/tuple patterns are the subgraph; the rest are its inputs
        p = stack.pop()
        if id(p) in seen or id(p) not in env:
            continue
        seen.add(id(p))
        if isinstance(p, (CallPattern, TuplePattern, TupleGetItemPattern)):
            body_ids.add(id(env[id(p)]))
        for attr in ("args", "fields"):
            stack.extend(getattr(p, attr, ()))
        for attr in ("tup", "pattern", "left", "right"):
            q = getattr(p, attr, None)
            if isinstance(q, DFPattern):
                stack.append(q)
    nodes = post_order(expr, body_ids)  # the matched subgraph from the root, stopping at leaves
    inputs: list[Expr] = []
    seen_in: set[int] = set()
    for n in nodes:
        for c in children(n):
            if id(c) not in body_ids and id(c) not in seen_in:
                seen_in.add(id(c))
                inputs.append(c)
    return Match(expr, nodes, inputs)


# ------------------------------------------------------------ constructors
def wildcard() -> WildcardPattern:
    """Matches any expression."""
    return WildcardPattern()


def is_op(name: str) -> OpPattern:
    """The op ``name``; ``is_op("nn.relu")(x)`` matches a relu of what ``x`` matches."""
    return OpPattern(name)


def is_constant() -> ConstantPattern:
    return ConstantPattern()


def is_var(name: str = "") -> VarPattern:
    return VarPattern(name)


def is_expr(expr: Expr) -> ExprPattern:
    return ExprPattern(expr)


def is_tuple(fields: Sequence[Any]) -> TuplePattern:
    return TuplePattern(fields)


def is_tuple_get_item(tup: DFPattern, index: int | None = None) -> TupleGetItemPattern:
    return TupleGetItemPattern(tup, index)


# ------------------------------------------------------------ pattern tables
PatternEntry = tuple  # (name, pattern) or (name, pattern, check(expr) -> bool)
_TABLES: dict[str, Callable[[], list[PatternEntry]]] = {}


def register_pattern_table(target: str, table: Callable[[], list[PatternEntry]] | None = None) -> Any:
    """Register the pattern table of an external target (a function returning ``[(name, pattern[, check])]``,
    names conventionally ``"target.what"``); usable as a decorator."""
    def do(fn: Callable[[], list[PatternEntry]]) -> Callable[[], list[PatternEntry]]:
        _TABLES[target] = fn
        return fn

    return do(table) if table is not None else do


def get_pattern_table(target: str) -> list[PatternEntry]:
    """The patterns registered for ``target``."""
    if target not in _TABLES:
        raise RelayError(f"no pattern table registered for target {target!r} "
                         f"(registered: {', '.join(sorted(_TABLES)) or 'none'})")
    return list(_TABLES[target]())


__all__ = [
    "AltPattern", "AttrPattern", "CallPattern", "ConstantPattern", "DFPattern", "ExprPattern", "Match",
    "OpPattern", "TupleGetItemPattern", "TuplePattern", "TypePattern", "VarPattern", "WildcardPattern",
    "get_pattern_table", "is_constant", "is_expr", "is_op", "is_tuple", "is_tuple_get_item", "is_var", "match",
    "register_pattern_table", "wildcard",
]
