"""Creating the tables, and upgrading those of earlier versions in place.

``cronlease_members`` of versions before roles (issue 16) lacks ``roles``: it
is added (``NOT NULL DEFAULT ''``, so replicas of the old version, which do not
name it, go on writing rows without roles). Member rows live seconds, so
nothing is copied; a replica that loses the race to add it finds it there.

Databases made before attempts existed (issue 13) have ``cronlease_runs``
without ``attempt`` and with the unique key ``cronlease_runs_slot_key`` (name,
slot, manual). :func:`create_tables` adds the column (existing history becomes
attempt 1) and swaps the key for ``cronlease_runs_attempt_key``, safely when
several replicas start at once (docs/design.md §3.9).

How, is each backend's own (``Statements.upgrade_runs`` and
``Statements.add_member_roles`` in its module under ``dialects/``): PostgreSQL
locks the table in one transaction, MySQL/MariaDB run one ``ALTER TABLE``,
SQLite rebuilds the table under its write lock.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from cronlease._lease.dialects import statements_for
from cronlease._lease.dialects.base import members_lack_roles, upgrade_needed
from cronlease._lease.recovery import describe_error
from cronlease._lease.schema import members, metadata, runs
from cronlease._roles import MAX_ROLES_LENGTH
from cronlease._safe_text import redact_secrets
from cronlease.errors import StoreError

__all__ = ["create_tables", "upgrade_needed"]

logger = logging.getLogger("cronlease")


def _failed(engine: Engine, exc: SQLAlchemyError) -> StoreError:
    """Which database it was: SQLite's "unable to open database file" names no file."""
    where = redact_secrets(engine.url.render_as_string(hide_password=True))
    return StoreError(f"creating the cronlease tables in {where} failed: {describe_error(exc)}")


#: the column added to ``cronlease_members`` of versions before roles
ROLES_COLUMN = f"roles VARCHAR({MAX_ROLES_LENGTH}) NOT NULL DEFAULT ''"


def create_tables(engine: Engine) -> None:
    """Create what is missing, then upgrade tables of earlier versions in place."""
    backend = statements_for(engine)
    for attempt in range(5):
        try:
            conn = engine.connect()
        except SQLAlchemyError as exc:
            raise _failed(engine, exc) from exc
        try:
            with conn:
                with conn.begin():
                    metadata.create_all(conn, checkfirst=True)
                needed = upgrade_needed(conn)
                no_roles = members_lack_roles(conn)
                conn.rollback()  # the inspection's implicit transaction
                if needed:
                    backend.upgrade_runs(conn)
                    logger.info("cronlease: upgraded %s for attempts", runs.name)
                if no_roles:
                    backend.add_member_roles(conn, ROLES_COLUMN)
                    logger.info("cronlease: added roles to %s", members.name)
            return
        except SQLAlchemyError as exc:
            # Another replica created a table between our check and our CREATE.
            if attempt == 4:
                raise _failed(engine, exc) from exc
            time.sleep(0.05 * (attempt + 1))
