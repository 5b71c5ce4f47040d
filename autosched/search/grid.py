"""``grid``: every configuration of a template space in index order (the first knob varies fastest)."""

from __future__ import annotations

from autosched.search.policy import SearchPolicy, register_policy
from autosched.space.base import CANDIDATE_ERRORS
from autosched.te.trace import Trace


@register_policy("grid")
class GridPolicy(SearchPolicy):
    space_kind = "template"

    def __init__(self, context):
        super().__init__(context)
        if not hasattr(context.space, "get"):
            raise ValueError(f"the grid policy needs a template space (indexed), not {type(context.space).__name__}; "
                             "tune with space='template'")
        self.next = 0

    def propose(self, n: int) -> list[Trace]:
        ctx, out = self.context, []
        while len(out) < n and self.next < ctx.space.size():
            try:
                trace = ctx.space.get(self.next)
            except CANDIDATE_ERRORS:  # a configuration with no legal schedule: skip it
                trace = None
            self.next += 1
            if trace is not None:
                out = ctx.new_only(out + [trace])
        return out
