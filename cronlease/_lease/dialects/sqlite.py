"""SQLite (>= 3.35 for RETURNING): every statement, engine setting and upgrade of this
backend, in one module.

SQLite has no data-modifying CTEs, so acquisition is three statements in one
``BEGIN IMMEDIATE`` transaction (:func:`sqlite_engine`): all local, and atomic
all the same. The RETURNING result is read fully before commit.

Acquisitions of many pass one JSON array parameter read with ``json_each()``
(one statement text whatever the count), rows upserted in name order, the
whole batch in one transaction; a batch of one passes its values as scalar
parameters to the same statement (:func:`acquire_statement`). The winners'
sweep and run rows, and a batch's finish, are one statement each over JSON rows
too (:func:`won_statements`, :func:`finish_statements`), not an ``executemany``
of one execution per task.

Engines: WAL, a busy timeout and ``BEGIN IMMEDIATE`` for every transaction (a
deferred one that later wants to write can fail at once with "database is
locked"); in-memory databases are refused; the file is guarded against being
deleted or replaced under the replica (:class:`FileGuard`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Delete,
    Double,
    MetaData,
    TextClause,
    TextualSelect,
    column,
    create_engine,
    delete,
    event,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.engine import URL, Connection, Dialect, Engine
from sqlalchemy.schema import CreateIndex, CreateTable
from sqlalchemy.sql.elements import ColumnClause

from cronlease._lease.dialects.base import (
    ABANDONED_ERROR,
    HEARTBEAT_TIMEOUT,
    LIMIT,
    Statements,
    acquire_rows,
    build_set_paused,
    members_lack_roles,
    state_after_upsert,
    take_if_free,
    upgrade_needed,
)
from cronlease._lease.dialects.driver import DriverStatement
from cronlease._lease.membership import FleetStatements
from cronlease._lease.model import AcquireRequest, FinishRequest, Lease, LeaseState
from cronlease._lease.pool import FORK_GATE
from cronlease._lease.schema import leases, members, runs
from cronlease.errors import ConfigError, DatabaseFileChanged

__all__ = [
    "SQLITE_BUSY_TIMEOUT_MS",
    "STATEMENTS",
    "FileGuard",
    "FileIdentity",
    "SQLiteFleet",
    "SQLiteStatements",
    "sqlite_engine",
]

SQLITE_BUSY_TIMEOUT_MS = 30_000

# unixepoch('subsec') would be simpler but is NULL before SQLite 3.42.
NOW_SQL = "((julianday('now') - 2440587.5) * 86400.0)"
NOW = literal_column(NOW_SQL, Double)


def acquire_statement(*, one: bool) -> TextualSelect:
    """The acquisition upsert (docs/design.md §3.5) of a batch of one (scalar
    parameters) or of many (``json_each(:b_batch)``, in name order: one text
    whatever the count). A lone tick skips the JSON, which would cost it more
    than the statement itself. The WHERE before ON CONFLICT is required by
    SQLite's parser for INSERT ... SELECT ... ON CONFLICT anyway. A manual
    request carries slot -1 (see base.acquire_rows)."""

    def field(name: str) -> str:
        return f":b_{name}" if one else f"json_extract(value, '$.{name}')"

    # The result's columns are named up front (untyped: no result processing),
    # so SQLAlchemy keeps the result metadata instead of building it from the
    # cursor on every execution (a sixth of a lone tick's cost on SQLite).

    source, order = ("", "") if one else ("\n  FROM json_each(:b_batch)", "\n ORDER BY 1")
    return text(
        f"""
INSERT INTO {leases.name} AS l
    (name, holder, fence, slot, acquired_at, expires_at, paused, fingerprint)
SELECT {field("name")}, {field("holder")}, 1, {field("slot")}, {NOW_SQL},
       {NOW_SQL} + {field("ttl")}, 0, {field("fingerprint")}{source}
 WHERE {field("slot")} < 0 OR {field("slot")} / 1000.0 <= {NOW_SQL} + {field("tolerance")}{order}
{take_if_free(NOW_SQL)}
RETURNING name, fence, holder, acquired_at
"""
    ).columns(*map(column, ("name", "fence", "holder", "acquired_at")))


def states_statement(*, one: bool) -> TextualSelect:
    """The lease rows of the requests that did not win, to explain their refusals."""
    names = "= :b_name" if one else "IN (SELECT value FROM json_each(:b_names))"
    return text(
        f"SELECT name, slot, expires_at, paused, {NOW_SQL} AS db_now, fence"
        f" FROM {leases.name} WHERE name {names}"
    ).columns(*map(column, ("name", "slot", "expires_at", "paused", "db_now", "fence")))


def heartbeat_statement(*, one: bool) -> TextualSelect:
    """Renew leases, fenced by fence and holder: one row by scalar parameters, many
    from ``json_each(:b_batch)`` (UPDATE ... FROM, SQLite >= 3.33); the names renewed."""
    if one:
        source = ""
        name, fence, holder, ttl = ":b_name", ":b_fence", ":b_holder", ":b_ttl"
    else:
        fields = ", ".join(
            f"json_extract(value, '$.{c}') AS {c}" for c in ("name", "fence", "holder", "ttl")
        )
        source = f"\n  FROM (SELECT {fields} FROM json_each(:b_batch)) AS b"
        name, fence, holder, ttl = "b.name", "b.fence", "b.holder", "b.ttl"
    return text(
        f"""
UPDATE {leases.name} SET expires_at = {NOW_SQL} + {ttl}{source}
 WHERE {leases.name}.name = {name} AND {leases.name}.fence = {fence}
   AND {leases.name}.holder = {holder}
RETURNING {leases.name}.name
"""
    ).columns(column("name"))


def _json_rows(parameter: str, fields: Sequence[str]) -> str:
    """The rows of a JSON array parameter, one column per field."""
    columns = ", ".join(f"json_extract(value, '$.{f}') AS {f}" for f in fields)
    return f"(SELECT {columns} FROM json_each(:{parameter}))"


def won_statements() -> tuple[TextClause, TextClause]:
    """A batch's winners, after its upsert: the abandoned-run sweep and their run rows,
    each one statement over ``:b_won`` (name, holder, run_slot, manual) whatever the
    count — not one execution per winner. Each finds its lease row by the attempt's
    nonce, as MySQL's do (docs/design.md §3.6), for its fence and acquisition time."""
    won = f"{_json_rows('b_won', ('name', 'holder', 'run_slot', 'manual'))} AS w"
    ours = f"{leases.name} l ON l.name = w.name AND l.holder = w.holder"
    abandon = text(
        f"""
UPDATE {runs.name} SET outcome = 'abandoned', error = :b_abandoned
  FROM {won} JOIN {ours}
 WHERE {runs.name}.name = l.name AND {runs.name}.outcome = 'running'
   AND ({runs.name}.fence < l.fence OR {runs.name}.holder <> l.holder)
"""
    )
    record = text(
        f"""
INSERT INTO {runs.name} (name, slot, manual, fence, holder, scheduled_for, started_at, outcome)
SELECT l.name, w.run_slot, w.manual, l.fence, l.holder, w.run_slot / 1000.0, l.acquired_at,
       'running'
  FROM {won} JOIN {ours}
"""
    )
    return abandon, record


def finish_statements() -> tuple[TextClause, TextClause]:
    """A batch's finish: its releases, then its runs' outcomes, each one statement over
    a JSON array (``:b_released``: name, fence, holder; ``:b_finished``: the run's key,
    fence, holder, outcome, error), fenced as the single statements are."""
    release = text(
        f"""
UPDATE {leases.name} SET expires_at = {NOW_SQL} - 0.001
  FROM {_json_rows("b_released", ("name", "fence", "holder"))} AS b
 WHERE {leases.name}.name = b.name AND {leases.name}.fence = b.fence
   AND {leases.name}.holder = b.holder
"""
    )
    fields = ("name", "slot", "manual", "fence", "holder", "outcome", "error")
    finish = text(
        f"""
UPDATE {runs.name}
   SET outcome = CASE WHEN {runs.name}.outcome = 'abandoned' THEN 'lost' ELSE b.outcome END,
       finished_at = {NOW_SQL}, error = b.error
  FROM {_json_rows("b_finished", fields)} AS b
 WHERE {runs.name}.name = b.name AND {runs.name}.slot = b.slot
   AND {runs.name}.manual = b.manual AND {runs.name}.fence = b.fence
   AND {runs.name}.holder = b.holder AND {runs.name}.outcome IN ('running', 'abandoned')
"""
    )
    return release, finish


class SQLiteFleet(FleetStatements):
    """Membership in one transaction (the write lock serializes renewers: no row locks
    to skip); the slot check on the driver's cursor, from one JSON parameter."""

    skip_locked = False

    def __init__(self) -> None:
        super().__init__(NOW)

    def member_upsert(self, values: dict[str, Any], kept: Sequence[str]) -> Any:
        upsert = insert(members).values(**values)
        return upsert.on_conflict_do_update(
            index_elements=[members.c.holder],
            set_={column: upsert.excluded[column] for column in kept},
        )

    def cursor_statement(self) -> DriverStatement | None:
        return DriverStatement(
            text(
                f"SELECT name, slot, fence, expires_at, {NOW_SQL} FROM {leases.name}"
                " WHERE name IN (SELECT value FROM json_each(:b_names))"
            )
        )

    def cursor_names(self, names: Sequence[str]) -> Any:
        return json.dumps(list(names))


def sqlite_engine(
    url: URL, connect_args: dict[str, Any], *, read_only: bool = False, **options: Any
) -> Engine:
    if url.database in (None, "", ":memory:") or "mode=memory" in str(url):
        # Each pooled connection would see its own empty database.
        raise ConfigError(
            "an in-memory SQLite database cannot hold leases: use a file, e.g. sqlite:///cronlease.db"
        )
    # One connection stays open whatever its idleness: it pins the file (§5.17).
    engine = create_engine(
        url, connect_args={"check_same_thread": False, **connect_args}, keep=1, **options
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN instead of pysqlite's own logic.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            if not read_only:
                enable_wal(cursor)
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    watch(engine, url)  # a file deleted or replaced under it (design §5.17)
    FORK_GATE.watch(engine, str(url.database))  # no fork inside a transaction (§5.13)
    return engine


def enable_wal(cursor: Any) -> None:
    """Switch a SQLite file to WAL, waiting out other connections that hold it.

    Changing the journal mode can fail with "database is locked" at once,
    without the busy handler, while another process opens the same new file:
    ten replicas starting together on an empty database hit it.
    """
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


# SQLite primary result codes of a file that cannot be used now (busy, locked,
# out of memory, read-only, I/O, corrupt, full, cannot open, lock protocol, not a database)
NO_ANSWER = frozenset({5, 6, 7, 8, 10, 11, 13, 14, 15, 26})
# --- the file guard (docs/design.md §5.17) -----------------------------------
#
# Whether a SQLite lease file is still the one at its path (docs/design.md §5.17).
#
# A replica's pooled connections keep the file they opened. When that file is
# deleted or another one is moved to its path, they go on using the old one
# while a replica started afterwards opens (or creates) the new one: two
# databases, each believing it holds every lease, and every slot runs twice.
#
# So the first connection pins the file's identity (``st_dev``, ``st_ino`` of
# the path once it is open), and
#
# - :meth:`FileGuard.check` compares the path with it before every acquisition
#   batch (one ``stat``, microseconds; no statement), raising
#   :class:`~cronlease.errors.DatabaseFileChanged`: a replica takes no lease on a
#   file that is no longer the one at the path;
# - every later connection is checked as it opens, and refused if it opened a
#   different file (or created one at the deleted path): heartbeats and
#   finishes never write to a database the replica did not start on.
#
# The identity is only as good as the old file's inode staying allocated: the
# pooled connections hold it open, so its number cannot be given to a new file.
# A process that closed every connection to it (``engine.dispose()``) could be
# fooled by a new file that got the freed number; a running replica never does.
# The replica does not reopen the new file: the old one holds the lease history
# and the leases of runs still going, and the new one knows neither (an empty
# file would let it rerun what the fleet just ran; a restored copy would roll
# the slot cursors back). A restart is the operator's decision.
# ``PRAGMA data_version`` is no help here: it says whether other connections
# wrote to the file this connection has open, not whether the path still names it.


@dataclass(frozen=True)
class FileIdentity:
    """A file as the kernel knows it: the same pair means the same file."""

    device: int
    inode: int

    def __post_init__(self) -> None:
        if self.device < 0 or self.inode < 0:
            raise ValueError("a file identity is two non-negative numbers")

    @classmethod
    def at(cls, path: str) -> FileIdentity | None:
        """The identity of the file ``path`` names now; None if there is none."""
        try:
            status = os.stat(path)
        except OSError:
            return None
        return cls(status.st_dev, status.st_ino)


class FileGuard:
    """Pins the file an engine's first connection opened and tells when the path moved on."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._pinned: FileIdentity | None = None

    @property
    def pinned(self) -> FileIdentity | None:
        """The file this engine opened first; None before its first connection."""
        return self._pinned

    def opened(self) -> None:
        """A connection just opened the path: pin the file, or refuse a different one."""
        now = FileIdentity.at(self.path)
        with self._lock:
            if self._pinned is None:
                self._pinned = now
                return
            pinned = self._pinned
        if now != pinned:
            # A DB-API error, so the pool reports it as a database failure.
            raise sqlite3.OperationalError(self._message())

    def check(self) -> None:
        """Raise DatabaseFileChanged if the path no longer names the pinned file."""
        pinned = self._pinned
        if pinned is not None and FileIdentity.at(self.path) != pinned:
            raise DatabaseFileChanged(self._message())

    def _message(self) -> str:
        now = "no file" if FileIdentity.at(self.path) is None else "another file"
        return (
            f"the SQLite lease file {self.path} was deleted or replaced under this replica "
            f"(the path names {now} now): it takes no lease until it is restarted"
        )


_GUARDS: weakref.WeakKeyDictionary[Engine, FileGuard] = weakref.WeakKeyDictionary()


def database_path(url: URL) -> str | None:
    """The file a SQLite URL opens, absolute (None for a form this guard cannot follow)."""
    database = url.database or ""
    if str(url.query.get("uri", "")).lower() in ("true", "1"):
        if not database.startswith("file:"):
            return None
        database = database[len("file:") :].split("?", 1)[0]
    return os.path.abspath(database) if database else None


def watch(engine: Engine, url: URL) -> None:
    """Guard ``engine``'s SQLite file: pin it at the first connection, check each later one."""
    path = database_path(url)
    if path is None:
        return
    guard = FileGuard(path)
    _GUARDS[engine] = guard

    # First among the connect hooks: a connection to another file is refused before
    # the others switch it to WAL (which would write to it).
    @event.listens_for(engine, "connect", insert=True)
    def _opened(_dbapi_connection: Any, _record: Any) -> None:
        guard.opened()


def guard_of(engine: Engine) -> FileGuard | None:
    """The guard of an engine :func:`watch` set up; None for other engines."""
    return _GUARDS.get(engine)


#: the table ``cronlease_runs`` is rebuilt into by the upgrade for attempts
REBUILT = "cronlease_runs_upgrade"


class SQLiteStatements(Statements):
    def __init__(self) -> None:
        super().__init__(NOW)
        self._set_paused = build_set_paused(insert)
        # by whether the batch has one row (scalar parameters) or many (JSON)
        self._acquire = {one: acquire_statement(one=one) for one in (True, False)}
        self._states = {one: states_statement(one=one) for one in (True, False)}
        self._heartbeat = {one: heartbeat_statement(one=one) for one in (True, False)}
        # a batch of many: one statement each over JSON rows, not one execution per row
        self._abandon_won, self._record_won = won_statements()
        self._release_many, self._finish_many = finish_statements()

    def acquire(
        self, conn: Connection, requests: Sequence[AcquireRequest], nonce_holders: Sequence[str]
    ) -> list[int | LeaseState | None]:
        rows = acquire_rows(requests, nonce_holders)
        one = len(rows) == 1
        scalars = {f"b_{key}": value for key, value in rows[0].items()} if one else {}
        with conn.begin():
            result = conn.execute(
                self._acquire[one], scalars if one else {"b_batch": json.dumps(rows)}
            )
            won = {row.name: row for row in result}
            if won and one:
                self._record_one(conn, rows[0], won[rows[0]["name"]])
            elif won:
                winners = json.dumps(
                    [
                        {
                            "name": row["name"],
                            "holder": row["holder"],
                            "run_slot": row["run_slot"],
                            "manual": int(row["slot"] < 0),
                        }
                        for row in rows
                        if row["name"] in won
                    ]
                )
                params = {"b_won": winners, "b_abandoned": ABANDONED_ERROR}
                conn.execute(self._abandon_won, params)
                conn.execute(self._record_won, params)
            lost = [request.name for request in requests if request.name not in won]
            states = {}
            if lost:
                states = {
                    row.name: row
                    for row in conn.execute(
                        self._states[one], scalars if one else {"b_names": json.dumps(lost)}
                    )
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
                        fence=int(row.fence),
                    )
                )
            else:
                results.append(None)
        return results

    def _record_one(self, conn: Connection, asked: dict[str, Any], row: Any) -> None:
        """A lone winner's sweep and run row, from scalar parameters."""
        conn.execute(
            self._abandon,
            {"b_name": row.name, "b_fence": int(row.fence), "b_holder": row.holder},
        )
        conn.execute(
            self._record_run,
            {
                "b_name": row.name,
                "b_run_slot": asked["run_slot"],
                "b_manual": asked["slot"] < 0,
                "b_fence": int(row.fence),
                "b_holder": row.holder,
                "b_scheduled_for": asked["run_slot"] / 1000.0,
                "b_started_at": float(row.acquired_at),
            },
        )

    def finish(self, conn: Connection, items: Sequence[FinishRequest]) -> None:
        released = [item for item in items if item.release]
        with conn.begin():
            # Lease rows first, as everywhere else (SQLite serializes writers anyway).
            if len(items) == 1:
                (item,) = items
                if released:
                    conn.execute(
                        self._release,
                        {"b_name": item.name, "b_fence": item.fence, "b_holder": item.holder},
                    )
                conn.execute(
                    self._finish_run,
                    {
                        "b_name": item.name,
                        "b_run_slot": item.slot,
                        "b_manual": item.manual,
                        "b_fence": item.fence,
                        "b_holder": item.holder,
                        "b_outcome": item.outcome,
                        "b_error": item.error,
                    },
                )
                return
            if released:
                rows = [
                    {"name": item.name, "fence": item.fence, "holder": item.holder}
                    for item in released
                ]
                conn.execute(self._release_many, {"b_released": json.dumps(rows)})
            finished = [
                {
                    "name": item.name,
                    "slot": item.slot,
                    "manual": int(item.manual),
                    "fence": item.fence,
                    "holder": item.holder,
                    "outcome": item.outcome,
                    "error": item.error,
                }
                for item in items
            ]
            conn.execute(self._finish_many, {"b_finished": json.dumps(finished)})

    def heartbeat(self, conn: Connection, beats: Sequence[Lease]) -> set[str]:
        rows = [
            {"name": b.name, "fence": b.fence, "holder": b.holder, "ttl": float(b.ttl)}
            for b in beats
        ]
        one = len(rows) == 1
        params = {f"b_{k}": v for k, v in rows[0].items()} if one else {"b_batch": json.dumps(rows)}
        with conn.begin():
            return {row.name for row in conn.execute(self._heartbeat[one], params)}

    def set_paused(self, conn: Connection, name: str) -> None:
        with conn.begin():
            conn.execute(self._set_paused, {"b_name": name})

    # --- the rest ----------------------------------------------------------

    def bounded_delete(self, where: ColumnElement[bool]) -> Delete:
        # rows found by their rowid, not by a second index lookup of their key
        rowid: ColumnClause[Any] = literal_column("rowid")
        return delete(runs).where(rowid.in_(select(rowid).where(where).limit(LIMIT)))

    def upgrade_runs(self, conn: Connection) -> None:
        """SQLite cannot change a table's constraints: the table is rebuilt — a new one
        with every row copied, the old one dropped, the new one renamed and every
        index made again — in one ``BEGIN IMMEDIATE`` transaction, which also keeps
        the second replica out until it can see the result."""
        with conn.begin():  # BEGIN IMMEDIATE: one writer until the commit
            if not upgrade_needed(conn):
                return
            # indexes made on the table besides cronlease's own are made again as they were
            own = {index.name for index in runs.indexes}
            others = [
                sql
                for (index_name, sql) in conn.exec_driver_sql(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
                    (runs.name,),
                )
                if sql is not None and index_name not in own
            ]
            rebuilt = runs.to_metadata(MetaData(), name=REBUILT)
            conn.execute(CreateTable(rebuilt, include_foreign_key_constraints=[]))
            old_columns = ", ".join(c.name for c in runs.columns if c.name != "attempt")
            conn.exec_driver_sql(
                f"INSERT INTO {REBUILT} ({old_columns}, attempt)"
                f" SELECT {old_columns}, 1 FROM {runs.name}"
            )
            conn.exec_driver_sql(f"DROP TABLE {runs.name}")
            conn.exec_driver_sql(f"ALTER TABLE {REBUILT} RENAME TO {runs.name}")
            for index in runs.indexes:
                conn.execute(CreateIndex(index))
            for sql in others:
                conn.exec_driver_sql(sql)

    def add_member_roles(self, conn: Connection, column: str) -> None:
        with conn.begin():  # BEGIN IMMEDIATE: the second replica waits, then finds it
            if members_lack_roles(conn):
                conn.exec_driver_sql(f"ALTER TABLE {members.name} ADD COLUMN {column}")

    def fleet_statements(self) -> FleetStatements:
        return SQLiteFleet()

    def make_engine(
        self, url: URL, connect_args: dict[str, Any], *, read_only: bool, options: dict[str, Any]
    ) -> Engine:
        return sqlite_engine(url, connect_args, read_only=read_only, **options)

    def file_guard(self, engine: Engine) -> Any:
        return guard_of(engine)

    def answered(self, orig: object) -> bool | None:
        code = getattr(orig, "sqlite_errorcode", None)
        if not isinstance(code, int):
            return None
        return code & 0xFF not in NO_ANSWER

    def connect_failure(self, where: str, orig: object) -> str | None:
        name = getattr(orig, "sqlite_errorname", None)
        if name == "SQLITE_NOTADB":
            return f"not a database: {where}: {orig}"
        return None if name is None else f"cannot connect: {where}: {orig}"

    def renewal_session(self, dialect: Dialect) -> list[str]:
        # a lock wait is what would hang a renewal: the busy timeout bounds it
        return [f"PRAGMA busy_timeout = {int(HEARTBEAT_TIMEOUT * 1000)}"]

    def configure_sibling(self, engine: Engine) -> None:
        # BEGIN IMMEDIATE, as on the store's engine (an engine event, not a pool one).
        @event.listens_for(engine, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        FORK_GATE.watch(engine, str(engine.url.database))

    def file_missing(self, url: Any) -> bool:
        database = url.database
        return (
            bool(database)
            and database != ":memory:"
            and not str(database).startswith("file:")  # a URI: the driver's to resolve
            and not Path(str(database)).exists()
        )

    def file_uncreatable(self, url: Any) -> str | None:
        folder = Path(str(url.database)).absolute().parent
        if not folder.is_dir():
            return f"its folder {folder} does not exist"
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"its folder {folder} is not writable"
        return None


STATEMENTS = SQLiteStatements()
