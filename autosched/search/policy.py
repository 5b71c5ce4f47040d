"""The search-policy interface, the tuning context it sees, and the registry of policies by name.

A policy is the smallest thing that can steer a tuning run (AutoTVM's ``Tuner`` protocol)::

    @autosched.search.register_policy("mine")
    class Mine(autosched.search.SearchPolicy):
        def propose(self, n):                      # up to n traces to measure next
            return self.context.space.sample(n, self.context.rng)

        def update(self, inputs, results):         # optional: learn from what was measured
            ...

``self.context`` (a :class:`TuneContext`) holds the task, its space, the cost
model (or None), the database, a seeded ``numpy`` generator, and what has been
measured. The tuning loop (:func:`autosched.tune`) owns everything else: it
never measures a trace twice (proposals already measured are dropped), commits
every result, trains the cost model, and stops early. Policies installed by
other packages are found through the entry-point group
``autosched.search_policies`` (``name = "package.module:PolicyClass"``).
"""

from __future__ import annotations

import hashlib
import heapq
import importlib.metadata
import inspect
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autosched.measure.result import MeasureInput
from autosched.te.trace import Trace

log = logging.getLogger("autosched.search")

ENTRY_POINT_GROUP = "autosched.search_policies"


class MeasuredSet:
    """The traces measured for a task, as a set one asks ``text in measured`` or ``trace in measured``.

    It keeps a 16-byte digest of each canonical trace text, not the text (about 0.7 KB for a conv2d),
    so a run of many thousands of trials stays small; it cannot list the traces (the database can).
    """

    def __init__(self, items: Iterable[str | Trace] = ()):
        self._digests: set[bytes] = set()
        for item in items:
            self.add(item)

    @staticmethod
    def _digest(item: str | Trace) -> bytes:
        text = item.dumps() if isinstance(item, Trace) else item
        return hashlib.blake2b(text.encode(), digest_size=16).digest()

    def add(self, item: str | Trace) -> None:
        self._digests.add(self._digest(item))

    def __contains__(self, item: object) -> bool:
        return isinstance(item, (str, Trace)) and self._digest(item) in self._digests

    def __len__(self) -> int:
        return len(self._digests)


#: how many of the fastest measured traces a context keeps for ``best()``
KEEP_BEST = 256


@dataclass
class TuneContext:
    """What a policy may read: the tuning run's task, space, cost model, database and generator.

    ``measured`` answers whether a trace (or its canonical text, ``trace.dumps()``) was measured for this task,
    including those found in the database when the run started; :meth:`best` gives the fastest ones (of the
    ``KEEP_BEST`` it keeps).
    """

    task: Any
    space: Any
    cost_model: Any = None
    database: Any = None
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    measured: MeasuredSet = field(default_factory=MeasuredSet)
    _best: list[tuple[float, int, Trace]] = field(default_factory=list, init=False, repr=False)  # a heap
    _n: int = field(default=0, init=False, repr=False)

    def is_new(self, trace: Trace) -> bool:
        """True when ``trace`` was never measured for this task."""
        return trace not in self.measured

    def new_only(self, traces: Sequence[Trace]) -> list[Trace]:
        """``traces`` without the measured ones and without repeats, in order."""
        seen: set[str] = set()
        out = []
        for t in traces:
            text = t.dumps()
            if text not in self.measured and text not in seen:
                seen.add(text)
                out.append(t)
        return out

    def record(self, trace: Trace, cost: float) -> None:
        """Note a measured trace (the tuning loop calls this; ``cost`` is inf for a failure)."""
        self.measured.add(trace)
        if np.isfinite(cost):
            self._n += 1
            heapq.heappush(self._best, (cost, self._n, trace))
            if len(self._best) > 2 * KEEP_BEST:  # bounded: a long run keeps the fastest only
                self._best = heapq.nsmallest(KEEP_BEST, self._best)  # sorted, hence a heap

    def best(self, k: int = 1) -> list[Trace]:
        """The ``k`` fastest measured traces, fastest first."""
        return [t for _, _, t in heapq.nsmallest(k, self._best)]

    @property
    def model_ready(self) -> bool:
        """True when a cost model is there and has learned something (its scores mean more than chance)."""
        return self.cost_model is not None and bool(getattr(self.cost_model, "trained", True))

    def sample_new(self, n: int, tries: int = 4) -> list[Trace]:
        """Up to ``n`` distinct random traces of the space that were never measured."""
        out: list[Trace] = []
        for _ in range(tries):
            out = self.new_only(out + self.space.sample(2 * n, self.rng))
            if len(out) >= n:
                break
        return out[:n]

    def diverse(self, ranked: Sequence[Trace], n: int, pool: float = 2) -> list[Trace]:
        """``n`` of the ``pool * n`` best of ``ranked`` (best first), picked for diversity: each pick is the
        one that brings the most decision values not yet in the batch, the better ranked on ties (AutoTVM's
        diversity filter). Without it a batch is often ``n`` near copies of one kernel that differ in an
        unroll or a reduction split, and measures nothing new about the rest of the space."""
        cands = list(ranked[: int(pool * n)])
        if len(cands) <= n:
            return cands
        points = []
        for t in cands:
            try:
                points.append(set(self.space.point_of(t).items()))
            except Exception:  # noqa: BLE001 - a trace the space cannot place counts as all new
                points.append({(id(t), None)})
        covered: set = set()
        left, out = list(range(len(cands))), []
        while left and len(out) < n:
            i = max(left, key=lambda k: (len(points[k] - covered), -k))
            left.remove(i)
            covered |= points[i]
            out.append(cands[i])
        return out

    def affordable(self, traces: Sequence[Trace], factor: float = 3.0) -> list[Trace]:
        """``traces`` (in order) without those the cost model expects to take more than ``factor`` times as long
        to build as the task's fastest kernels did (all of them while it cannot tell, or ``factor`` <= 0). A
        candidate that takes seconds to compile is almost never a fast kernel (big unrolled bodies under
        guards), and its build holds up the measurement of the rest."""
        m = self.cost_model
        if factor <= 0 or not traces or not hasattr(m, "predict_build_seconds"):
            return list(traces)
        budget = m.build_budget(self.task.workload_key, factor)
        seconds = m.predict_build_seconds([MeasureInput(self.task, t) for t in traces])
        return list(traces) if seconds is None else [t for t, s in zip(traces, seconds) if s <= budget]

    def predict(self, traces: Sequence[Trace]) -> np.ndarray:
        """Cost-model scores for ``traces`` (higher is faster); zeros without a model."""
        if self.cost_model is None or not traces:
            return np.zeros(len(traces))
        return np.asarray(self.cost_model.predict([MeasureInput(self.task, t) for t in traces]), dtype=float)


class SearchPolicy:
    """Proposes traces to measure and learns from their results. Subclass it and register it.

    ``uses_model``: the tuning loop gives an XGBoost model by default when True (else none, unless asked).
    ``space_kind``: the space the policy searches by default (``"generated"`` or ``"template"``).
    ``propose_ahead``: the tuning loop may propose the next batch while the current one builds (see below).
    Keyword options given to :func:`autosched.tune` as ``policy_options`` go to ``__init__``.
    """

    name = "policy"
    uses_model = False
    space_kind = "generated"
    #: True: the tuning loop may ask for the next batch while the current one builds, before ``update`` has
    #: taught the policy the current one (its traces count as measured meanwhile); its search then costs no
    #: wall time of its own. Off by default: a policy must be written to learn one batch later.
    propose_ahead = False

    def __init__(self, context: TuneContext):
        self.context = context

    def propose(self, n: int) -> list[Trace]:
        """Up to ``n`` traces to measure next; an empty list says the policy has nothing new."""
        raise NotImplementedError

    def update(self, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        """Learn from measured ``MeasureInput``s and their ``MeasureResult``s (``error_kind`` None on success)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.context.task})"


_POLICIES: dict[str, type[SearchPolicy]] = {}


def register_policy(name: str, *, replace: bool = False):
    """Class decorator: ``@register_policy("mine")`` makes ``tune(task, policy="mine")`` use it."""

    def do(cls: type[SearchPolicy]) -> type[SearchPolicy]:
        if not (isinstance(cls, type) and issubclass(cls, SearchPolicy)):
            raise TypeError(f"register_policy({name!r}) expects a SearchPolicy subclass, got {cls!r}")
        if name in _POLICIES and _POLICIES[name] is not cls and not replace:
            raise ValueError(f"a search policy named {name!r} is already registered ({_POLICIES[name].__name__}); "
                             "pass replace=True to override it")
        if "name" not in vars(cls):  # a class registered under a second name keeps its first
            cls.name = name
        _POLICIES[name] = cls
        return cls

    return do


def unregister_policy(name: str) -> None:
    _POLICIES.pop(name, None)


def _load_entry_points() -> None:
    """Register the policies that installed packages declare in the ``autosched.search_policies`` group."""
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _POLICIES:
            continue
        try:
            obj = ep.load()
        except Exception as e:  # noqa: BLE001 - a broken plugin must not break autosched
            log.warning("search policy %r from entry point %r could not be loaded: %s", ep.name, ep.value, e)
            continue
        if isinstance(obj, type) and issubclass(obj, SearchPolicy):
            register_policy(ep.name)(obj)
        elif ep.name not in _POLICIES:  # a module that registers its policies when imported is fine too
            log.warning("entry point %r (%s) gave %r, not a SearchPolicy subclass", ep.name, ep.value, obj)


def list_policies() -> list[str]:
    """Names of every policy: built-in, registered in this process, and from installed packages."""
    _load_entry_points()
    return sorted(_POLICIES)


def get_policy(name: str) -> type[SearchPolicy]:
    """The policy class registered as ``name`` (looked up in installed packages' entry points too)."""
    if name not in _POLICIES:
        _load_entry_points()
    if name not in _POLICIES:
        raise ValueError(f"unknown search policy {name!r}; available: {', '.join(sorted(_POLICIES))}")
    return _POLICIES[name]


def policy_options(policy: type[SearchPolicy]) -> dict[str, Any]:
    """The options a policy class takes (its ``__init__`` keywords after the context) and their defaults."""
    params = list(inspect.signature(policy.__init__).parameters.values())[2:]  # after self, context
    return {p.name: (None if p.default is inspect.Parameter.empty else p.default) for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def check_policy_options(policy: type[SearchPolicy], options: dict[str, Any]) -> None:
    """A ValueError naming any option ``policy`` does not take, and the ones it does."""
    if any(p.kind == p.VAR_KEYWORD for p in inspect.signature(policy.__init__).parameters.values()):
        return  # it takes any keyword
    known = policy_options(policy)
    unknown = sorted(set(options) - set(known))
    name = getattr(policy, "name", policy.__name__)
    if unknown:
        raise ValueError(f"search policy {name!r} has no option {', '.join(map(repr, unknown))}; its options: "
                         + (", ".join(f"{k}={v!r}" for k, v in known.items()) or "none"))
    for key, value in options.items():  # a value of the wrong kind would fail batches later, mid-run
        want = _option_kind(known[key])
        if want is not None and not _fits(value, want):
            raise ValueError(f"search policy {name!r}, option {key}: expected {want[1]} (default "
                             f"{known[key]!r}), got {value!r}")


def _option_kind(default: Any) -> tuple[tuple[type, ...], str] | None:
    """The types a value may have where the default is ``default`` (None: anything goes)."""
    if isinstance(default, bool):
        return (bool,), "true or false"
    if isinstance(default, int):
        return (int,), "an integer"
    if isinstance(default, float):
        return (int, float), "a number"
    if isinstance(default, (tuple, list)):
        return (tuple, list), "a list"
    return None


def _fits(value: Any, kind: tuple[tuple[type, ...], str]) -> bool:
    types = kind[0]
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


__all__ = ["ENTRY_POINT_GROUP", "SearchPolicy", "TuneContext", "check_policy_options", "get_policy",
           "list_policies", "policy_options", "register_policy", "unregister_policy"]
