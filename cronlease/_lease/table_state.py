"""What a database holds of cronlease's tables, found without writing anything.

Read commands and the status page must not create what they read (a SQLite
file is created by opening it; tables by a replica or ``init-db``), nor upgrade
tables of an earlier version (a write, docs/design.md §3.9). This is the one
check they share: a SQLite path with no file is answered from the file system,
before anything connects.
"""

from __future__ import annotations

import enum

from sqlalchemy import inspect
from sqlalchemy.engine import URL, Engine

from cronlease._lease.dialects import statements_for_url
from cronlease._lease.dialects.base import upgrade_needed
from cronlease._lease.schema import (
    jobs,
    leases,
    runs,
    schedule_changes,
    schedule_heads,
    schedules,
)

__all__ = [
    "TableState",
    "missing_sqlite_file",
    "schedule_tables_present",
    "table_state",
    "uncreatable_sqlite_file",
]


class TableState(enum.Enum):
    NO_FILE = "no file"  # a SQLite path no file is at
    NONE = "none"  # a database without cronlease's tables
    EARLIER = "earlier"  # tables of a version before attempts (issue 13)
    CURRENT = "current"

    @property
    def readable(self) -> bool:
        """Whether the tables can be read as they are (missing ones read as empty)."""
        return self is not TableState.EARLIER


def missing_sqlite_file(url: URL) -> bool:
    """True for a SQLite URL whose file does not exist (opening it would create it)."""
    backend = statements_for_url(url)
    return backend is not None and backend.file_missing(url)


def uncreatable_sqlite_file(url: URL) -> str | None:
    """For a SQLite URL whose file does not exist, why it could not be created there."""
    backend = statements_for_url(url)
    return None if backend is None else backend.file_uncreatable(url)


def table_state(engine: Engine) -> TableState:
    """The state of ``engine``'s database; SQLAlchemyError when it cannot be read
    (:mod:`connect_errors` says why in one line)."""
    if missing_sqlite_file(engine.url):
        return TableState.NO_FILE
    with engine.connect() as conn:
        inspector = inspect(conn)
        if not inspector.has_table(leases.name) or not inspector.has_table(runs.name):
            return TableState.NONE
        return TableState.EARLIER if upgrade_needed(conn) else TableState.CURRENT


def schedule_tables_present(engine: Engine) -> bool:
    """Whether the tables schedule rows are read from exist (a database made before them,
    or none yet, has no schedule: reading it must not create them)."""
    if missing_sqlite_file(engine.url):
        return False
    with engine.connect() as conn:
        inspector = inspect(conn)
        return all(
            inspector.has_table(t.name) for t in (schedules, schedule_changes, schedule_heads, jobs)
        )
