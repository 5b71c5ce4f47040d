"""Where a database is: the default location, and what a user may pass instead of a URL.

Accepted everywhere a database is named (``Database(...)``, ``apply_history_best(...)``, ``--db``):

- ``None``: ``$AUTOSCHED_DB`` if set, else ``<user data dir>/autosched/tuning.db`` (SQLite), e.g.
  ``~/.local/share/autosched/tuning.db`` on Linux (``$XDG_DATA_HOME`` is honoured).
- an SQLAlchemy URL: ``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://`` (in memory),
  ``postgresql://user:pass@host:5432/dbname`` (the psycopg 3 driver is used; ``postgresql+psycopg://``
  says so explicitly).
- a path: ``tuning.db`` or any other name is an SQLite file; ``*.jsonl`` / ``*.json`` / ``*.log`` is a JSON-lines
  tuning log (read into memory; new records are appended to the file).
- ``":memory:"``: a private in-memory SQLite database.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "AUTOSCHED_DB"
LOG_SUFFIXES = (".jsonl", ".json", ".log")  # .log: AutoTVM's tutorials name their logs so


def default_data_dir() -> Path:
    """The user's data directory for autosched (platformdirs; XDG on Linux)."""
    try:
        import platformdirs

        return Path(platformdirs.user_data_dir("autosched", appauthor=False))
    except ImportError:  # pragma: no cover - platformdirs is a dependency; keep a sane XDG fallback
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        return Path(base) / "autosched"


def default_location() -> str:
    """``$AUTOSCHED_DB`` if set, else the SQLite file ``tuning.db`` in :func:`default_data_dir`."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return env
    return str(default_data_dir() / "tuning.db")


@dataclass(frozen=True)
class Location:
    """A resolved database location: an SQLAlchemy URL, plus the log file when it is a JSON-lines log."""

    url: str
    log_path: Path | None = None  # set for a JSON-lines log (then url is an in-memory SQLite)
    sqlite_path: Path | None = None  # set for an SQLite file

    @property
    def in_memory(self) -> bool:
        return self.url in ("sqlite://", "sqlite:///:memory:") or self.log_path is not None


def resolve(spec: str | os.PathLike | None) -> Location:
    """Turn what a user passed into a :class:`Location` (see the module docstring for what is accepted)."""
    if spec is None:
        spec = default_location()
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"a database is a URL or a path, got {spec!r}")
    spec = spec.strip()
    if spec == ":memory:":
        return Location("sqlite://")
    if "://" in spec:
        from sqlalchemy.engine import make_url

        url = make_url(spec)
        backend = url.get_backend_name()
        if backend in ("postgresql", "postgres"):
            if url.drivername in ("postgresql", "postgres"):
                url = url.set(drivername="postgresql+psycopg")  # psycopg 3, not SQLAlchemy's psycopg2 default
            return Location(url.render_as_string(hide_password=False))
        if backend == "sqlite":
            if not url.database or url.database == ":memory:":
                return Location("sqlite://")
            path = Path(url.database).expanduser()
            if path.suffix in LOG_SUFFIXES:
                raise ValueError(f"{spec!r} names a JSON-lines log as an SQLite database; pass the path "
                                 f"{str(path)!r} alone to open it as a log")
            return Location(_sqlite_url(path, url.query), sqlite_path=path.absolute())
        return Location(url.render_as_string(hide_password=False))  # another backend: the user's call
    path = Path(spec).expanduser()
    if path.suffix in LOG_SUFFIXES:
        return Location("sqlite://", log_path=path.absolute())
    return Location(_sqlite_url(path), sqlite_path=path.absolute())


def _sqlite_url(path: Path, query: dict | None = None) -> str:
    url = "sqlite:///" + str(path.absolute())
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return url
