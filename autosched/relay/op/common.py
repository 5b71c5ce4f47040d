"""Helpers the relay op definitions share: argument checks, broadcasting, padding and pair attributes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched import te
from autosched.relay.ir.expr import RelayError, TensorType, Type


def exact_sum_dtype(bound: float) -> str:
    """The type an integer dot product whose partial sums stay within ``bound`` in magnitude is summed in:
    float32 while ``bound`` < 2^24 (every partial sum is then an integer float32 holds, in any order, so the
    float kernels compute it exactly), else int32."""
    return "float32" if bound < 2 ** 24 else "int32"


def _tensor(types: Sequence[Type], k: int, op: str, what: str = "") -> TensorType:
    t = types[k]
    if not isinstance(t, TensorType):
        raise RelayError(f"{op}: argument {k}{' (' + what + ')' if what else ''} must be a tensor, got {t!r}")
    return t


def _nargs(types: Sequence[Type], n: int, op: str) -> None:
    if len(types) != n:
        raise RelayError(f"{op} takes {n} arguments, got {len(types)}")


def _operands(types: Sequence[Type], op: str, *names: str) -> tuple[TensorType, ...]:
    """The argument types of ``op``, one per name, each checked to be a tensor (a name is what errors call it;
    "" for none), after checking there are as many arguments as names."""
    _nargs(types, len(names), op)
    return tuple(_tensor(types, k, op, what) for k, what in enumerate(names))


def _same_dtype(op: str, *ts: TensorType) -> str:
    dts = {t.dtype for t in ts}
    if len(dts) != 1:
        raise RelayError(f"{op}: operand dtypes differ: {', '.join(f'{t.shape} {t.dtype}' for t in ts)}")
    return ts[0].dtype


def _pair(v: Any, op: str, what: str) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2:
        raise RelayError(f"{op}: {what} must be 1 or 2 ints, got {v}")
    return v  # type: ignore[return-value]


def pad4(v: Any, op: str) -> tuple[int, int, int, int]:
    """TVM's 2-D padding: 1 int (all sides), 2 (top/bottom, left/right) or 4 (top, left, bottom, right)."""
    if isinstance(v, int):
        return (v, v, v, v)
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return (v[0],) * 4  # type: ignore[return-value]
    if len(v) == 2:
        return (v[0], v[1], v[0], v[1])
    if len(v) == 4:
        return v  # type: ignore[return-value]
    raise RelayError(f"{op}: padding must be 1, 2 or 4 ints, got {v}")


def broadcast_shape(a: Sequence[int], b: Sequence[int], op: str) -> tuple[int, ...]:
    """numpy broadcasting of two shapes, or an error naming the op and both shapes."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x != y and x != 1 and y != 1:
            raise RelayError(f"{op}: shapes {tuple(a)} and {tuple(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def _bload(x: Any, idx: Sequence[Any]) -> Any:
    """Read tensor ``x`` at output index ``idx`` under numpy broadcasting (a te scalar is used as is)."""
    if not isinstance(x, te.Tensor):
        return x
    nd = len(x.shape)
    sub = idx[len(idx) - nd:] if nd else []
    return x[tuple(0 if int(d) == 1 else i for d, i in zip(x.shape, sub))] if nd else x[()]


def _ishape(t: te.Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def _c(v: float, dtype: str) -> Any:
    return te.const(v, dtype)


def wrapped_index(k: Any, dim: int) -> Any:
    """Index ``k`` as int64, a negative one counted from the end of an axis of ``dim`` (ONNX's gathers)."""
    k = te.cast("int64", k)
    return te.if_then_else(k < 0, k + dim, k)


def clamped_index(k: Any, dim: int) -> Any:
    """:func:`wrapped_index`, then clamped into the axis: an out-of-range index reads the nearest end."""
    return te.minimum(te.maximum(wrapped_index(k, dim), te.const(0, "int64")), te.const(dim - 1, "int64"))


def einsum_without_ellipsis(equation: str, ranks: Sequence[int]) -> str:
    """``equation`` (numpy / ONNX einsum, spaces removed) with each ``...`` replaced by letters for the operand's
    leading axes it stands for, right-aligned across the operands (``ranks``), as numpy broadcasts them; an
    implicit output gets the ellipsis axes first, then the letters used once, sorted."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if "..." not in eq:
        return eq
    if len(terms) != len(ranks):
        raise ValueError(f"einsum {equation!r} names {len(terms)} operands, {len(ranks)} were given")
    named = [len(t.replace("...", "")) for t in terms]
    if any(t.count("...") > 1 or "." in t.replace("...", "") for t in terms + [rhs]):
        raise ValueError(f"einsum {equation!r}: a term has more than one ellipsis, or a stray '.'")
    widths = [r - k if "..." in t else 0 for t, r, k in zip(terms, ranks, named)]
    if any(w < 0 for w in widths):
        raise ValueError(f"einsum {equation!r}: a term names more axes than its operand's {ranks} has")
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in eq]
    width = max(widths)
    letters = "".join(free[:width])
    terms = [t.replace("...", letters[width - w:]) for t, w in zip(terms, widths)]
    joined = "".join(terms)
    if not arrow:
        rhs = letters + "".join(sorted(c for c in set(joined) if c not in letters and joined.count(c) == 1))
    else:
        rhs = rhs.replace("...", letters)
    return ",".join(terms) + "->" + rhs
