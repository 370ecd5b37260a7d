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
  (cronlease/_lease/dialects/mysql.py). On MariaDB a session idle in a
  transaction for :data:`IDLE_IN_TRANSACTION_TIMEOUT` is ended by the server.
- SQLite uses WAL, a busy timeout, and ``BEGIN IMMEDIATE`` for every transaction:
  a deferred transaction that later wants to write can fail at once with
  "database is locked" instead of waiting.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError

from cronlease._lease import prepared, sqlite_file
from cronlease._lease.dialects.base import HEARTBEAT_TIMEOUT, IDLE_IN_TRANSACTION_TIMEOUT
from cronlease._lease.pool import ConnectState, StorePool
from cronlease._lease.settings import (
    DEFAULT_POOL,
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
    "adopt_engine",
    "connect_state",
    "create_store_engine",
    "normalize_url",
    "redact",
    "scheduler_engine",
]

DEFAULT_URL = "sqlite:///cronlease.db"
CONNECT_TIMEOUT = 5
SQLITE_BUSY_TIMEOUT_MS = 30_000

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
    read_only: bool = False,
    **pool: Any,
) -> Engine:
    """An engine configured for lease statements on ``url`` (default SQLite file).

    ``pool`` holds the settings of :class:`~cronlease._lease.settings.PoolSettings`
    (None: not given); they win over the same parameters in the URL's query,
    which are taken out before the URL reaches the driver; ``base`` fills the
    rest. ``connect_args`` go to the driver's ``connect()``. ``read_only``: an
    engine that only reads (the read commands): SQLite is not switched to WAL (that
    is a write: it would change the file's journal mode, and fail on a read-only
    copy) and its transactions are deferred (``BEGIN IMMEDIATE`` takes the write lock).
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
            return _sqlite_engine(parsed, given, read_only=read_only, **options)
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
                from cronlease._lease.dialects.mysql import enable_scripts

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


def _sqlite_engine(
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
                _enable_wal(cursor)
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

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
