"""The tuning database: every measured candidate, the best ones at build time, JSON-lines logs.

- :class:`Database` (``database.py``): SQLAlchemy over an SQLite file (default, WAL) or PostgreSQL;
  ``commit`` / ``commit_many`` / ``best`` / ``records`` / ``measured_traces`` / ``export`` / ``import_``.
- :class:`TuningRecord` and the JSON-lines record format (``record.py``; ``LOG_VERSION``), usable
  without SQLAlchemy.
- :func:`apply_history_best` and :func:`apply_best` (``apply.py``): the best records applied to tasks.
- the SQL schema and its version (``schema.py``), where a database lives (``location.py``).

``docs/database.md`` describes the schema, the default location (``$AUTOSCHED_DB``) and the log format.
SQLAlchemy is imported only when a database is opened.
"""

from __future__ import annotations

from autosched.database.location import ENV_VAR, default_location
from autosched.database.record import LOG_VERSION, LogFormatError, TuningRecord, producer_info

_LAZY = {
    "Database": "autosched.database.database",
    "DatabaseError": "autosched.database.database",
    "SchemaVersionError": "autosched.database.database",
    "ImportReport": "autosched.database.database",
    "TuningRun": "autosched.database.database",
    "WorkloadInfo": "autosched.database.database",
    "open_database": "autosched.database.database",
    "target_key": "autosched.database.database",
    "ApplyHistoryBest": "autosched.database.apply",
    "apply_history_best": "autosched.database.apply",
    "apply_best": "autosched.database.apply",
    "best_record": "autosched.database.apply",
    "current_contexts": "autosched.database.apply",
    "SCHEMA_VERSION": "autosched.database.schema",
}


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'autosched.database' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


__all__ = ["ENV_VAR", "LOG_VERSION", "LogFormatError", "TuningRecord", "default_location", "producer_info",
           *_LAZY]
