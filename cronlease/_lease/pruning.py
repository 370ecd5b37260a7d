"""Run-history pruning statements: each deletes a bounded batch, in a transaction of its own.

One unbounded ``DELETE`` of an hour's history (1.8 M rows at the 8 x 500
ticks per second benchmark shape) holds its locks and its undo for as long as
it takes, behind which every replica's run rows wait. So a statement deletes
at most ``limit`` rows and commits; the housekeeping task repeats it within a
budget (cronlease/_run/housekeeping/pruning.py, docs/design.md §5.12). Rows still
``running`` are never deleted.

- **by age**: finished runs of the given tasks that started more than
  ``max_age`` seconds ago (database clock);
- **by count**: a task's finished runs older than its ``keep`` newest (newest
  by ``started_at``, then slot; running ones count among the newest): one
  index lookup finds the ``keep``-th newest, then rows strictly older go.

A batch is chosen by the backend (``Statements.bounded_delete``; neither
PostgreSQL nor SQLite has ``DELETE ... LIMIT``): PostgreSQL deletes ``ctid =
ANY(ARRAY(<LIMIT-ed subquery>))``, a TID scan (the key ``IN (subquery)`` form
hash-joined the table and was 5 times slower); SQLite the rows whose ``rowid``
a ``LIMIT``-ed subquery selects; MySQL/MariaDB ``DELETE ... LIMIT``, since
MariaDB refuses ``LIMIT`` in an ``IN`` subquery (and MySQL a subquery on the
table being deleted from), under READ COMMITTED so the range scan gap-locks
nothing (``Statements.begin_batch``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import (
    BigInteger,
    Double,
    Integer,
    String,
    and_,
    bindparam,
    or_,
    select,
)
from sqlalchemy.engine import Connection

from cronlease._lease.dialects.base import Statements
from cronlease._lease.schema import runs

__all__ = ["Pruning"]

_name = bindparam("b_name", type_=String)
_cut_started = bindparam("b_cut_started", type_=Double)
_cut_slot = bindparam("b_cut_slot", type_=BigInteger)


class Pruning:
    """The pruning statements of one backend."""

    def __init__(self, backend: Statements) -> None:
        self.backend = backend
        now = backend.now
        finished = runs.c.outcome != "running"
        old = and_(
            runs.c.name.in_(bindparam("b_names", expanding=True)),
            runs.c.started_at < now - bindparam("b_max_age", type_=Double),
            finished,
        )
        beyond = and_(
            runs.c.name == _name,
            or_(
                runs.c.started_at < _cut_started,
                and_(runs.c.started_at == _cut_started, runs.c.slot < _cut_slot),
            ),
            finished,
        )
        self._old = backend.bounded_delete(old)
        self._beyond = backend.bounded_delete(beyond)
        # the keep-th newest run (offset keep - 1), found on the (name, started_at) index
        self._cutoff = (
            select(runs.c.started_at, runs.c.slot)
            .where(runs.c.name == _name)
            .order_by(runs.c.started_at.desc(), runs.c.slot.desc())
            .limit(1)
            .offset(bindparam("b_offset", type_=Integer))
        )

    def old(self, conn: Connection, names: Sequence[str], max_age: float, limit: int) -> int:
        """Delete at most ``limit`` finished runs of ``names`` older than ``max_age`` s."""
        if not names:
            return 0
        with conn.begin():
            self.backend.begin_batch(conn)
            params = {"b_names": list(names), "b_max_age": max_age, "b_limit": limit}
            return int(conn.execute(self._old, params).rowcount)

    def beyond(self, conn: Connection, name: str, keep: int, limit: int) -> int:
        """Delete at most ``limit`` finished runs of ``name`` older than its ``keep`` newest."""
        with conn.begin():
            self.backend.begin_batch(conn)
            cutoff = conn.execute(self._cutoff, {"b_name": name, "b_offset": keep - 1}).first()
            if cutoff is None:
                return 0  # no more than ``keep`` runs
            params = {
                "b_name": name,
                "b_cut_started": float(cutoff.started_at),
                "b_cut_slot": int(cutoff.slot),
                "b_limit": limit,
            }
            return int(conn.execute(self._beyond, params).rowcount)
