"""``forget``: delete lease rows no run holds, then the run history of tasks left without one.

The one way a lease row is deleted (docs/design.md §5.15: never implicitly;
deleting one resets its task's slot cursor). Which rows go is decided and done
in ONE transaction: the free rows are selected ``FOR UPDATE`` (SQLite: the
store's ``BEGIN IMMEDIATE``) and exactly those are deleted, so what is
returned is what happened, whatever a replica does at that moment. A row is
free as acquisition sees it: ``expires_at < now`` on the database clock, and
no run of its task still ``running`` (a run can outlive its lease: its
heartbeat lapsed in an outage while its process went on).

The history goes after, in bounded batches (:mod:`pruning`'s), each deleting
only runs of names that have no lease row at that moment: a run is only ever
written with its row, so a task a replica re-created meanwhile keeps its runs,
and a ``forget`` interrupted between two batches is finished by the next one,
which finds no row but the history still there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, delete, exists, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import BindParameter

from cronlease._lease.dialects.base import Statements
from cronlease._lease.schema import leases, runs
from cronlease._lease.watermark import Watermarks

__all__ = ["Forgetting"]

#: the store's ``_call(what, operation)``: a StoreError when the database fails
Call = Callable[..., Any]
#: run rows deleted per statement and transaction
FORGET_BATCH = 5000


class Forgetting:
    """The statements of ``forget`` on one backend."""

    def __init__(self, backend: Statements) -> None:
        self.backend = backend
        now = backend.now
        names: BindParameter[Any] = bindparam("b_names", expanding=True)
        chosen: BindParameter[Any] = bindparam("b_free", expanding=True)
        running = exists().where(runs.c.name == leases.c.name, runs.c.outcome == "running")
        self._free = (
            select(leases.c.name)
            .where(leases.c.name.in_(names), leases.c.expires_at < now, ~running)
            .with_for_update()
        )
        self._rows = delete(leases).where(leases.c.name.in_(chosen))
        self._left = select(leases.c.name).where(leases.c.name.in_(names))
        rowless = ~exists().where(leases.c.name == runs.c.name)
        self._history = backend.bounded_delete(and_(runs.c.name.in_(names), rowless))

    def forget(self, call: Call, names: Sequence[str], seen: Watermarks) -> list[str]:
        """Delete the free rows of ``names``, then the history of those of ``names`` left
        without a row; returns those names (a name that had no row is among them).
        ``seen`` is the store's memory of rows, which the deleted ones leave."""
        unique = sorted(set(names))
        if not unique:
            return []
        gone: list[str] = call(
            "forgetting lease rows", lambda conn: self._delete_rows(conn, unique)
        )
        seen.drop(gone)
        params = {"b_names": gone, "b_limit": FORGET_BATCH}
        # until a batch finds nothing: a short batch is no proof that none is left
        while gone and call("forgetting run history", lambda conn: self._batch(conn, params)):
            pass
        return gone

    def _delete_rows(self, conn: Connection, names: list[str]) -> list[str]:
        with self.backend.write_transaction(conn):  # READ COMMITTED on MySQL: no gap locks
            free = list(conn.execute(self._free, {"b_names": names}).scalars())
            if free:
                conn.execute(self._rows, {"b_free": free})
            left = set(conn.execute(self._left, {"b_names": names}).scalars())
        return [name for name in names if name not in left]

    def _batch(self, conn: Connection, params: dict[str, object]) -> int:
        with conn.begin():
            self.backend.begin_batch(conn)
            return int(conn.execute(self._history, params).rowcount)
