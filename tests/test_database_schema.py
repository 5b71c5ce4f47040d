"""Opening databases: locations, SQLite settings, schema versions (newer refused, older upgraded), indexes."""

from __future__ import annotations

import socket
import sqlite3

import pytest
from sqlalchemy import create_engine, inspect, text

import autosched.database.versioning as dbmod  # where the schema is created and upgraded
from _database_helpers import make_url, ok, task, trace
from autosched.database import Database, DatabaseError, SchemaVersionError, default_location
from autosched.database.location import resolve
from autosched.database.record import TuningRecord
from autosched.database.schema import SCHEMA_VERSION
from autosched.measure.result import ResultFlag


def test_locations(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCHED_DB", str(tmp_path / "env.db"))
    assert default_location() == str(tmp_path / "env.db")
    assert resolve(None).sqlite_path == tmp_path / "env.db"
    monkeypatch.delenv("AUTOSCHED_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_location() == str(tmp_path / "xdg" / "autosched" / "tuning.db")
    assert resolve("postgresql://u@h/db").url == "postgresql+psycopg://u@h/db"
    assert resolve("postgres://u@h/db").url == "postgresql+psycopg://u@h/db"
    assert resolve("postgresql+psycopg://u@h/db").url == "postgresql+psycopg://u@h/db"
    assert resolve(":memory:").url == "sqlite://" and resolve("sqlite://").in_memory
    assert resolve("sqlite:///rel.db").sqlite_path.is_absolute()
    assert resolve(tmp_path / "t.jsonl").log_path == tmp_path / "t.jsonl"
    assert resolve(str(tmp_path / "t.db")).url == f"sqlite:///{tmp_path}/t.db"
    with pytest.raises(ValueError, match="JSON-lines log"):
        resolve("sqlite:///x.jsonl")
    with pytest.raises(ValueError):
        resolve("")


def test_default_database_is_created_in_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOSCHED_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with Database() as db:
        db.commit(task(), trace(1), ok(1e-3))
    assert (tmp_path / "xdg" / "autosched" / "tuning.db").exists()
    monkeypatch.setenv("AUTOSCHED_DB", str(tmp_path / "elsewhere.db"))
    with Database() as db:
        assert db.count() == 0
    with pytest.raises(FileNotFoundError, match="no tuning database"):
        Database(tmp_path / "missing.db", create=False)


def test_sqlite_file_settings(tmp_path):
    with Database(tmp_path / "t.db", busy_timeout=12.5) as db:
        db.commit(task(), trace(1), ok(1e-3))
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 12500
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert db.schema_version == SCHEMA_VERSION


def test_best_is_an_index_range_scan(tmp_path):
    with Database(tmp_path / "t.db") as db:
        db.commit_many([(task(), trace(i), ok(i * 1e-4)) for i in range(1, 30)])
        wid = db._workload_id(task().workload_key)
        con = sqlite3.connect(tmp_path / "t.db")
        plan = " ".join(r[-1] for r in con.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM autosched_records WHERE workload_id = ? AND target = ? "
            "AND cost IS NOT NULL ORDER BY cost, id LIMIT 5", (wid, task().target.key)))
        con.close()
        assert "USING INDEX ix_autosched_records_best" in plan and "TEMP B-TREE" not in plan, plan


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    u, cleanup = make_url(request.param, tmp_path)
    yield u
    cleanup()


def _engine(url):
    return create_engine(resolve(url).url)


def test_newer_schema_is_refused(url):
    Database(url).close()
    eng = _engine(url)
    with eng.begin() as c:
        c.execute(text("UPDATE autosched_schema SET version = :v"), {"v": SCHEMA_VERSION + 1})
    eng.dispose()
    newer = f"schema version {SCHEMA_VERSION + 1}, newer than this"
    with pytest.raises(SchemaVersionError, match=newer) as e:
        Database(url)
    assert "upgrade autosched" in str(e.value)


def test_unknown_schema_is_refused(url):
    Database(url).close()
    eng = _engine(url)
    with eng.begin() as c:
        c.execute(text("DROP TABLE autosched_schema"))
    eng.dispose()
    with pytest.raises(SchemaVersionError, match="unknown schema"):
        Database(url)


def test_other_tables_are_left_alone(url):
    eng = _engine(url)
    with eng.begin() as c:
        c.execute(text("CREATE TABLE records (id INTEGER PRIMARY KEY, note TEXT)"))
    with Database(url) as db:
        db.commit(task(), trace(1), ok(1e-3))
    assert "records" in inspect(eng).get_table_names()
    eng.dispose()


def test_older_schema_is_upgraded_in_place(url, monkeypatch):
    with Database(url) as db:
        db.commit(task(), trace(1), ok(1e-3))
    ran = []

    def to_next(conn):  # as a real migration: DDL on the old layout, inside the upgrading transaction
        ran.append(True)
        conn.execute(text("CREATE INDEX ix_autosched_records_time ON autosched_records (timestamp)"))

    monkeypatch.setattr(dbmod, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setitem(dbmod.MIGRATIONS, SCHEMA_VERSION, to_next)
    with Database(url) as db:
        assert ran == [True] and db.schema_version == SCHEMA_VERSION + 1
        assert db.best(task())[0].trace == trace(1)
        idx = {i["name"] for i in inspect(db.engine).get_indexes("autosched_records")}
        assert "ix_autosched_records_time" in idx
    with Database(url):  # already upgraded: nothing runs again
        assert ran == [True]


def test_no_migration_path_is_an_error(url, monkeypatch):
    Database(url).close()
    monkeypatch.setattr(dbmod, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(SchemaVersionError, match="cannot upgrade"):
        Database(url)


def test_unreachable_server_is_a_clear_error():
    with pytest.raises(DatabaseError, match="cannot open tuning database postgresql"):
        Database("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")


def test_schema_1_database_gains_flags_and_machine(url):
    """A database written by schema 1 (no flags, host or node_id columns) is upgraded and keeps its records;
    new records carry their flags and the host that measured them."""
    with Database(url) as db:
        db.commit(task(), trace(1), ok(1e-3))
    eng = _engine(url)
    with eng.begin() as c:
        for col in ("flags", "host", "node_id", "device"):
            c.execute(text(f"ALTER TABLE autosched_records DROP COLUMN {col}"))
        c.execute(text("UPDATE autosched_schema SET version = 1"))
    eng.dispose()
    with Database(url) as db:
        assert db.schema_version == SCHEMA_VERSION
        old = db.best(task())[0]
        assert old.trace == trace(1) and old.flags == [] and old.host == "unknown"
        res = ok(2e-3)
        res.flags = [ResultFlag.UNCHECKED]
        db.commit(task(), trace(2), res)
        new = [r for r in db.records(task()) if r.trace == trace(2)][0]
        assert new.flags == [ResultFlag.UNCHECKED] and new.host == socket.gethostname()
        assert new.result.flags == [ResultFlag.UNCHECKED]
        assert TuningRecord.loads(new.dumps()).flags == [ResultFlag.UNCHECKED]


def test_schema_2_database_gains_the_device_state_of_gpu_measurements(url):
    """A schema-2 database (no device column) is upgraded; a GPU measurement's clocks and P-state travel with
    its record into the database and through a log, and a CPU record has none."""
    with Database(url) as db:
        db.commit(task(), trace(1), ok(1e-3))
    eng = _engine(url)
    with eng.begin() as c:
        c.execute(text("ALTER TABLE autosched_records DROP COLUMN device"))
        c.execute(text("UPDATE autosched_schema SET version = 2"))
    eng.dispose()
    gpu = {"gpu": "NVIDIA H100 80GB HBM3", "gpu_arch": "sm_90", "sm_clock_mhz": "1980", "mem_clock_mhz": "2619",
           "pstate": "P0"}
    with Database(url) as db:
        assert db.schema_version == SCHEMA_VERSION
        assert db.best(task())[0].device == {}
        res = ok(2e-3)
        res.machine = {"host": "gpu-node", **gpu}
        db.commit(task(), trace(2), res)
        new = [r for r in db.records(task()) if r.trace == trace(2)][0]
        assert new.device == gpu and new.host == "gpu-node"
        assert TuningRecord.loads(new.dumps()).device == gpu
