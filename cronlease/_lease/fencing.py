"""Fenced side effects: an attempt's writes in the lease database commit only while its
lease is still its own (docs/design.md §3.9).

A task that writes its effect in the database that holds the leases calls
:func:`verify_lease` in its own transaction, just before it commits. The lease
row is read under a share lock (PostgreSQL ``FOR SHARE``, MySQL/MariaDB ``LOCK
IN SHARE MODE``), which an acquisition's or a reacquisition's update of that
row waits for until the caller's transaction ends; on SQLite a write
transaction already excludes every other writer. So either the attempt still
holds the lease at its commit, or :class:`~cronlease.errors.LeaseLostError`
is raised and, propagating out of ``engine.begin()``, rolls the writes back.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from cronlease._lease.schema import leases
from cronlease.errors import LeaseLostError

__all__ = ["verify_lease"]

# read=True: FOR SHARE on PostgreSQL, LOCK IN SHARE MODE on MySQL/MariaDB, nothing on
# SQLite (whose write transaction excludes every other writer anyway)
_LEASE_ROW = (
    select(leases.c.fence, leases.c.holder)
    .where(leases.c.name == bindparam("b_name"))
    .with_for_update(read=True)
)


def verify_lease(connection: Connection, *, name: str, fence: int, holder: str) -> None:
    """Raise LeaseLostError unless the lease row of ``name`` still carries ``fence`` and
    ``holder`` (with its nonce); inside the caller's open transaction on the lease
    database, which it never commits nor rolls back."""
    row = connection.execute(_LEASE_ROW, {"b_name": name}).first()
    if row is None or int(row.fence) != fence or row.holder != holder:
        now = "no lease row" if row is None else f"fence {int(row.fence)} of another attempt"
        raise LeaseLostError(
            f"task {name!r} lost its lease: this attempt has fence {fence}, the database has "
            f"{now}; its writes in this transaction must not commit"
        )
