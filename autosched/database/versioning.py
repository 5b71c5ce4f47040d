"""Schema handling of a ``Database``: create the tables, read the stored version, run the migrations."""

from __future__ import annotations

import time

from sqlalchemy import inspect, select
from sqlalchemy.engine import Connection

from autosched.database.common import _S, DatabaseError, SchemaVersionError, logger
from autosched.database.record import (
    producer_info,
)
from autosched.database.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    TABLE_NAMES,
    Base,
    SchemaInfo,
)


class SchemaMixin:
    """Creates, reads and upgrades the schema of the database (``schema.SCHEMA_VERSION``, ``schema.MIGRATIONS``)."""

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

