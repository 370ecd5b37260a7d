"""MySQL and MariaDB statements (MySQL >= 8.0, MariaDB >= 10.5; tested on MariaDB 10.11).

Neither has ``ON CONFLICT ... DO UPDATE ... WHERE ... RETURNING``, so
acquisition is an ``INSERT ... SELECT ... ON DUPLICATE KEY UPDATE`` decided by
the attempt's nonce (DESIGN.md §3, the MariaDB note):

- The ``SELECT`` carries the future-slot gate, so a gated attempt inserts
  nothing and updates nothing, even for a task that never ran.
- The first assignment is ``holder = CASE WHEN <lease free> THEN :nonce ELSE
  holder END``; every later one tests ``holder = :nonce``. MySQL evaluates the
  assignments left to right and each sees the ones before it, so a condition
  repeated on every column would test a half-updated row: once ``slot`` is
  set, it is no longer older than the new slot, and so on.
- The assigned values are the bind parameters and the clock expression
  themselves, not ``VALUES(col)`` (deprecated since MySQL 8.0.20, whose
  ``AS new`` row alias MariaDB does not have): the text is the same on both.
- Then one ``SELECT`` in the same transaction, under the row lock the upsert
  took, reads the row and ``holder = :nonce``: that decides whether this
  attempt won, and otherwise explains the refusal. Not the affected-row count
  (ambiguous: SQLAlchemy sets the FOUND_ROWS client flag), not
  ``LAST_INSERT_ID()`` (it keeps a stale value per connection), and not
  ``RETURNING`` (MariaDB only). A winner marks earlier-fence ``running`` runs
  ``abandoned`` and records its run before it commits.

Every write transaction here runs at READ COMMITTED, whatever the session's
level (a user's engine may be REPEATABLE READ): there, marking a task's old
runs abandoned gap-locks the runs index up to the next task's runs, and
winners of neighbouring task names deadlock (tests/test_mysql.py). Every
transaction that touches both tables locks the lease row first. If InnoDB
still picks an acquisition as a deadlock victim, it has rolled the whole
transaction back, and the acquisition is retried once: the slot gate makes
a second attempt safe.

Batches pass one JSON array parameter read with ``JSON_TABLE`` (MariaDB >=
10.6, MySQL >= 8.0): the same upsert over all the batch's rows, in name order
(``utf8mb4_bin``, the key's own order), then one read-back of every row by
its nonce, one sweep of abandoned runs and one insert of the winners' runs, in
one transaction. ``VALUES(col)`` names each row's proposed values there (MySQL
8.0.20+ warns it is deprecated but keeps it; MariaDB has no other form).

The clock is the UTC time counted from the epoch by datetime arithmetic, so
the session ``time_zone`` cannot move lease times (``UNIX_TIMESTAMP(NOW(6))``
depends on it, and is an hour off in a daylight-saving fold).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Double,
    String,
    and_,
    bindparam,
    case,
    false,
    literal,
    literal_column,
    not_,
    select,
    text,
    true,
)
from sqlalchemy.dialects.mysql import insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from cronlease.dialects.base import (
    ABANDONED_ERROR,
    Finish,
    Statements,
    acquire_params,
    name_param,
    slot_param,
    state_after_upsert,
    ttl_param,
)
from cronlease.model import AcquireRequest, LeaseState
from cronlease.schema import leases, runs

__all__ = ["NOW", "STATEMENTS", "MySQLStatements"]

logger = logging.getLogger("cronlease")

# Epoch seconds with microseconds. UTC_TIMESTAMP(6) ignores the session time
# zone and, like NOW(), is fixed for the whole statement.
NOW_SQL = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1e6)"
NOW = literal_column(NOW_SQL, Double)
R = TypeVar("R")
NAME_SQL = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"


def _json_table(parameter: str, columns: str) -> str:
    return f"JSON_TABLE(:{parameter}, '$[*]' COLUMNS ({columns})) AS b"


_ACQUIRE_ROWS = _json_table(
    "b_batch",
    f"name {NAME_SQL} PATH '$.name', holder VARCHAR(255) PATH '$.holder', "
    "slot BIGINT PATH '$.slot', ttl DOUBLE PATH '$.ttl', tolerance DOUBLE PATH '$.tolerance', "
    "fingerprint VARCHAR(200) PATH '$.fingerprint'",
)
# The single-task upsert over JSON_TABLE: the first assignment decides (lease
# free and slot newer), every later one tests whether the row now carries the nonce.
_L = leases.name
_OURS = f"{_L}.holder = VALUES(holder)"


def _if_ours(column: str) -> str:
    return f"{column} = CASE WHEN {_OURS} THEN VALUES({column}) ELSE {_L}.{column} END"


ACQUIRE_MANY = text(
    f"""
INSERT INTO {_L} (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
SELECT b.name, b.holder, 1, b.slot, {NOW_SQL}, {NOW_SQL} + b.ttl, false, b.fingerprint
  FROM {_ACQUIRE_ROWS}
 WHERE b.slot / 1000.0 <= {NOW_SQL} + b.tolerance
 ORDER BY b.name
ON DUPLICATE KEY UPDATE
    holder = CASE WHEN {_L}.expires_at < {NOW_SQL} AND NOT {_L}.paused
                       AND {_L}.slot < VALUES(slot)
                  THEN VALUES(holder) ELSE {_L}.holder END,
    fence = CASE WHEN {_OURS} THEN {_L}.fence + 1 ELSE {_L}.fence END,
    {_if_ours("slot")},
    {_if_ours("acquired_at")},
    {_if_ours("expires_at")},
    {_if_ours("fingerprint")}
"""
)
# Read back under the row locks the upsert took; the caller compares holders with nonces.
OUTCOMES_MANY = text(
    f"""
SELECT l.name, l.holder, l.fence, l.acquired_at, l.slot, l.expires_at, l.paused,
       {NOW_SQL} AS db_now
  FROM {_json_table("b_names", f"name {NAME_SQL} PATH '$'")}
  STRAIGHT_JOIN {leases.name} l ON l.name = b.name
"""
)
_WINNER_ROWS = _json_table(
    "b_won",
    f"name {NAME_SQL} PATH '$.name', fence BIGINT PATH '$.fence', "
    "slot BIGINT PATH '$.slot', holder VARCHAR(255) PATH '$.holder', "
    "scheduled_for DOUBLE PATH '$.scheduled_for', started_at DOUBLE PATH '$.started_at'",
)
ABANDON_MANY = text(
    f"""
UPDATE {_WINNER_ROWS} STRAIGHT_JOIN {runs.name} r ON r.name = b.name
   SET r.outcome = 'abandoned', r.error = :b_abandoned
 WHERE r.outcome = 'running' AND r.fence < b.fence
"""
)
RECORD_MANY = text(
    f"""
INSERT INTO {runs.name} (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
SELECT b.name, b.slot, false, b.fence, b.holder, b.scheduled_for, b.started_at, 'running'
  FROM {_WINNER_ROWS}
"""
)
_FINISH_ROWS = _json_table(
    "b_batch",
    f"name {NAME_SQL} PATH '$.name', slot BIGINT PATH '$.slot', manual INT PATH '$.manual', "
    "fence BIGINT PATH '$.fence', outcome VARCHAR(16) PATH '$.outcome', "
    "error VARCHAR(2000) PATH '$.error', rel INT PATH '$.release'",
)
RELEASE_MANY = text(
    f"""
UPDATE {_FINISH_ROWS} STRAIGHT_JOIN {leases.name} l ON l.name = b.name
   SET l.expires_at = {NOW_SQL} - 0.001
 WHERE b.rel = 1 AND l.fence = b.fence
"""
)
FINISH_RUNS_MANY = text(
    f"""
UPDATE {_FINISH_ROWS} STRAIGHT_JOIN {runs.name} r
    ON r.name = b.name AND r.slot = b.slot AND r.manual = (b.manual = 1)
   SET r.outcome = CASE WHEN r.outcome = 'abandoned' THEN 'lost' ELSE b.outcome END,
       r.finished_at = {NOW_SQL}, r.error = b.error
 WHERE r.fence = b.fence AND r.outcome IN ('running', 'abandoned')
"""
)

# Applies to the next transaction of the session only; sent before each write transaction.
READ_COMMITTED = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"
ER_LOCK_DEADLOCK = 1213

holder_param = bindparam("b_holder", type_=String)
fingerprint_param = bindparam("b_fingerprint", type_=String)
tolerance_param = bindparam("b_tolerance", type_=Double)


def build_acquire(*, manual: bool) -> Any:
    """The acquisition upsert; it changes the row only if the lease was free for this slot.

    A scheduled acquisition needs the lease expired, the slot newer than the
    row's and not from the future, and the task not paused. A manual one (run
    now) needs only expiry and no pause, and leaves the slot cursor as it is
    (-1 for a task that never ran, so its first scheduled tick still runs).
    """
    new_slot: Any = literal(-1, BigInteger) if manual else slot_param
    source = select(
        name_param,
        holder_param,
        literal(1, BigInteger),
        new_slot,
        NOW,
        NOW + ttl_param,
        false(),
        fingerprint_param,
    )
    if not manual:
        source = source.where(slot_param / 1000.0 <= NOW + tolerance_param)
    lease_free = and_(leases.c.expires_at < NOW, not_(leases.c.paused))
    if not manual:
        lease_free = and_(lease_free, leases.c.slot < slot_param)
    # After the first assignment, the row carries this attempt's nonce if and only if it won.
    ours = leases.c.holder == holder_param
    assignments: list[tuple[str, Any]] = [
        ("holder", case((lease_free, holder_param), else_=leases.c.holder)),
        ("fence", case((ours, leases.c.fence + 1), else_=leases.c.fence)),
    ]
    if not manual:
        assignments.append(("slot", case((ours, slot_param), else_=leases.c.slot)))
    assignments += [
        ("acquired_at", case((ours, NOW), else_=leases.c.acquired_at)),
        ("expires_at", case((ours, NOW + ttl_param), else_=leases.c.expires_at)),
        ("fingerprint", case((ours, fingerprint_param), else_=leases.c.fingerprint)),
    ]
    return insert(leases).from_select(list(leases.c), source).on_duplicate_key_update(assignments)


def build_set_paused() -> Any:
    """Upsert the paused flag, so that a task that never ran can be paused too."""
    return (
        insert(leases)
        .values(
            name=name_param,
            holder="",
            fence=0,
            slot=-1,
            acquired_at=0.0,
            expires_at=0.0,
            paused=True,
        )
        .on_duplicate_key_update([("paused", true())])
    )


def is_deadlock(exc: OperationalError) -> bool:
    args: tuple[object, ...] = getattr(exc.orig, "args", ())
    return len(args) > 0 and args[0] == ER_LOCK_DEADLOCK


def _retry_deadlock(what: str, transaction: Callable[[], R]) -> R:
    """Run ``transaction``; once more if InnoDB rolled it back as a deadlock victim."""
    try:
        return transaction()
    except OperationalError as exc:
        if not is_deadlock(exc) or exc.connection_invalidated:
            raise
        logger.debug("%s: deadlock victim; retrying once", what)
    return transaction()


class MySQLStatements(Statements):
    dialect_names = ("mysql", "mariadb")

    def __init__(self) -> None:
        super().__init__(NOW)
        self._acquire = build_acquire(manual=False)
        self._acquire_manual = build_acquire(manual=True)
        self._set_paused = build_set_paused()
        # Read back in the acquiring transaction, under the row lock the upsert
        # took: the row as this attempt left it, and whether it carries the nonce
        # (compared by the database, with the same collation as the upsert).
        self._outcome = select(
            (leases.c.holder == holder_param).label("won"),
            leases.c.fence,
            leases.c.acquired_at,
            leases.c.slot,
            leases.c.expires_at,
            leases.c.paused,
            NOW.label("db_now"),
        ).where(leases.c.name == name_param)

    def acquire_detailed(
        self, conn: Connection, request: AcquireRequest, nonce_holder: str
    ) -> int | LeaseState | None:
        params = acquire_params(request, nonce_holder)
        try:
            return self._acquire_once(conn, request, params)
        except OperationalError as exc:
            if not is_deadlock(exc) or exc.connection_invalidated:
                raise
            # InnoDB rolled the whole transaction back: nothing of it took effect.
            logger.debug("acquiring the lease of %r: deadlock victim; retrying once", request.name)
        return self._acquire_once(conn, request, params)

    def _acquire_once(
        self, conn: Connection, request: AcquireRequest, params: dict[str, Any]
    ) -> int | LeaseState | None:
        statement = self._acquire_manual if request.manual else self._acquire
        with conn.begin():
            conn.exec_driver_sql(READ_COMMITTED)
            conn.execute(statement, params)
            row = conn.execute(self._outcome, params).first()
            if row is None:  # a task that never ran, and a slot from the future
                return None
            if not row.won:
                return state_after_upsert(
                    slot=int(row.slot),
                    expires_at=float(row.expires_at),
                    paused=bool(row.paused),
                    db_now=float(row.db_now),
                    request=request,
                )
            fence = int(row.fence)
            conn.execute(self._abandon, {"b_name": request.name, "b_fence": fence})
            conn.execute(
                self._record_run,
                {**params, "b_fence": fence, "b_started_at": float(row.acquired_at)},
            )
            return fence

    def finish(self, conn: Connection, item: Finish) -> None:
        # The lease row first, as in acquire: a late finish that locked its run
        # row first could deadlock with a winner that is abandoning that run.
        with conn.begin():
            conn.exec_driver_sql(READ_COMMITTED)
            if item.release:
                conn.execute(self._release, {"b_name": item.name, "b_fence": item.fence})
            conn.execute(self._finish_run, item.params())

    def acquire_many(
        self, conn: Connection, requests: Sequence[AcquireRequest], nonce_holders: Sequence[str]
    ) -> list[int | LeaseState | None]:
        order = sorted(range(len(requests)), key=lambda index: requests[index].name)
        batch = json.dumps(
            [
                {
                    "name": requests[index].name,
                    "holder": nonce_holders[index],
                    "slot": requests[index].slot,
                    "ttl": float(requests[index].ttl),
                    "tolerance": float(requests[index].tolerance),
                    "fingerprint": requests[index].fingerprint,
                }
                for index in order
            ]
        )
        names = json.dumps([requests[index].name for index in order])
        return _retry_deadlock(
            "acquiring a batch of leases",
            lambda: self._acquire_many_once(conn, requests, nonce_holders, batch, names),
        )

    def _acquire_many_once(
        self,
        conn: Connection,
        requests: Sequence[AcquireRequest],
        nonce_holders: Sequence[str],
        batch: str,
        names: str,
    ) -> list[int | LeaseState | None]:
        nonces = dict(zip((request.name for request in requests), nonce_holders, strict=True))
        with conn.begin():
            conn.exec_driver_sql(READ_COMMITTED)
            conn.execute(ACQUIRE_MANY, {"b_batch": batch})
            rows = {row.name: row for row in conn.execute(OUTCOMES_MANY, {"b_names": names})}
            won = [row for name, row in rows.items() if row.holder == nonces[name]]
            if won:
                by_name = {request.name: request for request in requests}
                winners = json.dumps(
                    [
                        {
                            "name": row.name,
                            "fence": int(row.fence),
                            "slot": by_name[row.name].slot,
                            "holder": row.holder,
                            "scheduled_for": by_name[row.name].slot / 1000.0,
                            "started_at": float(row.acquired_at),
                        }
                        for row in sorted(won, key=lambda row: str(row.name))
                    ]
                )
                conn.execute(ABANDON_MANY, {"b_won": winners, "b_abandoned": ABANDONED_ERROR})
                conn.execute(RECORD_MANY, {"b_won": winners})
        results: list[int | LeaseState | None] = []
        for request in requests:
            row = rows.get(request.name)
            if row is None:  # a task that never ran, and a slot from the future
                results.append(None)
            elif row.holder == nonces[request.name]:
                results.append(int(row.fence))
            else:
                results.append(
                    state_after_upsert(
                        slot=int(row.slot),
                        expires_at=float(row.expires_at),
                        paused=bool(row.paused),
                        db_now=float(row.db_now),
                        request=request,
                    )
                )
        return results

    def finish_many(self, conn: Connection, items: Sequence[Finish]) -> None:
        batch = json.dumps(
            [
                {
                    "name": item.name,
                    "slot": item.slot,
                    "manual": int(item.manual),
                    "fence": item.fence,
                    "outcome": item.outcome,
                    "error": item.error,
                    "release": int(item.release),
                }
                for item in sorted(items, key=lambda item: item.name)
            ]
        )

        def once() -> None:
            # The lease rows first, as in acquire (see finish).
            with conn.begin():
                conn.exec_driver_sql(READ_COMMITTED)
                conn.execute(RELEASE_MANY, {"b_batch": batch})
                conn.execute(FINISH_RUNS_MANY, {"b_batch": batch})

        _retry_deadlock("finishing a batch of runs", once)

    def set_paused(self, conn: Connection, name: str) -> None:
        with conn.begin():
            conn.exec_driver_sql(READ_COMMITTED)
            conn.execute(self._set_paused, {"b_name": name})

    def prune(self, conn: Connection, names: Sequence[str], max_age: float) -> int:
        # A range scan of the runs table: at REPEATABLE READ it would gap-lock
        # runs and stall winners recording theirs until it commits.
        if not names:
            return 0
        with conn.begin():
            conn.exec_driver_sql(READ_COMMITTED)
            result = conn.execute(self._prune, {"b_names": list(names), "b_max_age": max_age})
            return int(result.rowcount)


STATEMENTS = MySQLStatements()
