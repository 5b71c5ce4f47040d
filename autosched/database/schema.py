"""The SQL schema: SQLAlchemy 2.x models, the schema version and in-place upgrades.

Four tables, all prefixed ``autosched_`` so that a shared PostgreSQL database can hold them beside others:

- ``autosched_schema``: one row, the schema version of the tables below.
- ``autosched_workloads``: one row per workload key (sha256 of name, args and computation).
- ``autosched_records``: one row per measured candidate (workload, target key, trace); failed candidates
  too (``cost`` is NULL for them), so a resumed run never measures them again.
- ``autosched_runs``: one row per tuning run (policy, seed, trials asked and done, start and end).

``best()`` is one range scan of the partial index ``ix_autosched_records_best`` on
(workload_id, target, cost) over successful records; the unique index on (workload_id, target,
trace_hash) makes a candidate's identity and "was it measured?" cheap.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Connection
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

#: Version of the tables' layout. A database with a newer one is refused; an older one is upgraded
#: in place by the functions in MIGRATIONS.
SCHEMA_VERSION = 3


class Base(DeclarativeBase):
    pass


class SchemaInfo(Base):
    __tablename__ = "autosched_schema"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # always 1
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    autosched_version: Mapped[str] = mapped_column(String(32), nullable=False)  # who last created/upgraded it
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)


class WorkloadRow(Base):
    __tablename__ = "autosched_workloads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)  # Task.workload_key
    name: Mapped[str] = mapped_column(String(200), nullable=False, index=True)
    args: Mapped[str] = mapped_column(Text, nullable=False)  # JSON object of the canonical parameters
    # sha256 of the computation's structural form (no names, no args): finds one computation under
    # several names; NULL when the record came from a log of a workload not built here
    hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[float] = mapped_column(Float, nullable=False)


class RunRow(Base):
    __tablename__ = "autosched_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    policy: Mapped[str] = mapped_column(String(100), nullable=False)
    seed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    trials_asked: Mapped[int | None] = mapped_column(Integer, nullable=True)
    trials_done: Mapped[int | None] = mapped_column(Integer, nullable=True)
    target: Mapped[str | None] = mapped_column(String(400), nullable=True)
    status: Mapped[str] = mapped_column(String(16), nullable=False)  # running / done / failed / interrupted
    started_at: Mapped[float] = mapped_column(Float, nullable=False)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    config: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON: tasks, options, ...
    host: Mapped[str | None] = mapped_column(String(200), nullable=True)
    autosched_version: Mapped[str] = mapped_column(String(32), nullable=False)


class RecordRow(Base):
    __tablename__ = "autosched_records"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("autosched_workloads.id"), nullable=False)
    target: Mapped[str] = mapped_column(String(400), nullable=False)  # Target.key, CPU included
    trace: Mapped[str] = mapped_column(Text, nullable=False)  # canonical compact JSON
    trace_hash: Mapped[str] = mapped_column(String(32), nullable=False)  # 128 bits of sha256(trace)
    costs: Mapped[str] = mapped_column(Text, nullable=False)  # JSON list of seconds per repeat
    cost: Mapped[float | None] = mapped_column(Float, nullable=True)  # median; NULL when it failed
    mean_cost: Mapped[float | None] = mapped_column(Float, nullable=True)
    error_kind: Mapped[str | None] = mapped_column(String(32), nullable=True)
    error_msg: Mapped[str | None] = mapped_column(Text, nullable=True)
    build_seconds: Mapped[float] = mapped_column(Float, nullable=False)
    run_seconds: Mapped[float] = mapped_column(Float, nullable=False)
    timestamp: Mapped[float] = mapped_column(Float, nullable=False)  # unix seconds of the measurement
    record_version: Mapped[int] = mapped_column(Integer, nullable=False)  # record format it was written in
    autosched_version: Mapped[str] = mapped_column(String(32), nullable=False)
    llvm_version: Mapped[str] = mapped_column(String(32), nullable=False)
    host_cpu: Mapped[str] = mapped_column(String(64), nullable=False)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("autosched_runs.id"), nullable=True)
    # since schema 2: ResultFlag values, comma-separated ("unchecked", "noisy"); NULL for a plain result
    flags: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # since schema 2: which machine measured it (host name; the Ray node id on a cluster)
    host: Mapped[str | None] = mapped_column(String(200), nullable=True)
    node_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # since schema 3: JSON object of the device's state while it timed (a GPU: its name, arch, SM and memory
    # clocks, P-state); NULL for a CPU measurement
    device: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (
        UniqueConstraint("workload_id", "target", "trace_hash", name="uq_autosched_records_candidate"),
        Index("ix_autosched_records_best", "workload_id", "target", "cost",
              sqlite_where=cost.isnot(None), postgresql_where=cost.isnot(None)),
        Index("ix_autosched_records_run", "run_id",
              sqlite_where=run_id.isnot(None), postgresql_where=run_id.isnot(None)),
    )


TABLES = [SchemaInfo.__table__, WorkloadRow.__table__, RunRow.__table__, RecordRow.__table__]
TABLE_NAMES = {t.name for t in TABLES}

#: MIGRATIONS[n] upgrades a database of schema version n to n + 1, inside the upgrading transaction.
#: Each one must be written against the layout of version n (not against the models above).
MIGRATIONS: dict[int, Callable[[Connection], None]] = {}


def _add_flags_and_machine(conn: Connection) -> None:
    """1 -> 2: a result's flags (unchecked, noisy) and the machine that measured it."""
    for col, typ in (("flags", "VARCHAR(200)"), ("host", "VARCHAR(200)"), ("node_id", "VARCHAR(64)")):
        conn.exec_driver_sql(f"ALTER TABLE autosched_records ADD COLUMN {col} {typ}")


MIGRATIONS[1] = _add_flags_and_machine


def _add_device(conn: Connection) -> None:
    """2 -> 3: the device's state while it timed (a GPU's clocks)."""
    conn.exec_driver_sql("ALTER TABLE autosched_records ADD COLUMN device TEXT")


MIGRATIONS[2] = _add_device
