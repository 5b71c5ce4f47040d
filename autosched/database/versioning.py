"""Schema versioning of an SQL database: create the tables of a new one, read the stored version, and
upgrade an older one in place (``schema.SCHEMA_VERSION``, ``schema.MIGRATIONS``), in one transaction."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy import inspect, select
from sqlalchemy.engine import Connection

from autosched.database.common import DatabaseError, SchemaVersionError
from autosched.database.record import producer_info
from autosched.database.schema import MIGRATIONS, SCHEMA_VERSION, TABLE_NAMES, Base, SchemaInfo

logger = logging.getLogger("autosched.database")

_S = SchemaInfo.__table__

Transaction = Callable[[], AbstractContextManager[Connection]]


def prepare(read: Transaction, write: Transaction, dialect: str, name: str, create: bool) -> None:
    """Make the database ``name`` hold this version's tables: create them (unless ``create`` is false), or
    upgrade them; ``read`` and ``write`` open its read and write transactions."""
    with read() as conn:
        version = read_version(conn, name)
    if version == SCHEMA_VERSION:
        return
    with write() as conn:
        if dialect == "postgresql":  # serialise concurrent creators/upgraders of one database
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7301125)")
        version = read_version(conn, name)
        if version is None:
            if not create:
                raise DatabaseError(f"{name} has no autosched tables (create=False)")
            Base.metadata.create_all(conn)
            conn.execute(_S.insert().values(id=1, version=SCHEMA_VERSION,
                                            autosched_version=producer_info()["autosched"], updated_at=time.time()))
            return
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{name} has schema version {version}, newer than this autosched "
                f"({producer_info()['autosched']}) understands ({SCHEMA_VERSION}); "
                f"upgrade autosched, or export the records to a JSON-lines log with the newer version")
        start = version
        while version < SCHEMA_VERSION:
            migrate = MIGRATIONS.get(version)
            if migrate is None:
                raise SchemaVersionError(f"{name} has schema version {version}, which this autosched "
                                         f"cannot upgrade (no migration from {version})")
            migrate(conn)
            version += 1
        conn.execute(_S.update().where(_S.c.id == 1).values(
            version=version, autosched_version=producer_info()["autosched"], updated_at=time.time()))
        logger.info("upgraded %s from schema version %d to %d", name, start, version)


def read_version(conn: Connection, name: str) -> int | None:
    """The stored schema version; None for a database without autosched tables."""
    names = set(inspect(conn).get_table_names())
    if SchemaInfo.__tablename__ not in names:
        ours = sorted(TABLE_NAMES & names)
        if ours:
            raise SchemaVersionError(f"{name} has autosched tables ({', '.join(ours)}) but no "
                                     f"{SchemaInfo.__tablename__} table: an unknown schema")
        return None
    try:
        row = conn.execute(select(_S.c.version).where(_S.c.id == 1)).first()
    except Exception as e:
        raise SchemaVersionError(f"{name}: unreadable {SchemaInfo.__tablename__} table ({e})") from None
    if row is None or not isinstance(row[0], int) or row[0] < 1:
        raise SchemaVersionError(f"{name}: unknown schema (version row {row!r})")
    return int(row[0])
