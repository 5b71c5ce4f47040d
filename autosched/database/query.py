"""Reading a ``Database``: best records, filtered record lists and counts, workloads, statistics, gc."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from autosched.database.common import (
    _BATCH,
    _BEST,
    _MEASURED,
    _R,
    _RECORDS_OF,
    _RUN,
    _W,
    TuningRun,
    WorkloadInfo,
    _cpu_agnostic,
    _is_key,
    target_key,
)
from autosched.database.record import (
    TuningRecord,
    trace_digest,
    trace_text,
)
from autosched.result import ResultFlag

#: repeats of one record that differ by more than this share of their median are not a figure to trust
SPREAD_LIMIT = 0.5


def trusted(rec: Any) -> bool:
    """Whether a successful record's time can be a best: not marked noisy (disturbed while timed, or a
    re-measure that failed or disagreed) and its repeats within :data:`SPREAD_LIMIT` of each other."""
    return ResultFlag.NOISY not in (rec.flags or ()) and rec.spread <= SPREAD_LIMIT


class QueryMixin:
    """The queries of a Database: what it answers."""

    def _key_of(self, task_or_key: Any) -> str:
        if _is_key(task_or_key):
            return task_or_key
        key = getattr(task_or_key, "workload_key", None)
        if key is None:
            raise TypeError(f"expected a Task or a workload key (64 hex digits), got {task_or_key!r}")
        return key

    def _target_of(self, task_or_key: Any, target: Any) -> str:
        if target is not None:
            return target_key(target)
        t = getattr(task_or_key, "target", None)
        if t is not None:
            return t.key
        return target_key("llvm")

    def best(self, task_or_key: Any, target: Any = None, k: int = 1, *,
             allow_other_cpus: bool = False) -> list[TuningRecord]:
        """The ``k`` fastest successful records of a workload on a target, fastest first.

        ``target`` defaults to the task's (or the host's, for a bare key). Records are keyed by the target
        with its CPU, so a record tuned on another CPU is not returned, unless ``allow_other_cpus=True``
        and there is none for this CPU: then the fastest from other CPUs of the same target kind and options.
        """
        key = self._key_of(task_or_key)
        tkey = self._target_of(task_or_key, target)
        wid = self._workload_id(key)
        if wid is None or k <= 0:
            return []
        with self._read() as conn:
            out = self._best(conn, wid, [tkey], k)
            if not out and allow_other_cpus:
                want = _cpu_agnostic(tkey)
                others = [t for t in self._targets(conn, wid) if t != tkey and _cpu_agnostic(t) == want]
                if others:
                    out = self._best(conn, wid, others, k)
        return out

    def _best(self, conn: Connection, wid: int, targets: list[str], k: int) -> list[TuningRecord]:
        """The ``k`` fastest trusted records (see :func:`trusted`), fastest first; the untrusted ones only
        where too few others exist (then after them, fastest first: still shown, and flagged as they are)."""
        want = k
        while True:
            limit = 4 * want + 16
            if len(targets) == 1:
                rows = conn.execute(_BEST, {"wid": wid, "target": targets[0], "k": limit})
            else:
                stmt = (select(_R).where(_R.c.workload_id == wid, _R.c.target.in_(targets),
                                         _R.c.cost.isnot(None)).order_by(_R.c.cost, _R.c.id).limit(limit))
                rows = conn.execute(stmt)
            recs = [self._record(conn, r) for r in rows]
            good = [r for r in recs if trusted(r)]
            if len(good) >= k or len(recs) < limit:
                return (good + [r for r in recs if not trusted(r)])[:k]
            want = 4 * limit  # many untrusted records among the fastest: look further

    def _targets(self, conn: Connection, wid: int) -> list[str]:
        stmt = select(_R.c.target).where(_R.c.workload_id == wid, _R.c.cost.isnot(None)).distinct()
        return sorted(r[0] for r in conn.execute(stmt))

    def targets(self, task_or_key: Any = None) -> list[str]:
        """Target keys with successful records (of one workload, or of all)."""
        if task_or_key is None:
            with self._read() as conn:
                stmt = select(_R.c.target).where(_R.c.cost.isnot(None)).distinct()
                return sorted(r[0] for r in conn.execute(stmt))
        wid = self._workload_id(self._key_of(task_or_key))
        if wid is None:
            return []
        with self._read() as conn:
            return self._targets(conn, wid)

    def _record(self, conn: Connection, r: Any) -> TuningRecord:
        wl = self._wl_args.get(r.workload_id)
        if wl is None:
            row = conn.execute(select(_W.c.key, _W.c.name, _W.c.args).where(_W.c.id == r.workload_id)).one()
            wl = self._wl_args[r.workload_id] = (row.key, row.name, json.loads(row.args))
        costs = json.loads(r.costs)
        return TuningRecord(
            workload_key=wl[0], workload_name=wl[1], workload_args=dict(wl[2]), target=r.target,
            trace_json=r.trace, costs=costs, error_kind=r.error_kind, error_msg=r.error_msg or "",
            build_seconds=r.build_seconds, run_seconds=r.run_seconds, timestamp=r.timestamp,
            autosched_version=r.autosched_version, llvm_version=r.llvm_version, host_cpu=r.host_cpu,
            version=r.record_version, id=r.id, run_id=r.run_id,
            flags=r.flags.split(",") if r.flags else [], host=r.host or "unknown", node_id=r.node_id)

    def _filters(self, task_or_key: Any, target: Any, workload_name: str | None, ok: bool | None,
                 run: Any, since: float | None, until: float | None) -> list | None:
        conds = []
        if task_or_key is not None:
            wid = self._workload_id(self._key_of(task_or_key))
            if wid is None:
                return None
            conds.append(_R.c.workload_id == wid)
        if target is None and not isinstance(task_or_key, str):
            task_target = getattr(task_or_key, "target", None)  # a Task means its workload on its target
            if task_target is not None:
                conds.append(_R.c.target == task_target.key)
        if target is not None:
            conds.append(_R.c.target == target_key(target))
        if workload_name is not None:
            conds.append(_R.c.workload_id.in_(select(_W.c.id).where(_W.c.name == workload_name)))
        if ok is True:
            conds.append(_R.c.cost.isnot(None))
        elif ok is False:
            conds.append(_R.c.cost.is_(None))
        if run is not None:
            conds.append(_R.c.run_id == (run.id if isinstance(run, TuningRun) else int(run)))
        if since is not None:
            conds.append(_R.c.timestamp >= since)
        if until is not None:
            conds.append(_R.c.timestamp < until)
        return conds

    def iter_records(self, task_or_key: Any = None, target: Any = None, *, workload_name: str | None = None,
                     ok: bool | None = None, run: Any = None, since: float | None = None,
                     until: float | None = None, limit: int | None = None,
                     batch: int = 1000) -> Iterator[TuningRecord]:
        """Records in insertion order, fetched in batches (no transaction stays open between batches)."""
        conds = self._filters(task_or_key, target, workload_name, ok, run, since, until)
        if conds is None:
            return
        last, left = 0, limit
        while left is None or left > 0:
            n = batch if left is None else min(batch, left)
            with self._read() as conn:
                rows = list(conn.execute(select(_R).where(*conds, _R.c.id > last).order_by(_R.c.id).limit(n)))
                recs = [self._record(conn, r) for r in rows]
            yield from recs
            if len(rows) < n:
                return
            last = rows[-1].id
            if left is not None:
                left -= len(rows)

    def records(self, task_or_key: Any = None, target: Any = None, *, workload_name: str | None = None,
                ok: bool | None = None, run: Any = None, since: float | None = None,
                until: float | None = None, order: str = "id",
                limit: int | None = None) -> list[TuningRecord]:
        """Records matching every filter given: a workload (a Task: its workload on its target, unless
        ``target`` says otherwise; a key: on every target), a target, a workload name,
        success (``ok=True``) or failure (``ok=False``), a tuning run, a time range [since, until).
        ``order``: ``"id"`` (insertion), ``"cost"`` (fastest first; failures last), ``"time"`` (newest
        first)."""
        if order == "id":
            return list(self.iter_records(task_or_key, target, workload_name=workload_name, ok=ok, run=run,
                                          since=since, until=until, limit=limit))
        orders = {"cost": (_R.c.cost.is_(None), _R.c.cost, _R.c.id), "time": (_R.c.timestamp.desc(), _R.c.id)}
        if order not in orders:
            raise ValueError(f"order must be 'id', 'cost' or 'time', got {order!r}")
        conds = self._filters(task_or_key, target, workload_name, ok, run, since, until)
        if conds is None:
            return []
        stmt = select(_R).where(*conds).order_by(*orders[order])
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._read() as conn:
            return [self._record(conn, r) for r in conn.execute(stmt)]

    def count(self, task_or_key: Any = None, target: Any = None, *, ok: bool | None = None) -> int:
        """How many records (of a workload, on a target, successful or failed when ``ok`` says)."""
        conds = self._filters(task_or_key, target, None, ok, None, None, None)
        if conds is None:
            return 0
        with self._read() as conn:
            return int(conn.execute(select(func.count()).select_from(_R).where(*conds)).scalar_one())

    def has_workload(self, task_or_key: Any) -> bool:
        """True when the database holds at least one record of this workload (on any target)."""
        wid = self._workload_id(self._key_of(task_or_key))
        if wid is None:
            return False
        with self._read() as conn:
            return conn.execute(select(_R.c.id).where(_R.c.workload_id == wid).limit(1)).first() is not None

    def measured_traces(self, task: Any, target: Any = None) -> set[str]:
        """Canonical trace texts already measured (successfully or not) for the task on its target:
        what a resumed tuning run must not measure again."""
        wid = self._workload_id(task.workload_key)
        if wid is None:
            return set()
        tkey = self._target_of(task, target)
        with self._read() as conn:
            rows = conn.execute(select(_R.c.trace).where(_R.c.workload_id == wid, _R.c.target == tkey))
            return {r[0] for r in rows}

    def measured_records(self, task: Any, traces: Iterable[Any], target: Any = None) -> list[TuningRecord]:
        """The stored records, for the task on its target, of those of ``traces`` already measured: what
        a tuner sharing the database must not measure again. One query per ``_BATCH`` traces, by the
        candidate index (workload, target, trace hash); never a scan of the task's records."""
        wid = self._workload_id(task.workload_key)
        if wid is None:
            return []
        tkey = self._target_of(task, target)
        hashes = list(dict.fromkeys(trace_digest(trace_text(t)) for t in traces))
        out: list[TuningRecord] = []
        with self._read() as conn:
            for i in range(0, len(hashes), _BATCH):
                rows = conn.execute(_RECORDS_OF, {"wid": wid, "target": tkey, "hashes": hashes[i:i + _BATCH]})
                out += [self._record(conn, r) for r in rows]
        return out

    def has_measured(self, task: Any, trace: Any, target: Any = None) -> bool:
        wid = self._workload_id(task.workload_key)
        if wid is None:
            return False
        tkey = self._target_of(task, target)
        h = trace_digest(trace_text(trace))
        with self._read() as conn:
            return conn.execute(_MEASURED, {"wid": wid, "target": tkey, "h": h}).first() is not None

    def workloads(self) -> list[WorkloadInfo]:
        """Every workload with its record count, by name."""
        counts = (select(_R.c.workload_id, func.count().label("n")).group_by(_R.c.workload_id).subquery())
        stmt = (select(_W.c.key, _W.c.name, _W.c.args, _W.c.hash, func.coalesce(counts.c.n, 0))
                .outerjoin(counts, counts.c.workload_id == _W.c.id).order_by(_W.c.name, _W.c.id))
        with self._read() as conn:
            return [WorkloadInfo(k, n, json.loads(a), h, int(c)) for k, n, a, h, c in conn.execute(stmt)]

    def stats(self) -> list[dict[str, Any]]:
        """Per workload and target: records, successful ones, the best cost, failures by error kind (cut-offs
        included, as ``cut_off``) and results by flag (``noisy``, ``unchecked``)."""
        stmt = (select(_W.c.key, _W.c.name, _W.c.args, _R.c.target, _R.c.error_kind, _R.c.flags, func.count(),
                       func.min(_R.c.cost), func.min(_R.c.timestamp), func.max(_R.c.timestamp))
                .join(_W, _W.c.id == _R.c.workload_id)
                .group_by(_W.c.key, _W.c.name, _W.c.args, _R.c.target, _R.c.error_kind, _R.c.flags))
        out: dict[tuple[str, str], dict[str, Any]] = {}
        with self._read() as conn:
            for key, name, args, target, kind, flags, n, best, first, last in conn.execute(stmt):
                row = out.setdefault((key, target), {"key": key, "name": name, "args": json.loads(args),
                                                     "target": target, "records": 0, "ok": 0, "best_cost": None,
                                                     "errors": {}, "flags": {}, "first": first, "last": last})
                for flag in (flags.split(",") if flags else []):
                    row["flags"][flag] = row["flags"].get(flag, 0) + int(n)
                row["records"] += int(n)
                row["first"], row["last"] = min(row["first"], first), max(row["last"], last)
                if kind is None:
                    row["ok"] += int(n)
                    if best is not None:
                        row["best_cost"] = best if row["best_cost"] is None else min(row["best_cost"], best)
                else:
                    row["errors"][kind] = row["errors"].get(kind, 0) + int(n)
        return sorted(out.values(), key=lambda r: (r["name"], r["key"], r["target"]))

    def gc(self, *, failed: bool = False, keep: int | None = None, dry_run: bool = False) -> dict[str, int]:
        """Remove what a database no longer needs; returns how many rows of each kind went (or would go).

        Always: workloads without records, and ended runs without records. ``failed=True``: failed records
        (a later run may then measure those candidates again). ``keep=K``: of the successful records, only
        the K fastest per workload and target stay (resume then re-measures nothing it kept, but may
        re-propose removed ones). SQLite files are compacted (VACUUM) afterwards.
        """
        if keep is not None and keep < 1:
            raise ValueError(f"gc: keep must be >= 1, got {keep}")
        removed = {"failed_records": 0, "slow_records": 0, "workloads": 0, "runs": 0}
        with self._write() as conn:
            if failed:
                q = _R.c.cost.is_(None)
                removed["failed_records"] = int(conn.execute(select(func.count()).select_from(_R).where(q))
                                                .scalar_one())
                if not dry_run:
                    conn.execute(_R.delete().where(q))
            if keep is not None:
                rank = (func.row_number().over(partition_by=(_R.c.workload_id, _R.c.target),
                                               order_by=(_R.c.cost, _R.c.id)).label("rank"))
                ranked = select(_R.c.id, rank).where(_R.c.cost.isnot(None)).subquery()
                ids = [r[0] for r in conn.execute(select(ranked.c.id).where(ranked.c.rank > keep))]
                removed["slow_records"] = len(ids)
                if not dry_run:
                    for i in range(0, len(ids), _BATCH):
                        conn.execute(_R.delete().where(_R.c.id.in_(ids[i:i + _BATCH])))
            used_w = select(_R.c.workload_id).distinct()
            used_r = select(_R.c.run_id).where(_R.c.run_id.isnot(None)).distinct()
            empty_w = _W.c.id.not_in(used_w)
            empty_r = (_RUN.c.id.not_in(used_r)) & (_RUN.c.status != "running")
            if dry_run:
                # what the deletions above would leave empty is not counted here: a dry run reports the
                # workloads and runs that are empty now
                removed["workloads"] = int(conn.execute(select(func.count()).select_from(_W).where(empty_w))
                                           .scalar_one())
                removed["runs"] = int(conn.execute(select(func.count()).select_from(_RUN).where(empty_r))
                                      .scalar_one())
            else:
                removed["workloads"] = conn.execute(_W.delete().where(empty_w)).rowcount
                removed["runs"] = conn.execute(_RUN.delete().where(empty_r)).rowcount
                self._wl_ids.clear()
                self._wl_args.clear()
        if not dry_run and self.dialect == "sqlite" and not self.location.in_memory:
            raw = self.engine.raw_connection()  # VACUUM cannot run inside the transaction SQLAlchemy begins
            try:
                raw.driver_connection.execute("VACUUM")
            finally:
                raw.close()
        return removed

