"""``Database``: every measured candidate, in SQLite (the default) or PostgreSQL, through SQLAlchemy.

    db = Database()                              # $AUTOSCHED_DB or ~/.local/share/autosched/tuning.db
    db = Database("postgresql://me@dbhost/tuning")
    db.commit(task, trace, result)               # one candidate (cheap: one short transaction)
    db.commit_many([(task, trace, result), ...]) # a batch in one transaction
    db.best(task, k=5)                           # successful records, fastest first
    db.measured_traces(task)                     # what a resumed run must not measure again
    db.measured_records(task, traces)            # which of a batch another tuner measured meanwhile
    db.export("out.jsonl", task=task); db.import_("in.jsonl")

Writes to SQLite take the write lock up front (``BEGIN IMMEDIATE``) and wait up to ``busy_timeout``
for it, so several tuning processes can share one file; the file is in WAL mode, so readers never
block writers and a killed writer loses nothing it had committed.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import IO, Any

from sqlalchemy import create_engine, event, func, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from autosched.database import location as _location
from autosched.database.common import (
    _BATCH,
    _R,
    _RUN,
    _W,
    _WORKLOAD_ID,
    ON_CONFLICT,
    DatabaseError,
    SchemaVersionError,
    TuningRun,
    WorkloadInfo,
    _costs_json,
    _cpu_agnostic,  # noqa: F401 - imported from here by search.tune
    logger,
    target_key,
)
from autosched.database.logs import ImportReport, LogMixin
from autosched.database.query import QueryMixin
from autosched.database.record import (
    LOG_VERSION,
    TuningRecord,
    producer_info,
    trace_digest,
)
from autosched.database.versioning import SchemaMixin

_OPEN: weakref.WeakSet[Database] = weakref.WeakSet()


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
    import sqlite3

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


class Database(SchemaMixin, QueryMixin, LogMixin):
    """A tuning database. See the module docstring; ``url`` is anything :func:`location.resolve` accepts.

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
        self._stmts: dict[tuple[str, bool], Any] = {}
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
        try:
            self._prepare_schema(create or loc.in_memory)  # create= is about files and servers
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
                report = self.import_(loc.log_path, on_conflict="replace", _quiet=True)
                if report.errors:
                    logger.warning("%s", report)
            else:
                loc.log_path.parent.mkdir(parents=True, exist_ok=True)

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

    # ------------------------------------------------------------------ workloads
    def _ensure_workload(self, key: str, name: str, args: dict, task: Any = None) -> int:
        wid = self._wl_ids.get(key)
        if wid is not None:
            return wid
        with self._read() as conn:
            row = conn.execute(_WORKLOAD_ID, {"key": key}).first()
        if row is None:
            shash = None
            if task is not None:
                from autosched.te.analysis import structural_hash

                shash = structural_hash(task.outputs)
            with self._write() as conn:
                args_json = json.dumps(args, separators=(",", ":"))
                stmt = self._insert(_W).values(key=key, name=name, args=args_json, hash=shash,
                                               created_at=time.time())
                conn.execute(self._on_conflict_nothing(stmt, ["key"]))
                row = conn.execute(_WORKLOAD_ID, {"key": key}).first()
        wid = int(row[0])
        self._wl_ids[key] = wid
        return wid

    def _workload_id(self, key: str) -> int | None:
        wid = self._wl_ids.get(key)
        if wid is None:
            with self._read() as conn:
                row = conn.execute(_WORKLOAD_ID, {"key": key}).first()
            if row is None:
                return None
            wid = self._wl_ids[key] = int(row[0])
        return wid

    def _insert(self, table):
        if self.dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        elif self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            raise DatabaseError(f"{self}: only SQLite and PostgreSQL are supported, not {self.dialect}")
        return insert(table)

    @staticmethod
    def _on_conflict_nothing(stmt, cols):
        return stmt.on_conflict_do_nothing(index_elements=cols)

    # ------------------------------------------------------------------ writing records
    def commit(self, task: Any, trace: Any, result: Any, *, run: TuningRun | int | None = None,
               on_conflict: str = "replace") -> TuningRecord:
        """Store one measured candidate; returns its record.

        A candidate is (workload key, target key, trace); if it is already stored, ``on_conflict`` says
        what wins: ``"replace"`` (default: the newer measurement), ``"skip"`` (the stored one) or
        ``"keep_better"`` (the lower cost; a success over a failure).
        """
        rec = TuningRecord.from_measurement(task, trace, result)
        self.commit_records([rec], run=run, on_conflict=on_conflict, tasks={rec.workload_key: task})
        return rec

    def commit_many(self, items: Iterable[Any], *, run: TuningRun | int | None = None,
                    on_conflict: str = "replace") -> int:
        """Store a batch in one transaction. ``items``: ``(task, trace, result)`` triples, ``(MeasureInput,
        MeasureResult)`` pairs, or :class:`TuningRecord` objects. Returns how many it stored: all of them,
        except candidates already stored that ``on_conflict`` kept as they were (``"skip"``: each one;
        ``"keep_better"``: those the new measurement does not beat), counted exactly even while other
        processes commit the same candidates."""
        recs: list[TuningRecord] = []
        tasks: dict[str, Any] = {}
        prod = producer_info()
        for item in items:
            if isinstance(item, TuningRecord):
                recs.append(item)
                continue
            if len(item) == 2:
                inp, result = item
                task, trace = inp.task, inp.trace
            else:
                task, trace, result = item
            rec = TuningRecord.from_measurement(task, trace, result, prod)
            tasks.setdefault(rec.workload_key, task)
            recs.append(rec)
        return self.commit_records(recs, run=run, on_conflict=on_conflict, tasks=tasks, _stored=True) or 0

    def commit_records(self, records: Iterable[TuningRecord], *, run: TuningRun | int | None = None,
                       on_conflict: str = "skip", tasks: dict[str, Any] | None = None,
                       _count: bool = False, _stored: bool = False, _to_log: bool = True) -> int | None:
        """Store records as they are (e.g. read from a log), in one transaction. Returns how many of them
        were new when ``_count`` (one extra COUNT), how many rows it wrote (inserted or updated) when
        ``_stored`` (the statement returns them), else None."""
        if on_conflict not in ON_CONFLICT:
            raise ValueError(f"on_conflict must be one of {', '.join(ON_CONFLICT)}, got {on_conflict!r}")
        records = list(records)
        if not records:
            return 0 if _count or _stored else None
        run_id = run.id if isinstance(run, TuningRun) else run
        tasks = tasks or {}
        rows = []
        for rec in records:
            wid = self._ensure_workload(rec.workload_key, rec.workload_name, rec.workload_args,
                                        tasks.get(rec.workload_key))
            rows.append(self._row(rec, wid, run_id))
        new = None
        with self._write() as conn:
            before = self._count_rows(conn) if _count else 0
            stmt = self._upsert(on_conflict, _stored)
            stored = 0
            for i in range(0, len(rows), _BATCH):
                result = conn.execute(stmt, rows[i:i + _BATCH])
                if _stored:
                    stored += len(result.all())
            if _count:
                new = self._count_rows(conn) - before
            elif _stored:
                new = stored
        if _to_log and self.location.log_path is not None:
            self._append_log(records)
        return new

    def _count_rows(self, conn: Connection) -> int:
        return int(conn.execute(select(func.count()).select_from(_R)).scalar_one())

    @staticmethod
    def _row(rec: TuningRecord, wid: int, run_id: int | None) -> dict:
        ok = rec.ok
        return {
            "workload_id": wid,
            "target": rec.target,
            "trace": rec.trace_json,
            "trace_hash": trace_digest(rec.trace_json),
            "costs": _costs_json(rec.costs),
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
        }

    _UPDATABLE = ("costs", "cost", "mean_cost", "error_kind", "error_msg", "build_seconds", "run_seconds",
                  "timestamp", "record_version", "autosched_version", "llvm_version", "host_cpu", "flags",
                  "host", "node_id")

    def _upsert(self, on_conflict: str, returning: bool = False):
        stmt = self._stmts.get((on_conflict, returning))  # built once: building one costs more than running it
        if stmt is None:
            stmt = self._stmts[on_conflict, returning] = self._make_upsert(on_conflict, returning)
        return stmt

    def _make_upsert(self, on_conflict: str, returning: bool):
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
        return stmt.returning(_R.c.id) if returning else stmt

    def _append_log(self, records: list[TuningRecord]) -> None:
        path = self.location.log_path
        if path is None:
            return
        if self._log_file is None:
            self._log_file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open until close()
        self._log_file.write("".join(r.dumps() + "\n" for r in records))  # one write: lines stay whole
        self._log_file.flush()

    # ------------------------------------------------------------------ tuning runs
    def start_run(self, policy: str, *, seed: int | None = None, trials: int | None = None,
                  target: Any = None, config: dict | None = None) -> TuningRun:
        now = time.time()
        tstr = None if target is None else str(target)
        values = dict(policy=policy, seed=seed, trials_asked=trials, trials_done=None, target=tstr,
                      status="running", started_at=now, ended_at=None,
                      config=json.dumps(config or {}, sort_keys=True, default=str),
                      host=socket.gethostname(), autosched_version=producer_info()["autosched"])
        with self._write() as conn:
            rid = conn.execute(_RUN.insert().values(**values)).inserted_primary_key[0]
        values.pop("config")
        return TuningRun(id=int(rid), config=dict(config or {}), **values)

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

    @contextmanager
    def tuning_run(self, policy: str, **kwargs: Any) -> Iterator[TuningRun]:
        """``with db.tuning_run("evolutionary", seed=0, trials=1000) as run: db.commit(..., run=run)``;
        the run ends as done, interrupted (Ctrl-C) or failed."""
        run = self.start_run(policy, **kwargs)
        try:
            yield run
        except KeyboardInterrupt:
            self.end_run(run, status="interrupted")
            raise
        except BaseException:
            self.end_run(run, status="failed")
            raise
        else:
            self.end_run(run)

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

    # ------------------------------------------------------------------ lifecycle
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

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __str__(self) -> str:
        loc = self.location
        if loc.log_path is not None:
            return str(loc.log_path)
        if loc.sqlite_path is not None:
            return str(loc.sqlite_path)
        if loc.url == "sqlite://":
            return "sqlite:// (in memory)"
        from sqlalchemy.engine import make_url

        return make_url(loc.url).render_as_string(hide_password=True)

    def __repr__(self) -> str:
        return f"Database({str(self)!r})"


def open_database(db: Database | str | os.PathLike | None = None, **kwargs: Any) -> tuple[Database, bool]:
    """``(db, owned)``: an open Database as is (not owned), or a new one for a URL or path (owned)."""
    if isinstance(db, Database):
        return db, False
    return Database(db, **kwargs), True


__all__ = ["Database", "DatabaseError", "ImportReport", "LOG_VERSION", "SchemaVersionError", "TuningRun",
           "WorkloadInfo", "open_database", "target_key"]

