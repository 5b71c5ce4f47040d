"""Knobs of a schedule, and the configuration that holds every knob at its default.

A CPU schedule of a built-in workload is written once, as ``fn(cfg, sch, tensors, **params)``: it declares its
knobs on ``cfg`` (``define_split``, ``define_knob``, ``define_annotate``, ``define_reorder``), each with the
``default`` an expert would pick for this target and shape, and reads them (``cfg[name]``). Run with a
:class:`DefaultConfig` it is the workload's expert (default) schedule; run with the space's
``ConfigSpace`` (:mod:`autosched.space.config`) it is the workload's template, whose points include those
defaults. So the default schedule is the template at its default knobs, and the two cannot drift apart.

The entities here are what a knob's value does to a schedule (``cfg[name]``): a split into sizes, an order,
annotations, a plain value. A split's default may have fewer parts than the knob's candidates: one part is
"no split" (``apply`` returns the axis itself), so a schedule written ``*outer, inner = cfg[...].apply(...)``
reads both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from autosched.te.schedule import Stage
from autosched.te.tensor import IterVar


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: ``default=`` not given: a plain knob's default is then its first candidate
NO_DEFAULT: Any = _NoDefault()


def _stage(sch: Any, op: Any) -> Any:
    return op if isinstance(op, Stage) else sch[op]


class SplitEntity:
    """The chosen sizes of a split knob (outermost first); ``apply`` splits an axis into ``len(size)`` loops."""

    def __init__(self, size: Sequence[int]):
        self.size = list(size)

    def apply(self, sch: Any, op: Any, axis: IterVar) -> list[IterVar]:
        stage = _stage(sch, op)
        out = []
        for i in range(len(self.size) - 1):
            factor = math.prod(self.size[i + 1:])
            outer, axis = stage.split(axis, factor=factor)
            out.append(outer)
        out.append(axis)
        return out

    def __repr__(self) -> str:
        return f"SplitEntity({self.size})"


class ReorderEntity:
    def __init__(self, perm: Sequence[int]):
        self.perm = list(perm)

    def apply(self, sch: Any, op: Any, axes: Sequence[IterVar]) -> list[IterVar]:
        ordered = [axes[i] for i in self.perm]
        if self.perm != sorted(self.perm):
            _stage(sch, op).reorder(*ordered)
        return ordered

    def __repr__(self) -> str:
        return f"ReorderEntity({self.perm})"


class AnnotateEntity:
    def __init__(self, anns: Sequence[str]):
        self.anns = list(anns)

    def apply(self, sch: Any, op: Any, axes: Sequence[IterVar], axis_lens: Sequence[int] | None = None,
              max_unroll: int | None = None) -> None:
        """Annotate ``axes``; ``unroll`` is skipped where ``axis_lens`` says the loop is longer than ``max_unroll``."""
        stage = _stage(sch, op)
        for k, (ax, ann) in enumerate(zip(axes, self.anns)):
            if ann == "unroll":
                if max_unroll is not None and axis_lens is not None and axis_lens[k] > max_unroll:
                    continue
                stage.unroll(ax)
            elif ann == "vec":
                stage.vectorize(ax)

    def __repr__(self) -> str:
        return f"AnnotateEntity({self.anns})"


class OtherOptionEntity:
    def __init__(self, val: Any):
        self.val = val

    def __repr__(self) -> str:
        return f"OtherOptionEntity({self.val!r})"


class DefaultConfig:
    """The ``cfg`` of an expert schedule: every knob the schedule declares takes its ``default`` (AutoTVM's
    fallback configuration). ``values`` holds them by name, in the order declared."""

    is_default = True

    def __init__(self) -> None:
        self._entities: dict[str, Any] = {}
        self.values: dict[str, Any] = {}

    def _set(self, name: str, entity: Any, value: Any) -> None:
        if name in self._entities:
            raise ValueError(f"schedule knob {name!r} is defined twice")
        self._entities[name] = entity
        self.values[name] = value

    def define_split(self, name: str, axis: Any, num_outputs: int = 2, policy: str = "factors",
                     max_factor: int | None = None, candidate: Any = None, filter: Any = None,  # noqa: A002
                     default: Sequence[int] | None = None) -> None:
        if default is None:
            raise ValueError(f"split knob {name!r} of an expert schedule needs a default")
        self._set(name, SplitEntity(default), [int(x) for x in default])

    def define_reorder(self, name: str, axes: Sequence[Any], policy: str = "all", candidate: Any = None,
                       default: Sequence[int] | None = None) -> None:
        perm = list(range(len(axes))) if default is None else list(default)
        self._set(name, ReorderEntity(perm), perm)

    def define_annotate(self, name: str, axes: Sequence[Any], policy: str = "try_unroll_vec",
                        default: Sequence[str] | None = None) -> None:
        anns = ["none"] * len(axes) if default is None else list(default)
        self._set(name, AnnotateEntity(anns), anns)

    def define_knob(self, name: str, candidates: Sequence[Any], default: Any = NO_DEFAULT) -> None:
        value = candidates[0] if default is NO_DEFAULT else default
        self._set(name, OtherOptionEntity(value), value)

    def __getitem__(self, name: str) -> Any:
        try:
            return self._entities[name]
        except KeyError:
            raise KeyError(f"schedule knob {name!r} is read before it is defined") from None

    def get(self, name: str, default: Any = None) -> Any:
        return self._entities.get(name, default)

    def __contains__(self, name: str) -> bool:
        return name in self._entities

    def __repr__(self) -> str:
        return f"DefaultConfig({self.values})"
