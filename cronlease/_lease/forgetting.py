"""``forget``: delete lease rows no run holds, then their run history, in bounded batches.

The one way a lease row is deleted (docs/design.md §5.15: never implicitly;
deleting one resets its task's slot cursor). The row goes in one statement,
``DELETE ... WHERE name IN (...) AND expires_at <= now`` on the database
clock, so a row a run holds, or takes at that moment, stays whatever was read
before. The history goes after it: kept, it would be read as the history of a
new task of the same name, and no pruning reaches the runs of an undeclared
task. Runs that started after the row went (a replica still declaring the task
made a new row) are not touched; the batches are :mod:`pruning`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Double, and_, bindparam, delete, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import BindParameter

from cronlease._lease.model import LeaseInfo
from cronlease._lease.pruning import begin_batch, bounded
from cronlease._lease.schema import leases, runs

__all__ = ["Forgetting"]

#: the store's ``_call(what, operation)``: a StoreError when the database fails
Call = Callable[..., Any]
#: run rows deleted per statement and transaction
FORGET_BATCH = 5000


class Forgetting:
    """The statements of ``forget`` on one backend; ``now`` is its database clock."""

    def __init__(self, dialect: str, now: ColumnElement[float]) -> None:
        self.dialect = dialect
        names: BindParameter[Any] = bindparam("b_names", expanding=True)
        self._now = select(now)
        self._rows = delete(leases).where(leases.c.name.in_(names), leases.c.expires_at <= now)
        cut = bindparam("b_cut", type_=Double)
        self._history = bounded(dialect, and_(runs.c.name.in_(names), runs.c.started_at <= cut))

    def forget(
        self,
        call: Call,
        read: Callable[[Sequence[str]], list[LeaseInfo]],
        names: Sequence[str],
    ) -> list[str]:
        """Delete the rows of ``names`` no run holds and their history; the names whose
        rows are gone. ``read`` reads lease rows back: one still there is held."""
        unique = sorted(set(names))
        if not unique:
            return []
        cut = call("forgetting lease rows", lambda conn: self._delete_rows(conn, unique))
        left = {row.name for row in read(unique)}
        gone = [name for name in unique if name not in left]
        params = {"b_names": gone, "b_cut": cut, "b_limit": FORGET_BATCH}
        while gone and call("forgetting run history", lambda conn: self._batch(conn, params)):
            pass  # a full batch went: there may be more
        return gone

    def _delete_rows(self, conn: Connection, names: list[str]) -> float:
        with conn.begin():
            cut = float(conn.execute(self._now).scalar_one())
            conn.execute(self._rows, {"b_names": names})
        return cut

    def _batch(self, conn: Connection, params: dict[str, object]) -> bool:
        with conn.begin():
            begin_batch(conn, self.dialect)
            return int(conn.execute(self._history, params).rowcount) >= FORGET_BATCH
