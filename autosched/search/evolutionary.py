"""``evolutionary``: Ansor's evolutionary search. Each batch is bred in the cost model's imagination and only
its best are measured.

The population starts from the best measured traces (a ``seed_fraction`` of it), the model's favourites
among ``scout`` fresh samples (a quarter of it: a cheap look at the whole space, so the search can leave
the basin of the best measured kernels), and more fresh samples. For ``generations`` rounds, parents are
drawn by rank of model score; a child is a crossover of two parents (probability ``crossover_prob``) or a
mutation of one, and the best ``population`` of parents and children survive. The batch is picked from
the ``diversity * n`` best-scored unmeasured traces met on the way, each pick bringing the most decision
values the batch does not have yet (``diversity=1``: simply the best), except an ``eps`` fraction of
random samples (epsilon-greedy exploration); until the model has learned anything it is all random, and a
task's first batch, picked by a model trained elsewhere (the shipped one), is half random.

``build_factor`` > 0 (off by default): once the model has timed some builds, the candidates it expects to
take ``build_factor`` times longer to build than the task's fastest kernels did go to the back of the
ranking (``TuneContext.affordable``). It saves build time, but in a first trial its search found slower
kernels: not the default until measured further.

``propose_ahead`` (on): where the builders leave a core idle (a Ray cluster, or fewer builders than cores:
``Measurer.accepts_during_build``), the tuning loop breeds the next batch while they compile the current
one, so the search takes no wall time of its own; it then learns each batch one batch later (off, or with
builders on every local core, the default: every batch is bred from every result so far, and the search waits).

Cost: a batch scores about ``scout + population * (generations + 1)`` candidates, each lowered once for
its features, so the defaults keep the search to a fraction of the time the batch takes to measure; raise
them when measuring is slow (big kernels, GPUs). ``scout`` is 128, not 256: the search costs less and its
best was no slower. The figures behind these choices: docs/measured_choices.md.
"""

from __future__ import annotations

import numpy as np

from autosched.search.policy import SearchPolicy, register_policy
from autosched.te.trace import Trace


@register_policy("evolutionary")
class EvolutionaryPolicy(SearchPolicy):
    uses_model = True

    def __init__(self, context, population: int = 32, generations: int = 3, crossover_prob: float = 0.15,
                 seed_fraction: float = 0.25, eps: float = 0.05, diversity: int = 2, scout: int = 128,
                 build_factor: float = 0.0, propose_ahead: bool = True):
        super().__init__(context)
        self.propose_ahead = propose_ahead
        self.build_factor = build_factor
        self.scout = scout
        self.population, self.generations, self.eps = population, generations, eps
        self.crossover_prob, self.seed_fraction, self.diversity = crossover_prob, seed_fraction, diversity

    def _parents(self, parents: list[Trace], weights: np.ndarray) -> tuple[Trace, Trace | None]:
        """A child's parents: two for a crossover (probability ``crossover_prob``), else one to mutate."""
        rng = self.context.rng
        i, j = rng.choice(len(parents), size=2, p=weights)
        return (parents[i], parents[j]) if rng.random() < self.crossover_prob and i != j else (parents[i], None)

    def propose(self, n: int) -> list[Trace]:
        ctx = self.context
        if not ctx.model_ready:
            return ctx.sample_new(n)
        pop = ctx.best(int(self.population * self.seed_fraction))
        if self.scout > 0:  # the model's favourites among many fresh samples join the population
            fresh = ctx.space.sample(self.scout, ctx.rng)
            fs = ctx.predict(fresh)
            pop = pop + [fresh[i] for i in np.argsort(-fs)[: self.population // 4]]
        pop = pop + ctx.space.sample(self.population - len(pop), ctx.rng)
        scores = ctx.predict(pop)
        found = {t.dumps(): (float(s), t) for t, s in zip(pop, scores) if ctx.is_new(t)}
        for _ in range(self.generations):
            rank = np.empty(len(pop))
            rank[np.argsort(-scores)] = np.arange(len(pop))
            weights = 1.0 / (rank + 1.0)  # the best parents are drawn most often
            requests = [self._parents(pop, weights / weights.sum()) for _ in range(self.population)]
            children = ctx.space.offspring(requests, ctx.rng)  # (on a GPU: in shares, with the helpers)
            child_scores = ctx.predict(children)
            found.update((t.dumps(), (float(s), t)) for t, s in zip(children, child_scores) if ctx.is_new(t))
            both, both_scores = pop + children, np.concatenate([scores, child_scores])
            keep, texts = [], set()
            for i in np.argsort(-both_scores, kind="stable"):  # survivors: the best distinct traces
                if both[i].dumps() not in texts:
                    texts.add(both[i].dumps())
                    keep.append(i)
                if len(keep) == self.population:
                    break
            pop, scores = [both[i] for i in keep], both_scores[keep]
        # a task's first batch (a model that has only a base, trained elsewhere, to go on) is half random: the
        # random half is what the base is checked on (XGBCostModel drops one that orders them no better than chance)
        n_rand = int(round((0.5 if len(ctx.measured) < n else self.eps) * n))
        ranked = [t for _, t in sorted(found.values(), key=lambda st: -st[0])]
        cheap = ctx.affordable(ranked, self.build_factor)
        if len(cheap) < len(ranked):  # the ones expected to build slowly go last: picked only if too few others
            fast = set(map(id, cheap))
            ranked = cheap + [t for t in ranked if id(t) not in fast]
        out = ctx.diverse(ranked, n - n_rand, self.diversity) if self.diversity > 1 else ranked[: n - n_rand]
        return ctx.new_only(out + ctx.sample_new(n - len(out)))[:n]
