"""The op registry: each op declares its attributes, type relation, te compute, fusion pattern and the
default schedule of a fused kernel it anchors (its schedule space is the generated one of that kernel).
Calls are made with ``make_call``; importing this module also gives ``Expr`` its ``+ - * /`` (TVM's sugar).

    relay.op.register_op(OpDef("my_op", attrs={...}, type_rel=..., compute=..., pattern=ELEMWISE))

See docs/relay.md, "Adding an op".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autosched.relay.ir.expr import Call, Constant, Expr, RelayError, Tuple, const

# fusion patterns, as in TVM (lower is more fusable)
ELEMWISE = 0
BROADCAST = 1
INJECTIVE = 2
COMM_REDUCE = 3
OUT_ELEMWISE_FUSABLE = 4  # conv2d, dense, matmul: elementwise consumers fuse into them
OPAQUE = 8


@dataclass
class OpDef:
    """A registered operator.

    ``type_rel(arg_types, attrs) -> Type`` checks the arguments (raising RelayError naming the op and the
    shapes) and gives the output type; ``compute(inputs, attrs, out_type) -> te.Tensor`` builds the te
    computation from te tensors (a Tuple argument arrives as its fields, flattened); ``schedule`` is the
    default schedule of a fused kernel anchored on this op (``fn(sch, out, anchor, attrs)``, None: generic);
    ``canonical_attrs`` spells equivalent attributes one way (padding 1 == (1, 1, 1, 1)) for task keys.
    """

    name: str
    type_rel: Callable[[list, dict], Any]
    compute: Callable[[list, dict, Any], Any]
    pattern: int = OPAQUE
    attrs: dict[str, Any] = field(default_factory=dict)
    num_inputs: int | None = None
    schedule: Callable | None = None
    doc: str = ""
    canonical_attrs: Callable[[dict], dict] | None = None  # attrs in one spelling (task keys do not depend on it)

    def __repr__(self) -> str:
        return f"Op({self.name})"


_OPS: dict[str, OpDef] = {}


def register_op(op: OpDef) -> OpDef:
    """Add an op to the registry (a second registration of the same name replaces the first)."""
    _OPS[op.name] = op
    return op


def get(name: str) -> OpDef:
    """The registered op ``name`` (e.g. ``"nn.conv2d"``)."""
    op = _OPS.get(name)
    if op is None:
        raise RelayError(f"unknown relay op {name!r}; registered: {', '.join(sorted(_OPS))}")
    return op


def list_ops() -> list[str]:
    """The names of the registered ops, sorted."""
    return sorted(_OPS)


_OP_ATTRS: dict[tuple[str, str], Any] = {}


def register_op_attr(op_name: str, attr_key: str, value: Any = None) -> Any:
    """Attach an attribute to an op, as TVM's ``register_op_attr``; usable as a decorator. External targets
    say which calls they take with ``"target.NAME"``: a bool or a predicate ``fn(call) -> bool``.

        @relay.op.register_op_attr("nn.conv2d", "target.mylib")
        def _conv2d(call):
            return call.attrs["groups"] == 1
    """
    get(op_name)

    def do(v: Any) -> Any:
        _OP_ATTRS[(op_name, attr_key)] = v
        return v

    return do(value) if value is not None else do


def get_op_attr(op_name: str, attr_key: str, default: Any = None) -> Any:
    """The attribute ``attr_key`` registered for ``op_name`` (``default`` when none is)."""
    return _OP_ATTRS.get((op_name, attr_key), default)


def _expr(x: Any) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, (list, tuple)):
        return Tuple([_expr(v) for v in x])
    if isinstance(x, (int, float, np.ndarray, np.generic)):
        return const(x)
    raise RelayError(f"cannot use {x!r} as a relay expression")


def make_call(name: str, args: Sequence[Any], **attrs: Any) -> Call:
    """``Call`` of a registered op with its default attributes filled in; unknown attributes are refused."""
    op = get(name)
    unknown = [k for k in attrs if k not in op.attrs]
    if unknown:
        raise RelayError(f"{name}: unknown attribute(s) {', '.join(unknown)}; it takes {', '.join(op.attrs) or 'none'}")
    full = dict(op.attrs)
    full.update({k: v for k, v in attrs.items()})
    return Call(op, [_expr(a) for a in args], full)


def _binary(name: str) -> Callable[[Any, Any], Call]:
    def f(lhs: Any, rhs: Any) -> Call:
        lhs, rhs = _match_scalar(lhs, rhs)
        return make_call(name, [lhs, rhs])

    f.__name__ = name
    f.__doc__ = f"Elementwise {name} with numpy broadcasting."
    return f


def _match_scalar(lhs: Any, rhs: Any) -> tuple[Any, Any]:
    """A Python scalar operand takes the dtype of the other operand's annotation when that is known."""
    def dtype_of(e: Any) -> str | None:
        if isinstance(e, Constant):
            return str(e.data.dtype)
        t = getattr(e, "_checked_type", None) or getattr(e, "type_annotation", None)
        return getattr(t, "dtype", None)

    if isinstance(rhs, (int, float)) and isinstance(lhs, Expr) and dtype_of(lhs):
        rhs = const(rhs, dtype_of(lhs))
    if isinstance(lhs, (int, float)) and isinstance(rhs, Expr) and dtype_of(rhs):
        lhs = const(lhs, dtype_of(rhs))
    return lhs, rhs


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")

# TVM-like sugar: expressions combine with + - * / (attached here so that the IR does not import the ops)
Expr.__add__ = add  # type: ignore[attr-defined]
Expr.__sub__ = subtract  # type: ignore[attr-defined]
Expr.__mul__ = multiply  # type: ignore[attr-defined]
Expr.__truediv__ = divide  # type: ignore[attr-defined]
