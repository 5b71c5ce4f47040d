"""``annealing``: AutoTVM's model-based tuner. Simulated annealing walks a set of points through the space,
scored by the cost model; the best-scored unmeasured traces it met are measured next.

Each ``propose``: ``points`` (kept from the last call, so the walk goes on) are mutated ``n_iter`` times; a
move is taken with probability ``exp((new - old) / (t * scale))`` where ``t`` cools linearly from
``temperature[0]`` to ``temperature[1]`` and ``scale`` is the spread of the scores (the ranking model's
scores have no fixed unit). Before the walk, the weakest quarter of the points restart at the model's
favourites among ``scout`` fresh samples, so walks stuck in a poor basin move on, and the ``anchors`` weakest
of the rest restart at the fastest measured kernels, so some walks always search around what measured best.
The batch is picked for diversity among the ``diversity * n`` best-scored (:meth:`TuneContext.diverse`). A
fraction ``eps`` of each batch is random samples (exploration), and so is the whole batch until the model
has learned from a first one. A batch scores ``scout + parallel_size * (n_iter + 1)`` candidates (each
lowered once for its features: what the search costs, docs/measured_choices.md).
"""

from __future__ import annotations

import numpy as np

from autosched.search.policy import SearchPolicy, register_policy
from autosched.te.trace import Trace


@register_policy("annealing")
class AnnealingPolicy(SearchPolicy):
    uses_model = True

    def __init__(self, context, parallel_size: int = 16, n_iter: int = 6,
                 temperature: tuple[float, float] = (1.0, 0.0), eps: float = 0.05, diversity: int = 2,
                 scout: int = 256, anchors: int = 2, propose_ahead: bool = True):
        super().__init__(context)
        self.propose_ahead = propose_ahead  # the walk goes on while the batch before builds (SearchPolicy)
        self.anchors = anchors
        self.parallel_size, self.n_iter, self.temperature, self.eps = parallel_size, n_iter, temperature, eps
        self.diversity, self.scout = diversity, scout
        self.points: list[Trace] = []

    def propose(self, n: int) -> list[Trace]:
        ctx = self.context
        if not ctx.model_ready:
            return ctx.sample_new(n)
        # continue the walk from the last points, topped up with the best measured and fresh samples
        points = (self.points or ctx.best(self.parallel_size // 4))[: self.parallel_size]
        if len(points) < self.parallel_size:
            points = points + ctx.space.sample(self.parallel_size - len(points), ctx.rng)
        scores = ctx.predict(points)
        if self.scout > 0:  # the weakest quarter of the walkers restart at the model's favourite fresh samples
            fresh = ctx.space.sample(self.scout, ctx.rng)
            fs = ctx.predict(fresh)
            k = self.parallel_size // 4
            top, weak = np.argsort(-fs)[:k], np.argsort(scores)[:k]
            for w, f in zip(weak, top):
                points[w], scores[w] = fresh[f], fs[f]
        if self.anchors > 0:  # more weak walkers restart at the fastest measured kernels
            walking = {p.dumps() for p in points}
            best = [t for t in ctx.best(self.anchors + len(points)) if t.dumps() not in walking][: self.anchors]
            for w, b, s in zip(np.argsort(scores), best, ctx.predict(best)):
                points[w], scores[w] = b, s
        found: dict[str, tuple[float, Trace]] = {}  # unmeasured traces met, by text: (score, trace)

        def note(traces: list[Trace], sc: np.ndarray) -> None:
            for t, s in zip(traces, sc):
                if ctx.is_new(t):
                    found[t.dumps()] = (float(s), t)

        note(points, scores)
        t0, t1 = self.temperature
        for k in range(self.n_iter):
            t = t0 - (t0 - t1) * k / max(1, self.n_iter)
            new = ctx.space.offspring([(p, None) for p in points], ctx.rng)  # a walker with no move stays
            new_scores = ctx.predict(new)
            note(new, new_scores)
            scale = float(np.std(np.concatenate([scores, new_scores]))) or 1.0
            with np.errstate(over="ignore"):
                prob = np.exp(np.minimum((new_scores - scores) / (t * scale + 1e-9), 0.0))
            take = ctx.rng.random(len(points)) < prob
            points = [b if m else a for a, b, m in zip(points, new, take)]
            scores = np.where(take, new_scores, scores)
        self.points = points
        n_rand = int(round(self.eps * n))
        ranked = [t for _, t in sorted(found.values(), key=lambda st: -st[0])]
        out = ctx.diverse(ranked, n - n_rand, self.diversity) if self.diversity > 1 else ranked[: n - n_rand]
        return ctx.new_only(out + ctx.sample_new(n - len(out)))[:n]
