"""Engines for the lease store: URL defaults, drivers and per-backend connection settings.

- A bare ``postgresql://`` URL means psycopg 3; ``mysql://`` and ``mariadb://`` mean PyMySQL.
- PostgreSQL runs lease statements in autocommit (each is one atomic statement),
  so no transaction is held open and losers never see serialization failures.
  Nothing is left on a server connection between transactions, so PgBouncer
  works in transaction pooling as in session pooling (docs/design.md §3.10):
  psycopg never prepares statements (``prepare_threshold=None``) unless the
  URL or ``connect_args`` ask it to, and no setting is made on connect (the
  renewal's time bound and the idle-in-transaction bound are ``SET LOCAL``,
  in the transaction they bound).
- MySQL/MariaDB (PyMySQL) sessions are READ COMMITTED and accept
  multi-statement queries, so each lease transaction is one request
  (cronlease/_lease/dialects/mysql_script.py). On MariaDB a session idle in a
  transaction for :data:`IDLE_IN_TRANSACTION_TIMEOUT` is ended by the server.
- SQLite uses WAL, a busy timeout, and ``BEGIN IMMEDIATE`` for every transaction:
  a deferred transaction that later wants to write can fail at once with
  "database is locked" instead of waiting.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError

from cronlease._lease import prepared, sqlite_file
from cronlease._lease.pool import ConnectState, StorePool
from cronlease._lease.settings import (
    DEFAULT_POOL,
    READER_POOL,
    PoolKeywords,
    PoolSettings,
    pool_from_url,
    resolve_pool,
)
from cronlease._safe_text import redact_secrets
from cronlease.errors import ConfigError

__all__ = [
    "DEFAULT_URL",
    "HEARTBEAT_TIMEOUT",
    "IDLE_IN_TRANSACTION_TIMEOUT",
    "RenewalEngine",
    "adopt_engine",
    "connect_state",
    "create_store_engine",
    "heartbeat_engine",
    "normalize_url",
    "reader_engine",
    "redact",
    "scheduler_engine",
    "side_pool",
]

DEFAULT_URL = "sqlite:///cronlease.db"
CONNECT_TIMEOUT = 5
SQLITE_BUSY_TIMEOUT_MS = 30_000
# The longest a lease renewal (one statement for every lease of the replica) may
# take, lock waits included: a hung one fails, is logged, and is retried soon on
# a fresh connection. Leases are at least 1 s long and renewed every ttl/3, so a
# renewal this slow costs only the leases that would have expired anyway.
HEARTBEAT_TIMEOUT = 5.0
# The longest a transaction cronlease opened may sit idle between its statements
# before the server ends the session (PostgreSQL: the transactions of several
# statements, SET LOCAL; MariaDB: every session, idle_transaction_timeout; MySQL
# has no such setting). cronlease sends a transaction's statements one after the
# other, so only a stalled process (SIGSTOP, swapping, a debugger) sits that long,
# and the row locks of its transaction would otherwise hold every other replica's
# statements on those rows until its connection ends, however long it is stopped.
IDLE_IN_TRANSACTION_TIMEOUT = 5
#: how long a page's read waits for its one connection (another request's read)
READER_TIMEOUT = 10.0

logger = logging.getLogger("cronlease")

_DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}


def normalize_url(url: str | URL) -> URL:
    """Parse ``url`` and pick cronlease's default driver for a bare backend name."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"database URL {redact(str(url))!r} is not a valid URL") from exc
    driver = _DRIVERS.get(parsed.drivername)
    if driver is not None:
        parsed = parsed.set(drivername=driver)
    return parsed


def redact(url: str | URL) -> str:
    """The URL with its password hidden, for logs and pages."""
    try:
        # hide_password hides the userinfo password; a ``?password=`` stays, so: redacted too
        return redact_secrets(make_url(url).render_as_string(hide_password=True))
    except ArgumentError:
        return "<invalid URL>"


def create_store_engine(
    url: str | URL | None = None,
    *,
    connect_args: dict[str, Any] | None = None,
    base: PoolSettings = DEFAULT_POOL,
    **pool: Any,
) -> Engine:
    """An engine configured for lease statements on ``url`` (default SQLite file).

    ``pool`` holds the settings of :class:`~cronlease._lease.settings.PoolSettings`
    (None: not given); they win over the same parameters in the URL's query,
    which are taken out before the URL reaches the driver; ``base`` fills the
    rest. ``connect_args`` go to the driver's ``connect()``.
    """
    parsed, from_url = pool_from_url(normalize_url(url or DEFAULT_URL))
    settings = resolve_pool(from_url, pool, base=base)
    backend = parsed.get_backend_name()
    options: dict[str, Any] = {
        "poolclass": StorePool,
        "pool_size": settings.pool_size,
        "max_overflow": settings.max_overflow,
        "pool_timeout": settings.pool_timeout,
        "idle_timeout": settings.pool_idle_timeout,
    }
    given = dict(connect_args or {})
    try:
        if backend == "sqlite":
            return _sqlite_engine(parsed, given, **options)
        if backend == "postgresql":
            parsed, prepare = prepared.threshold_for(parsed, given)
            connect_args = {
                "connect_timeout": CONNECT_TIMEOUT,
                # A server that vanishes without closing the socket must fail a
                # statement in seconds, not hang a worker or the heartbeat thread.
                "keepalives": 1,
                "keepalives_idle": 5,
                "keepalives_interval": 2,
                "keepalives_count": 3,
                "tcp_user_timeout": 10_000,
                **given,
                prepared.PREPARE_THRESHOLD: prepare,
            }
            return create_engine(
                parsed,
                isolation_level="AUTOCOMMIT",
                connect_args=connect_args,
                **options,
            )
        if backend in ("mysql", "mariadb"):
            connect_args = {
                "connect_timeout": CONNECT_TIMEOUT,
                # lease times are epoch seconds from the server clock in UTC
                # A lock wait far past any tick's grace helps nobody.
                # /*M! ... */ is run by MariaDB only (MySQL has no such variable).
                "init_command": "SET time_zone = '+00:00', innodb_lock_wait_timeout = 10"
                f" /*M!100300 , idle_transaction_timeout = {IDLE_IN_TRANSACTION_TIMEOUT} */",
                **given,
            }
            engine = create_engine(
                parsed,
                isolation_level="READ COMMITTED",
                pool_recycle=3600,
                # Every lease method ends its own transaction (and SQLAlchemy rolls
                # back one left open when the connection closes), so the pool's
                # ROLLBACK on return would be one more round trip per statement.
                pool_reset_on_return=None,
                connect_args=connect_args,
                **options,
            )
            if engine.dialect.driver == "pymysql":
                # One request per lease transaction (multi-statement queries).
                from cronlease._lease.dialects.mysql_script import enable_scripts

                enable_scripts(engine)
            return engine
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"the driver for {redact(parsed)!r} is not installed ({exc.name}); "
            "for MySQL/MariaDB install cronlease[mysql]"
        ) from exc
    except ArgumentError as exc:
        raise ConfigError(f"database URL {redact(parsed)!r}: {exc}") from exc
    raise ConfigError(
        f"cronlease does not support {backend!r} databases: use SQLite, PostgreSQL or MySQL/MariaDB"
    )


def connect_state(engine: Engine) -> ConnectState | None:
    """Why ``engine``'s pool makes no new connection now (None: it does, or it is
    not a pool cronlease made)."""
    pool = engine.pool
    return pool.gate.state() if isinstance(pool, StorePool) else None


def _sqlite_engine(url: URL, connect_args: dict[str, Any], **options: Any) -> Engine:
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
            _enable_wal(cursor)
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    sqlite_file.watch(engine, url)  # a file deleted or replaced under it (design §5.17)
    return engine


def _enable_wal(cursor: Any) -> None:
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


def scheduler_engine(
    url: str | None,
    engine: Engine | None,
    pool: PoolKeywords,
    connect_args: dict[str, Any] | None,
) -> Engine:
    """The store engine of a ``Scheduler``: made from ``url`` with the pool settings
    given, or adopted from the user's ``engine``, whose pool is the user's to configure."""
    given = pool.given()
    if engine is None:
        return create_store_engine(url, connect_args=connect_args, **given)
    if connect_args is not None:
        given["connect_args"] = connect_args
    if given:
        raise ConfigError(
            f"{next(iter(given))}= configures an engine cronlease makes: with engine=, "
            "configure your engine instead (or pass the URL and let cronlease make it)"
        )
    return adopt_engine(engine)


def adopt_engine(engine: Engine) -> Engine:
    """An engine for lease statements with the settings of the user's ``engine``."""
    if engine.dialect.name == "postgresql":
        return prepared.unprepared_while_ours(
            engine.execution_options(isolation_level="AUTOCOMMIT")
        )
    # SQLite needs BEGIN IMMEDIATE and MySQL a UTC session: both are set when
    # connecting, so build a pool of our own from the same URL.
    return create_store_engine(engine.url)


def heartbeat_engine(engine: Engine) -> Engine:
    """A one-connection engine for lease renewals, connecting as ``engine`` does.

    Renewals must never wait behind the application or the acquirer for a
    pooled connection (an adopted engine's pool is the application's own), so
    they get a connection of their own. It is made by ``engine``'s own pool
    creator, so it has the same URL, connect arguments, driver hooks and
    connect listeners (search_path, session time zone, SQLite pragmas); it is
    pinged before use, so it reconnects after a restart or failover; and every
    renewal is bounded by :data:`HEARTBEAT_TIMEOUT`, so one hung renewal cannot
    stall every other lease's renewal for long: by session settings on SQLite
    and MySQL/MariaDB, by the statement itself on PostgreSQL (a ``SET LOCAL``
    sent with it: a statement added to this connection there must carry its own,
    ``DriverStatement(local=...)``). Its connection is closed once unused for
    the store's ``pool_idle_timeout`` (no run in progress), and it reconnects
    through the store pool's connect gate.
    """
    pool = side_pool(
        engine,
        PoolSettings(pool_size=1, max_overflow=0),
        timeout=HEARTBEAT_TIMEOUT,
        pre_ping=True,
    )
    own = _sibling(engine, pool)

    @event.listens_for(pool, "connect")
    def _bound(dbapi_connection: Any, _record: Any) -> None:
        _bound_statements(engine.dialect, dbapi_connection)

    return own


def reader_engine(engine: Engine) -> Engine:
    """A one-connection engine for the status page's reads, connecting as ``engine``
    does (:func:`side_pool`): a page refreshed by many browsers never takes a
    connection the replica's acquirer or finisher is waiting for. Not pinged (a
    round trip per statement): a read whose connection broke is retried once on a
    fresh one, as on the store's own pool (§3.8)."""
    pool = side_pool(engine, READER_POOL, timeout=READER_TIMEOUT, pre_ping=False)
    return _sibling(engine, pool)


def _sibling(engine: Engine, pool: StorePool) -> Engine:
    own = Engine(pool, engine.dialect, engine.url, execution_options=engine.get_execution_options())
    if engine.dialect.name == "sqlite":
        # BEGIN IMMEDIATE, as on the store's engine (an engine event, not a pool one).
        @event.listens_for(own, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return own


def side_pool(
    engine: Engine, settings: PoolSettings, *, timeout: float, pre_ping: bool
) -> StorePool:
    """A pool of its own beside ``engine``'s, connecting as it does: made by its pool
    creator, with its connect listeners, recycle and reset rules, idle timeout and
    connect gate (when cronlease made it). ``pre_ping``: a round trip per checkout,
    so a broken connection is replaced before the statement, not retried after."""
    source = engine.pool
    ours = source if isinstance(source, StorePool) else None
    pool = StorePool(
        source._creator,
        idle_timeout=ours.idle_timeout if ours else DEFAULT_POOL.pool_idle_timeout,
        gate=ours.gate if ours else None,
        pool_size=settings.pool_size,
        max_overflow=settings.max_overflow,
        timeout=timeout,
        pre_ping=pre_ping,
        recycle=source._recycle,
        reset_on_return=source._reset_on_return,
        _dispatch=source.dispatch,
        dialect=source._dialect,
    )
    prepared.unprepared_pool(engine, pool)  # an adopted engine's creator: ours alone
    return pool


def _bound_statements(dialect: Any, dbapi_connection: Any) -> None:
    """Bound every statement of a heartbeat connection by HEARTBEAT_TIMEOUT, server-side.

    Not on PostgreSQL: a session setting made on connect stays on the server
    connection, which PgBouncer in transaction pooling hands to other clients,
    while our next statement may run on another one. The renewal statement
    carries its own bound instead (``SET LOCAL`` in the same request:
    dialects/postgresql.py).
    """
    seconds = HEARTBEAT_TIMEOUT
    if dialect.name == "postgresql":
        return
    if dialect.name == "sqlite":
        statements = [f"PRAGMA busy_timeout = {int(seconds * 1000)}"]
    elif getattr(dialect, "is_mariadb", False):
        statements = [
            f"SET SESSION innodb_lock_wait_timeout = {max(1, int(seconds))}",
            f"SET SESSION max_statement_time = {seconds}",
        ]
    else:
        # MySQL bounds only SELECTs by time (max_execution_time); a lock wait is what hangs.
        statements = [f"SET SESSION innodb_lock_wait_timeout = {max(1, int(seconds))}"]
    cursor = dbapi_connection.cursor()
    try:
        for statement in statements:
            cursor.execute(statement)
    finally:
        cursor.close()


class RenewalEngine:
    """A store's :func:`heartbeat_engine`, made on first use — and anew in a forked
    child, which must not touch its parent's connection."""

    def __init__(self, source: Engine) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        self._pid = 0

    @property
    def engine(self) -> Engine:
        with self._lock:
            if self._engine is not None and self._pid != os.getpid():
                self._engine.dispose(close=False)  # the parent's: leave it open
                self._engine = None
            if self._engine is None:
                self._engine = heartbeat_engine(self._source)
                self._pid = os.getpid()
            return self._engine

    def dispose(self) -> None:
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()
