"""What a tuning database answers, written once over the :class:`~autosched.database.interface.Database`
interface (``db`` below is any implementation): committing measurements, the best records, the records
of a task or a batch of traces, and the per-task figures that reports show."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from autosched.database.common import (
    ORDERS,
    Records,
    TuningRun,
    Where,
    WorkloadInfo,
    check_on_conflict,
    target_key,
)
from autosched.database.record import TuningRecord, producer_info, trace_text
from autosched.result import ResultFlag
from autosched.target import Target

#: repeats of one record that differ by more than this share of their median are not a figure to trust
SPREAD_LIMIT = 0.5

#: traces asked about in one ``select_records`` (keeps statements small)
_BATCH = 2000


def trusted(rec: Any) -> bool:
    """Whether a successful record's time can be a best: not marked noisy (disturbed while timed, or a
    re-measure that failed or disagreed) and its repeats within :data:`SPREAD_LIMIT` of each other."""
    return ResultFlag.NOISY not in (rec.flags or ()) and rec.spread <= SPREAD_LIMIT


def cpu_agnostic(key: str) -> tuple:
    """A target key without its CPU (mcpu, mattr): what must still match when reusing other CPUs' records."""
    try:
        t = Target(key)
    except ValueError:
        return (key,)
    return (t.kind, tuple(sorted((k, v) for k, v in t.options.items() if k not in ("mcpu", "mattr"))))


def key_of(task_or_key: Any) -> str:
    """The workload key of a Task, or a key (64 hex digits) as it is."""
    if isinstance(task_or_key, str) and len(task_or_key) == 64 and all(c in "0123456789abcdef"
                                                                      for c in task_or_key):
        return task_or_key
    key = getattr(task_or_key, "workload_key", None)
    if key is None:
        raise TypeError(f"expected a Task or a workload key (64 hex digits), got {task_or_key!r}")
    return key


def target_of(task_or_key: Any, target: Any) -> str:
    """The target key asked about: ``target``, else the task's, else the host's."""
    if target is not None:
        return target_key(target)
    t = getattr(task_or_key, "target", None)
    return t.key if t is not None else target_key("llvm")


def where(task_or_key: Any = None, target: Any = None, *, workload_name: str | None = None,
          ok: bool | None = None, run: Any = None, since: float | None = None,
          until: float | None = None) -> Where:
    """The :class:`Where` of the filters users give: a Task means its workload on its target (unless
    ``target`` says otherwise), a workload key means it on every target."""
    if target is None and task_or_key is not None and not isinstance(task_or_key, str):
        target = getattr(task_or_key, "target", None)  # a Task: its workload on its target
    return Where(workload_key=None if task_or_key is None else key_of(task_or_key),
                 target=None if target is None else target_key(target), workload_name=workload_name, ok=ok,
                 run_id=None if run is None else (run.id if isinstance(run, TuningRun) else int(run)),
                 since=since, until=until)


# ---------------------------------------------------------------------- committing measurements
def commit(db: Records, task: Any, trace: Any, result: Any, *, run: TuningRun | int | None = None,
           on_conflict: str = "replace") -> TuningRecord:
    """Store one measured candidate; returns its record.

    A candidate is (workload key, target key, trace); if it is already stored, ``on_conflict`` says what
    wins: ``"replace"`` (default: the newer measurement), ``"skip"`` (the stored one) or ``"keep_better"``
    (the lower cost; a success over a failure).
    """
    rec = TuningRecord.from_measurement(task, trace, result)
    commit_many(db, [rec], run=run, on_conflict=on_conflict)
    return rec


def commit_many(db: Records, items: Iterable[Any], *, run: TuningRun | int | None = None,
                on_conflict: str = "replace") -> int:
    """Store a batch in one transaction. ``items``: ``(task, trace, result)`` triples, ``(MeasureInput,
    MeasureResult)`` pairs, or :class:`TuningRecord` objects. Returns how many it stored: all of them,
    except candidates already stored that ``on_conflict`` kept as they were (``"skip"``: each one;
    ``"keep_better"``: those the new measurement does not beat), counted exactly even while other
    processes commit the same candidates (where the storage counts so: SQL does)."""
    check_on_conflict(on_conflict)
    prod = producer_info()
    recs = []
    for item in items:
        if not isinstance(item, TuningRecord):
            task, trace, result = (item[0].task, item[0].trace, item[1]) if len(item) == 2 else item
            item = TuningRecord.from_measurement(task, trace, result, prod)
        recs.append(item)
    return db.commit_records(recs, run=run, on_conflict=on_conflict)


# ---------------------------------------------------------------------- records
def records(db: Records, task_or_key: Any = None, target: Any = None, *, workload_name: str | None = None,
            ok: bool | None = None, run: Any = None, since: float | None = None, until: float | None = None,
            order: str = "id", limit: int | None = None) -> list[TuningRecord]:
    """Records matching every filter given: a workload (a Task: its workload on its target, unless
    ``target`` says otherwise; a key: on every target), a target, a workload name, success (``ok=True``)
    or failure (``ok=False``), a tuning run, a time range [since, until).
    ``order``: ``"id"`` (insertion), ``"cost"`` (fastest first; failures last), ``"time"`` (newest first)."""
    if order not in ORDERS:
        raise ValueError(f"order must be 'id', 'cost' or 'time', got {order!r}")
    w = where(task_or_key, target, workload_name=workload_name, ok=ok, run=run, since=since, until=until)
    return db.select_records(w, order=order, limit=limit)


def iter_records(db: Records, task_or_key: Any = None, target: Any = None, *, limit: int | None = None,
                 batch: int = 1000, **filters: Any) -> Iterator[TuningRecord]:
    """Records in insertion order (filters as in :func:`records`), read ``batch`` at a time (a database
    holds no transaction open between batches)."""
    w = where(task_or_key, target, **filters)
    last, left = 0, limit
    while left is None or left > 0:
        n = batch if left is None else min(batch, left)
        recs = db.select_records(replace(w, after_id=last), limit=n)
        yield from recs
        if len(recs) < n:
            return
        last = recs[-1].id
        if left is not None:
            left -= len(recs)


def best(db: Records, task_or_key: Any, target: Any = None, k: int = 1, *,
         allow_other_cpus: bool = False) -> list[TuningRecord]:
    """The ``k`` fastest successful records of a workload on a target, fastest first, trusted ones (see
    :func:`trusted`) before the others. Where some were timed with cold caches (``tune --model`` on a CPU
    times so: the ranking that holds inside a model), those are the ones compared: a cold time is never
    weighed against a warm one, which is shorter for the same kernel.

    ``target`` defaults to the task's (or the host's, for a bare key). Records are keyed by the target
    with its CPU, so a record tuned on another CPU is not returned, unless ``allow_other_cpus=True``
    and there is none for this CPU: then the fastest from other CPUs of the same target kind and options.
    """
    key, tkey = key_of(task_or_key), target_of(task_or_key, target)
    if k <= 0:
        return []
    out = _fastest(db, key, [tkey], k)
    if not out and allow_other_cpus:
        want = cpu_agnostic(tkey)
        others = [t for t in db.targets(key) if t != tkey and cpu_agnostic(t) == want]
        if others:
            out = _fastest(db, key, others, k)
    return out


def _fastest(db: Records, key: str, targets: list[str], k: int) -> list[TuningRecord]:
    """The ``k`` fastest trusted records, fastest first (those timed cold, where there are any); the untrusted
    ones only where too few others exist (then after them, fastest first: still shown, and flagged as they
    are)."""
    cold = any(db.select_records(Where(workload_key=key, target=t, ok=True, cold=True), limit=1) for t in targets)
    want = k
    while True:
        limit = 4 * want + 16
        recs = sorted((r for t in targets
                       for r in db.select_records(Where(workload_key=key, target=t, ok=True, cold=cold or None),
                                                  order="cost", limit=limit)), key=ORDERS["cost"])[:limit]
        good = [r for r in recs if trusted(r)]
        if len(good) >= k or len(recs) < limit:
            return (good + [r for r in recs if not trusted(r)])[:k]
        want = 4 * limit  # many untrusted records among the fastest: look further


def measured_records(db: Records, task: Any, traces: Iterable[Any], target: Any = None) -> list[TuningRecord]:
    """The stored records, for the task on its target, of those of ``traces`` already measured: what a
    tuner sharing the database must not measure again (one ``select_records`` per ``_BATCH`` traces)."""
    key, tkey = task.workload_key, target_of(task, target)
    texts = list(dict.fromkeys(trace_text(t) for t in traces))
    return [r for i in range(0, len(texts), _BATCH)
            for r in db.select_records(Where(workload_key=key, target=tkey, traces=tuple(texts[i:i + _BATCH])))]


# ---------------------------------------------------------------------- figures
def summarize(groups: Iterable[tuple]) -> list[dict[str, Any]]:
    """``stats()`` rows, per workload and target, by name, key and target, from groups of records alike:
    (workload key, name, args, target, error kind, flags, how many, best cost, first and last timestamps);
    one record is a group of one (:func:`group_of`), a storage may count groups itself (SQL's GROUP BY)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key, name, args, target, kind, flags, n, best, first, last in groups:
        row = out.setdefault((key, target), {"key": key, "name": name, "args": dict(args), "target": target,
                                             "records": 0, "ok": 0, "best_cost": None, "errors": {}, "flags": {},
                                             "first": first, "last": last})
        for flag in flags:
            row["flags"][flag] = row["flags"].get(flag, 0) + n
        row["records"] += n
        row["first"], row["last"] = min(row["first"], first), max(row["last"], last)
        if kind is None:
            row["ok"] += n
            if best is not None:
                row["best_cost"] = best if row["best_cost"] is None else min(row["best_cost"], best)
        else:
            row["errors"][kind] = row["errors"].get(kind, 0) + n
    return sorted(out.values(), key=lambda r: (r["name"], r["key"], r["target"]))


def group_of(r: TuningRecord) -> tuple:
    """One record as a group of :func:`summarize`."""
    return (r.workload_key, r.workload_name, r.workload_args, r.target, r.error_kind, r.flags, 1, r.cost,
            r.timestamp, r.timestamp)


def workloads(db: Records) -> list[WorkloadInfo]:
    """Every workload with records, with their count, by name (from ``db.stats()``)."""
    out: dict[str, WorkloadInfo] = {}
    for row in db.stats():
        info = out.setdefault(row["key"], WorkloadInfo(row["key"], row["name"], row["args"], None, 0))
        info.records += row["records"]
    return sorted(out.values(), key=lambda w: (w.name, w.key))
