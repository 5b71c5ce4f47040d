"""What every schedule space shares: decisions, points, traces, sampling, mutation and recovery.

A space is a *program that reads decisions*: a template reads its knobs, a
sketch generator reads its tile sizes, unroll depths and compute locations.
Running that program on a fresh schedule of the task applies primitives and so
records a :class:`~autosched.te.Trace`, the one schedule representation.

* A **decision** is a named choice among candidates (``tile/C.local/s0`` among
  the factorisations of 64 into four parts, ``unroll/C.local`` among
  ``0, 16, 64, 512``). Names are stable; the candidates may depend on earlier
  decisions.
* A **point** is the mapping ``name -> value`` of the decisions one run read.
  Running again with the same point gives the same trace; a point that names a
  value no longer among a decision's candidates (after a mutation changed an
  earlier decision) gets a fresh random value there.
* ``sample`` runs the program with random decisions, ``mutate`` changes one
  decision of a trace's point and runs again, ``crossover`` mixes two points.

The space remembers the point of every trace it produced; a trace from
elsewhere (a database, a log) is matched back to a point by replaying the
program and pruning decisions whose steps disagree with the trace
(:meth:`Space.point_of`).
"""

from __future__ import annotations

import abc
import contextlib
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autosched.errors import AutoschedError, LoweringError, ScheduleError
from autosched.te.trace import Split, Step, Trace
from autosched.tir.gpu import prepare_kernel
from autosched.tir.lower import lower

Point = dict[str, Any]


class SpaceError(AutoschedError, ValueError):
    """A space cannot produce what was asked (every candidate failed, an unknown trace, a bad template)."""


@dataclass(frozen=True)
class Decision:
    """One choice a run read: its name, kind (for mutation), candidates and the index chosen."""

    name: str
    kind: str
    candidates: tuple
    index: int

    @property
    def value(self) -> Any:
        return self.candidates[self.index]


def freeze(v: Any) -> Any:
    """JSON lists to tuples, recursively (points hold hashable values)."""
    if isinstance(v, list | tuple):
        return tuple(freeze(x) for x in v)
    return v


def _thaw(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


def point_to_json(point: Point) -> dict:
    return {k: _thaw(v) for k, v in point.items()}


def point_from_json(data: dict | str) -> Point:
    if isinstance(data, str):
        data = json.loads(data)
    return {k: freeze(v) for k, v in data.items()}


class _NeedChoice(Exception):
    def __init__(self, n: int, first: int | None = None):
        self.n, self.first = n, first


class _Mismatch(Exception):
    pass


class _CheckingTrace(Trace):
    """A schedule's trace that stops the run as soon as it departs from a target trace."""

    __slots__ = ("target",)

    def __init__(self, target: Trace):
        super().__init__()
        self.target = target.steps

    def append(self, step: Step) -> None:
        k = len(self.steps)
        if k >= len(self.target) or self.target[k] != step:
            raise _Mismatch()
        self.steps.append(step)


def split_hint(first: int = 0) -> Callable[[Sequence[Step], tuple], int | None]:
    """A hint for a decision among split sizes (outermost first) that is used right away to split an axis
    into the levels ``first..``: the factors of the next splits in the trace give the inner sizes."""

    def hint(upcoming: Sequence[Step], cands: tuple) -> int | None:
        n = len(cands[0]) - 1 - first
        factors = []
        for st in upcoming[:n]:
            if not isinstance(st, Split) or st.factor is None:
                return None
            factors.append(st.factor)
        if len(factors) != n:
            return None
        for i, c in enumerate(cands):
            if all(math.prod(c[lv + 1:]) == f for lv, f in zip(range(first, len(c) - 1), factors)):
                return i
        return None

    return hint


class DecisionRun:
    """The decisions of one run of a space's program.

    ``forced`` values are used when they are among the candidates; other
    decisions are drawn from ``rng`` (with the given weights) or, without an
    rng, take their default (the first candidate, or ``default=``).
    """

    def __init__(self, forced: Point | None = None, rng: np.random.Generator | None = None):
        self.forced = forced or {}
        self.rng = rng
        self.decisions: dict[str, Decision] = {}
        self.sch: Any = None  # the schedule being built (set by the space)
        #: (trace length, PrimFunc): the schedule as a rule lowered it (partition=False); the check of a GPU's
        #: limits reuses it when no step came after (GPUPadSharedRows lowers every candidate it pads or not)
        self.lowered: tuple[int, Any] | None = None
        # recovery mode (see Space.point_of)
        self._prefix: list[int] | None = None
        self._target: Trace | None = None

    def decide(self, name: str, candidates: Sequence[Any], kind: str = "choice",
               weights: Sequence[float] | None = None, default: Any = None,
               hint: Callable[[Sequence[Step], tuple], int | None] | None = None) -> Any:
        """Choose one of ``candidates`` for decision ``name`` (the same value when asked twice in one run).

        ``hint(upcoming_steps, candidates)`` may guess, from the steps a trace
        has from here on, which candidate made them: :meth:`Space.point_of`
        tries that one first (read decisions just before the steps they make,
        and matching a foreign trace to its point is fast).
        """
        got = self.decisions.get(name)
        if got is not None:
            return got.value
        cands = candidates if type(candidates) is tuple else tuple(freeze(c) for c in candidates)
        if not cands:
            raise SpaceError(f"decision {name!r} has no candidates")
        if self._prefix is not None:
            k = len(self.decisions)
            if k >= len(self._prefix):
                if len(cands) > 1:
                    first = None
                    if hint is not None:
                        first = hint(self._target.steps[len(self.sch.trace):], cands)
                    raise _NeedChoice(len(cands), first)
                self._prefix.append(0)
            idx = self._prefix[k]
            if idx >= len(cands):
                raise _Mismatch()
        else:
            idx = None
            want = self.forced.get(name, _MISSING)
            if want is not _MISSING:
                try:
                    idx = cands.index(freeze(want))
                except ValueError:
                    idx = None
            if idx is None:
                if self.rng is not None and len(cands) > 1:
                    if weights is None:
                        idx = int(self.rng.integers(len(cands)))
                    else:
                        w = np.asarray(weights, dtype=float)
                        idx = int(self.rng.choice(len(cands), p=w / w.sum()))
                elif default is not None and freeze(default) in cands:
                    idx = cands.index(freeze(default))
                else:
                    idx = 0
        self.decisions[name] = Decision(name, kind, cands, idx)
        return cands[idx]

    @property
    def point(self) -> Point:
        return {d.name: d.value for d in self.decisions.values()}


_MISSING = object()

class CandidateError(SpaceError):
    """One point of a space gives no legal schedule (a rule's primitive was refused); another is drawn."""


# errors that mean "this point does not give a legal schedule": drop it, try another. Other errors (a
# template that declares different knobs for different configurations, a rule's bug) propagate.
CANDIDATE_ERRORS = (ScheduleError, LoweringError, CandidateError)


class Space(abc.ABC):
    """A space of schedules of one task, every point of which is a trace.

    Subclasses implement :meth:`_run` (apply the program to a fresh schedule,
    reading decisions from ``run``) and :meth:`size`.
    """

    kind = "space"
    CACHE = 2048  # traces whose point is remembered (a few generations of the search; ~4 KB each)

    def __init__(self, task: Any, validate: str = "replay"):
        if validate not in ("replay", "lower"):
            raise ValueError(f"validate must be 'replay' or 'lower', got {validate!r}")
        self.task = task
        self.validate = validate
        self._points: OrderedDict[Trace, Point] = OrderedDict()
        self._failures: dict[str, int] = {}
        #: the distinct traces a :meth:`sample` that ran dry found (a small space: max pooling on a GPU has 15),
        #: sorted; later samples draw from them instead of drawing hundreds of duplicates again
        self.dry_sample: list[Trace] | None = None
        #: while a tuning run for a GPU goes on, its feature helpers (:mod:`autosched.cost_model.helpers`; none
        #: on one core): :meth:`sample` draws in shares, theirs and this process's; None: one sequence of draws
        self.helpers: Any = None

    # -------------------------------------------------------------- program
    @abc.abstractmethod
    def _run(self, run: DecisionRun) -> Any:
        """Apply the space's program to ``run.sch`` (a fresh schedule), reading decisions from ``run``."""

    @abc.abstractmethod
    def size(self) -> int:
        """How many distinct points the space has (exact for templates, an estimate for sketches)."""

    def __len__(self) -> int:
        return self.size()

    def __bool__(self) -> bool:  # a space is an object, not a container: no size estimate for a truth test
        return True

    def _execute(self, run: DecisionRun) -> Trace:
        sch, args = self.task.schedule()
        run.sch = sch
        if run._target is not None:
            sch.trace = _CheckingTrace(run._target)
        with self.task.target:  # templates and rules size their blocks from Target.current().cpu
            self._run(run)
        if run._prefix is not None:
            return sch.trace
        if self.validate == "lower":
            lower(sch, args)
        if self.task.target.kind == "cuda":  # a schedule over the GPU's limits (threads, shared memory) is not a
            # point: draw another. Unpartitioned loops give the same launch and verdict, in two thirds the time
            done = run.lowered
            func = done[1] if done is not None and done[0] == len(sch.trace) else lower(sch, args, partition=False)
            prepare_kernel(func, self.task.target.gpu)
        return sch.trace

    def generate(self, point: Point | None = None, rng: np.random.Generator | None = None) -> tuple[Trace, Point]:
        """The trace of ``point`` (decisions it lacks: random from ``rng``, else defaults) and its full point."""
        run = DecisionRun(point, rng)
        trace = self._execute(run)
        full = run.point
        self._remember(trace, full)
        return trace, full

    def trace_of(self, point: Point) -> Trace:
        """The trace of a point (``point_of``'s inverse)."""
        return self.generate(point_from_json(point) if isinstance(point, str) else point)[0]

    def remembered(self, trace: Trace) -> Point | None:
        """``trace``'s point if this space drew or placed it lately (no replay), else None."""
        return self._points.get(trace)

    def _remember(self, trace: Trace, point: Point) -> None:
        self._points[trace] = point
        self._points.move_to_end(trace)
        while len(self._points) > self.CACHE:
            self._points.popitem(last=False)

    def _try(self, point: Point | None, rng: np.random.Generator | None) -> tuple[Trace, Point] | None:
        try:
            return self.generate(point, rng)
        except CANDIDATE_ERRORS as e:
            msg = str(e).splitlines()[0][:300]
            key = f"{type(e).__name__}: {msg}"
            self._failures[key] = self._failures.get(key, 0) + 1
            return None

    def _fail(self, what: str, attempts: int) -> SpaceError:
        top = sorted(self._failures.items(), key=lambda kv: -kv[1])[:3]
        lines = "\n".join(f"  {n} x {m}" for m, n in top) or "  (no errors recorded)"
        return SpaceError(
            f"{self.kind} space of {self.task}: {what} after {attempts} attempts; the commonest failures:\n{lines}"
        )

    # --------------------------------------------------------------- search
    #: traces per share of a sample drawn in shares (:attr:`helpers` set)
    SAMPLE_SHARE = 8

    def sample(self, n: int, rng: np.random.Generator | None = None) -> list[Trace]:
        """``n`` distinct random traces (fewer only when the space has fewer distinct ones).

        Bounded: after ``20 n + 50`` draws, or 200 draws in a row that give nothing new, it returns
        what it has (after the latter, later calls draw from what it found); when no draw gave a legal
        trace it raises :class:`SpaceError` naming the commonest failures.

        With :attr:`helpers` set, the draws come in shares of ``SAMPLE_SHARE`` traces, each from a generator
        seeded by ``rng``, drawn by the helper processes and here at once; a share is the same wherever it is
        drawn, so a seeded search repeats however many helpers answer. The shares' traces come first, in share
        order; draws here make up what repeats left out."""
        rng = _rng(rng)
        if self.dry_sample is not None:  # every trace a draw reaches is known: no draws needed
            pick = rng.choice(len(self.dry_sample), size=min(n, len(self.dry_sample)), replace=False)
            return [self.dry_sample[i] for i in pick]
        out: dict[Trace, None] = {}
        if self.helpers is not None and n > self.SAMPLE_SHARE:
            seeds = [int(x) for x in rng.integers(2**63 - 1, size=-(-n // self.SAMPLE_SHARE))]
            with self._as_shares_left_it():
                answers = self.helpers.sample_shares(self, [(self.SAMPLE_SHARE, seed) for seed in seeds])
            for share in answers:
                for trace, point in share:
                    self._remember(trace, point)
                    out[trace] = None
            if len(out) >= n:
                return list(out)[:n]
        attempts, limit, stale = 0, 20 * n + 50, 0
        while len(out) < n and attempts < limit and stale < 200:
            attempts += 1
            got = self._try(None, rng)
            if got is not None and got[0] not in out:
                out[got[0]] = None
                stale = 0
            else:
                stale += 1  # 200 draws in a row without a new trace: the space is (nearly) exhausted
        if not out and n > 0:
            raise self._fail("no legal trace could be sampled", attempts)
        if stale >= 200:  # ran dry: these are all the traces a draw reaches (on a GPU, 20-100 ms a draw)
            self.dry_sample = sorted(out, key=lambda t: t.dumps())
        return list(out)

    def draw_share(self, n: int, seed: int) -> list[tuple[Trace, Point]]:
        """One share of a sample drawn in shares: up to ``n`` distinct legal traces (and their points) from a
        generator seeded with ``seed``, in at most ``4 n + 8`` draws; the same in every process."""
        rng = np.random.default_rng(seed)
        out: dict[Trace, Point] = {}
        for _ in range(4 * n + 8):
            got = self._try(None, rng)
            if got is not None and got[0] not in out:
                out[got[0]] = got[1]
                if len(out) == n:
                    break
        return list(out.items())

    #: requests per share of offspring bred in shares (:attr:`helpers` set): a GPU mutation lowers the kernel
    #: for each try, about 0.17 s a child on a Zen 3 core, so small shares spread well over many helpers
    OFFSPRING_SHARE = 4

    def offspring(self, requests: Sequence[tuple[Trace, Trace | None]],
                  rng: np.random.Generator | None = None) -> list[Trace]:
        """One child per ``(a, b)`` request: a :meth:`mutate` of ``a`` (``b`` None) or a :meth:`crossover` of
        ``a`` and ``b``; ``a`` itself where the space has no legal child of them. What search policies breed.

        With :attr:`helpers` set, the requests go in shares of ``OFFSPRING_SHARE``, each bred from a generator
        seeded by ``rng``, by the helper processes and here at once; a share is the same wherever it is bred,
        so a seeded search repeats however many helpers answer. Else one after another, from ``rng``."""
        rng = _rng(rng)
        if self.helpers is None or len(requests) <= self.OFFSPRING_SHARE:
            return [self._child(a, b, rng) for a, b in requests]
        k = self.OFFSPRING_SHARE
        chunks = [list(requests[i:i + k]) for i in range(0, len(requests), k)]
        seeds = [int(x) for x in rng.integers(2**63 - 1, size=len(chunks))]
        # every share starts from the parents' points as they are now (a child bred here may be remembered
        # with another point of the same trace before the next share runs)
        known = {t: p for a, b in requests for t in (a, b) if t is not None and (p := self.remembered(t)) is not None}
        shares = [(c, seed, {t: known[t] for a, b in c for t in (a, b) if t in known})
                  for c, seed in zip(chunks, seeds)]
        with self._as_shares_left_it():
            answers = self.helpers.offspring_shares(self, shares)
        out = []
        for (_, _, points), share in zip(shares, answers):
            for trace, point in [*points.items(), *share]:
                if point is not None:
                    self._remember(trace, point)
            out += [trace for trace, _ in share]
        return out

    @contextlib.contextmanager
    def _as_shares_left_it(self) -> Iterator[None]:
        """Undo what work in shares here did to the remembered points: the tries of a share bred or drawn in this
        process remember points that one in a helper would not (another point of a parent's trace, say), so the
        caller remembers each share's answers alone, as a helper returned them, and the search goes on the same."""
        before = list(self._points.items())
        try:
            yield
        finally:
            self._points.clear()
            self._points.update(before)

    def breed_share(self, requests: Sequence[tuple[Trace, Trace | None]], seed: int,
                    points: dict[Trace, Point] | None = None) -> list[tuple[Trace, Point | None]]:
        """One share of :meth:`offspring` bred in shares: each request's child, with its point (None for a
        parent this space cannot place), from a generator seeded with ``seed``; the same in every process.
        ``points``: the parents' points (remembered first), so that every process starts from the same ones and
        one that did not draw the parents need not replay them."""
        for trace, point in (points or {}).items():
            self._remember(trace, point)
        rng = np.random.default_rng(seed)
        children = [self._child(a, b, rng) for a, b in requests]
        return [(c, self.remembered(c)) for c in children]

    def _child(self, a: Trace, b: Trace | None, rng: np.random.Generator) -> Trace:
        try:
            return self.mutate(a, rng) if b is None else self.crossover(a, b, rng)
        except SpaceError:  # no legal child of these parents
            return a

    def mutate(self, trace: Trace, rng: np.random.Generator | None = None, tries: int = 32) -> Trace:
        """A trace that differs from ``trace`` in one decision (a neighbour in the space)."""
        rng = _rng(rng)
        point = self.point_of(trace)
        run = DecisionRun(point)
        self._execute(run)  # the decisions (with their candidates) of this point
        decisions = [d for d in run.decisions.values() if len(d.candidates) > 1]
        if not decisions:
            raise SpaceError(f"{self.kind} space of {self.task}: the trace has no decision to mutate (size 1)")
        for _ in range(tries):
            d = self._pick_decision(decisions, rng)
            new_value = self._mutate_value(d, rng)
            if new_value is None:
                continue
            new_point = dict(point)
            new_point[d.name] = new_value
            got = self._try(new_point, rng)
            if got is not None and got[0] != trace:
                return got[0]
        raise self._fail("no legal mutation of the trace was found", tries)

    def _pick_decision(self, decisions: list[Decision], rng: np.random.Generator) -> Decision:
        """Uniform over decision kinds, then over the decisions of that kind (tiles do not drown the rest)."""
        kinds = sorted({d.kind for d in decisions})
        kind = kinds[int(rng.integers(len(kinds)))]
        pool = [d for d in decisions if d.kind == kind]
        return pool[int(rng.integers(len(pool)))]

    def _mutate_value(self, d: Decision, rng: np.random.Generator) -> Any:
        """Another candidate of ``d``; tile sizes move one prime factor from one level to another."""
        if d.kind == "tile" and isinstance(d.value, tuple):
            moved = move_factor(d.value, rng)
            if moved is not None and moved in d.candidates:
                return moved
        if d.kind in ("parallel", "unroll") and all(isinstance(c, int) for c in d.candidates):
            # ordered candidates: step to a neighbour
            step = 1 if rng.integers(2) else -1
            j = d.index + step
            if not 0 <= j < len(d.candidates):
                j = d.index - step
            return d.candidates[j]
        others = [i for i in range(len(d.candidates)) if i != d.index]
        return d.candidates[others[int(rng.integers(len(others)))]]

    def crossover(self, a: Trace, b: Trace, rng: np.random.Generator | None = None, tries: int = 8) -> Trace:
        """A trace whose decisions come from ``a`` or ``b`` (each with probability 1/2)."""
        rng = _rng(rng)
        pa, pb = self.point_of(a), self.point_of(b)
        for _ in range(tries):
            child = {}
            for name in list(pa) + [n for n in pb if n not in pa]:
                src = pa if (name not in pb or (name in pa and rng.integers(2) == 0)) else pb
                child[name] = src[name]
            got = self._try(child, rng)
            if got is not None:
                return got[0]
        raise self._fail("no legal crossover of the two traces was found", tries)

    # ------------------------------------------------------------- recovery
    def point_of(self, trace: Trace | list | str, budget: int = 20_000) -> Point:
        """The point (decisions) that gives ``trace``: remembered, else found by replaying the program.

        Replays prune each decision whose steps disagree with the trace, so
        the cost is about (decisions x candidates) partial runs; ``budget``
        bounds the runs. Raises :class:`SpaceError` for a trace this space
        does not produce.
        """
        if not isinstance(trace, Trace):
            trace = Trace.from_json(trace)
        got = self._points.get(trace)
        if got is not None:
            return got
        runs = 0

        def attempt(prefix: list[int]) -> Point | None | tuple[int, list[int]]:
            nonlocal runs
            runs += 1
            if runs > budget:
                raise SpaceError(f"{self.kind} space of {self.task}: gave up matching a trace to a point "
                                 f"after {budget} replays")
            run = DecisionRun()
            run._prefix, run._target = list(prefix), trace
            try:
                out = self._execute(run)
            except _NeedChoice as nc:
                return nc, run._prefix
            except (_Mismatch, *CANDIDATE_ERRORS):
                return None
            return run.point if len(out) == len(trace) else None

        stack: list[list[int]] = [[]]
        while stack:
            prefix = stack.pop()
            res = attempt(prefix)
            if isinstance(res, dict):
                self._remember(trace, res)
                return res
            if isinstance(res, tuple):
                nc, longer = res
                order = [i for i in reversed(range(nc.n)) if i != nc.first]
                if nc.first is not None:
                    order.append(nc.first)  # popped first
                stack.extend(longer + [i] for i in order)
        raise SpaceError(
            f"{self.kind} space of {self.task}: the trace is not a point of this space "
            f"(no decisions replay to its {len(trace)} steps)"
        )

    # ----------------------------------------------------------------- misc
    def decisions(self, trace: Trace) -> list[Decision]:
        """The decisions (with candidates) behind ``trace``, in the order the program read them."""
        run = DecisionRun(self.point_of(trace))
        self._execute(run)
        return list(run.decisions.values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.task}, size~{self.size()})"


def _rng(rng: Any) -> np.random.Generator:
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, int | np.integer):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be a numpy.random.Generator (or an int seed), got {type(rng).__name__}")


def prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def move_factor(sizes: tuple, rng: np.random.Generator) -> tuple | None:
    """Move one prime factor of one level of a perfect tiling to another level (Ansor's tile-size mutation)."""
    src = [i for i, s in enumerate(sizes) if isinstance(s, int) and s > 1]
    if not src or len(sizes) < 2:
        return None
    i = src[int(rng.integers(len(src)))]
    ps = prime_factors(sizes[i])
    p = ps[int(rng.integers(len(ps)))]
    j = int(rng.integers(len(sizes) - 1))
    if j >= i:
        j += 1
    out = list(sizes)
    out[i] //= p
    out[j] *= p
    return tuple(out)


Program = Callable[[DecisionRun], Any]
