"""SQLite statements (SQLite >= 3.35 for RETURNING).

SQLite has no data-modifying CTEs, so acquisition is three statements in one
``BEGIN IMMEDIATE`` transaction (see :mod:`cronlease._lease.database`): all local,
and atomic all the same. The RETURNING result is read fully before commit.

Batches pass one JSON array parameter read with ``json_each()``: one statement
text whatever the batch size (so SQLAlchemy and sqlite3 cache it), rows
upserted in name order, the whole batch in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import Double, literal_column, text
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.engine import Connection

from cronlease._lease.dialects.base import (
    Finish,
    Statements,
    acquire_params,
    state_after_upsert,
)
from cronlease._lease.dialects.on_conflict import build_acquire, build_set_paused
from cronlease._lease.model import AcquireRequest, LeaseState
from cronlease._lease.schema import leases

__all__ = ["STATEMENTS", "SQLiteStatements"]

# unixepoch('subsec') would be simpler but is NULL before SQLite 3.42.
NOW_SQL = "((julianday('now') - 2440587.5) * 86400.0)"
NOW = literal_column(NOW_SQL, Double)


def _field(name: str) -> str:
    return f"json_extract(value, '$.{name}')"


# The docs/design.md §3.5 upsert over json_each(:b_batch); the WHERE before ON CONFLICT
# is required by SQLite's parser for INSERT ... SELECT ... ON CONFLICT anyway.
ACQUIRE_MANY = text(
    f"""
INSERT INTO {leases.name} AS l
    (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
SELECT {_field("name")}, {_field("holder")}, 1, {_field("slot")}, {NOW_SQL},
       {NOW_SQL} + {_field("ttl")}, 0, {_field("fingerprint")}
  FROM json_each(:b_batch)
 WHERE {_field("slot")} / 1000.0 <= {NOW_SQL} + {_field("tolerance")}
 ORDER BY 1
ON CONFLICT (name) DO UPDATE
   SET holder = excluded.holder, fence = l.fence + 1, slot = excluded.slot,
       acquired_at = excluded.acquired_at, expires_at = excluded.expires_at,
       fingerprint = excluded.fingerprint
 WHERE l.expires_at < {NOW_SQL} AND l.slot < excluded.slot AND NOT l.paused
RETURNING name, fence, holder, acquired_at
"""
)
STATES_MANY = text(
    f"""
SELECT name, slot, expires_at, paused, {NOW_SQL} AS db_now
  FROM {leases.name} WHERE name IN (SELECT value FROM json_each(:b_names))
"""
)


class SQLiteStatements(Statements):
    def __init__(self) -> None:
        super().__init__(NOW)
        self._acquire = build_acquire(insert, NOW, manual=False)
        self._acquire_manual = build_acquire(insert, NOW, manual=True)
        self._set_paused = build_set_paused(insert)

    def acquire_detailed(
        self, conn: Connection, request: AcquireRequest, nonce_holder: str
    ) -> int | LeaseState | None:
        params = acquire_params(request, nonce_holder)
        statement = self._acquire_manual if request.manual else self._acquire
        with conn.begin():
            rows = conn.execute(statement, params).all()
            if not rows:
                row = conn.execute(self._state, {"b_name": request.name}).first()
                if row is None:
                    return None
                return state_after_upsert(
                    slot=int(row[0]),
                    expires_at=float(row[1]),
                    paused=bool(row[2]),
                    db_now=float(row[3]),
                    request=request,
                )
            fence = int(rows[0].fence)
            conn.execute(self._abandon, {"b_name": request.name, "b_fence": fence})
            conn.execute(
                self._record_run,
                {**params, "b_fence": fence, "b_started_at": float(rows[0].acquired_at)},
            )
            return fence

    def acquire_many(
        self, conn: Connection, requests: Sequence[AcquireRequest], nonce_holders: Sequence[str]
    ) -> list[int | LeaseState | None]:
        batch = json.dumps(
            [
                {
                    "name": request.name,
                    "holder": nonce,
                    "slot": request.slot,
                    "ttl": float(request.ttl),
                    "tolerance": float(request.tolerance),
                    "fingerprint": request.fingerprint,
                }
                for request, nonce in zip(requests, nonce_holders, strict=True)
            ]
        )
        with conn.begin():
            won = {row.name: row for row in conn.execute(ACQUIRE_MANY, {"b_batch": batch}).all()}
            if won:
                by_name = {request.name: request for request in requests}
                conn.execute(
                    self._abandon,
                    [{"b_name": name, "b_fence": int(row.fence)} for name, row in won.items()],
                )
                conn.execute(
                    self._record_run,
                    [
                        {
                            "b_name": name,
                            "b_run_slot": by_name[name].slot,
                            "b_manual": False,
                            "b_fence": int(row.fence),
                            "b_holder": row.holder,
                            "b_scheduled_for": by_name[name].slot / 1000.0,
                            "b_started_at": float(row.acquired_at),
                        }
                        for name, row in won.items()
                    ],
                )
            lost = [request.name for request in requests if request.name not in won]
            states = {}
            if lost:
                states = {
                    row.name: row
                    for row in conn.execute(STATES_MANY, {"b_names": json.dumps(lost)}).all()
                }
        results: list[int | LeaseState | None] = []
        for request in requests:
            if request.name in won:
                results.append(int(won[request.name].fence))
            elif request.name in states:
                row = states[request.name]
                results.append(
                    state_after_upsert(
                        slot=int(row.slot),
                        expires_at=float(row.expires_at),
                        paused=bool(row.paused),
                        db_now=float(row.db_now),
                        request=request,
                    )
                )
            else:
                results.append(None)
        return results

    def finish_many(self, conn: Connection, items: Sequence[Finish]) -> None:
        with conn.begin():
            # Lease rows first, in name order, as everywhere else.
            released = [
                {"b_name": item.name, "b_fence": item.fence}
                for item in sorted(items, key=lambda item: item.name)
                if item.release
            ]
            if released:
                conn.execute(self._release, released)
            conn.execute(
                self._finish_run,
                [
                    {
                        "b_name": item.name,
                        "b_run_slot": item.slot,
                        "b_manual": item.manual,
                        "b_fence": item.fence,
                        "b_outcome": item.outcome,
                        "b_error": item.error,
                    }
                    for item in items
                ],
            )

    def set_paused(self, conn: Connection, name: str) -> None:
        with conn.begin():
            conn.execute(self._set_paused, {"b_name": name})


STATEMENTS = SQLiteStatements()
