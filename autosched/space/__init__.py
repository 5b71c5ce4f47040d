"""Schedule spaces: AutoTVM-style templates with knobs and Ansor-style generated sketches.

Both kinds produce :class:`~autosched.te.Trace` objects, the one schedule
representation, and share one interface (:class:`Space`)::

    task = autosched.Task("matmul", args={"M": 256, "N": 256, "K": 256})
    space = task.space("generated")          # or "template"
    rng = numpy.random.default_rng(0)
    traces = space.sample(16, rng)            # distinct, reproducible for a seed
    child = space.mutate(traces[0], rng)      # one decision changed
    sch, args = task.apply(child)             # ready for autosched.build

Templates are registered per workload and target kind with
:func:`register_template`; sketch rules per target kind with
:func:`register_sketch_rule`. See ``docs/spaces.md``.
"""

from __future__ import annotations

from typing import Any

# the built-in rules and templates: the templates register themselves at import, the rules are registered
# below (before any user's); the package does it, not sketch.py or template.py, which these modules import
from autosched.space import blocked_rules, cpu_templates, gpu_rules, gpu_templates, rules  # noqa: F401
from autosched.space.base import (
    CANDIDATE_ERRORS,
    CandidateError,
    Decision,
    DecisionRun,
    Point,
    Space,
    SpaceError,
    point_from_json,
    point_to_json,
)
from autosched.space.config import ConfigSpace, factorizations
from autosched.space.sketch import (
    GeneratedSpace,
    SketchContext,
    SketchRule,
    register_sketch_rule,
    sketch_rules,
    unregister_sketch_rule,
)
from autosched.space.template import TemplateSpace, get_template, list_templates, register_template

for _rule in blocked_rules.BLOCKED_RULES + rules.BUILTIN_RULES:
    register_sketch_rule(_rule, "llvm")
for _rule in gpu_rules.GPU_RULES:
    register_sketch_rule(_rule, "cuda")
del _rule

KINDS = ("generated", "template")


def make_space(task: Any, kind: str = "generated", **options: Any) -> Space:
    """The space of ``kind`` (``"generated"`` or ``"template"``) for a task; options go to the space."""
    if kind == "generated":
        return GeneratedSpace(task, **options)
    if kind == "template":
        return TemplateSpace(task, **options)
    raise ValueError(f"unknown space kind {kind!r}; expected one of {', '.join(KINDS)}")


__all__ = [
    "CANDIDATE_ERRORS", "CandidateError", "ConfigSpace", "Decision", "DecisionRun", "GeneratedSpace", "KINDS",
    "Point", "SketchContext", "SketchRule", "Space", "SpaceError", "TemplateSpace", "factorizations",
    "get_template", "list_templates", "make_space", "point_from_json", "point_to_json",
    "register_sketch_rule", "register_template", "sketch_rules", "unregister_sketch_rule",
]
