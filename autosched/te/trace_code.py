"""A trace as the te schedule code that makes it (TVM auto_scheduler's ``print_best``): each step becomes the
primitive call a person would write, with loops and new stages named as the schedule names them, so a tuned
schedule can be read, pasted into a script and edited by hand.

The code expects a schedule ``s`` of the computation and each tensor in a variable of its (sanitised) name.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from typing import Any

from autosched.te.stage import Schedule, Stage
from autosched.te.tensor import IterVar
from autosched.te.trace import (
    Annotate,
    Bind,
    CacheRead,
    CacheWrite,
    ComputeAt,
    ComputeInline,
    ComputeRoot,
    CreateGroup,
    DoubleBuffer,
    Fuse,
    GroupComputeAt,
    GroupComputeRoot,
    Pragma,
    Prefetch,
    Reorder,
    RFactor,
    SetScope,
    Split,
    Step,
    StorageAlign,
    Trace,
)


class PyNames:
    """Python names for objects (a schedule's stages and loops, a function's buffers and variables): each one
    made of a text, unique, valid and no keyword; ``taken`` holds names already in use."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.taken: set[str] = set(taken)
        self.of: dict[int, str] = {}

    def name(self, obj: Any, text: str) -> str:
        """``obj``'s name, made from ``text`` the first time."""
        return self.of.get(id(obj)) or self.make(obj, text)

    def make(self, obj: Any, text: str) -> str:
        base = re.sub(r"\W", "_", text).strip("_") or "x"
        base = "_" + base if base[0].isdigit() or keyword.iskeyword(base) else base
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        self.of[id(obj)] = name
        return name

    def get(self, obj: Any) -> str | None:
        return self.of.get(id(obj))


def schedule_code(task: Any, trace: Trace) -> str:
    """The te code that applies ``trace`` to a fresh schedule ``s`` of ``task``'s computation."""
    sch, _ = task.schedule()
    names = PyNames({"s", "te"})
    for st in sch.stages:
        names.make(st, st.name)
    lines = [f"# s = te.create_schedule({', '.join(names.get(sch[o]) + '.op' for o in sch.outputs)}), with each "
             f"tensor in a variable of its name"]
    for step in trace:
        lines += _step_code(sch, step, names)
    return "\n".join(lines) + "\n"


def _leaves(stage: Stage, names: PyNames, lines: list[str]) -> list[str]:
    """The names of ``stage``'s loops, first naming (in ``lines``) those not named yet."""
    leaves = stage.leaf_iter_vars
    if all(names.get(v) for v in leaves):
        return [names.get(v) for v in leaves]
    t = names.get(stage)
    new = [names.get(v) or names.make(v, f"{t}_{v.var.name}") for v in leaves]
    roots = list(stage.op.axis) + list(stage.op.reduce_axis)
    source = (f"tuple(s[{t}].op.axis) + tuple(s[{t}].op.reduce_axis)" if list(leaves) == roots
              else f"s[{t}].leaf_iter_vars")
    lines.append(f"{', '.join(new)}{',' if len(new) == 1 else ''} = {source}")
    return new


_ON_LOOPS = (Split, Reorder, Fuse, Annotate, Bind, RFactor, Pragma, Prefetch)  # steps that name the stage's loops


def _step_code(sch: Schedule, step: Step, names: PyNames) -> list[str]:
    if step.subject == "group":
        return _group_step_code(sch, step, names)
    stage = sch.stages[step.stage]
    t = names.get(stage)
    lines: list[str] = []
    axes = _leaves(stage, names, lines) if isinstance(step, _ON_LOOPS) else []
    before_stages = {id(x) for x in sch.stages}
    before_leaves = {id(v) for v in stage.leaf_iter_vars}
    target = sch.stages[step.target] if isinstance(step, ComputeAt) else None
    target_axes = _leaves(target, names, lines) if target is not None else []
    readers = [names.get(sch.stages[i]) for i in step.readers] if isinstance(step, CacheRead) else []
    prefetched = names.get(sch.stages[step.tensor]) if isinstance(step, Prefetch) else None
    sch.apply(step)
    new_stage = next((x for x in sch.stages if id(x) not in before_stages), None)
    new_leaves = [v for v in stage.leaf_iter_vars if id(v) not in before_leaves]

    def fresh(v: IterVar) -> str:
        return names.make(v, f"{t}_{v.var.name}")

    if isinstance(step, Split):
        o, i = (fresh(v) for v in new_leaves)
        arg = f"factor={step.factor}" if step.factor is not None else f"nparts={step.nparts}"
        lines.append(f"{o}, {i} = s[{t}].split({axes[step.axis]}, {arg})")
    elif isinstance(step, Reorder):
        lines.append(f"s[{t}].reorder({', '.join(axes[k] for k in step.order)})")
    elif isinstance(step, Fuse):
        lines.append(f"{fresh(new_leaves[0])} = s[{t}].fuse({', '.join(axes[k] for k in step.axes)})")
    elif isinstance(step, Annotate):
        lines.append(f"s[{t}].{step.annotation}({axes[step.axis]})")
    elif isinstance(step, Bind):
        lines.append(f's[{t}].bind({axes[step.axis]}, te.thread_axis("{step.thread}"))')
    elif isinstance(step, ComputeAt):
        lines.append(f"s[{t}].compute_at(s[{names.get(target)}], {target_axes[step.axis]})")
    elif isinstance(step, (ComputeInline, ComputeRoot, DoubleBuffer)):
        lines.append(f"s[{t}].{step.kind}()")
    elif isinstance(step, (CacheRead, CacheWrite, RFactor)):
        new = names.make(new_stage, new_stage.name)
        call = (f'cache_read({t}, "{step.scope}", [{", ".join(readers)}])' if isinstance(step, CacheRead) else
                f'cache_write({t}, "{step.scope}")' if isinstance(step, CacheWrite) else
                f"rfactor({t}, {axes[step.axis]}, factor_axis={step.factor_axis})")
        lines.append(f"{new} = s.{call}")
    elif isinstance(step, SetScope):
        lines.append(f's[{t}].set_scope("{step.scope}")')
    elif isinstance(step, Pragma):
        value = "" if step.value is None else f", {step.value!r}"
        lines.append(f's[{t}].pragma({axes[step.axis]}, "{step.key}"{value})')
    elif isinstance(step, StorageAlign):
        lines.append(f"s[{t}].storage_align(s[{t}].op.axis[{step.axis}], {step.factor}, {step.offset})")
    elif isinstance(step, Prefetch):
        lines.append(f"s[{t}].prefetch({prefetched}, {axes[step.axis]}, {step.offset})")
    else:  # tensorize, transform_layout, store_predicate: their arguments are objects, not text
        lines.append(f"# {step.describe()}  (stage {t}; written as a trace step: its argument is not text)")
    return lines


def _group_step_code(sch: Schedule, step: Step, names: PyNames) -> list[str]:
    lines: list[str] = []
    if isinstance(step, CreateGroup):
        outs, ins = ([names.get(sch.stages[i]) for i in ends] for ends in (step.outputs, step.inputs))
        sch.apply(step)
        g = names.make(sch.groups[-1], f"g{step.stage}")
        extra = ", include_inputs=True" if step.include_inputs else ""
        return [f"{g} = s.create_group(outputs=[{', '.join(outs)}], inputs=[{', '.join(ins)}]{extra})"]
    group = sch.groups[step.stage]
    g = names.get(group)
    if g is None:  # a scan's group, made with the schedule
        g = names.make(group, f"g{step.stage}")
        lines.append(f"{g} = s.groups[{step.stage}]")
    if isinstance(step, GroupComputeAt):
        target = sch.stages[step.target]
        axes = _leaves(target, names, lines)
        lines.append(f"{g}.compute_at(s[{names.get(target)}], {axes[step.axis]})")
    elif isinstance(step, GroupComputeRoot):
        lines.append(f"{g}.compute_root()")
    sch.apply(step)
    return lines


__all__ = ["PyNames", "schedule_code"]
