"""Creating the tables, and upgrading those of earlier versions in place.

``cronlease_members`` of versions before roles (issue 16) lacks ``roles``:
:func:`_add_member_roles` adds it (``NOT NULL DEFAULT ''``, so replicas of the
old version, which do not name it, go on writing rows without roles). Member rows
live seconds, so nothing is copied; a replica that loses the race to add it
finds it there (PostgreSQL ``IF NOT EXISTS``, MySQL "duplicate column", SQLite
checks again under its write lock).

Databases made before attempts existed (issue 13) have ``cronlease_runs``
without ``attempt`` and with the unique key ``cronlease_runs_slot_key`` (name,
slot, manual). :func:`create_tables` adds the column (existing history becomes
attempt 1) and swaps the key for ``cronlease_runs_attempt_key``, safely when
several replicas start at once (docs/design.md §3.9):

- PostgreSQL: one transaction (DDL is transactional there) that locks the
  table and checks again under the lock: the second replica finds it done.
- MySQL/MariaDB: one ``ALTER TABLE`` (atomic in InnoDB, serialized by the
  metadata lock); the replica that loses the race gets "duplicate column" and
  finds the upgrade made by inspecting the table again.
- SQLite cannot change a table's constraints: the table is rebuilt — a new
  one with every row copied, the old one dropped, the new one renamed and
  every index made again — in one ``BEGIN IMMEDIATE`` transaction, which also
  keeps the second replica out until it can see the result.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import MetaData, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.schema import CreateIndex, CreateTable

from cronlease._lease.dialects.attempts import write_transaction
from cronlease._lease.recovery import describe_error
from cronlease._lease.schema import (
    RUNS_ATTEMPT_KEY,
    RUNS_SLOT_KEY,
    members,
    metadata,
    runs,
)
from cronlease._roles import MAX_ROLES_LENGTH
from cronlease.errors import StoreError

__all__ = ["create_tables", "upgrade_needed"]

logger = logging.getLogger("cronlease")

# MySQL: "Duplicate column name", "Duplicate key name", "Can't DROP ...; check that it exists"
_MYSQL_ALREADY_DONE = {1060, 1061, 1091}
_REBUILT = "cronlease_runs_upgrade"
_FAILED = "creating the cronlease tables failed: "


def create_tables(engine: Engine) -> None:
    """Create what is missing, then upgrade tables of earlier versions in place."""
    for attempt in range(5):
        try:
            conn = engine.connect()
        except SQLAlchemyError as exc:
            raise StoreError(_FAILED + describe_error(exc)) from exc
        try:
            with conn:
                with conn.begin():
                    metadata.create_all(conn, checkfirst=True)
                needed = upgrade_needed(conn)
                no_roles = _members_lack_roles(conn)
                conn.rollback()  # the inspection's implicit transaction
                if needed:
                    _upgrade(conn)
                if no_roles:
                    _add_member_roles(conn)
            return
        except SQLAlchemyError as exc:
            # Another replica created a table between our check and our CREATE.
            if attempt == 4:
                raise StoreError(_FAILED + describe_error(exc)) from exc
            time.sleep(0.05 * (attempt + 1))


def upgrade_needed(conn: Connection) -> bool:
    """Whether ``cronlease_runs`` is of a version before attempts (no ``attempt`` column)."""
    columns = {column["name"] for column in inspect(conn).get_columns(runs.name)}
    return "attempt" not in columns


def _members_lack_roles(conn: Connection) -> bool:
    return "roles" not in {c["name"] for c in inspect(conn).get_columns(members.name)}


def _add_member_roles(conn: Connection) -> None:
    column = f"roles VARCHAR({MAX_ROLES_LENGTH}) NOT NULL DEFAULT ''"
    name = conn.dialect.name
    if name == "postgresql":  # autocommit: the ALTER is its own transaction
        conn.execute(text(f"ALTER TABLE {members.name} ADD COLUMN IF NOT EXISTS {column}"))
    elif name in ("mysql", "mariadb"):
        try:
            conn.exec_driver_sql(f"ALTER TABLE {members.name} ADD COLUMN {column}")
        except OperationalError as exc:
            conn.rollback()
            code = getattr(exc.orig, "args", (None,))[0]
            if code not in _MYSQL_ALREADY_DONE or _members_lack_roles(conn):
                raise
    else:
        with conn.begin():  # BEGIN IMMEDIATE: the second replica waits, then finds it
            if _members_lack_roles(conn):
                conn.exec_driver_sql(f"ALTER TABLE {members.name} ADD COLUMN {column}")
    logger.info("cronlease: added roles to %s (issue 16)", members.name)


def _upgrade(conn: Connection) -> None:
    name = conn.dialect.name
    if name == "postgresql":
        _upgrade_postgresql(conn)
    elif name in ("mysql", "mariadb"):
        _upgrade_mysql(conn)
    else:
        _upgrade_sqlite(conn)
    logger.info("cronlease: upgraded %s for attempts (issue 13)", runs.name)


def _upgrade_postgresql(conn: Connection) -> None:
    # The store's connections are autocommit: this one needs a real transaction, and
    # the table lock is released with it (it holds under PgBouncer's transaction pooling).
    with write_transaction(conn):
        conn.execute(text(f"LOCK TABLE {runs.name} IN ACCESS EXCLUSIVE MODE"))
        if not upgrade_needed(conn):
            return  # another replica did it while we waited for the lock
        conn.execute(text(f"ALTER TABLE {runs.name} ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1"))
        conn.execute(text(f"ALTER TABLE {runs.name} DROP CONSTRAINT IF EXISTS {RUNS_SLOT_KEY}"))
        conn.execute(
            text(
                f"ALTER TABLE {runs.name} ADD CONSTRAINT {RUNS_ATTEMPT_KEY}"
                " UNIQUE (name, slot, manual, attempt)"
            )
        )


def _upgrade_mysql(conn: Connection) -> None:
    keys = {index["name"] for index in inspect(conn).get_indexes(runs.name)}
    drop = f", DROP INDEX {RUNS_SLOT_KEY}" if RUNS_SLOT_KEY in keys else ""
    try:
        conn.exec_driver_sql(
            f"ALTER TABLE {runs.name} ADD COLUMN attempt INT NOT NULL DEFAULT 1{drop},"
            f" ADD CONSTRAINT {RUNS_ATTEMPT_KEY} UNIQUE (name, slot, manual, attempt)"
        )
    except OperationalError as exc:
        code = getattr(exc.orig, "args", (None,))[0]
        conn.rollback()  # the implicit transaction of the failed statement
        if code not in _MYSQL_ALREADY_DONE or upgrade_needed(conn):
            raise
        # another replica's ALTER came first


def _upgrade_sqlite(conn: Connection) -> None:
    with conn.begin():  # BEGIN IMMEDIATE (database.py): one writer until the commit
        if not upgrade_needed(conn):
            return
        # indexes made on the table besides cronlease's own are made again as they were
        own = {index.name for index in runs.indexes}
        others = [
            sql
            for (index_name, sql) in conn.exec_driver_sql(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
                (runs.name,),
            )
            if sql is not None and index_name not in own
        ]
        rebuilt = runs.to_metadata(MetaData(), name=_REBUILT)
        conn.execute(CreateTable(rebuilt, include_foreign_key_constraints=[]))
        old_columns = ", ".join(column.name for column in runs.columns if column.name != "attempt")
        conn.exec_driver_sql(
            f"INSERT INTO {_REBUILT} ({old_columns}, attempt)"
            f" SELECT {old_columns}, 1 FROM {runs.name}"
        )
        conn.exec_driver_sql(f"DROP TABLE {runs.name}")
        conn.exec_driver_sql(f"ALTER TABLE {_REBUILT} RENAME TO {runs.name}")
        for index in runs.indexes:
            conn.execute(CreateIndex(index))
        for sql in others:
            conn.exec_driver_sql(sql)
