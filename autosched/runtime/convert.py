"""``tvm.runtime.convert``: a Python value as the object TVM's APIs take (a list as an ``Array``, a number as a
constant expression); other values are returned as they are."""

from __future__ import annotations

from typing import Any

from autosched.container import Array, Map
from autosched.te.expr import Expr
from autosched.te.expr import convert as to_expr


def convert(value: Any) -> Any:
    """Lists and tuples become ``Array`` (recursively), dicts ``Map``, numbers constant expressions."""
    if isinstance(value, (list, tuple)):
        return Array(convert(v) for v in value)
    if isinstance(value, dict):
        return Map((k, convert(v)) for k, v in value.items())
    if isinstance(value, (bool, int, float)) and not isinstance(value, Expr):
        return to_expr(value)
    return value


__all__ = ["convert"]
