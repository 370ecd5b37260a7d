"""MySQL and MariaDB statements (MySQL >= 8.0, MariaDB >= 10.6; tested on MariaDB 10.11).

Neither has ``ON CONFLICT ... DO UPDATE ... WHERE``, so acquisition is an
``INSERT ... SELECT ... ON DUPLICATE KEY UPDATE`` decided by the attempt's
nonce (docs/design.md §3.6); the SQL is in mysql_sql.py:

- The ``SELECT`` carries the future-slot gate, so a gated attempt inserts
  nothing and updates nothing, even for a task that never ran.
- The first assignment is ``holder = CASE WHEN <lease free> THEN :nonce ELSE
  holder END``; every later one tests ``holder = :nonce``. MySQL evaluates the
  assignments left to right and each sees the ones before it, so a condition
  repeated on every column would test a half-updated row: once ``slot`` is
  set, it is no longer older than the new slot, and so on.
- The assigned values are ``VALUES(col)``, each row's proposed value:
  deprecated since MySQL 8.0.20 (which still runs it, with a warning), but its
  replacement, the ``AS new`` row alias, does not exist on MariaDB, and the
  text must be the same on both.
- The row as the attempt left it, with ``holder = :nonce``, decides whether
  it won and otherwise explains the refusal: from ``RETURNING`` on MariaDB >=
  10.5, from a ``SELECT`` under the row lock the upsert took elsewhere. Not
  the affected-row count (ambiguous: SQLAlchemy sets the FOUND_ROWS client
  flag), not ``LAST_INSERT_ID()`` (it keeps a stale value per connection).
- In the same transaction, a winner marks earlier-fence ``running`` runs
  ``abandoned`` and records its run. Both statements find the lease row by
  the nonce, so they change nothing for a loser and need nothing from the
  client: the whole transaction goes to the server before a result is read.

Round trips: on engines cronlease creates, each lease transaction is one
multi-statement request (mysql_script.py) — an executed tick costs one
request to acquire and one to finish, a skipped tick one. Engines given to
``LeaseStore(engine)`` run the same statements one request each.

Every write transaction here runs at READ COMMITTED, whatever the session's
level (a user's engine may be REPEATABLE READ): there, marking a task's old
runs abandoned gap-locks the runs index up to the next task's runs, and
winners of neighbouring task names deadlock (tests/processes/test_mysql_race.py). cronlease's
own engines are READ COMMITTED sessions; on others each transaction starts
with ``SET TRANSACTION ISOLATION LEVEL READ COMMITTED``. Every transaction that
touches both tables locks the lease row first. If InnoDB still picks one as a
deadlock victim, it has rolled the whole transaction back, and it is retried
once: the slot gate makes a second acquisition attempt safe.

Batches pass one JSON array parameter read with ``JSON_TABLE`` (MariaDB >=
10.6, MySQL >= 8.0): the same upsert over all the batch's rows, in name order
(``utf8mb4_bin``, the key's own order), one read-back of every row, and the
winners' sweeps and run rows by nonce, in one transaction.

The clock is the UTC time counted from the epoch by datetime arithmetic, so
the session ``time_zone`` cannot move lease times (``UNIX_TIMESTAMP(NOW(6))``
depends on it, and is an hour off in a daylight-saving fold).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import Double, literal_column, text, true
from sqlalchemy.dialects.mysql import insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError

from cronlease._lease.dialects import mysql_sql as sql
from cronlease._lease.dialects.base import (
    ABANDONED_ERROR,
    PAUSED_ROW,
    Statements,
    acquire_rows,
    state_after_upsert,
)
from cronlease._lease.dialects.mysql_script import run_script, script, scripts_enabled
from cronlease._lease.model import AcquireRequest, Finish, Lease, LeaseState
from cronlease._lease.schema import leases

__all__ = ["MODES", "NOW", "STATEMENTS", "MySQLStatements"]

logger = logging.getLogger("cronlease")

NOW = literal_column(sql.NOW_SQL, Double)
R = TypeVar("R")
Row = dict[str, Any]

# Applies to the next transaction of the session only.
READ_COMMITTED = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"
ER_LOCK_DEADLOCK = 1213
# "CONSTRAINT ... failed", which PyMySQL raises as an OperationalError
ER_CONSTRAINT_FAILED = 4025

#: How a connection runs a lease transaction: one request deciding by
#: RETURNING (MariaDB >= 10.5), one request deciding by a read-back (MySQL,
#: older MariaDB), or one request per statement (engines cronlease did not create).
MODES = ("returning", "read-back", "statements")


def build_set_paused() -> Any:
    """Upsert the paused flag, so that a task that never ran can be paused too."""
    return insert(leases).values(**PAUSED_ROW).on_duplicate_key_update([("paused", true())])


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


def _batch_params(rows: Sequence[Row]) -> dict[str, Any]:
    """The parameters :func:`mysql_sql.rows` reads: a batch of one as scalars, else JSON."""
    if len(rows) == 1:
        return {f"b_{column}": value for column, value in rows[0].items()}
    return {"b_batch": json.dumps(rows)}


def _state(row: Row, request: AcquireRequest) -> LeaseState:
    return state_after_upsert(
        slot=int(row["slot"]),
        expires_at=float(row["expires_at"]),
        paused=bool(row["paused"]),
        db_now=float(row["db_now"]),
        request=request,
        fence=int(row["fence"]),
    )


class MySQLStatements(Statements):
    def __init__(self, mode: str | None = None) -> None:
        """``mode`` forces one of :data:`MODES` (for tests); by default each connection picks."""
        super().__init__(NOW)
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        self._set_paused = build_set_paused()
        # by whether the batch has one row (scalar parameters) or many (JSON)
        self._acquisition = {one: sql.acquisition(one=one) for one in (True, False)}
        self._finishing = {one: sql.finishing(one=one) for one in (True, False)}
        self._renewal = {one: sql.renewal(one=one) for one in (True, False)}
        self._acquire_scripts = {
            (one, returning): script(
                acquisition.upsert_returning if returning else acquisition.upsert,
                *([] if returning else [acquisition.outcomes]),
                acquisition.abandon_won,
                acquisition.record_won,
            )
            for one, acquisition in self._acquisition.items()
            for returning in (False, True)
        }
        self._outcomes_scripts = {
            one: script(acquisition.outcomes) for one, acquisition in self._acquisition.items()
        }
        self._finish_scripts = {
            one: script(finishing.release, finishing.finish_runs)
            for one, finishing in self._finishing.items()
        }
        self._renew_scripts = {
            one: script(renewal.renew, renewal.renewed) for one, renewal in self._renewal.items()
        }
        self._text = (
            {
                statement: text(statement)
                for acquisition in self._acquisition.values()
                for statement in acquisition
            }
            | {
                statement: text(statement)
                for finishing in self._finishing.values()
                for statement in finishing
            }
            | {
                statement: text(statement)
                for renewal in self._renewal.values()
                for statement in renewal
            }
        )

    def mode_for(self, conn: Connection) -> str:
        """This connection's way of running lease transactions (one of :data:`MODES`)."""
        if self.mode is not None:
            return self.mode
        if not scripts_enabled(conn):
            return "statements"
        dialect = conn.dialect
        mariadb = getattr(dialect, "is_mariadb", False)
        if mariadb and (dialect.server_version_info or ()) >= (10, 5):
            return "returning"
        return "read-back"

    # --- acquisition -------------------------------------------------------

    def acquire(
        self, conn: Connection, requests: Sequence[AcquireRequest], nonce_holders: Sequence[str]
    ) -> list[int | LeaseState | None]:
        rows = acquire_rows(requests, nonce_holders)
        one = len(rows) == 1
        rows.sort(key=lambda row: row["name"])  # utf8mb4_bin: the key's own order
        params = {**_batch_params(rows), "b_abandoned": ABANDONED_ERROR}
        mode = self.mode_for(conn)
        nonces = dict(zip((request.name for request in requests), nonce_holders, strict=True))
        found = {
            row["name"]: row
            for row in _retry_deadlock(
                "acquiring leases", lambda: self._acquire_once(conn, params, mode, one, nonces)
            )
        }
        missing = [row for row in rows if row["name"] not in found]
        if missing and mode == "returning":
            # RETURNING leaves out rows the future gate kept out (a clock ahead:
            # rare); one more request reads why they were refused. They wrote
            # nothing, so reading them after the commit decides nothing else.
            (refused,) = run_script(
                conn, self._outcomes_scripts[len(missing) == 1], _batch_params(missing)
            )
            found.update((row["name"], row) for row in refused)
        results: list[int | LeaseState | None] = []
        for request in requests:
            row = found.get(request.name)
            if row is None:  # a task that never ran, and a slot from the future
                results.append(None)
            elif row["holder"] == nonces[request.name]:
                results.append(int(row["fence"]))
            else:
                results.append(_state(row, request))
        return results

    def _acquire_once(
        self,
        conn: Connection,
        params: dict[str, Any],
        mode: str,
        one: bool,
        nonces: dict[str, str],
    ) -> list[Row]:
        if mode == "statements":
            acquisition = self._acquisition[one]
            with conn.begin():
                conn.exec_driver_sql(READ_COMMITTED)
                conn.execute(self._text[acquisition.upsert], params)
                result = conn.execute(self._text[acquisition.outcomes], params)
                rows = [dict(row) for row in result.mappings()]
                if any(row["holder"] == nonces[row["name"]] for row in rows):
                    conn.execute(self._text[acquisition.abandon_won], params)
                    conn.execute(self._text[acquisition.record_won], params)
            return rows
        (rows, *_) = run_script(conn, self._acquire_scripts[one, mode == "returning"], params)
        return rows

    # --- finishing ---------------------------------------------------------

    def finish(self, conn: Connection, items: Sequence[Finish]) -> None:
        one = len(items) == 1
        params = _batch_params(
            [
                {
                    "name": item.name,
                    "slot": item.slot,
                    "manual": int(item.manual),
                    "fence": item.fence,
                    "outcome": item.outcome,
                    "error": item.error,
                    "rel": int(item.release),
                    "holder": item.holder,
                }
                for item in sorted(items, key=lambda item: item.name)
            ]
        )
        finishing = self._finishing[one]

        def once() -> None:
            if self.mode_for(conn) != "statements":
                run_script(conn, self._finish_scripts[one], params)
                return
            with conn.begin():
                conn.exec_driver_sql(READ_COMMITTED)
                conn.execute(self._text[finishing.release], params)
                conn.execute(self._text[finishing.finish_runs], params)

        _retry_deadlock("finishing runs", once)

    # --- renewal -----------------------------------------------------------

    def heartbeat(self, conn: Connection, beats: Sequence[Lease]) -> set[str]:
        rows: list[Row] = [
            {"name": b.name, "fence": b.fence, "holder": b.holder, "ttl": float(b.ttl)}
            for b in sorted(beats, key=lambda b: b.name)  # utf8mb4_bin: the key's own order
        ]
        one = len(rows) == 1
        params = _batch_params(rows)
        renewal = self._renewal[one]

        def once() -> set[str]:
            if self.mode_for(conn) != "statements":
                (renewed,) = run_script(conn, self._renew_scripts[one], params)
                return {row["name"] for row in renewed}
            with conn.begin():
                conn.exec_driver_sql(READ_COMMITTED)
                conn.execute(self._text[renewal.renew], params)
                return {row.name for row in conn.execute(self._text[renewal.renewed], params)}

        return _retry_deadlock("renewing leases", once)

    def refuses_row(self, exc: DBAPIError) -> bool:
        args: tuple[object, ...] = getattr(exc.orig, "args", ())
        constraint = len(args) > 0 and args[0] == ER_CONSTRAINT_FAILED
        return super().refuses_row(exc) or (constraint and not exc.connection_invalidated)

    # --- the rest ----------------------------------------------------------

    def set_paused(self, conn: Connection, name: str) -> None:
        with conn.begin():
            conn.exec_driver_sql(READ_COMMITTED)
            conn.execute(self._set_paused, {"b_name": name})


STATEMENTS = MySQLStatements()
