"""Tensor contractions written directly in te: ``tensordot`` and ``einsum`` (symbolic shapes allowed)."""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

from autosched import te
from autosched.relay.op.common import einsum_without_ellipsis
from autosched.topi import tag


def _axes_of(ndim: int, axes: Sequence[int], who: str) -> list[int]:
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"tensordot: axis {a} is out of range for {who} of rank {ndim}")
        out.append(a % ndim)
    return out


def tensordot(a: te.Tensor, b: te.Tensor, axes: int | Sequence[Any] = 2) -> te.Tensor:
    """The sum over the last ``axes`` dimensions of ``a`` and the first of ``b`` (numpy's ``tensordot``), or
    over the dimensions listed in ``axes = (axes_of_a, axes_of_b)``."""
    if isinstance(axes, int):
        if not 0 <= axes <= min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: cannot contract {axes} dimensions of ranks {a.ndim} and {b.ndim}")
        ax_a, ax_b = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        ax_a, ax_b = ([x] if isinstance(x, int) else list(x) for x in axes)
        ax_a, ax_b = _axes_of(a.ndim, ax_a, "a"), _axes_of(b.ndim, ax_b, "b")
        if len(ax_a) != len(ax_b):
            raise ValueError(f"tensordot: {len(ax_a)} axes of a against {len(ax_b)} of b")
    letters = iter(string.ascii_letters)
    sa = [next(letters) for _ in range(a.ndim)]
    sb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = [c for i, c in enumerate(sa) if i not in ax_a] + [c for j, c in enumerate(sb) if j not in ax_b]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b, name="tensordot")


def _is_one(d: Any) -> bool:
    return isinstance(d, int) and d == 1 or getattr(d, "value", None) == 1


def _same(a: Any, b: Any) -> bool:
    return a is b or getattr(a, "value", a) == getattr(b, "value", b)


def einsum(subscripts: str, *operand: te.Tensor, name: str = "einsum") -> te.Tensor:
    """numpy's ``einsum`` over te tensors, explicit or implicit output (``"ij,jk->ik"``, ``"ii->i"``, ``"ij,jk"``,
    ``"...ij,...jk->...ik"``); letters absent from the output are summed over, and an axis of 1 broadcasts
    against the same letter's longer axis, as in numpy."""
    if len(operand) == 1 and isinstance(operand[0], (list, tuple)):
        operand = tuple(operand[0])
    spec = einsum_without_ellipsis(subscripts, [t.ndim for t in operand])
    lhs, arrow, rhs = spec.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operand):
        raise ValueError(f"einsum {subscripts!r} names {len(inputs)} operands, {len(operand)} were given")
    extent: dict[str, Any] = {}
    for sub, t in zip(inputs, operand):
        if len(sub) != t.ndim or not all(c in string.ascii_letters for c in sub):
            raise ValueError(f"einsum {subscripts!r}: {sub!r} does not name the {t.ndim} dimensions of {t.name}")
        for c, d in zip(sub, t.shape):
            if c not in extent or _is_one(extent[c]):
                extent[c] = d
            elif not _is_one(d) and not _same(extent[c], d):
                raise ValueError(f"einsum {subscripts!r}: dimension {c!r} has extents {extent[c]} and {d}, which "
                                 "do not broadcast")
    if not arrow:  # implicit output: the letters used once, in alphabetical order
        rhs = "".join(sorted(c for c in extent if lhs.count(c) == 1))
    if len(set(rhs)) != len(rhs) or any(c not in extent for c in rhs):
        raise ValueError(f"einsum {subscripts!r}: the output {rhs!r} must name distinct input dimensions")
    summed = [c for c in extent if c not in rhs]
    red = {c: te.reduce_axis((0, extent[c]), name=c) for c in summed}

    def body(*idx: Any) -> Any:
        var = dict(zip(rhs, idx))
        var.update((c, r.var) for c, r in red.items())
        prod = None
        for sub, t in zip(inputs, operand):  # (an axis of 1 against a longer one: broadcast, read at 0)
            v = t[tuple(0 if _is_one(d) and not _is_one(extent[c]) else var[c] for c, d in zip(sub, t.shape))]
            prod = v if prod is None else prod * v
        return te.sum(prod, axis=list(red.values())) if red else prod

    return te.compute(tuple(extent[c] for c in rhs), body, name=name, tag=tag.COMM_REDUCE if red else tag.INJECTIVE)
