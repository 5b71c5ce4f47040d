"""TVM's ``tvm.ir`` names that te code uses: ``save_json`` / ``load_json`` of te tensors, operations and schedules
(:mod:`autosched.te.serialize`), ``Op`` (what a ``tir.Call`` calls: ``call.op.name == "tir.exp"``) and
``Range``."""

from __future__ import annotations

from autosched.te.expr import Op
from autosched.te.serialize import load_json, save_json
from autosched.te.tensor import Range

__all__ = ["Op", "Range", "load_json", "save_json"]
