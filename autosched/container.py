"""TVM's container names: ``Map`` and ``Array``, what TVM's APIs return (``te.schedule.InferBound`` gives a
Map of loop axis -> Range)."""

from __future__ import annotations


class Map(dict):
    """A mapping (TVM's ``tvm.container.Map``): a dict, with TVM's ``items()`` and lookups."""


class Array(list):
    """A sequence (TVM's ``tvm.container.Array``): a list."""


__all__ = ["Array", "Map"]
