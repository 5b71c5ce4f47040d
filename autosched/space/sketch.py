"""Generated spaces (Ansor sketches) for any te computation, built from rules.

The generator runs two phases of rules over the stages of a fresh schedule:

1. **prepare** rules change the structure, each rule over every stage in
   producer-to-consumer order: inline elementwise producers, plan multi-level
   tiling for reductions with data reuse (fusing an elementwise consumer, or
   adding a ``cache_write`` stage to fuse into).
2. **schedule** rules give every remaining stage its loops, consumers first
   (so a producer can be computed inside loops its consumers already have):
   the first rule whose condition holds handles the stage.
3. **finish** rules see the whole schedule once it is complete, every matching
   stage in turn: choices made by measuring the schedule so far (padding the
   rows of GPU shared copies where a static model finds bank conflicts).

Rules read every choice through :meth:`SketchContext.decide`: structural ones
(inline or not, cache write or not, the fusion level) pick the *sketch*;
the others (tile sizes, parallel granularity, vector length, unroll depth,
compute location) fill it in. A point of the space is the mapping of decision
names to values, so sampling, mutation and crossover work on decisions and the
trace is always the replay of a whole program: legal by construction, and
checked by replaying it on a fresh schedule (``validate="lower"`` also lowers).

Add a rule with :func:`register_sketch_rule` (see ``docs/spaces.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.errors import ScheduleError
from autosched.space.analysis import Dataflow, compute_stages
from autosched.space.base import CandidateError, DecisionRun, Space, SpaceError
from autosched.te.schedule import Schedule, Stage

log = logging.getLogger("autosched.space")

STRUCTURAL_STEPS = ("compute_inline", "cache_write", "cache_read")


class SketchRule:
    """A rule of the sketch generator.

    ``phase`` is ``"prepare"`` (structure: every matching stage, producers
    first), ``"schedule"`` (loops: consumers first, the first matching rule
    handles the stage unless its ``apply`` returns False) or ``"finish"`` (every
    matching stage of the complete schedule).
    """

    name = "rule"
    phase = "schedule"

    def condition(self, ctx: SketchContext, stage: Stage) -> bool:
        return True

    def apply(self, ctx: SketchContext, stage: Stage) -> bool | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<sketch rule {self.name} ({self.phase})>"


#: target kind -> its rules, in order; the built-in ones (space/rules.py, blocked_rules.py, gpu_rules.py) are
#: registered by the package (autosched/space/__init__.py) when it is imported, before any user's
_RULES: dict[str, list[SketchRule]] = {}


def register_sketch_rule(rule: SketchRule, target: str = "llvm", before: str | None = None,
                         after: str | None = None, replace: bool = False) -> SketchRule:
    """Add ``rule`` to the rules of a target kind (at the end, or ``before``/``after`` a named rule).

    A rule with the same name is an error unless ``replace=True`` (then it takes the old one's place).
    Spaces created afterwards use it.
    """
    rules = _RULES.setdefault(target, [])
    names = [r.name for r in rules]
    if rule.name in names:
        if not replace:
            raise ValueError(f"a sketch rule named {rule.name!r} is already registered for {target!r}")
        rules[names.index(rule.name)] = rule
        return rule
    anchor = before or after
    if anchor is not None:
        if anchor not in names:
            raise ValueError(f"no sketch rule named {anchor!r} for {target!r} (rules: {', '.join(names)})")
        k = names.index(anchor) + (1 if after else 0)
        rules.insert(k, rule)
    else:
        rules.append(rule)
    return rule


def unregister_sketch_rule(name: str, target: str = "llvm") -> None:
    _RULES[target] = [r for r in _RULES.get(target, []) if r.name != name]


def sketch_rules(target: str = "llvm") -> list[SketchRule]:
    return list(_RULES.get(target, []))


class SketchContext:
    """What a rule sees during one generation: the schedule, decisions, stage keys and the plan."""

    def __init__(self, sch: Schedule, task: Any, run: DecisionRun):
        self.sch = sch
        self.task = task
        self.run = run
        self.target = task.target
        self.plan: dict[int, dict[str, Any]] = {}
        self.scheduled: list[Stage] = []  # stages the schedule phase has handled, in order
        self.memo: dict[str, Any] = {}  # what a rule computed once for this generation (by rule name)
        self._keys: dict[int, str] = {}
        self._by_key: dict[str, Stage] = {}
        for st in sch.stages:
            self._name(st, st.name)
        self._flow: Dataflow | None = None
        self._flow_len = -1

    # ------------------------------------------------------------- keys
    def _name(self, st: Stage, base: str) -> str:
        key, n = base, 1
        while key in self._by_key:
            n += 1
            key = f"{base}#{n}"
        self._keys[id(st)] = key
        self._by_key[key] = st
        return key

    def key(self, st: Stage) -> str:
        """A name for ``st`` that is stable across runs (decision names are built from it)."""
        got = self._keys.get(id(st))
        if got is None:
            got = self._name(st, st.name)
        return got

    def stage(self, key: str) -> Stage:
        return self._by_key[key]

    def origin(self, st: Stage) -> str:
        """The key of the stage a cache stage was made from (itself otherwise)."""
        return self.info(st).get("origin", self.key(st))

    def info(self, st: Stage) -> dict[str, Any]:
        """The plan of a stage (what prepare rules decided about it), to be filled and read by rules."""
        return self.plan.setdefault(id(st), {})

    # -------------------------------------------------------- decisions
    def decide(self, name: str, candidates: Sequence[Any], kind: str = "choice",
               weights: Sequence[float] | None = None, hint: Any = None) -> Any:
        """Choose among ``candidates`` (kinds: tile, parallel, unroll, vectorize, location, structure).

        The same name gives the same value within a run. Read a decision just
        before the steps it makes (see :meth:`DecisionRun.decide` for ``hint``)."""
        return self.run.decide(name, candidates, kind=kind, weights=weights, hint=hint)

    # ------------------------------------------------------------- facts
    @property
    def flow(self) -> Dataflow:
        """Effective readers/bodies (recomputed after structural steps: inline, cache_write/read)."""
        n = len(self.sch.trace)
        if self._flow is None or (n != self._flow_len and any(
                s.kind in STRUCTURAL_STEPS for s in self.sch.trace.steps[max(self._flow_len, 0):])):
            self._flow = Dataflow(self.sch)
        self._flow_len = n
        return self._flow

    def live_stages(self) -> list[Stage]:
        return [s for s in compute_stages(self.sch) if s.attach_type != "inline"]

    def cache_write(self, st: Stage, scope: str = "local") -> Stage:
        """``sch.cache_write`` of a stage; returns the new cache stage (keyed ``<key>.<scope>``)."""
        idx = st.index
        self.sch.cache_write(st.op.output(0), scope)
        cache = self.sch.stages[idx]
        self._name(cache, f"{self.key(st)}.{scope}")
        self.info(cache)["origin"] = self.origin(st)
        return cache

    def vector_lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one native vector of the task's target (a GPU thread's widest access is
        16 bytes)."""
        if self.target.kind == "llvm":
            return self.target.cpu.lanes(dtype)
        return max(1, 16 // max(1, np.dtype(dtype).itemsize))

    def cores(self) -> int:
        """Cores the kernels of a CPU target run on (its parallel loops' threads); 1 elsewhere."""
        return self.target.cpu.cores if self.target.kind == "llvm" else 1

    def vector_registers(self) -> int:
        """Architectural vector registers of the task's CPU target (16, or 32 with AVX-512); 16 elsewhere."""
        return self.target.cpu.vector_registers if self.target.kind == "llvm" else 16


class GeneratedSpace(Space):
    """Ansor-style sketches of any te computation, filled in by sampling."""

    kind = "generated"

    def __init__(self, task: Any, rules: Sequence[SketchRule] | None = None, validate: str = "replay"):
        super().__init__(task, validate)
        kind = task.target.kind
        self.rules = list(rules) if rules is not None else sketch_rules(kind)
        if not self.rules:
            raise SpaceError(
                f"no sketch rules for target kind {kind!r}: register rules with "
                f"autosched.space.register_sketch_rule(rule, target={kind!r})"
            )
        self._size: int | None = None

    def _run(self, run: DecisionRun) -> None:
        ctx = SketchContext(run.sch, self.task, run)
        generate(ctx, self.rules)

    def size(self) -> int:
        """An estimate: the mean, over a few seeded random runs, of the product of the decisions' candidate counts."""
        if self._size is None:
            rng = np.random.default_rng(0)
            prods = []
            for _ in range(8):
                run = DecisionRun(rng=rng)
                try:
                    self._execute(run)
                except Exception as e:  # noqa: BLE001 - a failed run just does not count in the estimate
                    log.debug("size estimate of %s: a sampled run failed (%s: %s)", self.task, type(e).__name__, e)
                    continue
                p = 1
                for d in run.decisions.values():
                    p *= len(d.candidates)
                prods.append(p)
            self._size = int(sum(prods) // len(prods)) if prods else 0
        return self._size


def generate(ctx: SketchContext, rules: Sequence[SketchRule]) -> None:
    """Run the prepare rules, then the schedule rules, then the finish rules, on ``ctx.sch``."""
    for rule in rules:
        if rule.phase != "prepare":
            continue
        for st in [s for s in compute_stages(ctx.sch) if s.attach_type != "inline"]:
            if st.attach_type == "inline":
                continue
            _apply(rule, ctx, st)
    sched = [r for r in rules if r.phase == "schedule"]
    for st in reversed(ctx.live_stages()):
        for rule in sched:
            if _apply(rule, ctx, st) is not False:
                break
        ctx.scheduled.append(st)
    for rule in rules:
        if rule.phase == "finish":
            for st in list(ctx.sch.stages):
                _apply(rule, ctx, st)


def _apply(rule: SketchRule, ctx: SketchContext, st: Stage) -> bool | None:
    """Apply ``rule`` to ``st`` if its condition holds; False when it did not apply."""
    try:
        if not rule.condition(ctx, st):
            return False
        return rule.apply(ctx, st)
    except ScheduleError as e:
        raise CandidateError(f"sketch rule {rule.name!r} on stage '{st.name}': {e}") from e
