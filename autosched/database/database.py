"""``Database``: every measured candidate, in SQLite (the default) or PostgreSQL, through SQLAlchemy.

    db = Database()                              # $AUTOSCHED_DB or ~/.local/share/autosched/tuning.db
    db = Database("postgresql://me@dbhost/tuning")
    db.commit(task, trace, result)               # one candidate (cheap: one short transaction)
    db.commit_many([(task, trace, result), ...]) # a batch in one transaction
    db.best(task, k=5)                           # successful records, fastest first
    db.measured_traces(task)                     # what a resumed run must not measure again
    db.export("out.jsonl", task=task); db.import_("in.jsonl")

Writes to SQLite take the write lock up front (``BEGIN IMMEDIATE``) and wait up to ``busy_timeout``
for it, so several tuning processes can share one file; the file is in WAL mode, so readers never
block writers and a killed writer loses nothing it had committed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import statistics
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Integer, bindparam, create_engine, event, func, inspect, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from autosched.database import location as _location
from autosched.database.record import (
    LOG_VERSION,
    LogFormatError,
    TuningRecord,
    WorkloadChecker,
    producer_info,
    trace_digest,
    trace_text,
)
from autosched.database.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    TABLE_NAMES,
    Base,
    RecordRow,
    RunRow,
    SchemaInfo,
    WorkloadRow,
)
from autosched.errors import AutoschedError

logger = logging.getLogger("autosched.database")

_R = RecordRow.__table__
_W = WorkloadRow.__table__
_RUN = RunRow.__table__
_S = SchemaInfo.__table__

ON_CONFLICT = ("replace", "skip", "keep_better")

# statements run in tuning loops, built once (building one costs more than SQLite takes to run it)
_BEST = (select(_R).where(_R.c.workload_id == bindparam("wid"), _R.c.target == bindparam("target"),
                          _R.c.cost.isnot(None))
         .order_by(_R.c.cost, _R.c.id).limit(bindparam("k", type_=Integer)))
_WORKLOAD_ID = select(_W.c.id).where(_W.c.key == bindparam("key"))
_MEASURED = select(_R.c.id).where(_R.c.workload_id == bindparam("wid"), _R.c.target == bindparam("target"),
                                  _R.c.trace_hash == bindparam("h"))
_BATCH = 2000  # rows per INSERT batch; keeps statements and memory small


class DatabaseError(AutoschedError, RuntimeError):
    """A tuning database cannot be opened or used; the message names the database and the reason."""


class SchemaVersionError(DatabaseError):
    """The database's schema is newer than this autosched, or not an autosched schema at all."""


@dataclass
class TuningRun:
    """A tuning run as stored: what was asked, what was done, when."""

    id: int
    policy: str
    seed: int | None = None
    trials_asked: int | None = None
    trials_done: int | None = None
    target: str | None = None
    status: str = "running"
    started_at: float = 0.0
    ended_at: float | None = None
    config: dict = field(default_factory=dict)
    host: str | None = None
    autosched_version: str = ""


@dataclass
class WorkloadInfo:
    key: str
    name: str
    args: dict
    hash: str | None
    records: int


@dataclass
class ImportReport:
    """What :meth:`Database.import_` did: lines read, records added, duplicates, and the bad lines."""

    source: str
    lines: int = 0
    imported: int = 0  # new records
    duplicates: int = 0  # candidates already in the database (skipped or replaced per on_conflict)
    errors: list[LogFormatError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def __str__(self) -> str:
        s = (f"{self.source}: {self.lines} lines, {self.imported} new records, "
             f"{self.duplicates} already present, {len(self.errors)} bad lines")
        for e in self.errors[:10]:
            s += f"\n  line {e.line}: {e.reason}"
        if len(self.errors) > 10:
            s += f"\n  ... and {len(self.errors) - 10} more"
        return s


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


def _costs_json(costs: list[float]) -> str:
    """JSON of a list of floats; several times faster than json.dumps (bulk imports spend time here)."""
    vals = [float(c) for c in costs]
    if all(math.isfinite(v) for v in vals):
        return "[" + ",".join(map(repr, vals)) + "]"
    return json.dumps(vals)


def _is_key(x: Any) -> bool:
    return isinstance(x, str) and len(x) == 64 and all(c in "0123456789abcdef" for c in x)


def target_key(target: Any) -> str:
    """The key records are stored under for ``target`` (a Target, a target string or a key)."""
    from autosched.codegen.target import Target

    return Target(target).key


def _cpu_agnostic(key: str) -> tuple:
    """A target key without its CPU (mcpu, mattr): what must still match when reusing other CPUs' records."""
    from autosched.codegen.target import Target

    try:
        t = Target(key)
    except ValueError:
        return (key,)
    return (t.kind, tuple(sorted((k, v) for k, v in t.options.items() if k not in ("mcpu", "mattr"))))


class Database:
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
        self._stmts: dict[str, Any] = {}
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
            raise DatabaseError(f"cannot open tuning database {self}: {type(e).__name__}: {e}") from e
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

    # ------------------------------------------------------------------ schema
    def _prepare_schema(self, create: bool) -> None:
        with self._read() as conn:
            version = self._read_version(conn)
        if version == SCHEMA_VERSION:
            return
        with self._write() as conn:
            if self.dialect == "postgresql":  # serialise concurrent creators/upgraders of one database
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7301125)")
            version = self._read_version(conn)
            if version is None:
                if not create:
                    raise DatabaseError(f"{self} has no autosched tables (create=False)")
                Base.metadata.create_all(conn)
                conn.execute(_S.insert().values(id=1, version=SCHEMA_VERSION,
                                                autosched_version=producer_info()["autosched"],
                                                updated_at=time.time()))
                return
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self} has schema version {version}, newer than this autosched "
                    f"({producer_info()['autosched']}) understands ({SCHEMA_VERSION}); "
                    f"upgrade autosched, or export the records to a JSON-lines log with the newer version")
            start = version
            while version < SCHEMA_VERSION:
                migrate = MIGRATIONS.get(version)
                if migrate is None:
                    raise SchemaVersionError(f"{self} has schema version {version}, which this autosched "
                                             f"cannot upgrade (no migration from {version})")
                migrate(conn)
                version += 1
            conn.execute(_S.update().where(_S.c.id == 1).values(
                version=version, autosched_version=producer_info()["autosched"], updated_at=time.time()))
            logger.info("upgraded %s from schema version %d to %d", self, start, version)

    def _read_version(self, conn: Connection) -> int | None:
        """The stored schema version; None for a database without autosched tables."""
        names = set(inspect(conn).get_table_names())
        if SchemaInfo.__tablename__ not in names:
            ours = sorted(TABLE_NAMES & names)
            if ours:
                raise SchemaVersionError(f"{self} has autosched tables ({', '.join(ours)}) but no "
                                         f"{SchemaInfo.__tablename__} table: an unknown schema")
            return None
        try:
            row = conn.execute(select(_S.c.version).where(_S.c.id == 1)).first()
        except Exception as e:
            raise SchemaVersionError(f"{self}: unreadable {SchemaInfo.__tablename__} table ({e})") from None
        if row is None or not isinstance(row[0], int) or row[0] < 1:
            raise SchemaVersionError(f"{self}: unknown schema (version row {row!r})")
        return int(row[0])

    @property
    def schema_version(self) -> int:
        with self._read() as conn:
            return self._read_version(conn) or 0

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
        MeasureResult)`` pairs, or :class:`TuningRecord` objects. Returns how many were given."""
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
        self.commit_records(recs, run=run, on_conflict=on_conflict, tasks=tasks)
        return len(recs)

    def commit_records(self, records: Iterable[TuningRecord], *, run: TuningRun | int | None = None,
                       on_conflict: str = "skip", tasks: dict[str, Any] | None = None,
                       _count: bool = False, _to_log: bool = True) -> int | None:
        """Store records as they are (e.g. read from a log), in one transaction. Returns how many of them
        were new when ``_count`` (one extra COUNT), else None."""
        if on_conflict not in ON_CONFLICT:
            raise ValueError(f"on_conflict must be one of {', '.join(ON_CONFLICT)}, got {on_conflict!r}")
        records = list(records)
        if not records:
            return 0 if _count else None
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
            stmt = self._upsert(on_conflict)
            for i in range(0, len(rows), _BATCH):
                conn.execute(stmt, rows[i:i + _BATCH])
            if _count:
                new = self._count_rows(conn) - before
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
                  "timestamp", "record_version", "autosched_version", "llvm_version", "host_cpu", "run_id",
                  "flags", "host", "node_id")

    def _upsert(self, on_conflict: str):
        stmt = self._stmts.get(on_conflict)  # built once: building one costs more than running it
        if stmt is None:
            stmt = self._stmts[on_conflict] = self._make_upsert(on_conflict)
        return stmt

    def _make_upsert(self, on_conflict: str):
        ins = self._insert(_R)
        cols = ["workload_id", "target", "trace_hash"]
        if on_conflict == "skip":
            return ins.on_conflict_do_nothing(index_elements=cols)
        set_ = {c: ins.excluded[c] for c in self._UPDATABLE}
        if on_conflict == "replace":
            return ins.on_conflict_do_update(index_elements=cols, set_=set_)
        better = ins.excluded.cost.isnot(None) & (_R.c.cost.is_(None) | (ins.excluded.cost < _R.c.cost))
        return ins.on_conflict_do_update(index_elements=cols, set_=set_, where=better)

    def _append_log(self, records: list[TuningRecord]) -> None:
        path = self.location.log_path
        if path is None:
            return
        if self._log_file is None:
            self._log_file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open until close()
        self._log_file.write("".join(r.dumps() + "\n" for r in records))  # one write: lines stay whole
        self._log_file.flush()

    # ------------------------------------------------------------------ reading
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
        if len(targets) == 1:
            rows = conn.execute(_BEST, {"wid": wid, "target": targets[0], "k": k})
        else:
            stmt = (select(_R).where(_R.c.workload_id == wid, _R.c.target.in_(targets), _R.c.cost.isnot(None))
                    .order_by(_R.c.cost, _R.c.id).limit(k))
            rows = conn.execute(stmt)
        return [self._record(conn, r) for r in rows]

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
        """Per workload and target: records, successful ones, the best cost, and failures by error kind."""
        stmt = (select(_W.c.key, _W.c.name, _W.c.args, _R.c.target, _R.c.error_kind, func.count(),
                       func.min(_R.c.cost), func.min(_R.c.timestamp), func.max(_R.c.timestamp))
                .join(_W, _W.c.id == _R.c.workload_id)
                .group_by(_W.c.key, _W.c.name, _W.c.args, _R.c.target, _R.c.error_kind))
        out: dict[tuple[str, str], dict[str, Any]] = {}
        with self._read() as conn:
            for key, name, args, target, kind, n, best, first, last in conn.execute(stmt):
                row = out.setdefault((key, target), {"key": key, "name": name, "args": json.loads(args),
                                                     "target": target, "records": 0, "ok": 0, "best_cost": None,
                                                     "errors": {}, "first": first, "last": last})
                row["records"] += int(n)
                row["first"], row["last"] = min(row["first"], first), max(row["last"], last)
                if kind is None:
                    row["ok"] += int(n)
                    if best is not None:
                        row["best_cost"] = best if row["best_cost"] is None else min(row["best_cost"], best)
                else:
                    row["errors"][kind] = int(n)
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

    # ------------------------------------------------------------------ JSON-lines logs
    def export(self, dest: str | os.PathLike | IO[str], task_or_key: Any = None, target: Any = None, *,
               workload_name: str | None = None, ok: bool | None = None, run: Any = None,
               since: float | None = None, until: float | None = None, append: bool = False) -> int:
        """Write matching records (filters as in :meth:`records`) as a JSON-lines log, in insertion order;
        returns how many. A path is written atomically (a temporary file renamed) unless ``append``."""
        it = self.iter_records(task_or_key, target, workload_name=workload_name, ok=ok, run=run, since=since,
                               until=until)
        if hasattr(dest, "write"):
            n = 0
            for rec in it:
                dest.write(rec.dumps() + "\n")
                n += 1
            return n
        path = Path(dest)
        path.parent.mkdir(parents=True, exist_ok=True)
        if append:
            with open(path, "a", encoding="utf-8") as f:
                return self.export(f, task_or_key, target, workload_name=workload_name, ok=ok, run=run,
                                   since=since, until=until)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                n = self.export(f, task_or_key, target, workload_name=workload_name, ok=ok, run=run,
                                since=since, until=until)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return n

    def import_(self, source: str | os.PathLike | IO[str], *, strict: bool = False, on_conflict: str = "skip",
                _quiet: bool = False) -> ImportReport:
        """Read a JSON-lines log into the database; returns an :class:`ImportReport`.

        Every bad line (not JSON, truncated, a newer or unknown record version, a workload that is not
        registered here or whose computation changed) is reported with its line number and reason, and the
        valid lines are imported. With ``strict=True`` the first bad line raises :class:`LogFormatError`
        and nothing is imported. ``on_conflict`` as in :meth:`commit` (default: keep what is stored).
        """
        if hasattr(source, "read"):
            name = getattr(source, "name", "<stream>")
            return self._import_lines(source, str(name), strict, on_conflict, _quiet)
        path = Path(source)
        with open(path, encoding="utf-8", errors="replace") as f:
            return self._import_lines(f, str(path), strict, on_conflict, _quiet)

    def _import_lines(self, lines: Iterable[str], name: str, strict: bool, on_conflict: str,
                      quiet: bool) -> ImportReport:
        report = ImportReport(source=name)
        checker = WorkloadChecker()
        pending: list[TuningRecord] = []

        def flush() -> None:
            if not pending:
                return
            # counted exactly; records read from a log are not appended back to the log
            new = self.commit_records(pending, on_conflict=on_conflict, _count=True, _to_log=False)
            report.imported += new
            report.duplicates += len(pending) - new
            pending.clear()

        for lineno, line in enumerate(lines, 1):
            report.lines = lineno
            if not line.strip():
                continue
            try:
                rec = TuningRecord.loads(line)
                checker.check(rec)
            except LogFormatError as e:
                err = LogFormatError(e.reason, lineno, name)
                if strict:
                    raise err from None
                report.errors.append(err)
                continue
            pending.append(rec)
            if not strict and len(pending) >= 5 * _BATCH:
                flush()
        flush()
        if report.errors and not quiet:
            for e in report.errors[:20]:
                logger.warning("%s (line skipped)", e)
            if len(report.errors) > 20:
                logger.warning("%s: %d more bad lines skipped", name, len(report.errors) - 20)
        if not quiet:
            logger.info("%s", report.__str__().split("\n", 1)[0])
        return report

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
