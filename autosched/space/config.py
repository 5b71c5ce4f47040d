"""AutoTVM-style knobs: what a template declares (``define_*``) and reads (``cfg[name]``).

A template is ``fn(cfg, sch, tensors, **params)``. It declares each knob once
with its candidates and then reads the chosen value::

    cfg.define_split("tile_i", i, num_outputs=3)          # i: an axis, or an extent
    io, im, ii = cfg["tile_i"].apply(sch, C, i)           # splits i by the chosen sizes
    cfg.define_knob("unroll_k", [False, True])
    if cfg["unroll_k"].val: ...

Knob kinds and their policies:

* ``define_split(name, axis_or_extent, num_outputs=2, policy="factors", max_factor=None, candidate=None)``:
  ``"factors"``: every ordered factorisation of the extent into ``num_outputs``
  parts (no tails); ``"power2"``: inner parts powers of two, the outer part
  rounded up (tails allowed); ``"verbose"``: both; ``"candidate"``: the given
  size lists. ``max_factor`` bounds every part but the outermost. The entity's
  ``size`` lists the parts, outermost first.
* ``define_reorder(name, axes, policy="all" | "identity" | "candidate", candidate=None)``: a
  permutation of ``axes`` (``entity.perm``); ``apply`` reorders them.
* ``define_annotate(name, axes, policy="try_unroll" | "try_vec" | "try_unroll_vec")``:
  per axis ``"none"``, ``"unroll"`` or (the last axis only) ``"vec"``.
* ``define_knob(name, candidates)``: any JSON-able values (``entity.val``).

Every ``define_*`` also takes ``default=``: the value an expert schedule picks (see
:mod:`autosched.workloads.knobs`: the built-in CPU templates are the expert schedules, run here with their
knobs free); it is added to the candidates when they lack it, so the default schedule is a point of the space.

Knobs must be the same for every configuration (declare them all, whatever
the values read): that is what makes the space a fixed product whose size is
exact and whose points are indices.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from autosched.space.analysis import axis_extent
from autosched.space.base import DecisionRun, SpaceError, freeze, split_hint
from autosched.te.tensor import IterVar
from autosched.workloads.knobs import (  # noqa: F401 - the entities are this module's names too
    NO_DEFAULT,
    AnnotateEntity,
    OtherOptionEntity,
    ReorderEntity,
    SplitEntity,
)


@lru_cache(maxsize=4096)
def factorizations(n: int, parts: int, max_inner: int | None = None) -> tuple[tuple[int, ...], ...]:
    """Ordered tuples of ``parts`` positive ints whose product is ``n`` (outermost first);
    every part but the outermost is at most ``max_inner``."""
    if parts == 1:
        return ((n,),)
    out = []
    for d in _divisors(n):  # the innermost part
        if max_inner is not None and d > max_inner:
            continue
        for rest in factorizations(n // d, parts - 1, max_inner):
            out.append(rest + (d,))
    out.sort()
    return tuple(out)


@lru_cache(maxsize=4096)
def _divisors(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


def divisors(n: int) -> tuple[int, ...]:
    return _divisors(n)


def _power2_splits(n: int, parts: int, max_inner: int | None) -> list[tuple[int, ...]]:
    cap = n if max_inner is None else min(n, max_inner)
    pows = [1 << k for k in range(max(1, cap.bit_length())) if (1 << k) <= cap]
    out = []
    for inner in itertools.product(pows, repeat=parts - 1):
        prod = math.prod(inner)
        if prod <= n:
            out.append((-(-n // prod),) + inner)
    return sorted(set(out))


class Knob:
    """A declared knob: its kind and candidate values (what ``ConfigSpace.space_map`` holds)."""

    def __init__(self, name: str, kind: str, candidates: Sequence[Any]):
        self.name, self.kind, self.candidates = name, kind, tuple(freeze(c) for c in candidates)

    def __len__(self) -> int:
        return len(self.candidates)

    def __repr__(self) -> str:
        return f"Knob({self.name!r}, {self.kind}, {len(self.candidates)} candidates)"


class ConfigSpace:
    """The ``cfg`` a template receives: declare knobs with ``define_*``, read them with ``cfg[name]``.

    During one run it holds one configuration (a point); ``space_map`` lists
    the knobs declared so far.
    """

    def __init__(self, run: DecisionRun, sch: Any):
        self._run = run
        self._sch = sch
        self.space_map: dict[str, Knob] = {}
        self._entities: dict[str, Any] = {}
        self._pending: dict[str, tuple] = {}

    # ----------------------------------------------------------- declaring
    def _declare(self, name: str, kind: str, candidates: Sequence[Any], make, knob_kind: str, hint=None,
                 default: Any = NO_DEFAULT) -> None:
        if name in self.space_map:
            raise SpaceError(f"template knob {name!r} is defined twice")
        if default is not NO_DEFAULT and default is not None and freeze(default) not in map(freeze, candidates):
            candidates = [*candidates, default]  # the expert's choice is a point of the space
        if not candidates:
            raise SpaceError(f"template knob {name!r} has no candidates")
        knob = Knob(name, kind, candidates)
        self.space_map[name] = knob
        # the value is chosen when the template first reads it (cfg[name]): reading a knob just before
        # using it lets a foreign trace be matched to its configuration quickly (Space.point_of); a run
        # without an rng or a value for it takes the expert's default
        self._pending[name] = (knob, make, knob_kind, hint, None if default is NO_DEFAULT else default)

    def _entity(self, name: str) -> Any:
        ent = self._entities.get(name)
        if ent is None and name in self._pending:
            knob, make, knob_kind, hint, default = self._pending.pop(name)
            value = self._run.decide(name, knob.candidates, kind=knob_kind, hint=hint, default=default)
            ent = self._entities[name] = make(value)
        return ent

    def finish(self) -> None:
        """Choose the knobs the template declared but never read (so every point names every knob)."""
        for name in list(self._pending):
            self._entity(name)

    def define_split(self, name: str, axis: IterVar | int, num_outputs: int = 2, policy: str = "factors",
                     max_factor: int | None = None, candidate: Sequence[Sequence[int]] | None = None,
                     filter: Any = None, default: Sequence[int] | None = None) -> None:  # noqa: A002 - AutoTVM's
        """Declare a split of ``axis`` (or of an extent) into ``num_outputs`` parts. ``default``: the expert
        schedule's sizes (:class:`~autosched.workloads.knobs.DefaultConfig`), added to the candidates if
        missing; it may have fewer parts (one: no split)."""
        n = self.extent(axis)
        if num_outputs < 1:
            raise SpaceError(f"define_split {name!r}: num_outputs must be >= 1")
        if policy == "factors":
            cands = list(factorizations(n, num_outputs, max_factor))
        elif policy == "power2":
            cands = _power2_splits(n, num_outputs, max_factor)
        elif policy == "verbose":
            cands = sorted(set(factorizations(n, num_outputs, max_factor)) | set(
                _power2_splits(n, num_outputs, max_factor)))
        elif policy == "candidate":
            if not candidate:
                raise SpaceError(f"define_split {name!r}: policy 'candidate' needs candidate=[[...], ...]")
            cands = []
            for c in candidate:
                c = [int(x) for x in c]
                if len(c) != num_outputs or any(x <= 0 and not (i == 0 and x == -1) for i, x in enumerate(c)):
                    raise SpaceError(f"define_split {name!r}: candidate {c} is not {num_outputs} positive sizes")
                if c[0] == -1:
                    c[0] = -(-n // math.prod(c[1:]))
                cands.append(tuple(c))
        else:
            raise SpaceError(f"define_split {name!r}: unknown policy {policy!r} "
                             "(factors, power2, verbose, candidate)")
        if filter is not None:
            cands = [c for c in cands if filter(SplitEntity(c))]
        default = None if default is None else tuple(int(x) for x in default)
        self._declare(name, "split", cands, SplitEntity, "tile", hint=split_hint(0), default=default)

    def define_reorder(self, name: str, axes: Sequence[IterVar], policy: str = "all",
                       candidate: Sequence[Sequence[Any]] | None = None, default: Sequence[int] | None = None) -> None:
        """Declare an order of ``axes``: every permutation (``all``, up to 7 axes), the given ones, or none."""
        n = len(axes)
        if policy == "identity":
            cands = [tuple(range(n))]
        elif policy == "all":
            if n > 7:
                raise SpaceError(f"define_reorder {name!r}: {n}! orders is too many; give policy='candidate'")
            cands = list(itertools.permutations(range(n)))
        elif policy == "candidate":
            if not candidate:
                raise SpaceError(f"define_reorder {name!r}: policy 'candidate' needs candidate=[...]")
            cands = []
            for c in candidate:
                perm = tuple(self._axis_pos(axes, a, name) for a in c)
                if sorted(perm) != list(range(n)):
                    raise SpaceError(f"define_reorder {name!r}: candidate {c} is not a permutation of the axes")
                cands.append(perm)
        else:
            raise SpaceError(f"define_reorder {name!r}: unknown policy {policy!r} (all, identity, candidate)")
        self._declare(name, "reorder", cands, ReorderEntity, "order",
                      default=None if default is None else tuple(default))

    @staticmethod
    def _axis_pos(axes: Sequence[IterVar], a: Any, name: str) -> int:
        if isinstance(a, int):
            return a
        for i, x in enumerate(axes):
            if x is a:
                return i
        raise SpaceError(f"define_reorder {name!r}: {a!r} is not one of the axes")

    def define_annotate(self, name: str, axes: Sequence[IterVar], policy: str = "try_unroll_vec",
                        default: Sequence[str] | None = None) -> None:
        """Declare annotations of ``axes`` (``try_unroll``, ``try_vec``: the last axis, ``try_unroll_vec``)."""
        n = len(axes)
        if n == 0:
            raise SpaceError(f"define_annotate {name!r}: no axes")
        if policy == "try_unroll":
            per = [("none", "unroll")] * n
        elif policy == "try_vec":
            per = [("none",)] * (n - 1) + [("none", "vec")]
        elif policy == "try_unroll_vec":
            per = [("none", "unroll")] * (n - 1) + [("none", "unroll", "vec")]
        else:
            raise SpaceError(f"define_annotate {name!r}: unknown policy {policy!r} "
                             "(try_unroll, try_vec, try_unroll_vec)")
        cands = list(itertools.product(*per))
        self._declare(name, "annotate", cands, AnnotateEntity, "annotate",
                      default=None if default is None else tuple(default))

    def define_knob(self, name: str, candidates: Sequence[Any], default: Any = NO_DEFAULT) -> None:
        """Declare a knob with explicit candidate values (numbers, strings, booleans, lists)."""
        self._declare(name, "other", list(candidates), lambda v: OtherOptionEntity(_plain(v)), "knob",
                      default=default)

    # ------------------------------------------------------------- reading
    def __getitem__(self, name: str) -> Any:
        ent = self._entity(name)
        if ent is None:
            raise SpaceError(f"template knob {name!r} is read before it is defined "
                             f"(defined: {', '.join(self.space_map) or 'none'})")
        return ent

    def get(self, name: str, default: Any = None) -> Any:
        ent = self._entity(name)
        return default if ent is None else ent

    def __contains__(self, name: str) -> bool:
        return name in self.space_map

    def to_dict(self) -> dict:
        self.finish()
        return {k: _plain(self._run.decisions[k].value) for k in self.space_map}

    def extent(self, axis: IterVar | int) -> int:
        """The constant extent of an axis of a root-attached stage (or an int passed through)."""
        if isinstance(axis, int):
            return axis
        n = axis_extent(self._sch, axis)
        if n is None:
            raise SpaceError(f"cannot tell the extent of axis {axis.name}: pass the extent as an int")
        return n

    def __repr__(self) -> str:
        return f"ConfigSpace({self.to_dict()})"


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v
