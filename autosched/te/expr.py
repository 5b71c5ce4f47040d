"""Scalar expressions shared by the tensor language (te) and the loop IR (tir).

Expressions are small immutable trees. Python operators build them (``a + b``,
``a // b``, ``a < b``); integers index tensors with 64-bit arithmetic and ``//``
and ``%`` have floor semantics, as in TVM.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_CACHE_SLOTS = frozenset(("_fv", "_sk", "_lin", "_simp", "_fix"))
_FLOAT = ("float16", "float32", "float64")
_INT = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = _FLOAT + _INT + ("bool",)
#: bytes per element of each dtype (bool is stored as a byte)
DTYPE_BYTES = {"float16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
               "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1}
INDEX_DTYPE = "int64"


def is_float(dtype: str) -> bool:
    return dtype in _FLOAT


def is_int(dtype: str) -> bool:
    return dtype in _INT


#: TVM's short names of types: ``x.astype("float")`` is float32
DTYPE_ALIASES = {"float": "float32", "int": "int32", "uint": "uint32"}


def check_dtype(dtype: str) -> str:
    """``dtype`` by its canonical name (TVM's aliases resolved), or a TypeError naming the supported ones."""
    dtype = str(dtype)
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    if dtype not in DTYPES:
        raise TypeError(f"unsupported dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return dtype


class Expr:
    """Base of every scalar expression. ``dtype`` is a numpy-style name.

    Nodes are immutable, so derived facts are cached on them (private slots, never pickled or copied):
    ``_fv`` the free variables, ``_sk`` the structural key, ``_lin`` the linear form, ``_simp`` the
    result of simplifying without ranges and ``_fix`` the ranges under which the node is a simplifier's
    result (see ``autosched.tir.arith``). Lowering asks for these many
    times on shared subtrees; caching them keeps it linear in the size of the IR.
    """

    __slots__ = ("dtype", "_fv", "_sk", "_lin", "_simp", "_fix")

    def __getstate__(self):
        state = {}
        for cls in type(self).__mro__:
            slots = getattr(cls, "__slots__", ())
            for k in (slots,) if isinstance(slots, str) else slots:
                if k not in _CACHE_SLOTS and hasattr(self, k):
                    state[k] = getattr(self, k)
        extra = getattr(self, "__dict__", None)
        return (extra or None, state)

    # arithmetic (a te.Tensor operand, which has its own operators once TOPI is imported, is left to them)
    def __add__(self, o):
        return NotImplemented if _defers(o) else _arith(Add, self, o)

    def __radd__(self, o):
        return NotImplemented if _defers(o) else _arith(Add, o, self)

    def __sub__(self, o):
        return NotImplemented if _defers(o) else _arith(Sub, self, o)

    def __rsub__(self, o):
        return NotImplemented if _defers(o) else _arith(Sub, o, self)

    def __mul__(self, o):
        return NotImplemented if _defers(o) else _arith(Mul, self, o)

    def __rmul__(self, o):
        return NotImplemented if _defers(o) else _arith(Mul, o, self)

    def __truediv__(self, o):
        return NotImplemented if _defers(o) else _div(self, o)

    def __rtruediv__(self, o):
        return NotImplemented if _defers(o) else _div(o, self)

    def __floordiv__(self, o):
        return NotImplemented if _defers(o) else _arith(FloorDiv, self, o)

    def __rfloordiv__(self, o):
        return NotImplemented if _defers(o) else _arith(FloorDiv, o, self)

    def __mod__(self, o):
        return NotImplemented if _defers(o) else _arith(FloorMod, self, o)

    def __rmod__(self, o):
        return NotImplemented if _defers(o) else _arith(FloorMod, o, self)

    def __neg__(self):
        return _arith(Sub, const(0, self.dtype), self)

    # comparisons build expressions; __bool__ refuses except for structural == / !=
    def __lt__(self, o):
        return _cmp(LT, self, o)

    def __le__(self, o):
        return _cmp(LE, self, o)

    def __gt__(self, o):
        return _cmp(GT, self, o)

    def __ge__(self, o):
        return _cmp(GE, self, o)

    def __eq__(self, o):  # type: ignore[override]
        return _cmp(EQ, self, o)

    def __ne__(self, o):  # type: ignore[override]
        return _cmp(NE, self, o)

    __hash__ = object.__hash__

    # &, |, ^ and ~ are logical on conditions (bool) and bitwise on integers, as in TVM; << and >> shift integers
    def __and__(self, o):
        return _bitwise(BitAnd, self, o)

    def __rand__(self, o):
        return _bitwise(BitAnd, o, self)

    def __or__(self, o):
        return _bitwise(BitOr, self, o)

    def __ror__(self, o):
        return _bitwise(BitOr, o, self)

    def __xor__(self, o):
        return _bitwise(BitXor, self, o)

    def __rxor__(self, o):
        return _bitwise(BitXor, o, self)

    def __invert__(self):
        if self.dtype == "bool" or is_float(self.dtype):
            return Not(_as_bool(self))
        return BitXor(self, const(-1 if not self.dtype.startswith("uint") else (1 << _bits(self.dtype)) - 1,
                                  self.dtype))

    def __lshift__(self, o):
        return _bitwise(ShiftLeft, self, o)

    def __rlshift__(self, o):
        return _bitwise(ShiftLeft, o, self)

    def __rshift__(self, o):
        return _bitwise(ShiftRight, self, o)

    def __rrshift__(self, o):
        return _bitwise(ShiftRight, o, self)

    def __bool__(self):
        raise TypeError(
            f"cannot use the symbolic expression {self} as a Python bool; "
            "use te.if_then_else / te.all / te.any to build conditions"
        )

    def astype(self, dtype: str) -> Expr:
        return cast(dtype, self)

    def equal(self, other: Any) -> Expr:
        """The expression ``self == other`` (TVM's spelling, e.g. ``tx.var.equal(0)`` in a store predicate)."""
        return _cmp(EQ, self, other)

    def __repr__(self) -> str:
        return expr_str(self)

    def _text(self) -> str:
        """The text form of a node kind :func:`expr_str` does not know (the loop IR's buffer loads define
        their own, beside their class)."""
        return f"<{type(self).__name__}>"

    def same_as(self, other: Any) -> bool:
        return self is other


class Var(Expr):
    """A named scalar variable: a loop index or a symbolic shape."""

    __slots__ = ("name",)

    def __init__(self, name: str, dtype: str = INDEX_DTYPE):
        self.name = name
        self.dtype = check_dtype(dtype)


class IntImm(Expr):
    __slots__ = ("value",)

    def __init__(self, value: int, dtype: str = INDEX_DTYPE):
        if isinstance(value, str):  # TVM's order: IntImm("int32", 5)
            value, dtype = dtype, value
        self.value = int(value)
        self.dtype = dtype

    def __int__(self) -> int:
        return self.value

    __index__ = __int__

    def __float__(self) -> float:
        return float(self.value)

    def __bool__(self) -> bool:
        return self.value != 0


class FloatImm(Expr):
    __slots__ = ("value",)

    def __init__(self, value: float, dtype: str = "float32"):
        if isinstance(value, str):  # TVM's order: FloatImm("float32", 0.5)
            value, dtype = dtype, value
        self.value = float(value)
        self.dtype = dtype

    def __float__(self) -> float:
        return self.value


class BinaryOp(Expr):
    __slots__ = ("a", "b")
    symbol = "?"

    def __init__(self, a: Expr, b: Expr, dtype: str | None = None):
        self.a = a
        self.b = b
        self.dtype = dtype or a.dtype


class Add(BinaryOp):
    __slots__ = ()
    symbol = "+"


class Sub(BinaryOp):
    __slots__ = ()
    symbol = "-"


class Mul(BinaryOp):
    __slots__ = ()
    symbol = "*"


class Div(BinaryOp):
    """Floating-point division."""

    __slots__ = ()
    symbol = "/"


class FloorDiv(BinaryOp):
    __slots__ = ()
    symbol = "//"


class FloorMod(BinaryOp):
    __slots__ = ()
    symbol = "%"


class Min(BinaryOp):
    __slots__ = ()
    symbol = "min"


class Max(BinaryOp):
    __slots__ = ()
    symbol = "max"


class CmpOp(BinaryOp):
    __slots__ = ()

    def __init__(self, a: Expr, b: Expr, dtype: str | None = None):
        super().__init__(a, b, "bool")


class EQ(CmpOp):
    __slots__ = ()
    symbol = "=="

    def __bool__(self):
        return self.a is self.b


class NE(CmpOp):
    __slots__ = ()
    symbol = "!="

    def __bool__(self):
        return self.a is not self.b


class LT(CmpOp):
    __slots__ = ()
    symbol = "<"


class LE(CmpOp):
    __slots__ = ()
    symbol = "<="


class GT(CmpOp):
    __slots__ = ()
    symbol = ">"


class GE(CmpOp):
    __slots__ = ()
    symbol = ">="


class And(BinaryOp):
    __slots__ = ()
    symbol = "&&"

    def __init__(self, a: Expr, b: Expr, dtype: str | None = None):
        super().__init__(a, b, "bool")


class Or(BinaryOp):
    __slots__ = ()
    symbol = "||"

    def __init__(self, a: Expr, b: Expr, dtype: str | None = None):
        super().__init__(a, b, "bool")


class BitOp(BinaryOp):
    """An operator on the bits of integers (TVM's bitwise_and, bitwise_or, bitwise_xor, shift_left, shift_right)."""

    __slots__ = ()


class BitAnd(BitOp):
    __slots__ = ()
    symbol = "&"


class BitOr(BitOp):
    __slots__ = ()
    symbol = "|"


class BitXor(BitOp):
    __slots__ = ()
    symbol = "^"


class ShiftLeft(BitOp):
    __slots__ = ()
    symbol = "<<"


class ShiftRight(BitOp):
    """Arithmetic for signed integers, logical for unsigned ones."""

    __slots__ = ()
    symbol = ">>"


class Not(Expr):
    __slots__ = ("a",)

    def __init__(self, a: Expr):
        self.a = a
        self.dtype = "bool"


class Select(Expr):
    """``cond ? t : f`` where only the chosen branch is evaluated (TVM's if_then_else)."""

    __slots__ = ("cond", "t", "f")

    def __init__(self, cond: Expr, t: Expr, f: Expr):
        self.cond = cond
        self.t = t
        self.f = f
        self.dtype = t.dtype


class Cast(Expr):
    __slots__ = ("value",)

    def __init__(self, dtype: str, value: Expr):
        self.dtype = check_dtype(dtype)
        self.value = value


class Call(Expr):
    """A pure math intrinsic such as ``exp`` or ``sqrt``."""

    __slots__ = ("name", "args")

    def __init__(self, dtype: str, name: str, args: Sequence[Expr]):
        self.dtype = dtype
        self.name = name
        self.args = tuple(args)

    @property
    def op(self) -> Op:
        """TVM's view of what is called: ``call.op.name == "tir.exp"``."""
        return Op("tir." + self.name)


class Op:
    """TVM's ``tvm.ir.Op``, the operator of a :class:`Call`, known by its name (``tir.exp``)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Op) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Op({self.name})"


#: the packed dot products, ``Call(int32, name, [acc, a, w])``: acc plus the products of the narrow elements
#: from ``a`` on and from ``w`` on (loads), a 32-bit word of each: name -> (the operands' dtypes, elements per
#: word). Each operand load reads its word, so analyses of the region a load reads extend its last axis.
#: ``dot4_u8s8``: 4 uint8 x int8 products (one AVX-512 VNNI vpdpbusd on 16 lanes); ``dot2_i16``: 2 int16 x int16
#: products (one pmaddwd per vector on any x86 CPU)
PACKED_DOTS = {"dot4_u8s8": (("uint8", "int8"), 4), "dot2_i16": (("int16",), 2)}


class Let(Expr):
    __slots__ = ("var", "value", "body")

    def __init__(self, var: Var, value: Expr, body: Expr):
        self.var = var
        self.value = value
        self.body = body
        self.dtype = body.dtype


class TensorLoad(Expr):
    """``T[i, j]`` on a te tensor (TVM's ProducerLoad)."""

    __slots__ = ("tensor", "indices")

    def __init__(self, tensor: Any, indices: Sequence[Expr]):
        self.tensor = tensor
        self.indices = tuple(indices)
        self.dtype = tensor.dtype


class CommReducer:
    """A commutative, associative reduction: ``combine(lhs, rhs)`` and its identity."""

    def __init__(self, fcombine: Callable, fidentity: Callable, name: str = "reduce"):
        self.fcombine = fcombine
        self.fidentity = fidentity
        self.name = name

    def combine(self, lhs: Expr, rhs: Expr) -> Expr:
        return convert(self.fcombine(lhs, rhs), lhs.dtype)

    def identity(self, dtype: str) -> Expr:
        return convert(self.fidentity(dtype), dtype)

    def combine_tuple(self, lhs: Sequence[Expr], rhs: Sequence[Expr]) -> list[Expr]:
        """``fcombine`` of a tuple reducer (argmax: (index, value) pairs): one new value per element."""
        out = self.fcombine(tuple(lhs), tuple(rhs))
        if not isinstance(out, (list, tuple)) or len(out) != len(lhs):
            raise TypeError(f"{self.name}: fcombine of {len(lhs)}-tuples must return a {len(lhs)}-tuple, got {out!r}")
        return [convert(o, x.dtype) if not isinstance(o, Expr) else o for o, x in zip(out, lhs)]

    def identity_tuple(self, dtypes: Sequence[str]) -> list[Expr]:
        out = self.fidentity(*dtypes)
        if not isinstance(out, (list, tuple)) or len(out) != len(dtypes):
            raise TypeError(f"{self.name}: fidentity of {len(dtypes)} types must return a {len(dtypes)}-tuple")
        return [convert(o, d) for o, d in zip(out, dtypes)]

    def __call__(self, expr: Any, axis: Any = None, where: Any = None, *args: Any) -> Any:
        """``reducer(expr, axis=k, where=cond)`` reduces over the reduce axes ``k``; ``expr`` may be a tuple
        (argmax), and then the result is a tuple of Reduce nodes that a ``te.compute`` returns as that many
        outputs. Called on values instead (``reducer(a, b, ...)``), it combines them, as TVM's does."""
        is_axis = isinstance(axis, IterVar) or (
            isinstance(axis, (list, tuple)) and len(axis) > 0 and builtins_all(isinstance(a, IterVar) for a in axis))
        if not is_axis:
            if axis is None:
                raise TypeError(f"{self.name}: give the reduce axis (axis=k) or at least two values to combine")
            values = [expr, axis] + ([where] if where is not None else []) + list(args)
            acc = convert(values[0])
            for v in values[1:]:
                a, b = _promote(acc, v)
                acc = convert(self.fcombine(a, b), a.dtype)
            return acc
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        for ax in axes:
            if not isinstance(ax, IterVar) or ax.kind != "reduce":
                raise TypeError(f"{self.name}: axis must be created by te.reduce_axis, got {ax!r}")
        cond = _as_bool(where) if where is not None else None
        if isinstance(expr, (list, tuple)):
            sources = tuple(convert(x) for x in expr)
            return tuple(Reduce(self, sources[k], axes, cond, sources, k) for k in range(len(sources)))
        source = convert(expr)
        return Reduce(self, source, axes, cond)

    def __repr__(self) -> str:
        return f"CommReducer({self.name})"


class Reduce(Expr):
    """A reduction over reduce axes; only allowed as the whole body of a compute.

    One value of a tuple reduction (argmax) has all the reduced values in ``sources`` and is the
    ``value_index``-th of them; a plain reduction has ``sources == (source,)``."""

    __slots__ = ("combiner", "source", "axis", "condition", "sources", "value_index")

    def __init__(self, combiner: CommReducer, source: Expr, axis: Sequence[Any], condition: Expr | None,
                 sources: Sequence[Expr] | None = None, value_index: int = 0):
        self.combiner = combiner
        self.sources = tuple(sources) if sources is not None else (source,)
        self.value_index = value_index
        self.source = self.sources[value_index]
        self.axis = tuple(axis)
        self.condition = condition
        self.dtype = self.source.dtype


class IterVar:
    """A loop axis: a variable, its domain (a ``te.tensor.Range``, or None for a thread axis given by tag
    alone), and its kind ('spatial', 'reduce' or 'thread'). It lives with the expressions, as TVM's
    ``tir.IterVar`` does: reductions hold their axes and ``convert`` turns an axis into its variable."""

    __slots__ = ("var", "dom", "kind", "thread_tag")

    # TVM's IterVar types, as ``Stage.iter_var_attrs[axis].iter_type`` reports them
    DataPar = 0
    ThreadIndex = 1
    CommReduce = 2
    Ordered = 3
    Opaque = 4
    Unrolled = 5
    Vectorized = 6
    Parallelized = 7
    Tensorized = 8

    def __init__(self, dom: Any, var: Var, kind: str, thread_tag: str = ""):
        self.var = var
        self.dom = dom
        self.kind = kind
        self.thread_tag = thread_tag

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.kind}, {self.dom})"

    # IterVars take part in expressions through their variable
    def _e(self):
        return self.var

    def __add__(self, o):
        return self.var + o

    def __radd__(self, o):
        return o + self.var

    def __sub__(self, o):
        return self.var - o

    def __rsub__(self, o):
        return o - self.var

    def __mul__(self, o):
        return self.var * o

    def __rmul__(self, o):
        return o * self.var

    def __floordiv__(self, o):
        return self.var // o

    def __rfloordiv__(self, o):
        return o // self.var

    def __mod__(self, o):
        return self.var % o

    def __rmod__(self, o):
        return o % self.var

    def __neg__(self):
        return -self.var

    def __lt__(self, o):
        return self.var < o

    def __le__(self, o):
        return self.var <= o

    def __gt__(self, o):
        return self.var > o

    def __ge__(self, o):
        return self.var >= o

    def astype(self, dtype: str) -> Expr:
        return self.var.astype(dtype)


# ----------------------------------------------------------------------------------------------
# construction helpers


def const(value: Any, dtype: str | None = None) -> Expr:
    """A constant; the dtype defaults to int64 for ints and float32 for floats."""
    if isinstance(value, Expr):
        return value if dtype is None or value.dtype == dtype else cast(dtype, value)
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = INDEX_DTYPE
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant from {value!r}")
    dtype = check_dtype(dtype)
    if is_float(dtype):
        return FloatImm(float(value), dtype)
    if dtype == "bool":
        return IntImm(1 if value else 0, "bool")
    if isinstance(value, float) and not float(value).is_integer():
        raise TypeError(f"constant {value!r} is not an integer but dtype is {dtype}")
    return IntImm(int(value), dtype)


def convert(value: Any, dtype_hint: str | None = None) -> Expr:
    """Turn a Python number, IterVar or Expr into an Expr."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, bool):
        return IntImm(int(value), "bool")
    if isinstance(value, int):
        if dtype_hint is not None and is_float(dtype_hint):
            return FloatImm(float(value), dtype_hint)
        return IntImm(value, dtype_hint if dtype_hint and is_int(dtype_hint) else INDEX_DTYPE)
    if isinstance(value, float):
        return FloatImm(value, dtype_hint if dtype_hint and is_float(dtype_hint) else "float32")
    try:
        if isinstance(value, np.generic):
            return const(value.item(), str(value.dtype))
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"cannot convert {value!r} ({type(value).__name__}) to an expression")


def _promote(a: Any, b: Any) -> tuple[Expr, Expr]:
    """Convert both operands; Python numbers take the other side's dtype, ints meet floats as floats."""
    if not isinstance(a, (Expr, IterVar)) and isinstance(b, (Expr, IterVar)):
        b = convert(b)
        a = convert(a, b.dtype)
    else:
        a = convert(a)
        b = convert(b, a.dtype)
    if a.dtype != b.dtype:
        if a.dtype == "bool" or b.dtype == "bool":
            a = a if a.dtype != "bool" else cast(b.dtype, a)
            b = b if b.dtype != "bool" else cast(a.dtype, b)
        elif is_float(a.dtype) and not is_float(b.dtype):
            b = cast(a.dtype, b)
        elif is_float(b.dtype) and not is_float(a.dtype):
            a = cast(b.dtype, a)
        else:
            order = _FLOAT + _INT
            wider = builtins.max(a.dtype, b.dtype, key=lambda d: (_bits(d), order.index(d)))
            a, b = cast(wider, a), cast(wider, b)
    return a, b


def _bits(dtype: str) -> int:
    return 1 if dtype == "bool" else int("".join(ch for ch in dtype if ch.isdigit()))


def _defers(o: Any) -> bool:
    """Whether ``o``'s own operators compute the result (a te.Tensor: ``n + A`` is a tensor, TOPI's broadcast)."""
    return getattr(type(o), "defers_arithmetic", False)


def _arith(cls: type, a: Any, b: Any) -> Expr:
    a, b = _promote(a, b)
    if cls in (FloorDiv, FloorMod) and is_float(a.dtype):
        if cls is FloorDiv:
            return Call(a.dtype, "floor", [Div(a, b)])
        return Sub(a, Mul(Call(a.dtype, "floor", [Div(a, b)]), b))
    return cls(a, b)


def _div(a: Any, b: Any) -> Expr:
    a, b = _promote(a, b)
    if not is_float(a.dtype):
        raise TypeError(
            f"'/' on integer expressions ({a} / {b}) is ambiguous; use // (floor division) "
            "or cast to a float type first"
        )
    return Div(a, b)


_LOGICAL = {"BitAnd": And, "BitOr": Or, "BitXor": NE}


def _bitwise(cls: type, a: Any, b: Any) -> Expr:
    """``cls`` (a BitOp) of two integers; &, | and ^ of conditions (either side bool) are And, Or, NE."""
    if cls.__name__ in _LOGICAL and (_is_condition(a) or _is_condition(b)):
        return _LOGICAL[cls.__name__](_as_bool(a), _as_bool(b))
    a, b = _promote(a, b)
    if not is_int(a.dtype):
        takes = "integers (or conditions)" if cls.__name__ in _LOGICAL else "integers"
        raise TypeError(f"'{cls.symbol}' takes {takes}, got {a.dtype}: {a} {cls.symbol} {b}")
    return cls(a, b)


def _is_condition(x: Any) -> bool:
    return isinstance(x, bool) or (isinstance(x, (Expr, IterVar)) and convert(x).dtype == "bool")


def bitwise_and(a: Any, b: Any) -> Expr:
    """``a & b`` of integers (TVM's tir.bitwise_and)."""
    return _bitwise(BitAnd, a, b)


def bitwise_or(a: Any, b: Any) -> Expr:
    """``a | b`` of integers."""
    return _bitwise(BitOr, a, b)


def bitwise_xor(a: Any, b: Any) -> Expr:
    """``a ^ b`` of integers."""
    return _bitwise(BitXor, a, b)


def bitwise_not(a: Any) -> Expr:
    """``~a`` of an integer."""
    return ~convert(a)


def shift_left(a: Any, b: Any) -> Expr:
    """``a << b`` of integers."""
    return _bitwise(ShiftLeft, a, b)


def shift_right(a: Any, b: Any) -> Expr:
    """``a >> b`` of integers: arithmetic for signed ones, logical for unsigned ones."""
    return _bitwise(ShiftRight, a, b)


def _cmp(cls: type, a: Any, b: Any) -> Expr:
    a, b = _promote(a, b)
    return cls(a, b)


def _as_bool(x: Any) -> Expr:
    x = convert(x)
    if x.dtype == "bool":
        return x
    return NE(x, const(0, x.dtype))


def cast(dtype: str, value: Any) -> Expr:
    value = convert(value)
    dtype = check_dtype(dtype)
    if value.dtype == dtype:
        return value
    if isinstance(value, IntImm) and is_int(dtype):
        return IntImm(value.value, dtype)
    if isinstance(value, (IntImm, FloatImm)) and is_float(dtype):
        return FloatImm(float(value.value), dtype)
    return Cast(dtype, value)


def if_then_else(cond: Any, t: Any, f: Any) -> Expr:
    """``t`` where ``cond`` holds, else ``f``; the branch not taken is never evaluated."""
    t, f = _promote(t, f)
    return Select(_as_bool(cond), t, f)


def all(*conds: Any) -> Expr:  # noqa: A001 - TVM's name
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    if not conds:
        return const(True)
    out = _as_bool(conds[0])
    for c in conds[1:]:
        out = And(out, _as_bool(c))
    return out


def any(*conds: Any) -> Expr:  # noqa: A001 - TVM's name
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    if not conds:
        return const(False)
    out = _as_bool(conds[0])
    for c in conds[1:]:
        out = Or(out, _as_bool(c))
    return out


def _float_call(name: str) -> Callable[[Any], Expr]:
    def fn(x: Any) -> Expr:
        x = convert(x)
        if not is_float(x.dtype):
            x = cast("float32", x)
        return Call(x.dtype, name, [x])

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` of a floating-point expression."
    return fn


def popcount(x: Any) -> Expr:
    """The number of set bits of an integer (TVM's ``tir.popcount``; one ``popcnt`` a lane on x86)."""
    x = convert(x)
    if is_float(x.dtype) or x.dtype == "bool":
        raise TypeError(f"popcount counts the bits of an integer, got a {x.dtype} expression ({x})")
    return Call(x.dtype, "popcount", [x])


exp = _float_call("exp")
log = _float_call("log")
sqrt = _float_call("sqrt")
tanh = _float_call("tanh")
floor = _float_call("floor")
ceil = _float_call("ceil")
erf = _float_call("erf")
sin = _float_call("sin")
cos = _float_call("cos")


def round(x: Any) -> Expr:  # noqa: A001 - TVM's name
    """The nearest integer, halves to even (as numpy's and ONNX's Round; LLVM's ``nearbyint``), as a float."""
    x = convert(x)
    if not is_float(x.dtype):
        return x
    return Call(x.dtype, "nearbyint", [x])


def trunc(x: Any) -> Expr:  # TVM's name
    """``x`` rounded towards zero, as a float (integers are returned as they are)."""
    x = convert(x)
    if not is_float(x.dtype):
        return x
    return Select(LT(x, const(0.0, x.dtype)), ceil(x), floor(x))


def reinterpret(dtype: str, value: Any) -> Expr:
    """``value``'s bits read as ``dtype`` (TVM's ``tir.reinterpret``; same width, e.g. float32 <-> int32)."""
    value = convert(value)
    dtype = check_dtype(dtype)
    if np.dtype(dtype).itemsize != np.dtype(value.dtype).itemsize or "bool" in (dtype, value.dtype):
        raise TypeError(f"reinterpret: {value.dtype} and {dtype} must have one width (and not be bool)")
    return value if dtype == value.dtype else Call(dtype, "reinterpret", [value])


def isnan(x: Any) -> Expr:
    """Whether ``x`` is NaN (a bool; always false for integers): NaN is the one value unequal to itself."""
    x = convert(x)
    return NE(x, x) if is_float(x.dtype) else const(False)


def isinf(x: Any) -> Expr:
    """Whether ``x`` is +inf or -inf (a bool; always false for integers)."""
    x = convert(x)
    return EQ(abs(x), const(float("inf"), x.dtype)) if is_float(x.dtype) else const(False)


def sigmoid(x: Any) -> Expr:
    x = convert(x)
    one = const(1.0, x.dtype)
    return one / (one + exp(-x))


def abs(x: Any) -> Expr:  # noqa: A001 - TVM's name
    x = convert(x)
    if is_float(x.dtype):
        return Call(x.dtype, "fabs", [x])
    return Select(LT(x, const(0, x.dtype)), Sub(const(0, x.dtype), x), x)


def power(x: Any, y: Any) -> Expr:
    x, y = _promote(x, y)
    if not is_float(x.dtype):
        x, y = cast("float32", x), cast("float32", y)
    return Call(x.dtype, "pow", [x, y])


def floordiv(a: Any, b: Any) -> Expr:
    """``a // b`` rounded towards minus infinity (TVM's ``floordiv``; the same as Python's ``//`` here)."""
    return _arith(FloorDiv, a, b)


def floormod(a: Any, b: Any) -> Expr:
    """The remainder of :func:`floordiv`: it has the sign of ``b`` (TVM's ``floormod``, Python's ``%``)."""
    return _arith(FloorMod, a, b)


#: TVM's index division and remainder, which are floor division and its remainder
indexdiv = floordiv
indexmod = floormod


def truncdiv(a: Any, b: Any) -> Expr:
    """``a / b`` rounded towards zero, as C's integer division (TVM's ``truncdiv``); on floats, ``a / b``."""
    a, b = _promote(a, b)
    if is_float(a.dtype):
        return Div(a, b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        if b.value == 0:
            raise ZeroDivisionError(f"truncdiv({a.value}, 0)")
        q = builtins.abs(a.value) // builtins.abs(b.value)
        return IntImm(q if (a.value < 0) == (b.value < 0) else -q, a.dtype)
    # floor and truncation differ by one where the division is inexact and the signs differ
    zero = const(0, a.dtype)
    q = FloorDiv(a, b)
    inexact = NE(FloorMod(a, b), zero)
    if isinstance(b, IntImm):
        differ = LT(a, zero) if b.value > 0 else GT(a, zero)
    else:
        differ = Or(And(LT(a, zero), GT(b, zero)), And(GT(a, zero), LT(b, zero)))
    return Select(And(inexact, differ), Add(q, const(1, a.dtype)), q)


def truncmod(a: Any, b: Any) -> Expr:
    """The remainder of :func:`truncdiv`: it has the sign of ``a`` (C's ``%``, TVM's ``truncmod``)."""
    a, b = _promote(a, b)
    if is_float(a.dtype):  # a - trunc(a / b) * b, trunc being floor or ceil by the quotient's sign
        q = Div(a, b)
        return Sub(a, Mul(Select(LT(q, const(0.0, a.dtype)), Call(a.dtype, "ceil", [q]), Call(a.dtype, "floor", [q])),
                          b))
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.value - truncdiv(a, b).value * b.value, a.dtype)
    return Sub(a, Mul(truncdiv(a, b), b))


def maximum(a: Any, b: Any) -> Expr:
    return _arith(Max, a, b)


def minimum(a: Any, b: Any) -> Expr:
    return _arith(Min, a, b)


def min_value(dtype: str) -> Expr:
    if is_float(dtype):
        return FloatImm(-math.inf, dtype)
    return IntImm(int(np.iinfo(dtype).min), dtype)


def max_value(dtype: str) -> Expr:
    if is_float(dtype):
        return FloatImm(math.inf, dtype)
    return IntImm(int(np.iinfo(dtype).max), dtype)


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> CommReducer:
    """Define a reduction: ``fcombine(x, y)`` merges two values, ``fidentity(dtype)`` is its unit."""
    return CommReducer(fcombine, fidentity, name)


sum = comm_reducer(lambda x, y: x + y, lambda t: const(0, t), name="sum")  # noqa: A001
_max_reducer = comm_reducer(lambda x, y: maximum(x, y), min_value, name="max")
_min_reducer = comm_reducer(lambda x, y: minimum(x, y), max_value, name="min")


def _is_axis_arg(x: Any) -> bool:
    if isinstance(x, IterVar):
        return x.kind == "reduce"
    return isinstance(x, (list, tuple)) and len(x) > 0 and builtins_all(isinstance(a, IterVar) for a in x)


def builtins_all(it) -> bool:
    for v in it:
        if not v:
            return False
    return True


def max(a: Any, b: Any = None, axis: Any = None, where: Any = None) -> Expr:  # noqa: A001
    """``te.max(expr, axis=k)`` reduces; ``te.max(a, b)`` is the elementwise maximum."""
    if axis is not None:
        return _max_reducer(a, axis, where)
    if b is not None and _is_axis_arg(b):
        return _max_reducer(a, b, where)
    if b is None:
        raise TypeError("te.max needs a second expression or axis=")
    return maximum(a, b)


def min(a: Any, b: Any = None, axis: Any = None, where: Any = None) -> Expr:  # noqa: A001
    """``te.min(expr, axis=k)`` reduces; ``te.min(a, b)`` is the elementwise minimum."""
    if axis is not None:
        return _min_reducer(a, axis, where)
    if b is not None and _is_axis_arg(b):
        return _min_reducer(a, b, where)
    if b is None:
        raise TypeError("te.min needs a second expression or axis=")
    return minimum(a, b)


# ----------------------------------------------------------------------------------------------
# traversal


def _children_slow(e: Expr) -> tuple:
    if isinstance(e, BinaryOp):
        return (e.a, e.b)
    if isinstance(e, (Not,)):
        return (e.a,)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Select):
        return (e.cond, e.t, e.f)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Let):
        return (e.value, e.body)
    if isinstance(e, TensorLoad):
        return e.indices
    if isinstance(e, Reduce):
        return e.sources + ((e.condition,) if e.condition is not None else ())
    idx = getattr(e, "indices", None)  # tir BufferLoad
    if idx is not None:
        return tuple(idx)
    return ()


def _leaf(e: Expr) -> tuple:
    return ()


def _binary(e: BinaryOp) -> tuple:
    return (e.a, e.b)


_CHILDREN: dict[type, Callable[[Expr], tuple]] = {Var: _leaf, IntImm: _leaf, FloatImm: _leaf}


def children(e: Expr) -> tuple:
    """The sub-expressions of ``e`` in a fixed order (:func:`rebuild` takes them back in it)."""
    fn = _CHILDREN.get(type(e))
    if fn is None:  # first node of this type: binary ops take the fast path, the rest the general one
        t = type(e)
        fn = _binary if issubclass(t, BinaryOp) else _leaf if issubclass(t, (Var, IntImm, FloatImm)) else \
            _children_slow
        _CHILDREN[t] = fn
    return fn(e)


def walk(e: Expr):
    """Pre-order iteration over the distinct nodes of an expression: a node that several parents share (te
    lambdas and inlining make DAGs) comes once, so a walk is linear in the nodes, not in the paths to them."""
    seen: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        stack.extend(reversed(children(x)))


_NO_VARS: frozenset = frozenset()


def free_var_set(e: Expr) -> frozenset:
    """The variables in ``e`` as a frozenset, cached on the node (shared with a child's where equal)."""
    fv = getattr(e, "_fv", None)
    if fv is not None:
        return fv
    if isinstance(e, Var):
        fv = frozenset((e,))
    else:
        fv = _NO_VARS
        for c in children(e):
            f = getattr(c, "_fv", None)
            if f is None:
                f = free_var_set(c)
            if f is fv or not f:
                continue
            if not fv or fv <= f:
                fv = f
            elif not f <= fv:
                fv = fv | f
    e._fv = fv
    return fv


def free_vars(e: Expr) -> set:
    """The variables in ``e`` (a new set the caller may change)."""
    return set(free_var_set(e))


def rebuild(e: Expr, new_children: Sequence[Expr]) -> Expr:
    """A copy of ``e`` with other children (same order as :func:`children`)."""
    if isinstance(e, BinaryOp):
        return type(e)(new_children[0], new_children[1], e.dtype)
    if isinstance(e, Not):
        return Not(new_children[0])
    if isinstance(e, Cast):
        return Cast(e.dtype, new_children[0])
    if isinstance(e, Select):
        return Select(*new_children)
    if isinstance(e, Call):
        return Call(e.dtype, e.name, new_children)
    if isinstance(e, Let):
        return Let(e.var, new_children[0], new_children[1])
    if isinstance(e, TensorLoad):
        return TensorLoad(e.tensor, new_children)
    if isinstance(e, Reduce):
        n = len(e.sources)
        cond = new_children[n] if e.condition is not None else None
        if n == 1:
            return Reduce(e.combiner, new_children[0], e.axis, cond)
        return Reduce(e.combiner, new_children[e.value_index], e.axis, cond, new_children[:n], e.value_index)
    if hasattr(e, "with_indices"):
        return e.with_indices(new_children)
    return e


def transform(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Bottom-up rewrite: ``fn`` sees each node (after its children) and may return a replacement."""
    memo: dict[int, Expr] = {}

    def go(x: Expr) -> Expr:
        key = id(x)
        if key in memo:
            return memo[key]
        kids = children(x)
        if kids:
            new = [go(c) for c in kids]
            if builtins_any(n is not o for n, o in zip(new, kids)):
                x2 = rebuild(x, new)
            else:
                x2 = x
        else:
            x2 = x
        r = fn(x2)
        out = x2 if r is None else r
        memo[key] = out
        return out

    return go(e)


def builtins_any(it) -> bool:
    for v in it:
        if v:
            return True
    return False


def substitute(e: Expr, vmap: dict) -> Expr:
    """Replace variables by expressions (keys are Var objects); subtrees without those variables are kept."""
    if not vmap:
        return e
    keys = frozenset(vmap)
    if free_var_set(e).isdisjoint(keys):
        return e
    memo: dict[int, Expr] = {}

    def go(x: Expr) -> Expr:
        key = id(x)
        out = memo.get(key)
        if out is not None:
            return out
        fv = getattr(x, "_fv", None)
        if fv is None:
            fv = free_var_set(x)
        if fv.isdisjoint(keys):
            out = x
        elif isinstance(x, Var):
            out = vmap.get(x)
            if out is None:
                out = x
        else:
            kids = children(x)
            new = [go(c) for c in kids]
            out = rebuild(x, new) if builtins_any(n is not o for n, o in zip(new, kids)) else x
        memo[key] = out
        return out

    return go(e)


# ----------------------------------------------------------------------------------------------
# text form

_PREC = {  # Python's: | below ^ below & below shifts below + and -
    Or: 1,
    And: 2,
    EQ: 3,
    NE: 3,
    LT: 3,
    LE: 3,
    GT: 3,
    GE: 3,
    BitOr: 4,
    BitXor: 4.25,
    BitAnd: 4.5,
    ShiftLeft: 4.75,
    ShiftRight: 4.75,
    Add: 5,
    Sub: 5,
    Mul: 6,
    Div: 6,
    FloorDiv: 6,
    FloorMod: 6,
}


def _prec(e: Expr) -> int:
    if isinstance(e, IntImm) and e.value < 0 or isinstance(e, FloatImm) and e.value < 0:
        return 7
    return _PREC.get(type(e), 9)


def expr_str(e: Expr) -> str:
    """The readable text form of an expression (what ``repr`` and the loop printer show)."""
    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value) if e.dtype in ("int64", "int32") else f"{e.dtype}({e.value})"
    if isinstance(e, FloatImm):
        v = e.value
        s = repr(v) if math.isfinite(v) else ("inf" if v > 0 else "-inf")
        return s + ("f" if e.dtype == "float32" and math.isfinite(v) else "")
    if isinstance(e, (Min, Max)):
        return f"{e.symbol}({expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, BinaryOp):
        p = _prec(e)
        left = expr_str(e.a)
        if _prec(e.a) < p:
            left = f"({left})"
        right = expr_str(e.b)
        # right operand of a non-commutative op needs parens at equal precedence, and a quotient or remainder
        # under a product does too: a*(b // c) is not a*b // c
        if _prec(e.b) < p or (_prec(e.b) == p and not (isinstance(e, (Add, And, Or))
                                                        or isinstance(e, Mul) and isinstance(e.b, Mul))):
            right = f"({right})"
        sep = "" if isinstance(e, Mul) else " "
        return f"{left}{sep}{e.symbol}{sep}{right}"
    if isinstance(e, Not):
        inner = expr_str(e.a)
        return f"!({inner})" if _prec(e.a) < 9 else f"!{inner}"
    if isinstance(e, Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_str(e.value)})"
    if isinstance(e, Call):
        for prefix, fn in (("packed:", "call_packed"), ("extern:", "call_extern")):
            if e.name.startswith(prefix):
                args = [f'"{e.name[len(prefix):]}"'] + [expr_str(a) for a in e.args]
                return f"{fn}({', '.join(args)})"
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, Let):
        return f"(let {e.var.name} = {expr_str(e.value)} in {expr_str(e.body)})"
    if isinstance(e, TensorLoad):
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ", ".join(a.name for a in e.axis)
        cond = f", where={expr_str(e.condition)}" if e.condition is not None else ""
        return f"{e.combiner.name}({expr_str(e.source)}, axis=[{axes}]{cond})"
    return e._text()
