"""Hill climbing: mutate the best candidates measured so far; sample the space until there are some.

A template for a researcher's own policy package: subclass ``SearchPolicy``, implement ``propose``
(and ``update`` if the policy learns), and declare it in the ``autosched.search_policies`` entry-point
group of your pyproject.toml. No change to autosched is needed.
"""

from __future__ import annotations

from autosched.search import SearchPolicy
from autosched.te import Trace


class HillClimb(SearchPolicy):
    """Neighbours of the current best few; a quarter of each batch explores with fresh samples."""

    parents = 4

    def propose(self, n: int) -> list[Trace]:
        ctx = self.context
        best = ctx.best(self.parents)
        if not best:
            return ctx.sample_new(n)
        out: list[Trace] = []
        explore = n // 4
        for i in range(4 * n):  # bounded: mutants may repeat
            if len(out) >= n - explore:
                break
            child = ctx.space.mutate(best[i % len(best)], ctx.rng)
            out = ctx.new_only(out + [child])
        return out + ctx.sample_new(n - len(out))
