"""``SQLDatabase``: the :class:`~autosched.database.interface.Database` interface over SQL, through
SQLAlchemy: an SQLite file (the default), PostgreSQL by URL, or a JSON-lines log read into an in-memory
SQLite (new records appended to the file). ``Database(url)`` opens one::

    db = Database()                              # $AUTOSCHED_DB or ~/.local/share/autosched/tuning.db
    db = Database("postgresql://me@dbhost/tuning")

The tables are ``schema.py``'s; ``versioning.py`` creates or upgrades them when a database is opened.
Writes to SQLite take the write lock up front (``BEGIN IMMEDIATE``) and wait up to ``busy_timeout``
for it, so several tuning processes can share one file; the file is in WAL mode, so readers never
block writers and a killed writer loses nothing it had committed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import statistics
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Integer, bindparam, create_engine, event, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.pool import StaticPool

from autosched.database import location as _location
from autosched.database import logs, query, versioning
from autosched.database.common import ORDERS, DatabaseError, TuningRun, Where, WorkloadInfo, check_on_conflict
from autosched.database.interface import Database, open_database
from autosched.database.query import cpu_agnostic as _cpu_agnostic  # noqa: F401 - search.tune imports it here
from autosched.database.record import TuningRecord, trace_digest
from autosched.database.schema import RecordRow, RunRow, WorkloadRow
from autosched.result import ResultFlag
from autosched.te.analysis import structural_hash

_R = RecordRow.__table__
_W = WorkloadRow.__table__
_RUN = RunRow.__table__
_BATCH = 2000  # rows per INSERT batch; keeps statements and memory small
_INSERT = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}  # with ON CONFLICT

#: the conditions of a Where's fields (all but ``ok``), each on a parameter named as the field
#: (``wid``: the workload key's row id; ``traces``: the trace texts' digests)
_CONDS = {
    "workload_key": lambda c: c.workload_id == bindparam("wid"),
    "target": lambda c: c.target == bindparam("target"),
    "workload_name": lambda c: c.workload_id.in_(select(_W.c.id).where(_W.c.name == bindparam("workload_name"))),
    "run_id": lambda c: c.run_id == bindparam("run_id"),
    "since": lambda c: c.timestamp >= bindparam("since"),
    "until": lambda c: c.timestamp < bindparam("until"),
    "traces": lambda c: c.trace_hash.in_(bindparam("traces", expanding=True)),
    "after_id": lambda c: c.id > bindparam("after_id"),
}

logger = logging.getLogger("autosched.database")
_OPEN: weakref.WeakSet[SQLDatabase] = weakref.WeakSet()


def _after_fork() -> None:  # pooled connections must not cross a fork
    for db in list(_OPEN):
        try:
            db.engine.dispose(close=False)
        except Exception as e:  # noqa: BLE001 - a fork must go on; the child then opens fresh connections
            logger.warning("after fork: could not drop the pooled connections of %s inherited from the parent "
                           "(%s: %s)", db, type(e).__name__, e)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _set_wal(cur: Any, timeout: float) -> None:
    """Switch an SQLite file to WAL. Changing the journal mode needs an exclusive lock and SQLite reports
    "database is locked" at once (its busy handler does not wait for it) when another process is opening
    the same new file: retry for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class SQLDatabase(Database):
    """A tuning database in SQL. ``url`` is anything :func:`location.resolve` accepts.

    ``create=False`` refuses to create a missing SQLite file (``FileNotFoundError``). ``busy_timeout`` is
    how long (seconds) an SQLite writer waits for another process's write to finish.
    """

    def __init__(self, url: str | os.PathLike | None = None, *, create: bool = True,
                 busy_timeout: float = 60.0, echo: bool = False):
        self.location = _location.resolve(url)
        loc = self.location
        self._closed = False
        self._wl_ids: dict[str, int] = {}
        self._wl_args: dict[int, tuple[str, str, dict]] = {}
        self._stmts: dict[tuple, Any] = {}  # built once: building a statement costs more than running it
        self._log_path: Path | None = None  # where commits are appended (a log location, once read)
        self._log_file: IO[str] | None = None
        self._mem_lock = threading.RLock() if loc.in_memory else None
        if loc.sqlite_path is not None:
            if not loc.sqlite_path.exists():
                if not create:
                    raise FileNotFoundError(f"no tuning database at {loc.sqlite_path}")
                loc.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        if loc.log_path is not None and not loc.log_path.exists() and not create:
            raise FileNotFoundError(f"no tuning log at {loc.log_path}")
        self.dialect = loc.url.split(":", 1)[0].split("+", 1)[0]
        kwargs: dict[str, Any] = {"echo": echo}
        if self.dialect == "sqlite":
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": busy_timeout}
            if loc.in_memory:
                kwargs["poolclass"] = StaticPool  # one connection: the in-memory database lives in it
        else:
            kwargs["pool_pre_ping"] = True
        try:
            self.engine: Engine = create_engine(loc.url, **kwargs)
        except ImportError as e:
            raise DatabaseError(f"cannot open {self}: a driver is missing ({e}); for PostgreSQL install "
                                f"autosched[postgres] (psycopg 3)") from None
        if self.dialect == "sqlite":
            self._setup_sqlite(busy_timeout)
        try:  # create= is about files and servers
            versioning.prepare(self._read, self._write, self.dialect, str(self), create or loc.in_memory)
        except DatabaseError:
            self.engine.dispose()
            raise
        except Exception as e:
            self.engine.dispose()
            if self.dialect == "sqlite" and "not a database" in str(e):  # a file, but not SQLite's
                raise DatabaseError(f"{loc.sqlite_path} is not a tuning database (not an SQLite file); give a "
                                    f"new path to create one, an autosched database, or a .jsonl tuning log") from e
            raise DatabaseError(f"cannot open tuning database {self}: {type(e).__name__}: "
                                f"{str(e).strip().splitlines()[0]}") from e
        _OPEN.add(self)
        if loc.log_path is not None:
            if loc.log_path.exists():
                report = logs.import_(self, loc.log_path, on_conflict="replace", _quiet=True)
                if report.errors:
                    logger.warning("%s", report)
            else:
                loc.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_path = loc.log_path  # what is committed from now on is appended

    # ------------------------------------------------------------------ engine setup
    def _setup_sqlite(self, busy_timeout: float) -> None:
        in_memory = self.location.in_memory

        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_conn, _record):
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (see _on_begin)
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            cur.execute("PRAGMA foreign_keys = ON")
            if not in_memory:
                _set_wal(cur, busy_timeout)
                # in WAL mode NORMAL loses nothing committed when a process dies, only on power loss
                cur.execute("PRAGMA synchronous = NORMAL")
            cur.close()

        @event.listens_for(self.engine, "begin")
        def _on_begin(conn):
            mode = conn.get_execution_options().get("autosched_mode")
            if mode == "write":
                # writers take the lock at BEGIN, so a busy database makes them wait (busy_timeout) instead
                # of failing when a read transaction would have to upgrade to a write one
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            elif mode != "read":  # reads run each statement in its own implicit transaction (autocommit)
                conn.exec_driver_sql("BEGIN")

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        self._check_open()
        with self._mem_lock or nullcontext(), self.engine.connect() as conn:
            conn = conn.execution_options(autosched_mode="read")
            with conn.begin():
                yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        self._check_open()
        with self._mem_lock or nullcontext(), self.engine.connect() as conn:
            conn = conn.execution_options(autosched_mode="write")
            with conn.begin():
                yield conn

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseError(f"{self} is closed")

    # ------------------------------------------------------------------ writing records
    def commit_records(self, records: Iterable[TuningRecord], *, run: TuningRun | int | None = None,
                       on_conflict: str = "skip") -> int:
        """Store records as they are (e.g. read from a log), in one transaction; returns how many rows it
        wrote (inserted or updated), counted by the statement (``RETURNING``): exact while other processes
        commit the same candidates."""
        check_on_conflict(on_conflict)
        records = list(records)
        if not records:
            return 0
        run_id = run.id if isinstance(run, TuningRun) else run
        rows = [self._row(rec, self._ensure_workload(rec), run_id) for rec in records]
        written = 0
        with self._write() as conn:
            stmt = self._upsert(on_conflict)
            for i in range(0, len(rows), _BATCH):
                written += len(conn.execute(stmt, rows[i:i + _BATCH]).all())
        if self._log_path is not None:
            if self._log_file is None:
                self._log_file = open(self._log_path, "a", encoding="utf-8")  # noqa: SIM115 - until close()
            self._log_file.write("".join(r.dumps() + "\n" for r in records))  # one write: lines stay whole
            self._log_file.flush()
        return written

    def _ensure_workload(self, rec: TuningRecord) -> int:
        wid = self._workload_id(rec.workload_key)
        if wid is not None:
            return wid
        try:  # the computation's structural form: finds one computation under several names
            shash = structural_hash(rec.task().outputs)
        except Exception:  # noqa: BLE001 - a workload not registered here (a log's): stored without it
            shash = None
        with self._write() as conn:
            stmt = self._insert(_W).values(key=rec.workload_key, name=rec.workload_name,
                                           args=json.dumps(rec.workload_args, separators=(",", ":")),
                                           hash=shash, created_at=time.time())
            conn.execute(stmt.on_conflict_do_nothing(index_elements=["key"]))
        return self._workload_id(rec.workload_key)

    def _workload_id(self, key: str) -> int | None:
        wid = self._wl_ids.get(key)
        if wid is None:
            with self._read() as conn:
                row = conn.execute(self._cached(("workload_id",), lambda: select(_W.c.id).where(
                    _W.c.key == bindparam("key"))), {"key": key}).first()
            if row is None:
                return None
            wid = self._wl_ids[key] = int(row[0])
        return wid

    def _insert(self, table):
        if self.dialect not in _INSERT:
            raise DatabaseError(f"{self}: only SQLite and PostgreSQL are supported, not {self.dialect}")
        return _INSERT[self.dialect](table)

    def _cached(self, key: tuple, build):
        stmt = self._stmts.get(key)
        if stmt is None:
            stmt = self._stmts[key] = build()
        return stmt

    @staticmethod
    def _row(rec: TuningRecord, wid: int, run_id: int | None) -> dict:
        ok = rec.ok
        costs = [float(c) for c in rec.costs]
        return {
            "workload_id": wid,
            "target": rec.target,
            "trace": rec.trace_json,
            "trace_hash": trace_digest(rec.trace_json),
            # several times faster than json.dumps (bulk imports spend time here)
            "costs": "[" + ",".join(map(repr, costs)) + "]" if all(map(math.isfinite, costs)) else json.dumps(costs),
            "cost": statistics.median(rec.costs) if ok else None,
            "mean_cost": sum(rec.costs) / len(rec.costs) if ok else None,
            "error_kind": rec.error_kind,
            "error_msg": rec.error_msg or None,
            "build_seconds": rec.build_seconds,
            "run_seconds": rec.run_seconds,
            "timestamp": rec.timestamp,
            "record_version": rec.version,
            "autosched_version": rec.autosched_version,
            "llvm_version": rec.llvm_version,
            "host_cpu": rec.host_cpu,
            "run_id": run_id,
            "flags": ",".join(rec.flags) or None,
            "host": None if rec.host == "unknown" else rec.host,
            "node_id": rec.node_id,
            "device": json.dumps(rec.device, sort_keys=True) if rec.device else None,
        }

    _UPDATABLE = ("costs", "cost", "mean_cost", "error_kind", "error_msg", "build_seconds", "run_seconds",
                  "timestamp", "record_version", "autosched_version", "llvm_version", "host_cpu", "flags",
                  "host", "node_id", "device")

    def _upsert(self, on_conflict: str):
        return self._cached(("upsert", on_conflict), lambda: self._make_upsert(on_conflict))

    def _make_upsert(self, on_conflict: str):
        ins = self._insert(_R)
        cols = ["workload_id", "target", "trace_hash"]
        if on_conflict == "skip":
            stmt = ins.on_conflict_do_nothing(index_elements=cols)
        else:
            set_ = {c: ins.excluded[c] for c in self._UPDATABLE}
            # a record stays with the run that first stored it (a run's records never move to another run,
            # so its trials_done stays true); one stored outside any run joins the run that measures it again
            set_["run_id"] = func.coalesce(_R.c.run_id, ins.excluded.run_id)
            better = None
            if on_conflict == "keep_better":
                better = ins.excluded.cost.isnot(None) & (_R.c.cost.is_(None) | (ins.excluded.cost < _R.c.cost))
            stmt = ins.on_conflict_do_update(index_elements=cols, set_=set_, where=better)
        # RETURNING gives the rows written, none for a conflict left alone: counted exactly under concurrency
        return stmt.returning(_R.c.id)

    # ------------------------------------------------------------------ reading records
    def select_records(self, where: Where, *, order: str = "id", limit: int | None = None) -> list[TuningRecord]:
        if order not in ORDERS:
            raise ValueError(f"order must be 'id', 'cost' or 'time', got {order!r}")
        params = self._params(where)
        if params is None:
            return []
        if limit is not None:
            params["k"] = limit
        stmt = self._cached(("select", *self._shape(where), order, limit is not None),
                            lambda: self._select(where, order, limit is not None))
        with self._read() as conn:
            return [self._record(conn, r) for r in conn.execute(stmt, params)]

    def count_records(self, where: Where) -> int:
        params = self._params(where)
        if params is None:
            return 0
        stmt = self._cached(("count", *self._shape(where)),
                            lambda: select(func.count()).select_from(_R).where(*self._conds(where)))
        with self._read() as conn:
            return int(conn.execute(stmt, params).scalar_one())

    @staticmethod
    def _shape(where: Where) -> tuple:
        """What a statement for ``where`` depends on: which fields are given (and ``ok``'s value)."""
        return tuple(getattr(where, f) is not None for f in _CONDS) + (where.ok, where.cold)

    def _params(self, where: Where) -> dict | None:
        """The values of a statement's parameters; None when the workload is not in the database."""
        params: dict[str, Any] = {f: getattr(where, f) for f in _CONDS if getattr(where, f) is not None}
        if where.workload_key is not None:
            wid = self._workload_id(params.pop("workload_key"))
            if wid is None:
                return None
            params["wid"] = wid
        if where.traces is not None:
            params["traces"] = [trace_digest(t) for t in where.traces]
        return params

    @staticmethod
    def _conds(where: Where) -> list:
        conds = [cond(_R.c) for f, cond in _CONDS.items() if getattr(where, f) is not None]
        if where.ok is not None:
            conds.append(_R.c.cost.isnot(None) if where.ok else _R.c.cost.is_(None))
        if where.cold is not None:  # flags are stored comma-joined
            cold = _R.c.flags.like(f"%{ResultFlag.COLD}%")
            conds.append(cold if where.cold else or_(_R.c.flags.is_(None), ~cold))
        return conds

    def _select(self, where: Where, order: str, limited: bool):
        c = _R.c
        # with successful records only, (cost, id) is the best index's order: a range scan, no sort
        by = {"id": (c.id,), "cost": (c.cost, c.id) if where.ok else (c.cost.is_(None), c.cost, c.id),
              "time": (c.timestamp.desc(), c.id)}[order]
        stmt = select(_R).where(*self._conds(where)).order_by(*by)
        return stmt.limit(bindparam("k", type_=Integer)) if limited else stmt

    def _record(self, conn: Connection, r: Any) -> TuningRecord:
        wl = self._wl_args.get(r.workload_id)
        if wl is None:
            row = conn.execute(select(_W.c.key, _W.c.name, _W.c.args).where(_W.c.id == r.workload_id)).one()
            wl = self._wl_args[r.workload_id] = (row.key, row.name, json.loads(row.args))
        return TuningRecord(
            workload_key=wl[0], workload_name=wl[1], workload_args=dict(wl[2]), target=r.target,
            trace_json=r.trace, costs=json.loads(r.costs), error_kind=r.error_kind, error_msg=r.error_msg or "",
            build_seconds=r.build_seconds, run_seconds=r.run_seconds, timestamp=r.timestamp,
            autosched_version=r.autosched_version, llvm_version=r.llvm_version, host_cpu=r.host_cpu,
            version=r.record_version, id=r.id, run_id=r.run_id,
            flags=r.flags.split(",") if r.flags else [], host=r.host or "unknown", node_id=r.node_id,
            device=json.loads(r.device) if r.device else {})

    def stats(self, where: Where | None = None) -> list[dict[str, Any]]:
        where = where or Where()
        params = self._params(where)
        if params is None:
            return []
        stmt = (select(_W.c.key, _W.c.name, _W.c.args, _R.c.target, _R.c.error_kind, _R.c.flags, func.count(),
                       func.min(_R.c.cost), func.min(_R.c.timestamp), func.max(_R.c.timestamp))
                .join(_W, _W.c.id == _R.c.workload_id).where(*self._conds(where))
                .group_by(_W.c.key, _W.c.name, _W.c.args, _R.c.target, _R.c.error_kind, _R.c.flags))
        with self._read() as conn:
            return query.summarize((key, name, json.loads(args), target, kind, flags.split(",") if flags else [],
                                    int(n), best, first, last)
                                   for key, name, args, target, kind, flags, n, best, first, last
                                   in conn.execute(stmt, params).all())

    def workloads(self) -> list[WorkloadInfo]:
        """Every workload with its record count (and its computation's structural hash), by name."""
        counts = (select(_R.c.workload_id, func.count().label("n")).group_by(_R.c.workload_id).subquery())
        stmt = (select(_W.c.key, _W.c.name, _W.c.args, _W.c.hash, func.coalesce(counts.c.n, 0))
                .outerjoin(counts, counts.c.workload_id == _W.c.id).order_by(_W.c.name, _W.c.id))
        with self._read() as conn:
            return [WorkloadInfo(k, n, json.loads(a), h, int(c)) for k, n, a, h, c in conn.execute(stmt)]

    # ------------------------------------------------------------------ tuning runs
    def start_run(self, policy: str, *, seed: int | None = None, trials: int | None = None,
                  target: Any = None, config: dict | None = None) -> TuningRun:
        run = TuningRun.new(policy, seed=seed, trials=trials, target=target, config=config)
        values = {**run.__dict__, "config": json.dumps(run.config, sort_keys=True, default=str)}
        del values["id"]
        with self._write() as conn:
            run.id = int(conn.execute(_RUN.insert().values(**values)).inserted_primary_key[0])
        return run

    def end_run(self, run: TuningRun | int, *, trials_done: int | None = None, status: str = "done") -> None:
        """Mark a run ended; ``trials_done`` defaults to the number of records committed with it."""
        rid = run.id if isinstance(run, TuningRun) else int(run)
        with self._write() as conn:
            if trials_done is None:
                trials_done = int(conn.execute(select(func.count()).select_from(_R)
                                               .where(_R.c.run_id == rid)).scalar_one())
            now = time.time()
            conn.execute(update(_RUN).where(_RUN.c.id == rid).values(trials_done=trials_done, status=status,
                                                                      ended_at=now))
        if isinstance(run, TuningRun):
            run.trials_done, run.status, run.ended_at = trials_done, status, now

    def runs(self, limit: int | None = None) -> list[TuningRun]:
        """Tuning runs, newest first."""
        stmt = select(_RUN).order_by(_RUN.c.id.desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._read() as conn:
            return [TuningRun(id=r.id, policy=r.policy, seed=r.seed, trials_asked=r.trials_asked,
                              trials_done=r.trials_done, target=r.target, status=r.status,
                              started_at=r.started_at, ended_at=r.ended_at,
                              config=json.loads(r.config or "{}"),
                              host=r.host, autosched_version=r.autosched_version)
                    for r in conn.execute(stmt)]

    # ------------------------------------------------------------------ upkeep
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

    # ------------------------------------------------------------------ lifecycle
    @property
    def schema_version(self) -> int:
        with self._read() as conn:
            return versioning.read_version(conn, str(self)) or 0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self.engine.dispose()
        _OPEN.discard(self)

    def __reduce__(self):
        # another process (a multiprocessing or Ray worker) opens the same database itself
        loc = self.location
        if loc.log_path is None and loc.sqlite_path is None and loc.url.startswith("sqlite"):
            raise TypeError(f"{self!r} is in memory: it cannot be sent to another process")
        return (Database, (str(loc.log_path or loc.sqlite_path or loc.url),))

    def __str__(self) -> str:
        loc = self.location
        if loc.log_path is not None:
            return str(loc.log_path)
        if loc.sqlite_path is not None:
            return str(loc.sqlite_path)
        if loc.url == "sqlite://":
            return "sqlite:// (in memory)"
        return make_url(loc.url).render_as_string(hide_password=True)

    def __repr__(self) -> str:
        return f"Database({str(self)!r})"


__all__ = ["Database", "SQLDatabase", "open_database"]

