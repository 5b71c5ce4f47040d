"""TOPI's ``topi.sort``, ``argsort``, ``topk`` and ``unique``, computed as relay's ``topk`` and ``unique`` compute
them (each element's rank along the axis, ties in position order; n^2 comparisons a row, in parallel over the
rows: for the axes of hundreds or thousands of elements that models sort, not for millions)."""

from __future__ import annotations

from typing import Any

from autosched import relay, te
from autosched.errors import AutoschedError
from autosched.topi._relay import lower_call, static_shape


def _k_of(data: te.Tensor, k: int, axis: int, what: str) -> int:
    shape = static_shape(data, what)
    if not -len(shape) <= axis < len(shape):
        raise AutoschedError(f"topi.{what}: axis {axis} is out of range for the {len(shape)} dimensions of "
                             f"{data.op.name}")
    n = shape[axis]
    return n if k < 1 else min(int(k), n)  # TVM: k < 1 takes the whole axis


def topk(data: te.Tensor, k: int = 1, axis: int = -1, ret_type: str = "both", is_ascend: bool = False,
         dtype: str = "int64") -> Any:
    """The ``k`` largest (``is_ascend``: smallest) elements along ``axis`` in order, their positions (of
    ``dtype``), or both as a list ``[values, indices]``; ``k < 1`` takes the whole axis."""
    if ret_type not in ("both", "values", "indices"):
        raise AutoschedError(f"topi.topk: ret_type {ret_type!r} must be 'both', 'values' or 'indices'")
    kk = _k_of(data, k, axis, "topk")
    return lower_call("topk", [data], lambda x: relay.topk(x, kk, axis, ret_type, bool(is_ascend), dtype))


def argsort(data: te.Tensor, valid_count: te.Tensor | None = None, axis: int = -1, is_ascend: bool = True,
            dtype: str = "float32") -> te.Tensor:
    """The positions that sort ``data`` along ``axis`` (ascending by default; ties in position order), as
    ``dtype`` (TVM's default float32)."""
    if valid_count is not None:
        raise AutoschedError("topi.argsort: valid_count (sorting only a prefix of each row) is not supported; "
                             "slice the rows first")
    return topk(data, 0, axis, "indices", is_ascend, dtype)


def sort(data: te.Tensor, axis: int = -1, is_ascend: bool = True) -> te.Tensor:
    """``data`` sorted along ``axis`` (ascending by default)."""
    return topk(data, 0, axis, "values", is_ascend)


def unique(data: te.Tensor, is_sorted: bool = True, return_counts: bool = False) -> list[te.Tensor]:
    """The distinct values of 1-D ``data``, padded to its length, as TVM returns them: [values, indices (first
    positions), inverse_indices, num_unique [1]] (+ counts); ``is_sorted`` ascending, else by first occurrence."""
    return lower_call("unique", [data], lambda x: relay.unique(x, bool(is_sorted), bool(return_counts)))


__all__ = ["argsort", "sort", "topk", "unique"]
