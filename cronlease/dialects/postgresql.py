"""PostgreSQL statements, run in autocommit: each method is one round trip.

Acquisition, the abandoned-run sweep and the new run's history row are one
statement (data-modifying CTEs), so a crash between them cannot leave a run
unrecorded; finishing a run and releasing its lease are one statement too.
The clock is ``statement_timestamp()``: ``now()`` is the transaction start.
"""

from __future__ import annotations

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
    true,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection

from cronlease.dialects.base import Statements, acquire_params
from cronlease.dialects.on_conflict import build_acquire, build_set_paused
from cronlease.model import AcquireRequest, LeaseState
from cronlease.schema import leases, runs

__all__ = ["STATEMENTS", "PostgreSQLStatements"]

NOW = literal_column("(EXTRACT(EPOCH FROM statement_timestamp())::float8)", Double)


class PostgreSQLStatements(Statements):
    dialect_names = ("postgresql",)

    def __init__(self) -> None:
        super().__init__(NOW)
        self._acquire = self._acquire_and_record(manual=False)
        self._acquire_manual = self._acquire_and_record(manual=True)
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
        self._finish_and_release = select(finished.c.outcome).add_cte(released)

    def _acquire_and_record(self, *, manual: bool) -> Any:
        acquired = build_acquire(insert, NOW, manual=manual).cte("acquired")
        abandoned = (
            runs.update()
            .where(
                runs.c.name == acquired.c.name,
                runs.c.outcome == "running",
                runs.c.fence < acquired.c.fence,
            )
            .values(outcome="abandoned", error="its holder stopped renewing the lease")
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

    def acquire(self, conn: Connection, request: AcquireRequest, nonce_holder: str) -> int | None:
        result = self.acquire_detailed(conn, request, nonce_holder)
        return result if isinstance(result, int) else None

    def acquire_detailed(
        self, conn: Connection, request: AcquireRequest, nonce_holder: str
    ) -> int | LeaseState | None:
        statement = self._acquire_manual if request.manual else self._acquire
        with conn.begin():
            (row,) = conn.execute(statement, acquire_params(request, nonce_holder)).all()
        if row.fence is not None:
            return int(row.fence)
        if row.slot is None:
            return None
        return LeaseState(
            slot=int(row.slot),
            expires_at=float(row.expires_at),
            paused=bool(row.paused),
            db_now=float(row.db_now),
        )

    def finish(
        self,
        conn: Connection,
        *,
        name: str,
        run_slot: int,
        manual: bool,
        fence: int,
        outcome: str,
        error: str | None,
        release: bool,
    ) -> None:
        if not release:
            super().finish(
                conn,
                name=name,
                run_slot=run_slot,
                manual=manual,
                fence=fence,
                outcome=outcome,
                error=error,
                release=False,
            )
            return
        params = {
            "b_name": name,
            "b_run_slot": run_slot,
            "b_manual": manual,
            "b_fence": fence,
            "b_outcome": outcome,
            "b_error": error,
        }
        with conn.begin():
            conn.execute(self._finish_and_release, params).all()

    def set_paused(self, conn: Connection, name: str) -> None:
        with conn.begin():
            conn.execute(self._set_paused, {"b_name": name})


STATEMENTS = PostgreSQLStatements()
