"""The statements of further attempts (retries, recoveries) and of the stuck watcher.

Rare next to ticks, so generic SQLAlchemy Core, the same on every backend, in
ordinary transactions (docs/design.md §3.9; begun by the backend's
``write_transaction``): an ``UPDATE ... WHERE`` judged by
its row count and a read-back, because MySQL/MariaDB have no ``UPDATE ...
RETURNING``. Every transaction locks lease rows before run rows, in name
order, as acquisition and finish do, so it cannot deadlock with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    Double,
    Integer,
    String,
    and_,
    bindparam,
    false,
    func,
    literal,
    not_,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection

from cronlease._lease.dialects.base import ABANDONED_ERROR, Statements
from cronlease._lease.model import AttemptCandidate, AttemptRequest
from cronlease._lease.outcomes import RECOVERABLE_OUTCOMES, RETRYABLE_OUTCOMES
from cronlease._lease.schema import leases, runs

__all__ = ["AttemptStatements"]

_name = bindparam("b_name", type_=String)
_slot = bindparam("b_slot", type_=BigInteger)
_fence = bindparam("b_fence", type_=BigInteger)
_holder = bindparam("b_holder", type_=String)
_names: BindParameter[Any] = bindparam("b_names", expanding=True)
_limit = bindparam("b_limit", type_=Integer)


class AttemptStatements:
    """The statements, built once per backend from its database clock."""

    def __init__(self, backend: Statements) -> None:
        self._backend = backend
        now = backend.now
        # The compare-and-swap: the attempt follows the one of fence b_fence, at the
        # same slot, on a free lease of a task not paused.
        self._take = (
            update(leases)
            .where(
                leases.c.name == _name,
                leases.c.fence == _fence,
                leases.c.slot == _slot,
                not_(leases.c.paused),
                leases.c.expires_at < now,
            )
            .values(
                holder=bindparam("b_nonce", type_=String),
                fence=leases.c.fence + 1,
                acquired_at=now,
                expires_at=now + bindparam("b_ttl", type_=Double),
            )
        )
        self._lock = (
            select(leases.c.name)
            .where(leases.c.name.in_(_names))
            .order_by(leases.c.name)
            .with_for_update()
        )
        self._row = select(*leases.c, now.label("db_now")).where(leases.c.name == _name)
        # Every run of the task still 'running' is another attempt's now (the one
        # followed, when its holder died; one of a database that lost writes).
        self._abandon_others = (
            update(runs)
            .where(
                runs.c.name == _name,
                runs.c.outcome == "running",
                or_(runs.c.fence < _fence, runs.c.holder != _holder),
            )
            .values(outcome="abandoned", finished_at=now, error=ABANDONED_ERROR)
        )
        self._record = runs.insert().values(
            name=_name,
            slot=_slot,
            manual=false(),
            fence=_fence,
            holder=_holder,
            scheduled_for=bindparam("b_scheduled_for", type_=Double),
            started_at=bindparam("b_started_at", type_=Double),
            outcome=literal("running", String),
            attempt=bindparam("b_attempt", type_=Integer),
        )
        # Joined by the unique key's prefix (name, slot, manual): a task's few attempts
        # of its last scheduled slot, whatever the length of its history. A manual run
        # is never retried nor recovered, so it is never a candidate.
        self._candidates = (
            select(
                runs.c.name,
                runs.c.slot,
                runs.c.manual,
                runs.c.fence,
                runs.c.attempt,
                runs.c.outcome,
                runs.c.finished_at,
                leases.c.expires_at,
                now.label("db_now"),
            )
            .select_from(leases)
            .join(
                runs,
                and_(
                    runs.c.name == leases.c.name,
                    runs.c.slot == leases.c.slot,
                    runs.c.manual == false(),
                    runs.c.fence == leases.c.fence,
                    runs.c.holder == leases.c.holder,
                ),
            )
            .where(
                leases.c.name.in_(_names),
                not_(leases.c.paused),
                or_(
                    runs.c.outcome.in_(RETRYABLE_OUTCOMES),
                    and_(
                        runs.c.outcome.in_(RECOVERABLE_OUTCOMES),
                        leases.c.expires_at < now,
                    ),
                ),
            )
            .order_by(leases.c.name)
        )
        # The stuck watcher, from the lease rows (one per task, paused and undeclared
        # ones too) to their runs still 'running' on the (name, outcome) index; the
        # lease rows locked (skipping those in use), so a renewal or a finish waits.
        self._stuck = (
            select(
                runs.c.name,
                runs.c.slot,
                runs.c.manual,
                runs.c.attempt,
                runs.c.fence,
                runs.c.holder,
            )
            .select_from(leases)
            .join(runs, and_(runs.c.name == leases.c.name, runs.c.outcome == "running"))
            .where(
                or_(
                    runs.c.fence != leases.c.fence,
                    runs.c.holder != leases.c.holder,
                    leases.c.expires_at < now,
                )
            )
            .order_by(leases.c.name, runs.c.slot, runs.c.attempt)
            .limit(_limit)
            .with_for_update(of=leases, skip_locked=True)
        )
        self._mark_stuck = (
            update(runs)
            .where(
                runs.c.name == _name,
                runs.c.slot == _slot,
                runs.c.manual == bindparam("b_manual"),
                runs.c.attempt == bindparam("b_attempt", type_=Integer),
                runs.c.fence == _fence,
                runs.c.holder == _holder,
                runs.c.outcome == "running",
            )
            .values(outcome="abandoned", finished_at=now, error=ABANDONED_ERROR)
        )
        count = func.count().label("abandoned")
        abandoned = runs.c.outcome == "abandoned"
        self._all_counts = select(runs.c.name, count).where(abandoned).group_by(runs.c.name)
        self._some_counts = (
            select(runs.c.name, count)
            .where(abandoned, runs.c.name.in_(_names))
            .group_by(runs.c.name)
        )

    def reacquire(
        self, conn: Connection, requests: Sequence[AttemptRequest], nonces: Sequence[str]
    ) -> list[Any]:
        """Per request (aligned), the lease row after its compare-and-swap, read in the
        same transaction (None: no row); it won iff the row's holder is its nonce."""
        rows: dict[str, Any] = {}
        with self._backend.write_transaction(conn):
            if len(requests) > 1:
                # in the database's name order, as acquisition locks them
                conn.execute(self._lock, {"b_names": [request.name for request in requests]})
            for request, nonce in zip(requests, nonces, strict=True):
                params = {
                    "b_name": request.name,
                    "b_fence": request.after_fence,
                    "b_slot": request.slot,
                    "b_nonce": nonce,
                    "b_ttl": float(request.ttl),
                }
                took = conn.execute(self._take, params).rowcount
                row = conn.execute(self._row, {"b_name": request.name}).first()
                rows[request.name] = row
                if not took or row is None or row.holder != nonce:
                    continue
                won = {"b_name": request.name, "b_fence": int(row.fence), "b_holder": nonce}
                conn.execute(self._abandon_others, won)
                conn.execute(
                    self._record,
                    {
                        **won,
                        "b_slot": request.slot,
                        "b_scheduled_for": request.slot / 1000.0,
                        "b_started_at": float(row.acquired_at),
                        "b_attempt": request.attempt,
                    },
                )
        return [rows[request.name] for request in requests]

    def candidates(self, conn: Connection, names: Sequence[str]) -> list[AttemptCandidate]:
        with conn.begin():
            rows = conn.execute(self._candidates, {"b_names": list(names)}).all()
        return [
            AttemptCandidate(
                name=row.name,
                slot=int(row.slot),
                manual=bool(row.manual),
                fence=int(row.fence),
                attempt=int(row.attempt),
                outcome=row.outcome,
                finished_at=None if row.finished_at is None else float(row.finished_at),
                expires_at=float(row.expires_at),
                db_now=float(row.db_now),
            )
            for row in rows
        ]

    def abandon_expired(self, conn: Connection, limit: int) -> list[tuple[str, int, int]]:
        marked: list[tuple[str, int, int]] = []
        with self._backend.write_transaction(conn):
            for run in conn.execute(self._stuck, {"b_limit": limit}).all():
                params = {
                    "b_name": run.name,
                    "b_slot": int(run.slot),
                    "b_manual": run.manual,
                    "b_attempt": int(run.attempt),
                    "b_fence": int(run.fence),
                    "b_holder": run.holder,
                }
                if conn.execute(self._mark_stuck, params).rowcount:
                    marked.append((run.name, int(run.slot), int(run.attempt)))
        return marked

    def abandoned_counts(self, conn: Connection, names: Sequence[str] | None) -> dict[str, int]:
        with conn.begin():
            if names is None:
                rows = conn.execute(self._all_counts).all()
            else:
                rows = conn.execute(self._some_counts, {"b_names": list(names)}).all()
        return {row.name: int(row.abandoned) for row in rows}
