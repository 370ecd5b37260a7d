"""PostgreSQL statements, run in autocommit: each method is one round trip.

Acquisition, the abandoned-run sweep and the new runs' history rows are one
statement (data-modifying CTEs), so a crash between them cannot leave a run
unrecorded; finishing runs and releasing their leases are one statement too.
The clock is ``statement_timestamp()``: ``now()`` is the transaction start.
The statements of the tick path run on the driver's cursor
(:mod:`cronlease._lease.dialects.driver`), the rest through SQLAlchemy.

Both tick statements read their rows from ``unnest()`` of parallel array
parameters: one statement text whatever the count (one tick is a batch of
one), so psycopg prepares it once, and lease rows are locked in name order
(``ORDER BY name`` under the upsert / ``FOR UPDATE``), so concurrent batches of
overlapping tasks cannot deadlock (docs/design.md §3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Double, literal_column, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection

from cronlease._lease.dialects.base import (
    ABANDONED_ERROR,
    Statements,
    acquire_rows,
)
from cronlease._lease.dialects.driver import DriverStatement
from cronlease._lease.dialects.on_conflict import build_set_paused, take_if_free
from cronlease._lease.model import AcquireRequest, Finish, LeaseState
from cronlease._lease.schema import leases, runs

__all__ = ["STATEMENTS", "PostgreSQLStatements"]

NOW_SQL = "(EXTRACT(EPOCH FROM statement_timestamp())::float8)"
NOW = literal_column(NOW_SQL, Double)

# The acquisition upsert (docs/design.md §3) over unnest(), plus the abandoned-run
# sweep and the run rows, plus one row per request explaining a refusal from the
# statement's own snapshot of the lease row. A manual request carries slot -1:
# it needs no future gate and no older slot, and keeps the row's slot cursor.
ACQUIRE = text(
    f"""
WITH batch AS (
    SELECT * FROM unnest(
        CAST(:b_names AS text[]), CAST(:b_holders AS text[]), CAST(:b_slots AS bigint[]),
        CAST(:b_run_slots AS bigint[]), CAST(:b_ttls AS float8[]),
        CAST(:b_tolerances AS float8[]), CAST(:b_fingerprints AS text[])
    ) AS b(name, holder, slot, run_slot, ttl, tolerance, fingerprint)
), acquired AS (
    INSERT INTO {leases.name} AS l
        (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
    SELECT b.name, b.holder, 1, b.slot, {NOW_SQL}, {NOW_SQL} + b.ttl, false, b.fingerprint
      FROM batch b
     WHERE b.slot < 0 OR b.slot::float8 / 1000.0 <= {NOW_SQL} + b.tolerance
     ORDER BY b.name
    {take_if_free(NOW_SQL)}
    RETURNING l.name, l.fence, l.holder, l.acquired_at
), abandoned AS (
    UPDATE {runs.name} r SET outcome = 'abandoned', error = :b_abandoned
      FROM acquired a
     WHERE r.name = a.name AND r.outcome = 'running' AND r.fence < a.fence
    RETURNING r.slot
), recorded AS (
    INSERT INTO {runs.name}
        (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
    SELECT a.name, b.run_slot, b.slot < 0, a.fence, a.holder, b.run_slot::float8 / 1000.0,
           a.acquired_at, 'running'
      FROM acquired a JOIN batch b ON b.name = a.name
    RETURNING slot
)
SELECT b.name, a.fence, c.slot, c.expires_at, c.paused, {NOW_SQL} AS db_now
  FROM batch b
  LEFT JOIN acquired a ON a.name = b.name
  LEFT JOIN {leases.name} c ON c.name = b.name
"""
)

# Finish runs in one statement: lock their lease rows first, in name order (as
# acquisition does), then record outcomes and release the leases, fenced. The
# lease rows come first because a takeover's abandoned-run sweep locks them in
# that order: a finish locking the run row first deadlocked with it
# (test_pg_locking.py).
FINISH = text(
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
        self._acquire = DriverStatement(ACQUIRE)
        self._finish = DriverStatement(FINISH)
        self._driver_heartbeat = DriverStatement(self._heartbeat)
        self._set_paused = build_set_paused(insert)

    def acquire(
        self, conn: Connection, requests: Sequence[AcquireRequest], nonce_holders: Sequence[str]
    ) -> list[int | LeaseState | None]:
        rows = acquire_rows(requests, nonce_holders)
        params = {
            "b_names": [row["name"] for row in rows],
            "b_holders": [row["holder"] for row in rows],
            "b_slots": [row["slot"] for row in rows],
            "b_run_slots": [row["run_slot"] for row in rows],
            "b_ttls": [row["ttl"] for row in rows],
            "b_tolerances": [row["tolerance"] for row in rows],
            "b_fingerprints": [row["fingerprint"] for row in rows],
            "b_abandoned": ABANDONED_ERROR,
        }
        result, _ = self._acquire.execute(conn, params)
        by_name = {row[0]: row[1:] for row in result}
        return [_acquired_or_state(by_name[request.name]) for request in requests]

    def finish(self, conn: Connection, items: Sequence[Finish]) -> None:
        params = {
            "b_names": [item.name for item in items],
            "b_slots": [item.slot for item in items],
            "b_manuals": [item.manual for item in items],
            "b_fences": [item.fence for item in items],
            "b_outcomes": [item.outcome for item in items],
            "b_errors": [item.error for item in items],
            "b_releases": [item.release for item in items],
        }
        self._finish.execute(conn, params)

    def heartbeat(self, conn: Connection, name: str, fence: int, ttl: float) -> bool:
        _, rowcount = self._driver_heartbeat.execute(
            conn, {"b_name": name, "b_fence": fence, "b_ttl": ttl}
        )
        return bool(rowcount)

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
