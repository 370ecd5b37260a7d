"""MySQL and MariaDB (MySQL >= 8.0, MariaDB >= 10.6; tested on MariaDB 10.11): everything
cronlease knows of these backends, in one module.

Neither has ``ON CONFLICT ... DO UPDATE ... WHERE``, so acquisition is an
``INSERT ... SELECT ... ON DUPLICATE KEY UPDATE`` decided by the attempt's
nonce (docs/design.md §3.6):

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
multi-statement request (the scripts below) — an executed tick costs one
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
once: the slot gate makes a second acquisition attempt safe; an acquisition
that is a victim again is refused ("contended"). On MariaDB Galera a 1213
also comes at COMMIT, when another node's write set to the same rows was
certified first: the lease is won only once the COMMIT's result is read,
which the scripts below do before any row is looked at (docs/design.md §3.6).

Batches pass one JSON array parameter read with ``JSON_TABLE`` (MariaDB >=
10.6, MySQL >= 8.0): the same upsert over all the batch's rows, in name order
(``utf8mb4_bin``, the key's own order), one read-back of every row, and the
winners' sweeps and run rows by nonce, in one transaction.

The clock is the UTC time counted from the epoch by datetime arithmetic, so
the session ``time_zone`` cannot move lease times (``UNIX_TIMESTAMP(NOW(6))``
depends on it, and is an hour off in a daylight-saving fold).

One round trip per lease transaction: multi-statement scripts.

PostgreSQL runs each lease transaction as one autocommit statement. MySQL
needs several (no ``ON CONFLICT ... WHERE``, no RETURNING on MySQL), and
PyMySQL sends each one, and the COMMIT, as a request of its own. On engines
cronlease creates, a whole transaction — ``START TRANSACTION; ...; COMMIT`` —
goes to the server as one multi-statement query instead:

- :class:`ScriptConnection` is PyMySQL's connection with the
  ``MULTI_STATEMENTS`` client flag. SQLAlchemy rolls back every connection it
  hands back to the pool; when the last thing the connection ran was a script
  that committed (and the server says no transaction is open), that ROLLBACK
  would be a no-op round trip, so it is skipped.
- A ``do_execute`` hook reads every result set of a script inside SQLAlchemy's
  own execution, so an error in any statement, or a lost connection, surfaces
  as SQLAlchemy's ``DBAPIError`` with the connection invalidated as usual (the
  store's retry and unknown-outcome check rely on it). The server runs no
  statement after a failed one; the transaction it leaves open is rolled back
  by :func:`run_script` before the error propagates, so a pooled connection
  never carries unread results or an open transaction into its next use.

User engines given to ``LeaseStore(engine)`` have neither, and use one
statement per request (``scripts_enabled`` is false there).

Each transaction is a list of statements that are run either one request
each, or joined into one multi-statement request: the same text either way,
so the path MySQL takes is the path tested here on MariaDB.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, TypeVar

import pymysql.connections  # type: ignore[import-untyped]
from pymysql.constants import CLIENT, SERVER_STATUS  # type: ignore[import-untyped]
from sqlalchemy import (
    ColumnElement,
    Delete,
    Double,
    TextClause,
    create_engine,
    delete,
    event,
    inspect,
    literal_column,
    text,
    true,
)
from sqlalchemy.dialects.mysql import insert
from sqlalchemy.dialects.mysql import limit as mysql_limit
from sqlalchemy.engine import URL, Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from cronlease._lease.dialects.base import (
    ABANDONED_ERROR,
    CONNECT_TIMEOUT,
    HEARTBEAT_TIMEOUT,
    IDLE_IN_TRANSACTION_TIMEOUT,
    LIMIT,
    PAUSED_ROW,
    Statements,
    acquire_rows,
    members_lack_roles,
    state_after_upsert,
    upgrade_needed,
)
from cronlease._lease.membership import FleetStatements
from cronlease._lease.model import AcquireRequest, FinishRequest, Lease, LeaseState
from cronlease._lease.schema import RUNS_ATTEMPT_KEY, RUNS_SLOT_KEY, leases, members, runs

__all__ = [
    "MODES",
    "NOW",
    "STATEMENTS",
    "MySQLFleet",
    "MySQLStatements",
    "ScriptConnection",
    "enable_scripts",
    "run_script",
    "script",
    "scripts_enabled",
]

# Epoch seconds with microseconds. UTC_TIMESTAMP(6) ignores the session time
# zone and, like NOW(), is fixed for the whole statement.
NOW_SQL = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1e6)"
# Names and holders compare byte for byte, as the tables' utf8mb4_bin columns do.
BIN_SQL = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
_L = leases.name
_R = runs.name

# --- the rows of a transaction ---------------------------------------------------

#: (column, JSON_TABLE type) of an acquisition's rows
ACQUIRE_COLUMNS = (
    ("name", BIN_SQL),
    ("holder", BIN_SQL),
    ("slot", "BIGINT"),
    ("run_slot", "BIGINT"),
    ("ttl", "DOUBLE"),
    ("tolerance", "DOUBLE"),
    ("fingerprint", "VARCHAR(200)"),
)
FINISH_COLUMNS = (
    ("name", BIN_SQL),
    ("slot", "BIGINT"),
    ("manual", "INT"),
    ("fence", "BIGINT"),
    ("outcome", "VARCHAR(16)"),
    ("error", "VARCHAR(2000)"),
    ("rel", "INT"),
    ("holder", BIN_SQL),
)
HEARTBEAT_COLUMNS = (
    ("name", BIN_SQL),
    ("fence", "BIGINT"),
    ("holder", BIN_SQL),
    ("ttl", "DOUBLE"),
)


class _Rows:
    """How a transaction's statements read its rows.

    Many rows are the table ``b``, a ``JSON_TABLE`` over one JSON array
    parameter, joined to the lease and run rows. A batch of one — every lone
    tick, catch-up and run-now — reads scalar parameters instead, and its
    statements find their rows by key: a derived or JSON table costs each
    statement of the transaction ~50 µs more (materialized, sorted). The
    statements are the same otherwise; :func:`acquisition` and
    :func:`finishing` write each once, for both.
    """

    def __init__(self, columns: tuple[tuple[str, str], ...], *, one: bool) -> None:
        self.one = one
        paths = ", ".join(f"{c} {t} PATH '$.{c}'" for c, t in columns)
        self.table = f"JSON_TABLE(:b_batch, '$[*]' COLUMNS ({paths})) AS b"

    def __call__(self, column: str) -> str:
        """A column of the row being written."""
        return f":b_{column}" if self.one else f"b.{column}"


# --- acquisition -----------------------------------------------------------------

# VALUES(col) is each row's proposed value (deprecated by MySQL 8.0.20+, which
# still runs it; MariaDB has no other form). The first assignment takes the row
# for this attempt's nonce only if the lease is free; every later one tests
# holder = nonce, because MySQL evaluates assignments left to right and each sees
# the ones before it (docs/design.md §3.6). A manual request carries slot -1: no
# future gate, no older-slot condition, and the row keeps its slot cursor.
_OURS = f"{_L}.holder = VALUES(holder)"
_FREE = (
    f"{_L}.expires_at < {NOW_SQL} AND NOT {_L}.paused "
    f"AND (VALUES(slot) < 0 OR {_L}.slot < VALUES(slot))"
)
# The row as the attempt left it; the caller compares holders with its nonces.
_OUTCOME_COLUMNS = f"name, holder, fence, slot, expires_at, paused, {NOW_SQL} AS db_now"


def _if_ours(column: str) -> str:
    return f"{column} = CASE WHEN {_OURS} THEN VALUES({column}) ELSE {_L}.{column} END"


class Acquisition(NamedTuple):
    """The statements of one acquisition transaction."""

    upsert: str
    upsert_returning: str
    outcomes: str
    abandon_won: str
    record_won: str


def acquisition(*, one: bool) -> Acquisition:
    """For a batch of one row (scalar parameters) or of many (JSON rows, name order).

    A winner's sweep of older runs and its own run row find the lease row by
    the nonce, so a loser's change nothing and a winner's need no fence from
    the client: the whole acquisition goes to the server before any result is
    read. The lease row is read first: for a loser the statement ends there.
    """
    b = _Rows(ACQUIRE_COLUMNS, one=one)
    source = "DUAL" if one else f"{b.table}"
    order = "" if one else "\n ORDER BY b.name"
    upsert = f"""
INSERT INTO {_L} (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
SELECT {b("name")}, {b("holder")}, 1, {b("slot")}, {NOW_SQL}, {NOW_SQL} + {b("ttl")}, false,
       {b("fingerprint")}
  FROM {source}
 WHERE {b("slot")} < 0 OR {b("slot")} / 1000.0 <= {NOW_SQL} + {b("tolerance")}{order}
ON DUPLICATE KEY UPDATE
    holder = CASE WHEN {_FREE} THEN VALUES(holder) ELSE {_L}.holder END,
    fence = CASE WHEN {_OURS} THEN {_L}.fence + 1 ELSE {_L}.fence END,
    slot = CASE WHEN {_OURS} AND VALUES(slot) >= 0 THEN VALUES(slot) ELSE {_L}.slot END,
    {_if_ours("acquired_at")},
    {_if_ours("expires_at")},
    {_if_ours("fingerprint")}"""
    if one:
        leases_of_batch = f"{_L} l WHERE l.name = :b_name"
        won = f"{_L} l WHERE l.name = :b_name AND l.holder = :b_holder"
        abandon_from = f"{_L} l"
        abandon_where = "l.name = :b_name AND l.holder = :b_holder AND r.name = :b_name AND "
    else:
        leases_of_batch = f"{b.table} STRAIGHT_JOIN {_L} l ON l.name = b.name"
        won = f"{b.table} STRAIGHT_JOIN {_L} l ON l.name = b.name AND l.holder = b.holder"
        abandon_from, abandon_where = won, ""
    return Acquisition(
        upsert=upsert,
        # MariaDB >= 10.5: each row as this attempt left it; a row the future gate
        # kept out inserts and updates nothing, and so returns nothing
        upsert_returning=f"{upsert}\nRETURNING {_OUTCOME_COLUMNS}",
        # read back under the row locks the upsert took (no RETURNING, or rows missing)
        outcomes=f"""
SELECT l.name, l.holder, l.fence, l.slot, l.expires_at, l.paused, {NOW_SQL} AS db_now
  FROM {leases_of_batch}
""",
        abandon_won=f"""
UPDATE {abandon_from} STRAIGHT_JOIN {_R} r ON r.name = l.name
   SET r.outcome = 'abandoned', r.error = :b_abandoned
 WHERE {abandon_where}r.outcome = 'running' AND (r.fence < l.fence OR r.holder <> l.holder)
""",
        record_won=f"""
INSERT INTO {_R} (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
SELECT l.name, {b("run_slot")}, {b("slot")} < 0, l.fence, l.holder, {b("run_slot")} / 1000.0,
       l.acquired_at, 'running'
  FROM {won}{"" if one else " ORDER BY l.name"}
""",
    )


# --- finishing -------------------------------------------------------------------


class Finishing(NamedTuple):
    """The statements of one finishing transaction: lease rows first, as in
    acquisition, since a late finish that locked its run row first could deadlock
    with a winner that is abandoning that run."""

    release: str
    finish_runs: str


def finishing(*, one: bool) -> Finishing:
    b = _Rows(FINISH_COLUMNS, one=one)
    if one:
        leases_of_batch, runs_of_batch = f"{_L} l", f"{_R} r"
        lease_is_ours = "l.name = :b_name AND "
        run_is_ours = "r.name = :b_name AND r.slot = :b_slot AND r.manual = (:b_manual = 1) AND "
    else:
        leases_of_batch = f"{b.table} STRAIGHT_JOIN {_L} l ON l.name = b.name"
        runs_of_batch = (
            f"{b.table} STRAIGHT_JOIN {_R} r"
            " ON r.name = b.name AND r.slot = b.slot AND r.manual = (b.manual = 1)"
        )
        lease_is_ours = run_is_ours = ""
    return Finishing(
        release=f"""
UPDATE {leases_of_batch}
   SET l.expires_at = {NOW_SQL} - 0.001
 WHERE {lease_is_ours}{b("rel")} = 1 AND l.fence = {b("fence")} AND l.holder = {b("holder")}
""",
        finish_runs=f"""
UPDATE {runs_of_batch}
   SET r.outcome = CASE WHEN r.outcome = 'abandoned' THEN 'lost' ELSE {b("outcome")} END,
       r.finished_at = {NOW_SQL}, r.error = {b("error")}
 WHERE {run_is_ours}r.fence = {b("fence")} AND r.holder = {b("holder")}
   AND r.outcome IN ('running', 'abandoned')
""",
    )


# --- renewal ---------------------------------------------------------------------


class Renewal(NamedTuple):
    """The statements of one renewal transaction: extend the leases still ours (fence
    and holder), in name order, then read which those were (MySQL's UPDATE returns
    no rows; the row locks the update took hold until the commit)."""

    renew: str
    renewed: str


def renewal(*, one: bool) -> Renewal:
    b = _Rows(HEARTBEAT_COLUMNS, one=one)
    if one:
        leases_of_batch = f"{_L} l"
        lease_is_ours = "l.name = :b_name AND "
    else:
        leases_of_batch = f"{b.table} STRAIGHT_JOIN {_L} l ON l.name = b.name"
        lease_is_ours = ""
    ours = f"{lease_is_ours}l.fence = {b('fence')} AND l.holder = {b('holder')}"
    return Renewal(
        renew=f"""
UPDATE {leases_of_batch}
   SET l.expires_at = {NOW_SQL} + {b("ttl")}
 WHERE {ours}
""",
        renewed=f"""
SELECT l.name FROM {leases_of_batch}
 WHERE {ours}
""",
    )


# --- one request per transaction: scripts ----------------------------------------

# The execution option that carries a script's result list into the do_execute hook.
_RESULTS = "cronlease_script_results"

Rows = list[dict[str, Any]]


class ScriptConnection(pymysql.connections.Connection):  # type: ignore[misc]
    """PyMySQL's connection, accepting multi-statement queries."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["client_flag"] = kwargs.get("client_flag", 0) | CLIENT.MULTI_STATEMENTS
        # Set by the do_execute hook once a script's COMMIT has been read.
        self.script_committed = False
        super().__init__(*args, **kwargs)

    def query(self, sql: Any, unbuffered: bool = False) -> int:
        self.script_committed = False
        result: int = super().query(sql, unbuffered)
        return result

    def rollback(self) -> None:
        committed = self.script_committed and not (
            self.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS
        )
        self.script_committed = False
        if not committed:
            super().rollback()


def script(*statements: str) -> TextClause:
    """One transaction as one query; :func:`run_script` relies on the final COMMIT."""
    body = ";\n".join(statement.strip() for statement in statements)
    return text(f"START TRANSACTION;\n{body};\nCOMMIT")


def enable_scripts(engine: Engine) -> None:
    """Let ``engine`` (PyMySQL, READ COMMITTED sessions) run :func:`script` transactions.

    Scripts send no ``SET TRANSACTION ISOLATION LEVEL``: an engine enabled here
    must already be READ COMMITTED, as every engine cronlease creates is.
    """

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        return ScriptConnection(*cargs, **cparams)

    @event.listens_for(engine, "do_execute")
    def _execute(cursor: Any, statement: str, parameters: Any, context: Any) -> bool:
        results: list[Rows] | None = context.execution_options.get(_RESULTS)
        if results is None:
            return False  # an ordinary statement: SQLAlchemy executes it
        cursor.execute(statement, parameters)
        while True:
            if cursor.description is not None:
                names = [column[0] for column in cursor.description]
                results.append([dict(zip(names, row, strict=True)) for row in cursor.fetchall()])
            if not cursor.nextset():
                break
        cursor.connection.script_committed = True
        return True


def scripts_enabled(conn: Connection) -> bool:
    return isinstance(conn.connection.dbapi_connection, ScriptConnection)


def run_script(conn: Connection, statement: TextClause, params: dict[str, Any]) -> list[Rows]:
    """Run one :func:`script`; the rows of each of its row-returning statements, in order."""
    results: list[Rows] = []
    try:
        conn.execute(statement, params, execution_options={_RESULTS: results})
    finally:
        # Ends SQLAlchemy's implicit transaction: free after the script's own
        # COMMIT, a real ROLLBACK after a statement failed midway.
        conn.rollback()
    return results


# --- the statements --------------------------------------------------------------

logger = logging.getLogger("cronlease")

NOW = literal_column(NOW_SQL, Double)
R = TypeVar("R")
Row = dict[str, Any]

# Applies to the next transaction of the session only.
READ_COMMITTED = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"
ER_LOCK_DEADLOCK = 1213
# "CONSTRAINT ... failed", which PyMySQL raises as an OperationalError
ER_CONSTRAINT_FAILED = 4025
# "Duplicate column name", "Duplicate key name", "Can't DROP ...; check that it exists":
# another replica's ALTER came first
ALREADY_DONE = {1060, 1061, 1091}

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
    """The parameters :class:`_Rows` reads: a batch of one as scalars, else JSON."""
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


# MySQL/MariaDB server errors of the same kind; every client error (2000-2999) too
NO_ANSWER = frozenset(
    {
        1040,  # too many connections
        1053,  # server shutdown in progress
        1077,  # normal shutdown
        1078,  # got signal
        1079,  # shutdown complete
        1152,  # aborted connection
        1158,  # error reading communication packets
        1159,  # timeout reading communication packets
        1160,  # error writing communication packets
        1161,  # timeout writing communication packets
        1205,  # lock wait timeout
        1213,  # deadlock
        1317,  # query execution was interrupted
        1927,  # connection was killed
        1969,  # query execution was interrupted (max_statement_time)
        3024,  # maximum statement execution time exceeded
    }
)


#: client-side error codes (CR_*) start here; below are the server's (ER_*)
CLIENT_ERRORS = 2000


def driver_args(orig: object) -> tuple[object, ...] | None:
    """The arguments of a PyMySQL (or mysqlclient) error; None for another driver's."""
    if not type(orig).__module__.startswith(("pymysql", "MySQLdb")):
        return None
    return tuple(getattr(orig, "args", ()))


class MySQLFleet(FleetStatements):
    """Membership in one transaction, ``ON DUPLICATE KEY UPDATE``; the slot check
    through SQLAlchemy."""

    def __init__(self) -> None:
        super().__init__(NOW)

    def member_upsert(self, values: dict[str, Any], kept: Sequence[str]) -> Any:
        upsert = insert(members).values(**values)
        return upsert.on_duplicate_key_update({column: upsert.inserted[column] for column in kept})


def error_code(exc: DBAPIError) -> object:
    """The server's (or PyMySQL's) error number of ``exc``."""
    return getattr(exc.orig, "args", (None,))[0]


class MySQLStatements(Statements):
    def __init__(self, mode: str | None = None) -> None:
        """``mode`` forces one of :data:`MODES` (for tests); by default each connection picks."""
        super().__init__(NOW)
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        self._set_paused = build_set_paused()
        # by whether the batch has one row (scalar parameters) or many (JSON)
        self._acquisition = {one: acquisition(one=one) for one in (True, False)}
        self._finishing = {one: finishing(one=one) for one in (True, False)}
        self._renewal = {one: renewal(one=one) for one in (True, False)}
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
        try:
            got = _retry_deadlock(
                "acquiring leases", lambda: self._acquire_once(conn, params, mode, one, nonces)
            )
        except OperationalError as exc:
            if not is_deadlock(exc) or exc.connection_invalidated:
                raise
            # A victim twice (on Galera: certification failed at COMMIT, or a write set
            # from another node aborted it): rolled back, nothing written, and the error
            # came before any row was returned. Others wrote these rows: refused
            # ("contended"), never won, not a database failure (docs/design.md §3.6).
            logger.debug("acquiring leases: deadlock victim again; refused as contended")
            return [None] * len(requests)
        found = {row["name"]: row for row in got}
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

    def finish(self, conn: Connection, items: Sequence[FinishRequest]) -> None:
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

    @contextmanager
    def write_transaction(self, conn: Connection) -> Iterator[None]:
        """READ COMMITTED whatever the session's level: engines not made by cronlease
        may be REPEATABLE READ, whose gap locks on the runs index deadlock winners of
        neighbouring names (§3.6). Idle sessions: MariaDB's session setting."""
        with conn.begin():
            conn.exec_driver_sql(READ_COMMITTED)
            yield

    def begin_batch(self, conn: Connection) -> None:
        # READ COMMITTED: the range scan of a DELETE ... LIMIT gap-locks nothing
        conn.exec_driver_sql(READ_COMMITTED)

    def bounded_delete(self, where: ColumnElement[bool]) -> Delete:
        # DELETE ... LIMIT: MariaDB refuses LIMIT in an IN subquery, and MySQL a
        # subquery on the table being deleted from
        return delete(runs).where(where).ext(mysql_limit(LIMIT))

    def upgrade_runs(self, conn: Connection) -> None:
        """One ``ALTER TABLE`` (atomic in InnoDB, serialized by the metadata lock); the
        replica that loses the race gets "duplicate column" and finds the upgrade
        made by inspecting the table again."""
        keys = {index["name"] for index in inspect(conn).get_indexes(runs.name)}
        drop = f", DROP INDEX {RUNS_SLOT_KEY}" if RUNS_SLOT_KEY in keys else ""
        try:
            conn.exec_driver_sql(
                f"ALTER TABLE {runs.name} ADD COLUMN attempt INT NOT NULL DEFAULT 1{drop},"
                f" ADD CONSTRAINT {RUNS_ATTEMPT_KEY} UNIQUE (name, slot, manual, attempt)"
            )
        except OperationalError as exc:
            conn.rollback()  # the implicit transaction of the failed statement
            if error_code(exc) not in ALREADY_DONE or upgrade_needed(conn):
                raise

    def add_member_roles(self, conn: Connection, column: str) -> None:
        try:
            conn.exec_driver_sql(f"ALTER TABLE {members.name} ADD COLUMN {column}")
        except OperationalError as exc:
            conn.rollback()
            if error_code(exc) not in ALREADY_DONE or members_lack_roles(conn):
                raise

    def fleet_statements(self) -> FleetStatements:
        return MySQLFleet()

    def make_engine(
        self, url: URL, connect_args: dict[str, Any], *, read_only: bool, options: dict[str, Any]
    ) -> Engine:
        engine = create_engine(
            url,
            isolation_level="READ COMMITTED",
            pool_recycle=3600,
            # Every lease method ends its own transaction (and SQLAlchemy rolls
            # back one left open when the connection closes), so the pool's
            # ROLLBACK on return would be one more round trip per statement.
            pool_reset_on_return=None,
            connect_args={
                "connect_timeout": CONNECT_TIMEOUT,
                # lease times are epoch seconds from the server clock in UTC
                # A lock wait far past any tick's grace helps nobody.
                # /*M! ... */ is run by MariaDB only (MySQL has no such variable).
                "init_command": "SET time_zone = '+00:00', innodb_lock_wait_timeout = 10"
                f" /*M!100300 , idle_transaction_timeout = {IDLE_IN_TRANSACTION_TIMEOUT} */",
                **connect_args,
            },
            **options,
        )
        if engine.dialect.driver == "pymysql":
            enable_scripts(engine)  # one request per lease transaction
        return engine

    def answered(self, orig: object) -> bool | None:
        args = driver_args(orig)
        if not args or not isinstance(args[0], int):
            return None
        number = args[0]
        client = 2000 <= number < 3000  # the driver's own: no connection, lost, gone away
        return number >= 1000 and not client and number not in NO_ANSWER

    def refused_connect(self, exc: BaseException) -> bool | None:
        """A server error number (1000-1999: 1040 too many connections, 1045 access
        denied, 1203 a user's limit); the driver's own 2000s are the client's."""
        args = driver_args(exc)
        if args is None:
            return None
        return bool(args) and isinstance(args[0], int) and 1000 <= args[0] < 2000

    def connect_failure(self, where: str, orig: object) -> str | None:
        args = driver_args(orig)
        code = args[0] if args and isinstance(args[0], int) else None
        if args is None or code is None or code >= CLIENT_ERRORS:
            return None
        return f"cannot connect: {where}: {args[1] if len(args) > 1 else str(orig).strip()}"

    def renewal_session(self, dialect: Dialect) -> list[str]:
        seconds = HEARTBEAT_TIMEOUT
        if getattr(dialect, "is_mariadb", False):
            return [
                f"SET SESSION innodb_lock_wait_timeout = {max(1, int(seconds))}",
                f"SET SESSION max_statement_time = {seconds}",
            ]
        # MySQL bounds only SELECTs by time (max_execution_time); a lock wait is what hangs.
        return [f"SET SESSION innodb_lock_wait_timeout = {max(1, int(seconds))}"]


STATEMENTS = MySQLStatements()
