"""AutoTVM-style template spaces: an expert schedule with knobs, registered per workload and target kind.

::

    @autosched.space.register_template("matmul", "llvm")
    def matmul_llvm(cfg, sch, tensors, M, N, K, dtype):
        A, B, C = tensors
        i, j = sch[C].op.axis
        cfg.define_split("tile_j", j, num_outputs=2, max_factor=64)
        jo, ji = cfg["tile_j"].apply(sch, C, j)
        sch[C].vectorize(ji)
        ...

A configuration (one value per knob) is a point of the space; running the
template on a fresh schedule with it records the trace. The space is the
product of the knobs' candidates, so ``size()`` is exact and every point has
an index (AutoTVM's: the first knob varies fastest).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autosched.space.base import CANDIDATE_ERRORS, DecisionRun, Point, Space, SpaceError, _rng, freeze
from autosched.space.config import ConfigSpace, Knob
from autosched.te.trace import Trace

TemplateFn = Callable[..., Any]
#: (workload, target kind) -> template; the built-in ones (space/cpu_templates.py, gpu_templates.py) register
#: themselves when the package (autosched/space/__init__.py) imports them
_TEMPLATES: dict[tuple[str, str], TemplateFn] = {}


def register_template(workload: str, target: str = "llvm",
                      override: bool = False) -> Callable[[TemplateFn], TemplateFn]:
    """Register ``fn(cfg, sch, tensors, **params)`` as the template of ``workload`` on a target kind."""

    def do(fn: TemplateFn) -> TemplateFn:
        key = (workload, target)
        old = _TEMPLATES.get(key)
        if old is not None and old is not fn and not override:
            same = (getattr(old, "__module__", None), getattr(old, "__qualname__", None)) == (
                fn.__module__, fn.__qualname__)
            if not same:
                raise ValueError(f"workload {workload!r} already has a template for {target!r} "
                                 "(override=True replaces it)")
        _TEMPLATES[key] = fn
        return fn

    return do


def get_template(workload: str, target: str = "llvm") -> TemplateFn | None:
    return _TEMPLATES.get((workload, target))


def list_templates() -> list[tuple[str, str]]:
    """``(workload, target kind)`` pairs that have a template."""
    return sorted(_TEMPLATES)


class TemplateSpace(Space):
    """The configurations of one template for one task."""

    kind = "template"

    def __init__(self, task: Any, template: TemplateFn | None = None, validate: str = "replay"):
        super().__init__(task, validate)
        kind = task.target.kind
        fn = template if template is not None else get_template(task.name, kind)
        if fn is None:
            have = ", ".join(f"{w} ({t})" for w, t in list_templates()) or "none"
            raise SpaceError(
                f"workload {task.name!r} has no template for target kind {kind!r} (templates: {have}); "
                f"register one with @autosched.space.register_template({task.name!r}, {kind!r}) "
                "or use task.space('generated')"
            )
        self.template = fn
        self.knobs: list[Knob] | None = None
        cfg = self._declared_knobs()
        self.knobs = list(cfg.space_map.values())
        self._names = [k.name for k in self.knobs]
        self._strides = []
        s = 1
        for k in self.knobs:
            self._strides.append(s)
            s *= len(k)
        self._size = s

    def _declared_knobs(self) -> ConfigSpace:
        """Run the template once to learn its knobs: the first configuration, else a few random ones."""
        rng = np.random.default_rng(0)
        for attempt in range(20):
            run = DecisionRun(rng=rng if attempt else None)
            try:
                self._execute(run)
            except CANDIDATE_ERRORS as e:
                self._failures[f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"] = 1
                continue
            return run.cfg
        raise self._fail("the template gave no legal schedule", 20)

    def _run(self, run: DecisionRun) -> None:
        cfg = run.cfg = ConfigSpace(run, run.sch)
        self.template(cfg, run.sch, self.task.tensors(), **self.task.args)
        cfg.finish()
        if self.knobs is not None and list(cfg.space_map) != self._names:
            raise SpaceError(
                f"template of {self.task.name} declared knobs {list(cfg.space_map)} for one configuration and "
                f"{self._names} for another; declare every knob whatever the values read"
            )

    def size(self) -> int:
        return self._size

    def __len__(self) -> int:
        return self._size

    def __str__(self) -> str:
        """The knobs one a line, as AutoTVM prints a config space."""
        lines = [f"ConfigSpace (len={self._size}, template of {self.task.name} on {self.task.target.kind}):"]
        lines += [f"  {i:3d} {k.name}: {k.kind}, {len(k)} candidates, e.g. {list(k.candidates[:3])}"
                  for i, k in enumerate(self.knobs)]
        return "\n".join(lines)

    # ----------------------------------------------------------- indices
    def point_at(self, index: int) -> Point:
        """The configuration with this index (the first knob varies fastest)."""
        if not 0 <= index < self._size:
            raise IndexError(f"index {index} outside the template space of size {self._size}")
        out = {}
        for k, stride in zip(self.knobs, self._strides):
            out[k.name] = k.candidates[(index // stride) % len(k)]
        return out

    def index_of(self, point: Point) -> int:
        idx = 0
        for k, stride in zip(self.knobs, self._strides):
            v = freeze(point[k.name])
            try:
                idx += k.candidates.index(v) * stride
            except ValueError:
                raise SpaceError(f"knob {k.name!r} has no candidate {v!r}") from None
        return idx

    def get(self, index: int) -> Trace:
        """The trace of the configuration with this index."""
        return self.generate(self.point_at(index))[0]

    def config(self, trace: Trace) -> dict:
        """The knob values (JSON-able) behind a trace of this space."""
        point = self.point_of(trace)
        return {k.name: _plain(point[k.name]) for k in self.knobs}

    # ------------------------------------------------------------ search
    def sample(self, n: int, rng: np.random.Generator | None = None) -> list[Trace]:
        """``n`` distinct configurations drawn uniformly without replacement (all of them if fewer)."""
        rng = _rng(rng)
        if self._size > 2**62:
            return super().sample(n, rng)
        want = min(n, self._size)
        order = rng.choice(self._size, size=min(self._size, 4 * want + 16), replace=False)
        out: dict[Trace, None] = {}
        tried = 0
        for idx in order:
            if len(out) >= want:
                break
            tried += 1
            got = self._try(self.point_at(int(idx)), None)
            if got is not None:
                out.setdefault(got[0])
        if not out and want > 0:
            raise self._fail("no configuration gave a legal schedule", tried)
        return list(out)

    def __iter__(self):
        for i in range(self._size):
            yield self.get(i)


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v
