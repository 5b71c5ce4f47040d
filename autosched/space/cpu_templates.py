"""CPU templates (target kind ``llvm``) for the built-in workloads: the expert schedules of
:mod:`autosched.workloads.cpu` with their knobs free.

Each schedule there is written once, ``fn(cfg, sch, tensors, **params)``, and declares its fixed choices as
knobs (register-block sizes, the split of the reduction, where the parallel loop ends, what is unrolled,
whether B is packed or the padding inlined) with the expert's choice as the default. Run with every knob at
its default it is the workload's default schedule; registered here it is the template, whose space holds
that default as one of its points. Block sizes are factors of the extents (no tails) where a knob lists
them, and the vectorized block is at most 64 lanes.
"""

from __future__ import annotations

from autosched.space.template import register_template
from autosched.workloads.cpu import SCHEDULES

for _workload, _schedule in SCHEDULES.items():
    register_template(_workload, "llvm")(_schedule)
