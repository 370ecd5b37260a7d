"""PostgreSQL statements, run in autocommit: each method is one round trip.

Acquisition, the abandoned-run sweep and the new run's history row are one
statement (data-modifying CTEs), so a crash between them cannot leave a run
unrecorded; finishing a run and releasing its lease are one statement too.
The clock is ``statement_timestamp()``: ``now()`` is the transaction start.
The statements of the tick path run on the driver's cursor
(:mod:`cronlease._lease.dialects.driver`), the rest through SQLAlchemy.

Batches (:meth:`PostgreSQLStatements.acquire_many`, ``finish_many``) are the
same statements over ``unnest()`` of parallel array parameters: one statement
text whatever the batch size, so psycopg prepares it once, and lease rows are
locked in name order (``ORDER BY name`` under the upsert / ``FOR UPDATE``), so
concurrent batches of overlapping tasks cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Double,
    String,
    bindparam,
    func,
    literal,
    literal_column,
    select,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection

from cronlease._lease.dialects.base import ABANDONED_ERROR, Finish, Statements, acquire_params
from cronlease._lease.dialects.driver import DriverStatement
from cronlease._lease.dialects.on_conflict import build_acquire, build_set_paused
from cronlease._lease.model import AcquireRequest, LeaseState
from cronlease._lease.schema import leases, runs

__all__ = ["STATEMENTS", "PostgreSQLStatements"]

NOW_SQL = "(EXTRACT(EPOCH FROM statement_timestamp())::float8)"
NOW = literal_column(NOW_SQL, Double)

# Scheduled acquisition of many tasks in one statement: the docs/design.md §3.4 upsert
# over unnest(), plus the abandoned-run sweep and the run rows (as in the single
# statement), plus one row per requested task explaining a refusal.
ACQUIRE_MANY = text(
    f"""
WITH batch AS (
    SELECT * FROM unnest(
        CAST(:b_names AS text[]), CAST(:b_holders AS text[]), CAST(:b_slots AS bigint[]),
        CAST(:b_ttls AS float8[]), CAST(:b_tolerances AS float8[]),
        CAST(:b_fingerprints AS text[])
    ) AS b(name, holder, slot, ttl, tolerance, fingerprint)
), acquired AS (
    INSERT INTO {leases.name} AS l
        (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
    SELECT b.name, b.holder, 1, b.slot, {NOW_SQL}, {NOW_SQL} + b.ttl, false, b.fingerprint
      FROM batch b
     WHERE b.slot::float8 / 1000.0 <= {NOW_SQL} + b.tolerance
     ORDER BY b.name
    ON CONFLICT (name) DO UPDATE
       SET holder = excluded.holder, fence = l.fence + 1, slot = excluded.slot,
           acquired_at = excluded.acquired_at, expires_at = excluded.expires_at,
           fingerprint = excluded.fingerprint
     WHERE l.expires_at < {NOW_SQL} AND l.slot < excluded.slot AND NOT l.paused
    RETURNING l.name, l.fence, l.holder, l.slot, l.acquired_at
), abandoned AS (
    UPDATE {runs.name} r SET outcome = 'abandoned', error = :b_abandoned
      FROM acquired a
     WHERE r.name = a.name AND r.outcome = 'running' AND r.fence < a.fence
    RETURNING r.slot
), recorded AS (
    INSERT INTO {runs.name}
        (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
    SELECT a.name, a.slot, false, a.fence, a.holder, a.slot::float8 / 1000.0, a.acquired_at,
           'running'
      FROM acquired a
    RETURNING slot
)
SELECT b.name, a.fence, c.slot, c.expires_at, c.paused, {NOW_SQL} AS db_now
  FROM batch b
  LEFT JOIN acquired a ON a.name = b.name
  LEFT JOIN {leases.name} c ON c.name = b.name
"""
)

# Finish many runs in one statement: lock their lease rows first, in name order
# (as acquisition does), then record outcomes and release the leases, fenced.
FINISH_MANY = text(
    f"""
WITH batch AS (
    SELECT * FROM unnest(
        CAST(:b_names AS text[]), CAST(:b_slots AS bigint[]), CAST(:b_manuals AS boolean[]),
        CAST(:b_fences AS bigint[]), CAST(:b_outcomes AS text[]), CAST(:b_errors AS text[]),
        CAST(:b_releases AS boolean[])
    ) AS b(name, slot, manual, fence, outcome, error, release)
), locked AS (
    SELECT l.name FROM {leases.name} l
     WHERE l.name IN (SELECT name FROM batch)
     ORDER BY l.name
       FOR UPDATE
), finished AS (
    UPDATE {runs.name} r
       SET outcome = CASE WHEN r.outcome = 'abandoned' THEN 'lost' ELSE b.outcome END,
           finished_at = {NOW_SQL}, error = b.error
      FROM batch b
     WHERE (SELECT count(*) FROM locked) >= 0
       AND r.name = b.name AND r.slot = b.slot AND r.manual = b.manual AND r.fence = b.fence
       AND r.outcome IN ('running', 'abandoned')
    RETURNING r.name
), released AS (
    UPDATE {leases.name} l SET expires_at = {NOW_SQL} - 0.001
      FROM batch b
     WHERE (SELECT count(*) FROM locked) >= 0
       AND b.release AND l.name = b.name AND l.fence = b.fence
    RETURNING l.name
)
SELECT (SELECT count(*) FROM finished) AS finished, (SELECT count(*) FROM released) AS released
"""
)


class PostgreSQLStatements(Statements):
    def __init__(self) -> None:
        super().__init__(NOW)
        self._acquire = DriverStatement(self._acquire_and_record(manual=False))
        self._acquire_manual = DriverStatement(self._acquire_and_record(manual=True))
        self._driver_heartbeat = DriverStatement(self._heartbeat)
        self._acquire_many = DriverStatement(ACQUIRE_MANY)
        self._finish_many = DriverStatement(FINISH_MANY)
        self._set_paused = build_set_paused(insert)
        # Lock the lease row before the run row, as acquisition does (its sweep of
        # abandoned runs comes after the upsert): a late finish racing a takeover
        # would otherwise deadlock with it. The scalar subquery makes PostgreSQL
        # evaluate the locking CTE before it touches the run row.
        locked = (
            select(leases.c.fence)
            .where(leases.c.name == bindparam("b_name", type_=String))
            .with_for_update()
            .cte("locked")
        )
        lease_locked = select(func.count()).select_from(locked).scalar_subquery() >= 0
        finished = self._finish_run.where(lease_locked).returning(runs.c.outcome).cte("finished")
        released = self._release.where(lease_locked).returning(leases.c.fence).cte("released")
        self._finish_and_release = DriverStatement(select(finished.c.outcome).add_cte(released))

    def _acquire_and_record(self, *, manual: bool) -> Any:
        acquired = build_acquire(insert, NOW, manual=manual).cte("acquired")
        abandoned = (
            runs.update()
            .where(
                runs.c.name == acquired.c.name,
                runs.c.outcome == "running",
                runs.c.fence < acquired.c.fence,
            )
            .values(outcome="abandoned", error=ABANDONED_ERROR)
            .returning(runs.c.slot)
            .cte("abandoned")
        )
        recorded = (
            insert(runs)
            .from_select(
                [
                    runs.c.name,
                    runs.c.slot,
                    runs.c.manual,
                    runs.c.fence,
                    runs.c.holder,
                    runs.c.scheduled_for,
                    runs.c.started_at,
                    runs.c.outcome,
                ],
                select(
                    acquired.c.name,
                    bindparam("b_run_slot", type_=BigInteger),
                    bindparam("b_manual", type_=Boolean),
                    acquired.c.fence,
                    acquired.c.holder,
                    bindparam("b_scheduled_for", type_=Double),
                    acquired.c.acquired_at,
                    literal("running", String),
                ),
            )
            .returning(runs.c.slot)
            .cte("recorded")
        )
        # One row always: the new fence if this statement won, and the lease row
        # as the statement's snapshot saw it, to explain a refusal without asking again.
        probe = select(literal(1).label("one")).subquery("probe")
        current = leases.alias("current_lease")
        return (
            select(
                acquired.c.fence,
                current.c.slot,
                current.c.expires_at,
                current.c.paused,
                NOW.label("db_now"),
            )
            .select_from(
                probe.outerjoin(acquired, true()).outerjoin(
                    current, current.c.name == bindparam("b_name", type_=String)
                )
            )
            .add_cte(abandoned, recorded)
        )

    def acquire_detailed(
        self, conn: Connection, request: AcquireRequest, nonce_holder: str
    ) -> int | LeaseState | None:
        statement = self._acquire_manual if request.manual else self._acquire
        (row,), _ = statement.execute(conn, acquire_params(request, nonce_holder))
        return _acquired_or_state(row)

    def finish(self, conn: Connection, item: Finish) -> None:
        if not item.release:
            super().finish(conn, item)
            return
        self._finish_and_release.execute(conn, item.params())

    def heartbeat(self, conn: Connection, name: str, fence: int, ttl: float) -> bool:
        _, rowcount = self._driver_heartbeat.execute(
            conn, {"b_name": name, "b_fence": fence, "b_ttl": ttl}
        )
        return bool(rowcount)

    def acquire_many(
        self, conn: Connection, requests: Sequence[AcquireRequest], nonce_holders: Sequence[str]
    ) -> list[int | LeaseState | None]:
        params = {
            "b_names": [request.name for request in requests],
            "b_holders": list(nonce_holders),
            "b_slots": [request.slot for request in requests],
            "b_ttls": [float(request.ttl) for request in requests],
            "b_tolerances": [float(request.tolerance) for request in requests],
            "b_fingerprints": [request.fingerprint for request in requests],
            "b_abandoned": ABANDONED_ERROR,
        }
        rows, _ = self._acquire_many.execute(conn, params)
        by_name = {row[0]: row[1:] for row in rows}
        return [_acquired_or_state(by_name[request.name]) for request in requests]

    def finish_many(self, conn: Connection, items: Sequence[Finish]) -> None:
        params = {
            "b_names": [item.name for item in items],
            "b_slots": [item.slot for item in items],
            "b_manuals": [item.manual for item in items],
            "b_fences": [item.fence for item in items],
            "b_outcomes": [item.outcome for item in items],
            "b_errors": [item.error for item in items],
            "b_releases": [item.release for item in items],
        }
        self._finish_many.execute(conn, params)

    def set_paused(self, conn: Connection, name: str) -> None:
        with conn.begin():
            conn.execute(self._set_paused, {"b_name": name})


def _acquired_or_state(row: Sequence[Any]) -> int | LeaseState | None:
    """Read (fence, slot, expires_at, paused, db_now): the new fence, or the row that refused."""
    fence, slot, expires_at, paused, db_now = row
    if fence is not None:
        return int(fence)
    if slot is None:
        return None
    return LeaseState(
        slot=int(slot), expires_at=float(expires_at), paused=bool(paused), db_now=float(db_now)
    )


STATEMENTS = PostgreSQLStatements()
