"""Helpers of the database tests: small tasks, distinct traces, results, a per-test PostgreSQL database."""

from __future__ import annotations

import os
import uuid

import pytest

import autosched
from autosched.measure import ErrorKind, MeasureResult
from autosched.te.trace import Split, Trace

CPU = "llvm -mcpu=skylake"
OTHER_CPU = "llvm -mcpu=icelake-server"
PG_ENV = "AUTOSCHED_TEST_POSTGRES_URL"
PG_SKIP = "no PostgreSQL server could be started"


def task(M: int = 16, target: str = CPU, name: str = "matmul"):
    if name == "matmul":
        return autosched.Task("matmul", dict(M=M, N=16, K=16), target=target)
    return autosched.Task(name, target=target)


def trace(i: int) -> Trace:
    """A distinct valid trace of a matmul task for each i >= 1 (split the output's row axis by i)."""
    return Trace([Split(2, 0, i, None)])


def ok(cost: float, repeats: int = 3, ts: float = 1_790_000_000.0) -> MeasureResult:
    return MeasureResult(costs=[cost * (1 + 0.01 * r) for r in range(repeats)], build_seconds=0.02,
                         run_seconds=0.1, timestamp=ts)


def failed(kind: str = ErrorKind.COMPILE_ERROR, msg: str = "LLVM said no") -> MeasureResult:
    return MeasureResult(costs=[], error_kind=kind, error_msg=msg, build_seconds=0.01,
                         timestamp=1_790_000_000.0)


def pg_base_url() -> str | None:
    return os.environ.get(PG_ENV) or None


class PgDatabase:
    """A fresh PostgreSQL database on the test server, dropped afterwards."""

    def __init__(self, base: str):
        import sqlalchemy as sa
        from sqlalchemy.engine import make_url

        url = make_url(base)
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        self.name = f"autosched_test_{uuid.uuid4().hex[:12]}"
        self.admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        with self.admin.connect() as c:
            c.exec_driver_sql(f'CREATE DATABASE "{self.name}"')
        self.url = url.set(database=self.name).render_as_string(hide_password=False)

    def drop(self) -> None:
        with self.admin.connect() as c:
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self.admin.dispose()


def make_url(backend: str, tmp_path):
    """(url, cleanup) for a fresh empty database of ``backend`` ('sqlite' or 'postgresql')."""
    if backend == "sqlite":
        return str(tmp_path / "tuning.db"), lambda: None
    base = pg_base_url()
    if base is None:
        pytest.skip(PG_SKIP)
    pg = PgDatabase(base)
    return pg.url, pg.drop
