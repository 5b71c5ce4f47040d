"""``random``: uniform samples of the space, never one measured before. The baseline every policy must beat."""

from __future__ import annotations

from autosched.search.policy import SearchPolicy, register_policy
from autosched.te.trace import Trace


@register_policy("random")
class RandomPolicy(SearchPolicy):
    def propose(self, n: int) -> list[Trace]:
        return self.context.sample_new(n)
