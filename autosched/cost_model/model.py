"""Cost models: score candidates so the search measures the promising ones first.

``CostModel`` is the whole interface (MetaSchedule style): ``update`` with
measured inputs and results, ``predict`` scores for a batch of candidates
(higher is better; only the order matters), ``save``/``load``. XGBoost is
used only behind :class:`XGBCostModel` (and imported by :mod:`autosched.cost_model.xgb`).
"""

from __future__ import annotations

import hashlib
import logging
import pickle
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.cost_model.features import FEATURE_NAMES, N_FEATURES, extract
from autosched.cost_model.xgb import xgboost
from autosched.result import MeasureInput, MeasureResult
from autosched.shipment import Shipment, make_task
from autosched.space.base import point_from_json, point_to_json
from autosched.te.trace import Trace
from autosched.tir.lower import lower

log = logging.getLogger("autosched.cost_model")


class CostModel(ABC):
    """Predicts relative speed of candidates from their lowered loop IR."""

    @abstractmethod
    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn from measured candidates (failed ones count as the slowest)."""

    @abstractmethod
    def predict(self, candidates: Sequence[MeasureInput]) -> np.ndarray:
        """One score per candidate; higher means expected faster."""

    def save(self, path: str) -> None:
        with open(path, "wb") as f:
            pickle.dump(self, f)

    @staticmethod
    def load(path: str) -> CostModel:
        with open(path, "rb") as f:
            model = pickle.load(f)
        if not isinstance(model, CostModel):
            raise TypeError(f"{path} does not hold an autosched cost model")
        return model


def candidate_features(task: Any, trace: Any) -> np.ndarray:
    """The feature vector of ``trace`` (a Trace or its text) of ``task``: its lowered loop IR, read; the zero
    vector for a candidate that does not apply or lower."""
    try:
        sch, args = task.apply(trace)
        return extract(lower(sch, args, partition=False))
    except Exception:  # noqa: BLE001 - an illegal candidate scores as the zero vector
        return np.zeros(N_FEATURES, dtype=np.float32)


class FeatureService:
    """What a feature helper process serves (:mod:`autosched.cost_model.helpers`): the features of candidates
    of a task that travels as the measurement workers' tasks do (:mod:`autosched.shipment`), and shares of
    samples of its space."""

    def features(self, shipment: Shipment, state: tuple, texts: list[str]) -> np.ndarray:
        """One row per trace text, as :func:`candidate_features` computes it."""
        task = make_task(shipment, state)
        return np.stack([candidate_features(task, t) for t in texts])

    def sample_shares(self, shipment: Shipment, state: tuple, kind: str,
                      shares: list[tuple[int, int]]) -> list[list[tuple[list, dict]]]:
        """Shares of a sample of the task's ``kind`` space (:meth:`Space.draw_share` of each ``(n, seed)``),
        as ``(trace JSON, point JSON)`` pairs. The task's space is kept, as the tuner's is, between calls."""
        space = make_task(shipment, state).space(kind)
        return [[(t.to_json(), point_to_json(p)) for t, p in space.draw_share(n, seed)] for n, seed in shares]

    def offspring_shares(self, shipment: Shipment, state: tuple, kind: str,
                         shares: list[tuple[list[tuple], int]]) -> list[list[tuple[list, dict | None]]]:
        """Shares of the offspring of the task's ``kind`` space (:meth:`Space.breed_share` of each ``(requests,
        seed)``; a request is ``(a, a's point, b, b's point)`` in JSON, ``b`` None for a mutation)."""
        space = make_task(shipment, state).space(kind)
        out = []
        for requests, seed in shares:
            pairs, points = [], {}
            for a, pa, b, pb in requests:
                ta, tb = Trace.from_json(a), None if b is None else Trace.from_json(b)
                pairs.append((ta, tb))
                points.update((t, point_from_json(p)) for t, p in ((ta, pa), (tb, pb)) if p is not None)
            out.append([(t.to_json(), None if p is None else point_to_json(p))
                        for t, p in space.breed_share(pairs, seed, points)])
        return out


#: unseen candidates of one task in one call before helper processes take a share of them
HELPER_MIN_BATCH = 16


class FeatureCache:
    """Features per candidate (workload key, digest of the trace text): a candidate is lowered and read once
    while it is among the ``capacity`` most recently added. Bounded, so a long run's memory stays flat: the
    search scores hundreds of candidates per measured one, and the training rows keep their own copy.

    ``helpers``: a :class:`~autosched.cost_model.helpers.FeatureHelpers` (the tuning loop sets one for its
    run, on machines with a core to spare): a call with ``HELPER_MIN_BATCH`` unseen candidates of a task or
    more gives each ready helper an equal share and computes the rest here meanwhile. The features are the
    same wherever they are computed."""

    def __init__(self, capacity: int = 16_384):
        self.capacity = capacity
        self._data: dict[tuple[str, bytes], np.ndarray] = {}
        self.helpers: Any = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "helpers": None}  # processes do not travel

    def __setstate__(self, state: dict) -> None:
        state.setdefault("helpers", None)
        self.__dict__.update(state)

    def features(self, inputs: Sequence[MeasureInput]) -> np.ndarray:
        out = np.zeros((len(inputs), N_FEATURES), dtype=np.float32)
        keys = [(inp.task.workload_key, hashlib.blake2b(inp.trace.dumps().encode(), digest_size=16).digest())
                for inp in inputs]
        missing: dict[tuple[str, bytes], MeasureInput] = {}
        for key, inp in zip(keys, inputs):
            if key not in self._data and key not in missing:
                missing[key] = inp
        if missing:
            found = self._compute(missing)
            for key, vec in found.items():
                if len(self._data) >= self.capacity:
                    self._data.pop(next(iter(self._data)))
                self._data[key] = vec
        for i, key in enumerate(keys):
            vec = self._data.get(key)
            out[i] = vec if vec is not None else found[key]  # found: when the capacity is below the call's size
        return out

    def _compute(self, missing: dict[tuple[str, bytes], MeasureInput]) -> dict[tuple[str, bytes], np.ndarray]:
        """Features of the ``missing`` candidates: shares of each task's to the helpers, the rest here."""
        found: dict[tuple[str, bytes], np.ndarray] = {}
        by_task: dict[str, list[tuple[tuple[str, bytes], MeasureInput]]] = {}
        for key, inp in missing.items():
            by_task.setdefault(key[0], []).append((key, inp))
        for items in by_task.values():
            local = [True] * len(items)
            sent: list[tuple[Any, int, int]] = []  # (helper, start, end) of items
            helpers, task = self.helpers, items[0][1].task
            if helpers is not None and len(items) >= HELPER_MIN_BATCH:
                ready = helpers.ready(task)
                size = len(items) // (len(ready) + 1)
                for n, helper in enumerate(ready):  # the last shares to the helpers, the first one here
                    lo, hi = len(items) - (n + 1) * size, len(items) - n * size
                    if helpers.send(helper, task, [inp.trace.dumps() for _, inp in items[lo:hi]]):
                        sent.append((helper, lo, hi))
                        local[lo:hi] = [False] * (hi - lo)
            for (key, inp), here in zip(items, local):
                if here:
                    found[key] = candidate_features(inp.task, inp.trace)
            for helper, lo, hi in sent:
                rows = helpers.receive(helper, task)
                if rows is None or len(rows) != hi - lo:  # a helper that failed: its share is computed here
                    rows = [candidate_features(inp.task, inp.trace) for _, inp in items[lo:hi]]
                for (key, _), vec in zip(items[lo:hi], rows):
                    found[key] = np.asarray(vec, dtype=np.float32)
        return found


class RandomCostModel(CostModel):
    """Uniform random scores: random search expressed as a cost model."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def update(self, inputs, results) -> None:
        return None

    def predict(self, candidates) -> np.ndarray:
        return self.rng.random(len(candidates))


def normalised_throughput(inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> np.ndarray:
    """Per task, best cost / cost (1 for the best candidate, 0 for failures)."""
    return _throughput([i.task.workload_key for i in inputs], [r.cost for r in results])


def _throughput(keys: Sequence[str], costs: Sequence[float]) -> np.ndarray:
    best: dict[str, float] = {}
    for k, c in zip(keys, costs):
        best[k] = min(best.get(k, float("inf")), c)
    return np.array([best[k] / c if np.isfinite(c) and c > 0 else 0.0 for k, c in zip(keys, costs)])


#: builds a model learns from before it predicts build times (XGBCostModel.predict_build_seconds)
MIN_BUILD_RECORDS = 8
#: a base model is judged on a task once the task has this many records, and dropped under this Kendall tau
BASE_CHECK_RECORDS, BASE_MIN_TAU = 16, 0.3
#: the base is judged on a task's latest records, at most this many (the pairs grow with its square)
BASE_CHECK_MAX_RECORDS = 1024


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b of two orderings (ties counted as scipy does), over every pair; NaN where one of
    them is constant. Here, not scipy's: importing scipy.stats costs a tuning run 2 s on a 2-core Zen 3."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both = ties_a = ties_b = 0.0
    for i in range(0, len(a), 256):  # in blocks of rows: a 256 x n sign matrix at a time
        sa = np.sign(a[i:i + 256, None] - a[None, :])
        sb = np.sign(b[i:i + 256, None] - b[None, :])
        both += float((sa * sb).sum())
        ties_a += float(np.abs(sa).sum())
        ties_b += float(np.abs(sb).sum())
    return both / np.sqrt(ties_a * ties_b) if ties_a > 0 and ties_b > 0 else float("nan")


def xgb_params(seed: int = 0, max_depth: int = 6, learning_rate: float = 0.2) -> dict:
    """The XGBoost parameters of every autosched ranking model (the tuner's and the shipped one's)."""
    return {
        "objective": "rank:pairwise",
        "max_depth": max_depth,
        "eta": learning_rate,
        "min_child_weight": 1,
        "subsample": 1.0,
        "seed": seed,
        "nthread": 1,
        "verbosity": 0,
    }


def train_ranker(params: dict, x: np.ndarray, y: np.ndarray, groups: Sequence[str], num_rounds: int,
                 base: Any = None) -> Any:
    """An XGBoost booster ranking the rows of each group (a workload key) by ``y``; with ``base`` (a Booster),
    its trees come first and the new ones learn what it gets wrong. ``base`` itself is left unchanged."""
    xgb = xgboost()

    order = np.argsort(np.asarray(groups), kind="stable")
    _, sizes = np.unique(np.asarray(groups)[order], return_counts=True)
    dtrain = xgb.DMatrix(x[order], label=y[order])
    dtrain.set_group(sizes)
    return xgb.train(params, dtrain, num_boost_round=num_rounds, xgb_model=base)


def _booster_bytes(booster: Any) -> bytes | None:
    return None if booster is None else bytes(booster.save_raw("ubj"))


def _booster_from(raw: bytes | None) -> Any:
    if raw is None:
        return None
    xgb = xgboost()

    booster = xgb.Booster()
    booster.load_model(bytearray(raw))
    return booster


class XGBCostModel(CostModel):
    """Gradient-boosted trees with a pairwise ranking objective on normalised throughput, one group per task.

    ``base``: a booster trained elsewhere (the shipped model, :func:`~autosched.cost_model.load_pretrained`).
    It ranks the candidates until records arrive; from then on each update trains ``num_rounds`` trees of the
    model's own on top of it on its records, so that the task's own measurements correct the base (on held-out
    workloads of the shipped logs, fewer trees on top ranked worse; as many ranked as well as a cold model).
    ``origin`` says in words where the model started (the tuner prints it)."""

    def __init__(self, seed: int = 0, num_rounds: int = 80, max_depth: int = 6, learning_rate: float = 0.2,
                 base: Any = None, origin: str = ""):
        self.seed = seed
        self.num_rounds = num_rounds
        self.params = xgb_params(seed, max_depth, learning_rate)
        self.base = base
        self.origin = origin or ("a pretrained base model" if base is not None else "cold (no records yet)")
        self.cache = FeatureCache()
        self._x = np.zeros((0, N_FEATURES), dtype=np.float32)
        self._keys: list[str] = []  # workload key of each training row
        self._costs: list[float] = []  # seconds, inf for a failed candidate
        self._builds: list[float] = []  # seconds each candidate took to build, 0 where unknown
        self._booster = None
        self._build_booster = None  # log build seconds from the same features (predict_build_seconds)
        self._untrained_why = ""  # why the last fit trained nothing, once records exist
        self._warned = False

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["cache"] = FeatureCache()
        state["_booster"] = _booster_bytes(self._booster)
        state["_build_booster"] = _booster_bytes(self._build_booster)
        state["base"] = _booster_bytes(self.base)
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("_untrained_why", "")
        state.setdefault("_warned", False)
        state.setdefault("origin", "")
        state.setdefault("_builds", [0.0] * len(state.get("_costs", [])))
        state["_booster"] = _booster_from(state.pop("_booster"))
        state["_build_booster"] = _booster_from(state.pop("_build_booster", None))
        state["base"] = _booster_from(state.get("base"))
        self.__dict__.update(state)

    @property
    def trained(self) -> bool:
        """True when the scores mean more than chance: trained on records, or started from a base model."""
        return self._booster is not None or self.base is not None

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Add the measured candidates and retrain on everything seen so far (trees are cheap at this size)."""
        if not inputs:
            return
        self._x = np.concatenate([self._x, self.cache.features(inputs)])
        self._keys += [inp.task.workload_key for inp in inputs]
        self._costs += [res.cost for res in results]
        self._builds += [float(getattr(res, "build_seconds", 0.0) or 0.0) for res in results]
        self._fit(self._x, _throughput(self._keys, self._costs), self._keys)
        self._fit_build_time()

    def _fit_build_time(self) -> None:
        builds = np.asarray(self._builds)
        known = builds > 0
        if known.sum() < MIN_BUILD_RECORDS:
            return
        xgb = xgboost()

        params = {"objective": "reg:squarederror", "max_depth": 4, "eta": 0.3, "seed": self.seed,
                  "nthread": 1, "verbosity": 0}
        self._build_booster = xgb.train(params, xgb.DMatrix(self._x[known], label=np.log(builds[known])),
                                        num_boost_round=30)

    def predict_build_seconds(self, candidates: Sequence[MeasureInput]) -> np.ndarray | None:
        """Seconds each candidate is expected to take to build, learned from the builds of this model's
        records (the same features); None before ``MIN_BUILD_RECORDS`` builds."""
        if self._build_booster is None or not candidates:
            return None
        xgb = xgboost()

        return np.exp(self._build_booster.predict(xgb.DMatrix(self.cache.features(candidates))))

    def build_budget(self, workload_key: str, factor: float, floor: float = 0.5) -> float:
        """``factor`` times the median build time of the fastest quarter of the task's measured kernels, at
        least ``floor`` seconds (only ``floor`` before one was measured)."""
        done = sorted((c, b) for k, c, b in zip(self._keys, self._costs, self._builds)
                      if k == workload_key and np.isfinite(c) and b > 0)
        if not done:
            return floor
        best = [b for _, b in done[: max(1, len(done) // 4)]]
        return max(floor, factor * float(np.median(best)))

    def _fit(self, x: np.ndarray, y: np.ndarray, groups: list[str]) -> None:
        if len(y) < 2 or float(np.max(y)) <= 0.0:
            self._untrained_why = (f"only {len(y)} measured candidate" if len(y) < 2 else
                                   f"none of the {len(y)} measured candidates has a time (all failed)")
            return
        self._untrained_why = ""
        self._check_base(x, y, groups)
        self._booster = train_ranker(self.params, x, y, groups, self.num_rounds, base=self.base)

    def _check_base(self, x: np.ndarray, y: np.ndarray, groups: list[str]) -> None:
        """Drop the base model when it ranks the records it has not seen, the tasks' own, no better than
        ``BASE_MIN_TAU`` (Kendall's tau, averaged over tasks with ``BASE_CHECK_RECORDS`` records or more): trees
        on top of a base that orders a task's kernels backwards learn slower than a cold model (the figures:
        docs/search.md, "Which cost model")."""
        if self.base is None:
            return
        keys = np.asarray(groups)
        taus = []
        for key in np.unique(keys):
            rows = np.flatnonzero(keys == key)[-BASE_CHECK_MAX_RECORDS:]
            if len(rows) >= BASE_CHECK_RECORDS and np.ptp(y[rows]) > 0:
                tau = kendall_tau(y[rows], self.base.predict(xgboost().DMatrix(x[rows])))
                taus.append(tau if np.isfinite(tau) else 0.0)
        if taus and float(np.mean(taus)) < BASE_MIN_TAU:
            log.info("cost model: %s ranks this task's %d measured candidates with Kendall tau %.2f (below %.2f): "
                     "dropped; the model learns from the task's records alone", self.origin, len(y),
                     float(np.mean(taus)), BASE_MIN_TAU)
            self.origin = f"cold (dropped {self.origin}: tau {np.mean(taus):.2f} on the task's records)"
            self.base = None

    def feature_gain(self) -> dict[str, float]:
        """Mean gain of the splits on each feature (``FEATURE_NAMES``) the trees use, largest first: what the model
        relies on most when it ranks candidates."""
        booster = self._booster if self._booster is not None else self.base
        if booster is None:
            return {}
        gain = booster.get_score(importance_type="gain")  # keys "f<index>"
        return dict(sorted(((FEATURE_NAMES[int(k[1:])], v) for k, v in gain.items()), key=lambda kv: -kv[1]))

    def predict(self, candidates: Sequence[MeasureInput]) -> np.ndarray:
        if not candidates:
            return np.zeros(0)
        x = self.cache.features(candidates)
        booster = self._booster if self._booster is not None else self.base
        if booster is None:
            # before any record a random order is all there is; after records it is a failure to report
            if self._costs and not self._warned:
                self._warned = True
                log.warning("the XGBoost cost model has %d records but is not trained (%s), so it ranks "
                            "candidates at random; look at why the candidates failed (autosched db list --failed)",
                            len(self._costs), self._untrained_why or "no fit yet")
            return np.random.default_rng(self.seed).random(len(candidates))
        xgb = xgboost()

        return booster.predict(xgb.DMatrix(x))
