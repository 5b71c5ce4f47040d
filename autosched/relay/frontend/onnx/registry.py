"""The table of ONNX op converters: ``register("Op")`` adds one; the importer looks ops up in ``CONVERTERS``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: ``fn(converter, node, attrs) -> relay expression or array``: the importer's ``_GraphConverter``, an ONNX NodeProto
#: and its attributes as a dict
Converter = Callable[..., Any]


CONVERTERS: dict[str, Converter] = {}


def register(*ops: str) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for op in ops:
            CONVERTERS[op] = fn
        return fn

    return deco


# ops supported only on values known at import time (static shapes make the shape arithmetic that exporters
# emit, e.g. Shape -> Gather -> Unsqueeze -> Concat -> Reshape, constant): they are evaluated by ``_fold``
FOLD_ONLY = frozenset({"Shape", "Size", "Gather", "Slice", "Cast", "ConstantOfShape"})


FOLD_LIMIT = 4096  # a node of constant inputs with at most this many elements in all is evaluated at import
