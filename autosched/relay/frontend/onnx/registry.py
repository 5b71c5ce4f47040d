"""The table of ONNX op converters: ``register("Op")`` adds one; the importer looks ops up in ``CONVERTERS``, after
the ``rewrite("Op")`` patterns in ``REWRITES``."""

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


#: ``fn(converter, node, attrs) -> relay expression or None``, tried in turn before an op's converter: a node that a
#: pattern around it lets run another way (a float Conv of dequantized bytes, run on the bytes); None leaves it to
#: the converter
REWRITES: dict[str, list[Converter]] = {}


def rewrite(*ops: str) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for op in ops:
            REWRITES.setdefault(op, []).append(fn)
        return fn

    return deco


# ops supported only on values known at import time (static shapes make the shape arithmetic that exporters
# emit, e.g. Shape -> Gather -> Unsqueeze -> Concat -> Reshape, constant; an audio front-end's window and mel
# filters are functions of constants; NonZero, Compress and Unique have shapes that depend on values, which
# static shapes allow only for constants): they are evaluated by ``_fold``
FOLD_ONLY = frozenset({"Shape", "Size", "Slice", "ConstantOfShape", "Range", "HannWindow", "HammingWindow",
                       "BlackmanWindow", "MelWeightMatrix", "NonZero", "Compress", "Unique"})

# ops evaluated whenever all their inputs are known at import time, whatever their size: the shape arithmetic and
# masks of transformer exports (positions by Range and Mod, a causal mask by Expand, Trilu and Equal, a position
# embedding gathered at constant positions, Swin's shifted-window masks written by ScatterND) become constants,
# so no kernel computes them at run time
FOLD_ALWAYS = FOLD_ONLY | frozenset({"Gather", "Expand", "Trilu", "Equal", "Less", "Greater", "LessOrEqual",
                                      "GreaterOrEqual", "Not", "And", "Or", "Where", "Mod", "CumSum",
                                      "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Scatter",
                                      "OneHot"})


FOLD_LIMIT = 4096  # a node of constant inputs with at most this many elements in all is evaluated at import

# ops never evaluated at import by onnx's reference evaluator: their values are sequences, which the importer keeps
# as lists (the evaluator would give a list, taken for one array)
NEVER_FOLD = frozenset({"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
                        "SequenceLength", "ConcatFromSequence", "SplitToSequence", "If", "Loop"})
