"""PostgreSQL: every statement, engine setting and upgrade of this backend, in one module.

Its statements run in autocommit: each method is one round trip.

Acquisition, the abandoned-run sweep and the new runs' history rows are one
statement (data-modifying CTEs), so a crash between them cannot leave a run
unrecorded; finishing runs and releasing their leases are one statement too.
The clock is ``statement_timestamp()``: ``now()`` is the transaction start.
The statements of the tick path run on the driver's cursor
(:mod:`cronlease._lease.dialects.driver`), the rest through SQLAlchemy.

Both tick statements read their rows from ``unnest()`` of parallel array
parameters (scalars for a batch of one: see :func:`batch_rows`), so each is
one text, prepared once where psycopg prepares (not by default: below),
and lease rows are locked in name order
(``ORDER BY name`` under the upsert / ``FOR UPDATE``), so concurrent batches of
overlapping tasks cannot deadlock (docs/design.md §3).

Engines: autocommit; ``connect_timeout``, TCP keepalives and
``tcp_user_timeout``, so a vanished server fails a statement in seconds; and no
server-side prepared statements unless asked:

psycopg 3 prepares a statement after 5 executions on a connection. A prepared
statement lives on one server connection, and PgBouncer in transaction
pooling gives each transaction any of its server connections: the next
execution fails with ``prepared statement "_pg3_0" does not exist`` (or
``... already exists``, another client's). So:

- cronlease's own engines pass ``prepare_threshold=None`` (never prepare),
  unless ``connect_args`` or the URL's query name one (:func:`threshold_for`):
  a number is psycopg's own (prepare after that many executions; 0: at once),
  ``none`` never; anything else is a ConfigError. In a URL SQLAlchemy would
  hand psycopg the text, so the value is taken out of the query and passed as
  a connect argument.
- On an adopted engine (``Scheduler(engine=app)``), whose pool is the
  application's, :func:`unprepared_while_ours` turns preparing off on a
  connection while cronlease holds it and gives it back its own value when it
  returns to the pool; a pool of cronlease's own made from that engine's
  creator (the renewal connection) never prepares (:func:`unprepared_pool`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Delete,
    Double,
    Text,
    TextClause,
    any_,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import Pool
from sqlalchemy.sql.elements import ColumnClause

from cronlease._lease.dialects.base import (
    ABANDONED_ERROR,
    CONNECT_TIMEOUT,
    HEARTBEAT_TIMEOUT,
    IDLE_IN_TRANSACTION_TIMEOUT,
    LIMIT,
    Statements,
    acquire_rows,
    build_set_paused,
    take_if_free,
    upgrade_needed,
)
from cronlease._lease.dialects.driver import DriverStatement
from cronlease._lease.membership import (
    MEMBER_COLUMNS,
    FleetStatements,
    MemberBeat,
    Members,
    members_of,
)
from cronlease._lease.model import AcquireRequest, FinishRequest, Lease, LeaseState
from cronlease._lease.schema import (
    RUNS_ATTEMPT_KEY,
    RUNS_SLOT_KEY,
    deliveries,
    leases,
    members,
    runs,
)
from cronlease._safe_text import redact_secrets
from cronlease.errors import ConfigError

__all__ = [
    "PREPARE_THRESHOLD",
    "STATEMENTS",
    "PostgreSQLFleet",
    "PostgreSQLStatements",
    "adopted",
    "threshold_for",
    "unprepared_pool",
    "unprepared_while_ours",
]

# --- never prepared unless asked (docs/design.md §3.10) ------------------------

PREPARE_THRESHOLD = "prepare_threshold"
_NEVER = ("none", "null", "off", "never")
# The execution option marking an adopted engine; the key its connections keep
# the application's value under while cronlease holds them.
_ADOPTED = "cronlease_unprepared"
_SAVED = "cronlease_prepare_threshold"
_restoring: weakref.WeakSet[Pool] = weakref.WeakSet()


def threshold_for(url: URL, connect_args: dict[str, Any]) -> tuple[URL, int | None]:
    """``url`` without a ``prepare_threshold`` query value, and psycopg's value: from
    ``connect_args``, else from the URL, else None (never prepare)."""
    in_query = url.query.get(PREPARE_THRESHOLD)
    if in_query is not None:
        url = url.difference_update_query([PREPARE_THRESHOLD])
    if PREPARE_THRESHOLD in connect_args:
        return url, _threshold(connect_args[PREPARE_THRESHOLD], "connect_args")
    if in_query is None:
        return url, None
    where = redact_secrets(url.render_as_string(hide_password=True))
    return url, _threshold(in_query, f"database URL {where!r}")


def _threshold(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _NEVER:
            return None
        if word.isascii() and word.isdigit():
            return int(word)
    raise ConfigError(
        f"{where}: {PREPARE_THRESHOLD} must be a whole number of executions after which"
        f" psycopg prepares a statement (0: at once) or none (never), not {value!r}"
    )


def adopted(engine: Engine) -> bool:
    """Whether ``engine`` came from :func:`unprepared_while_ours`."""
    return bool(engine.get_execution_options().get(_ADOPTED))


def unprepared_pool(engine: Engine, pool: Pool) -> None:
    """Make ``pool`` — cronlease's own, made with ``engine``'s pool creator (the renewal
    connection) — never prepare when ``engine`` is adopted: that creator is the
    application's, with the application's ``prepare_threshold``."""
    if not adopted(engine):
        return  # cronlease's engine: its connect arguments say what the user chose

    @event.listens_for(pool, "connect")
    def _connected(dbapi_connection: Any, _record: Any) -> None:
        if hasattr(dbapi_connection, PREPARE_THRESHOLD):
            dbapi_connection.prepare_threshold = None


def unprepared_while_ours(engine: Engine) -> Engine:
    """``engine`` (an application's, PostgreSQL) for cronlease's statements: unprepared.

    The application's engine may prepare (psycopg's default), which breaks
    PgBouncer's transaction pooling. An application that runs through one has
    turned it off for its own statements already; one that does not keeps its
    setting for its own statements. cronlease's are never prepared on either.
    """
    ours = engine.execution_options(**{_ADOPTED: True})

    @event.listens_for(ours, "engine_connect")
    def _checked_out(conn: Any) -> None:
        fairy = conn.connection
        dbapi_connection = fairy.dbapi_connection
        if _SAVED not in fairy.info and hasattr(dbapi_connection, PREPARE_THRESHOLD):
            fairy.info[_SAVED] = dbapi_connection.prepare_threshold
            dbapi_connection.prepare_threshold = None

    pool = ours.pool
    if pool not in _restoring:  # one listener per application pool, however many adopt it
        _restoring.add(pool)

        @event.listens_for(pool, "checkin")
        def _checked_in(dbapi_connection: Any, record: Any) -> None:
            if record is not None and _SAVED in record.info:
                saved = record.info.pop(_SAVED)
                if dbapi_connection is not None:
                    dbapi_connection.prepare_threshold = saved

    return ours


# --- statements ----------------------------------------------------------------

NOW_SQL = "(EXTRACT(EPOCH FROM statement_timestamp())::float8)"
NOW = literal_column(NOW_SQL, Double)

ACQUIRE_COLUMNS = (
    ("name", "text"),
    ("holder", "text"),
    ("slot", "bigint"),
    ("run_slot", "bigint"),
    ("ttl", "float8"),
    ("tolerance", "float8"),
    ("fingerprint", "text"),
)
FINISH_COLUMNS = (
    ("name", "text"),
    ("slot", "bigint"),
    ("manual", "boolean"),
    ("fence", "bigint"),
    ("outcome", "text"),
    ("error", "text"),
    ("release", "boolean"),
    ("holder", "text"),
)
HEARTBEAT_COLUMNS = (
    ("name", "text"),
    ("fence", "bigint"),
    ("holder", "text"),
    ("ttl", "float8"),
)


def batch_rows(columns: Sequence[tuple[str, str]], *, one: bool) -> str:
    """The ``batch`` CTE of a tick statement: its rows, from parameters.

    Many rows come from ``unnest()`` of one array parameter per column: one
    statement text whatever the count, prepared once where psycopg prepares
    (``prepare_threshold`` set: not by default, for PgBouncer). A batch of one —
    every lone tick, catch-up and run-now — passes scalars instead: an array's
    length is unknown to a cached generic plan, which then expects ten rows
    and loses to planning the statement afresh on every execution (a third of
    the round trip); with scalars the generic plan is the right one. Unprepared,
    every execution is planned for its own parameters anyway.
    The statement around the rows is the same text either way.
    """
    if one:
        return "SELECT " + ", ".join(f"CAST(:b_{c} AS {t}) AS {c}" for c, t in columns)
    arrays = ", ".join(f"CAST(:b_{c}s AS {t}[])" for c, t in columns)
    return f"SELECT * FROM unnest({arrays}) AS b({', '.join(c for c, _ in columns)})"


def batch_params(
    columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The parameters :func:`batch_rows` reads, for ``rows``."""
    if len(rows) == 1:
        return {f"b_{c}": rows[0][c] for c, _ in columns}
    return {f"b_{c}s": [row[c] for row in rows] for c, _ in columns}


def acquire_statement(rows: str) -> TextClause:
    """The acquisition upsert (docs/design.md §3.4) over the batch's rows, plus the
    abandoned-run sweep and the run rows, plus one row per request explaining a
    refusal from the statement's own snapshot of the lease row. A manual request
    carries slot -1: it needs no future gate and no older slot, and keeps the
    row's slot cursor."""
    return text(
        f"""
WITH batch AS (
    {rows}
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
     WHERE r.name = a.name AND r.outcome = 'running'
       AND (r.fence < a.fence OR r.holder <> a.holder)
    RETURNING r.slot
), recorded AS (
    INSERT INTO {runs.name}
        (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
    SELECT a.name, b.run_slot, b.slot < 0, a.fence, a.holder, b.run_slot::float8 / 1000.0,
           a.acquired_at, 'running'
      FROM acquired a JOIN batch b ON b.name = a.name
    RETURNING slot
)
SELECT b.name, a.fence, c.slot, c.expires_at, c.paused, {NOW_SQL} AS db_now, c.fence
  FROM batch b
  LEFT JOIN acquired a ON a.name = b.name
  LEFT JOIN {leases.name} c ON c.name = b.name
"""
    )


def _batch_locked(rows: str) -> str:
    """The batch's rows, then its lease rows locked in name order (as acquisition locks
    them), so batches of finishes, renewals and acquisitions cannot deadlock."""
    return f"""WITH batch AS (
    {rows}
), locked AS (
    SELECT l.name FROM {leases.name} l
     WHERE l.name IN (SELECT name FROM batch)
     ORDER BY l.name
       FOR UPDATE
)"""


def finish_statement(rows: str) -> TextClause:
    """Finish runs in one statement: lock their lease rows first, in name order (as
    acquisition does), then record outcomes and release the leases, fenced. The
    lease rows come first because a takeover's abandoned-run sweep locks them in
    that order: a finish locking the run row first deadlocked with it
    (test_pg_locking.py)."""
    return text(
        f"""
{_batch_locked(rows)}, finished AS (
    UPDATE {runs.name} r
       SET outcome = CASE WHEN r.outcome = 'abandoned' THEN 'lost' ELSE b.outcome END,
           finished_at = {NOW_SQL}, error = b.error
      FROM batch b
     WHERE (SELECT count(*) FROM locked) >= 0
       AND r.name = b.name AND r.slot = b.slot AND r.manual = b.manual AND r.fence = b.fence
       AND r.holder = b.holder AND r.outcome IN ('running', 'abandoned')
    RETURNING r.name
), released AS (
    UPDATE {leases.name} l SET expires_at = {NOW_SQL} - 0.001
      FROM batch b
     WHERE (SELECT count(*) FROM locked) >= 0
       AND b.release AND l.name = b.name AND l.fence = b.fence AND l.holder = b.holder
    RETURNING l.name
)
SELECT (SELECT count(*) FROM finished) AS finished, (SELECT count(*) FROM released) AS released
"""
    )


def heartbeat_statement(rows: str) -> TextClause:
    """Renew leases in one statement, fenced by fence and holder; rows locked in name
    order first (as acquisition and finish lock them), so a renewal of many cannot
    deadlock with a batch acquiring or finishing some of the same tasks."""
    return text(
        f"""
{_batch_locked(rows)}
UPDATE {leases.name} l SET expires_at = {NOW_SQL} + b.ttl
  FROM batch b
 WHERE (SELECT count(*) FROM locked) >= 0
   AND l.name = b.name AND l.fence = b.fence AND l.holder = b.holder
RETURNING l.name
"""
    )


def members_renewal() -> str:
    """Upsert and read the member rows in one statement, expired rows included (the
    caller deletes those it sees, rarely). The final SELECT reads the table as it was
    before the statement, so this batch's rows come from RETURNING."""
    return f"""
WITH batch AS (
    SELECT * FROM unnest(
        CAST(:b_holders AS text[]), CAST(:b_namespaces AS text[]),
        CAST(:b_task_sets AS text[]), CAST(:b_ttls AS float8[]), CAST(:b_roles AS text[])
    ) AS b(holder, namespace, task_set, ttl, roles)
), renewed AS (
    INSERT INTO {members.name} AS m ({MEMBER_COLUMNS})
    SELECT b.holder, b.namespace, b.task_set, {NOW_SQL}, {NOW_SQL}, {NOW_SQL} + b.ttl, b.roles
      FROM batch b ORDER BY b.holder
    ON CONFLICT (holder) DO UPDATE
       SET namespace = excluded.namespace, task_set = excluded.task_set,
           renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
           roles = excluded.roles
    RETURNING m.holder, m.namespace, m.task_set, m.started_at, m.renewed_at, m.expires_at,
              m.roles
)
SELECT {MEMBER_COLUMNS}, {NOW_SQL} FROM renewed
UNION ALL
SELECT {MEMBER_COLUMNS}, {NOW_SQL} FROM {members.name} m
 WHERE m.holder NOT IN (SELECT holder FROM batch)
"""


class PostgreSQLFleet(FleetStatements):
    """Membership in one statement (data-modifying CTEs); the slot check on the
    driver's cursor, one text for any count."""

    def __init__(self) -> None:
        super().__init__(NOW)
        self._renew = text(members_renewal())

    def member_upsert(self, values: dict[str, Any], kept: Sequence[str]) -> Any:
        return None  # the renewal is one statement of its own

    def cursor_statement(self) -> DriverStatement | None:
        return DriverStatement(
            text(
                f"SELECT name, slot, fence, expires_at, {NOW_SQL} FROM {leases.name}"
                " WHERE name = ANY(CAST(:b_names AS text[]))"
            )
        )

    def renew(self, conn: Connection, beats: Sequence[MemberBeat]) -> Members:
        ordered = sorted(beats, key=lambda beat: beat.holder)
        params = {
            "b_holders": [b.holder for b in ordered],
            "b_namespaces": [b.namespace for b in ordered],
            "b_task_sets": [b.task_set for b in ordered],
            "b_ttls": [float(b.ttl) for b in ordered],
            "b_roles": [b.roles for b in ordered],
        }
        rows = conn.execute(self._renew, params).all()
        db_now = float(rows[0][7])
        stale = sorted(row[0] for row in rows if float(row[5]) < db_now)
        if stale:  # rare: a replica died, or stopped without leaving
            conn.execute(self._delete_expired, {"b_expired": stale})
        return members_of([row[:7] for row in rows if float(row[5]) >= db_now], db_now)


# PostgreSQL SQLSTATE classes of a server that did not do the work: connection
# exception, transaction rollback (serialization, deadlock), insufficient
# resources, operator intervention (shutdown, cancel, timeouts), system error
NO_ANSWER_CLASSES = frozenset({"08", "40", "53", "57", "58"})
NO_ANSWER = frozenset({"55P03", "55006"})  # lock not available, object in use
# The transaction's start and its bound on idle time in one request (simple query
# protocol: no parameters), on a connection in autocommit. The bound is SET LOCAL,
# so it is never left on the server connection for the next client of a PgBouncer
# in transaction pooling.
IDLE_BOUND = f"SET LOCAL idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_TIMEOUT * 1000}"
BEGIN = f"BEGIN ISOLATION LEVEL READ COMMITTED; {IDLE_BOUND}"


class PostgreSQLStatements(Statements):
    names_per_read = 20_000

    def __init__(self) -> None:
        super().__init__(NOW)
        self._acquire = {
            one: DriverStatement(acquire_statement(batch_rows(ACQUIRE_COLUMNS, one=one)))
            for one in (True, False)
        }
        self._finish = {
            one: DriverStatement(finish_statement(batch_rows(FINISH_COLUMNS, one=one)))
            for one in (True, False)
        }
        # A renewal is bounded by HEARTBEAT_TIMEOUT, lock waits included (database.py),
        # by a setting of its own transaction: nothing is left on the server connection.
        bound = f"SET LOCAL statement_timeout = {int(HEARTBEAT_TIMEOUT * 1000)}"
        self._heartbeat = {
            one: DriverStatement(
                heartbeat_statement(batch_rows(HEARTBEAT_COLUMNS, one=one)), local=bound
            )
            for one in (True, False)
        }
        self._set_paused = build_set_paused(insert)
        # one array parameter, not a bound parameter per name: 100,000 names made a
        # statement that took a second to build and send
        self._some_leases = (
            select(*self._lease_columns)
            .where(leases.c.name == any_(bindparam("b_names", type_=ARRAY(Text))))
            .order_by(leases.c.name)
        )

    def acquire(
        self, conn: Connection, requests: Sequence[AcquireRequest], nonce_holders: Sequence[str]
    ) -> list[int | LeaseState | None]:
        rows = acquire_rows(requests, nonce_holders)
        params = {**batch_params(ACQUIRE_COLUMNS, rows), "b_abandoned": ABANDONED_ERROR}
        result, _ = self._acquire[len(rows) == 1].execute(conn, params)
        by_name = {row[0]: row[1:] for row in result}
        return [_acquired_or_state(by_name[request.name]) for request in requests]

    def finish(self, conn: Connection, items: Sequence[FinishRequest]) -> None:
        rows = [vars(item) for item in items]
        self._finish[len(rows) == 1].execute(conn, batch_params(FINISH_COLUMNS, rows))

    def heartbeat(self, conn: Connection, beats: Sequence[Lease]) -> set[str]:
        rows = [
            {"name": b.name, "fence": b.fence, "holder": b.holder, "ttl": float(b.ttl)}
            for b in beats
        ]
        result, _ = self._heartbeat[len(rows) == 1].execute(
            conn, batch_params(HEARTBEAT_COLUMNS, rows)
        )
        return {row[0] for row in result}

    def set_paused(self, conn: Connection, name: str) -> None:
        with conn.begin():
            conn.execute(self._set_paused, {"b_name": name})

    # --- the rest ----------------------------------------------------------

    @contextmanager
    def write_transaction(self, conn: Connection) -> Iterator[None]:
        """The store's connections are autocommit (each lease statement stands alone):
        a transaction of several statements is begun, at READ COMMITTED, with its
        bound on idle time as a setting of its own (§5.26)."""
        autocommit = bool(getattr(conn.connection.dbapi_connection, "autocommit", False))
        if not autocommit:  # not a store connection: psycopg begins it, at this level
            conn.execution_options(isolation_level="READ COMMITTED")  # reset when pooled
        with conn.begin():
            # in autocommit psycopg sends no BEGIN, and its COMMIT and ROLLBACK still
            # end the transaction the server has open
            conn.exec_driver_sql(BEGIN if autocommit else IDLE_BOUND)
            yield

    def claim_delivery(self, conn: Connection, task_id: str, name: str) -> bool:
        # ON CONFLICT DO NOTHING: a known id is no error (nor a line in the server's log)
        statement = (
            insert(deliveries)
            .values(task_id=task_id, name=name, claimed_at=self.now)
            .on_conflict_do_nothing(index_elements=[deliveries.c.task_id])
            .returning(deliveries.c.task_id)
        )
        with conn.begin():
            return conn.execute(statement).first() is not None

    def bounded_delete(self, where: ColumnElement[bool]) -> Delete:
        # ctid = ANY(ARRAY(...)): a TID scan; "IN (subquery)" would hash-join the table
        ctid: ColumnClause[Any] = literal_column("ctid")
        batch = select(ctid).select_from(runs).where(where).limit(LIMIT)
        return delete(runs).where(ctid == any_(func.array(batch.scalar_subquery())))

    def upgrade_runs(self, conn: Connection) -> None:
        """One transaction (DDL is transactional here) that locks the table and checks
        again under the lock: the second replica finds it done."""
        # The store's connections are autocommit: this one needs a real transaction, and
        # the table lock is released with it (it holds under PgBouncer's transaction pooling).
        with self.write_transaction(conn):
            conn.execute(text(f"LOCK TABLE {runs.name} IN ACCESS EXCLUSIVE MODE"))
            if not upgrade_needed(conn):
                return  # another replica did it while we waited for the lock
            conn.execute(
                text(f"ALTER TABLE {runs.name} ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1")
            )
            conn.execute(text(f"ALTER TABLE {runs.name} DROP CONSTRAINT IF EXISTS {RUNS_SLOT_KEY}"))
            conn.execute(
                text(
                    f"ALTER TABLE {runs.name} ADD CONSTRAINT {RUNS_ATTEMPT_KEY}"
                    " UNIQUE (name, slot, manual, attempt)"
                )
            )

    def add_member_roles(self, conn: Connection, column: str) -> None:
        # autocommit: the ALTER is its own transaction; IF NOT EXISTS for the race
        conn.execute(text(f"ALTER TABLE {members.name} ADD COLUMN IF NOT EXISTS {column}"))

    def fleet_statements(self) -> FleetStatements:
        return PostgreSQLFleet()

    def make_engine(
        self, url: URL, connect_args: dict[str, Any], *, read_only: bool, options: dict[str, Any]
    ) -> Engine:
        url, prepare = threshold_for(url, connect_args)
        return create_engine(
            url,
            isolation_level="AUTOCOMMIT",
            connect_args={
                "connect_timeout": CONNECT_TIMEOUT,
                # A server that vanishes without closing the socket must fail a
                # statement in seconds, not hang a worker or the heartbeat thread.
                "keepalives": 1,
                "keepalives_idle": 5,
                "keepalives_interval": 2,
                "keepalives_count": 3,
                "tcp_user_timeout": 10_000,
                **connect_args,
                PREPARE_THRESHOLD: prepare,
            },
            **options,
        )

    def adopt(self, engine: Engine) -> Engine | None:
        # autocommit is an execution option: the application's pool can be shared
        return unprepared_while_ours(engine.execution_options(isolation_level="AUTOCOMMIT"))

    def answered(self, orig: object) -> bool | None:
        sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)  # psycopg 3, 2
        if not (isinstance(sqlstate, str) and len(sqlstate) == 5):
            return None
        return sqlstate[:2] not in NO_ANSWER_CLASSES and sqlstate not in NO_ANSWER

    def refused_connect(self, exc: BaseException) -> bool | None:
        """libpq (psycopg) writes the server's message after its severity, ``FATAL:``; a
        server whose messages are translated is not recognised, and is asked again at
        once as before."""
        return True if "FATAL:" in str(exc) else None

    def connect_failure(self, where: str, orig: object) -> str | None:
        if not type(orig).__module__.startswith("psycopg"):
            return None
        # libpq reports the server's refusal as "... failed: FATAL:  <reason>"
        _, fatal, reason = str(orig).strip().partition("FATAL:")
        if not (fatal and reason.strip()):
            return None
        return f"cannot connect: {where}: {reason.strip().splitlines()[0]}"

    def configure_side_pool(self, engine: Engine, pool: Any) -> None:
        unprepared_pool(engine, pool)  # an adopted engine's creator: ours alone


def _acquired_or_state(row: Sequence[Any]) -> int | LeaseState | None:
    """Read (fence, slot, expires_at, paused, db_now, row fence): the new fence, or the
    row that refused."""
    fence, slot, expires_at, paused, db_now, row_fence = row
    if fence is not None:
        return int(fence)
    if slot is None:
        return None
    return LeaseState(
        slot=int(slot),
        expires_at=float(expires_at),
        paused=bool(paused),
        db_now=float(db_now),
        fence=int(row_fence),
    )


STATEMENTS = PostgreSQLStatements()
