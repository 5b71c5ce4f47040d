"""The tuning database: every measured candidate, the best ones at build time, JSON-lines logs.

A few small concepts, each in its module:

- the interface (``interface.py``): :class:`Database`, what any tuning database stores and answers
  (``commit_records``, ``select_records`` with a :class:`Where`, tuning runs), and what users call over it
  (``commit``, ``best``, ``records``, ``measured_records``, ``export``, ...); ``common.py`` holds the
  words the parts share (``Where``, ``TuningRun``, the errors, what a candidate committed twice becomes);
- storage in SQL (``database.py``): ``Database(url)`` opens an SQLite file (default), PostgreSQL by URL,
  or a JSON-lines log, through SQLAlchemy; its tables (``schema.py``) and where it lives (``location.py``);
- queries (``query.py``): best records, the records of a task or of a batch of traces, report figures;
- logs (``logs.py``): JSON-lines import and export; a record and its line (``record.py``; ``LOG_VERSION``),
  usable without SQLAlchemy;
- schema versioning (``versioning.py``): create, check and upgrade the SQL tables;
- :func:`apply_history_best` and :func:`apply_best` (``apply.py``): the best records applied to tasks.

``docs/database.md`` describes them. SQLAlchemy is imported only when an SQL database is opened.
"""

from __future__ import annotations

import importlib

from autosched.database.common import DatabaseError, SchemaVersionError, TuningRun, Where, WorkloadInfo, target_key
from autosched.database.interface import Database, open_database, set_default_database
from autosched.database.location import ENV_VAR, default_location
from autosched.database.logs import ImportReport
from autosched.database.record import LOG_VERSION, LogFormatError, TuningRecord, producer_info

# SQLAlchemy (the SQL storage, its schema) and what relay.build looks for in sys.modules (apply): on first use
_LAZY = {
    "SQLDatabase": "autosched.database.database",
    "ApplyHistoryBest": "autosched.database.apply",
    "apply_history_best": "autosched.database.apply",
    "apply_best": "autosched.database.apply",
    "best_record": "autosched.database.apply",
    "current_contexts": "autosched.database.apply",
    "SCHEMA_VERSION": "autosched.database.schema",
}


def _sql_database() -> type[Database]:
    from autosched.database.database import SQLDatabase  # SQLAlchemy: imported when a database is opened

    return SQLDatabase


# ``Database(url)`` opens an SQL database: named here, above both the interface and the SQL implementation
set_default_database(_sql_database)


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'autosched.database' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


__all__ = ["ENV_VAR", "LOG_VERSION", "Database", "DatabaseError", "ImportReport", "LogFormatError",
           "SchemaVersionError", "TuningRecord", "TuningRun", "Where", "WorkloadInfo", "default_location",
           "open_database", "producer_info", "target_key", *_LAZY]
