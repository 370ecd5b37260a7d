"""SQLite statements (SQLite >= 3.35 for RETURNING).

SQLite has no data-modifying CTEs, so acquisition is three statements in one
``BEGIN IMMEDIATE`` transaction (see :mod:`cronlease.database`): all local,
and atomic all the same. The RETURNING result is read fully before commit.
"""

from __future__ import annotations

from sqlalchemy import Double, bindparam, literal_column, select
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.engine import Connection

from cronlease.dialects.base import (
    Statements,
    acquire_params,
    manual_param,
    run_slot_param,
)
from cronlease.dialects.on_conflict import build_acquire, build_set_paused
from cronlease.model import AcquireRequest, LeaseState
from cronlease.schema import runs

__all__ = ["STATEMENTS", "SQLiteStatements"]

# unixepoch('subsec') would be simpler but is NULL before SQLite 3.42.
NOW = literal_column("((julianday('now') - 2440587.5) * 86400.0)", Double)


class SQLiteStatements(Statements):
    dialect_names = ("sqlite",)

    def __init__(self) -> None:
        super().__init__(NOW)
        self._acquire = build_acquire(insert, NOW, manual=False)
        self._acquire_manual = build_acquire(insert, NOW, manual=True)
        self._set_paused = build_set_paused(insert)
        self._record_run = runs.insert().values(
            name=bindparam("b_name"),
            slot=run_slot_param,
            manual=manual_param,
            fence=bindparam("b_fence"),
            holder=bindparam("b_holder"),
            scheduled_for=bindparam("b_scheduled_for", type_=Double),
            started_at=bindparam("b_started_at", type_=Double),
            outcome="running",
        )
        self._select_now = select(NOW)

    def acquire(self, conn: Connection, request: AcquireRequest, nonce_holder: str) -> int | None:
        result = self.acquire_detailed(conn, request, nonce_holder)
        return result if isinstance(result, int) else None

    def acquire_detailed(
        self, conn: Connection, request: AcquireRequest, nonce_holder: str
    ) -> int | LeaseState | None:
        params = acquire_params(request, nonce_holder)
        statement = self._acquire_manual if request.manual else self._acquire
        with conn.begin():
            rows = conn.execute(statement, params).all()
            if not rows:
                return self._read_state(conn, request.name)
            fence = int(rows[0].fence)
            conn.execute(self._abandon, {"b_name": request.name, "b_fence": fence})
            conn.execute(
                self._record_run,
                {**params, "b_fence": fence, "b_started_at": float(rows[0].acquired_at)},
            )
            return fence

    def set_paused(self, conn: Connection, name: str) -> None:
        with conn.begin():
            conn.execute(self._set_paused, {"b_name": name})


STATEMENTS = SQLiteStatements()
