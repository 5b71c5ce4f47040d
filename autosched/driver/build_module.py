"""Lowering and building under TVM's ``tvm.driver.build_module`` names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched.codegen.build import build as _build
from autosched.te.schedule import Schedule
from autosched.tir import stmt as S
from autosched.tir.lower import lower as _lower


def schedule_to_module(sch: Schedule, args: Sequence[Any], name: str = "main", binds: Any = None) -> S.PrimFunc:
    """The schedule lowered to one function; ``mod["main"]`` reads it, as in TVM (where the result is an
    IRModule of that one function)."""
    if binds:
        raise NotImplementedError("schedule_to_module(binds=...): buffers are laid out densely here")
    return _lower(sch, args, name=name)


def lower(sch: Schedule, args: Sequence[Any], name: str = "main", binds: Any = None,
          simple_mode: bool = False) -> S.PrimFunc:
    return schedule_to_module(sch, args, name, binds)


def build(sch: Any, args: Sequence[Any] | None = None, target: Any = "llvm", target_host: Any = None,
          name: str = "main") -> Any:
    return _build(sch, args, target=target, name=name)


__all__ = ["build", "lower", "schedule_to_module"]
