"""The engine factory: URL defaults, the pool, and the backend's engine (dialects/).

- A bare ``postgresql://`` URL means psycopg 3; ``mysql://`` and ``mariadb://`` mean
  PyMySQL (``dialects.DRIVERS``).
- Every engine gets cronlease's pool (:class:`~cronlease._lease.pool.StorePool`)
  with the settings of docs/design.md §8; the driver's connect arguments,
  session settings and hooks are the backend module's (``Statements.make_engine``:
  PostgreSQL in autocommit and never preparing, MySQL/MariaDB READ COMMITTED
  sessions running multi-statement scripts, SQLite in WAL with ``BEGIN
  IMMEDIATE``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError

from cronlease._lease.dialects import DRIVERS, backend_for_url, statements_for
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

logger = logging.getLogger("cronlease")


def normalize_url(url: str | URL) -> URL:
    """Parse ``url`` and pick cronlease's default driver for a bare backend name."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(_not_a_url(str(url))) from exc
    driver = DRIVERS.get(parsed.drivername)
    if driver is not None:
        parsed = parsed.set(drivername=driver)
    return parsed


def _not_a_url(given: str) -> str:
    """Say what was given (its secrets hidden); a file path is most likely a SQLite file."""
    shown = redact_secrets(given)
    if "@" in shown:  # user:password@host without a scheme: nothing marks the password
        shown = "***@" + shown.rsplit("@", 1)[1]
    message = f"database URL {shown!r} is not a valid URL"
    looks_like_a_path = "/" in given or Path(given).suffix in (".db", ".sqlite", ".sqlite3")
    if looks_like_a_path and "://" not in given and "@" not in given and " " not in given:
        message += f" (a SQLite file? sqlite:///{Path(given).expanduser()})"
    return message


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
    options: dict[str, Any] = {
        "poolclass": StorePool,
        "pool_size": settings.pool_size,
        "max_overflow": settings.max_overflow,
        "pool_timeout": settings.pool_timeout,
        "idle_timeout": settings.pool_idle_timeout,
    }
    given = dict(connect_args or {})
    try:
        return backend_for_url(parsed).make_engine(
            parsed, given, read_only=read_only, options=options
        )
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"the driver for {redact(parsed)!r} is not installed ({exc.name}); "
            "for MySQL/MariaDB install cronlease[mysql]"
        ) from exc
    except ArgumentError as exc:
        raise ConfigError(f"database URL {redact(parsed)!r}: {exc}") from exc


def connect_state(engine: Engine) -> ConnectState | None:
    """Why ``engine``'s pool makes no new connection now (None: it does, or it is
    not a pool cronlease made)."""
    pool = engine.pool
    return pool.gate.state() if isinstance(pool, StorePool) else None


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
    """An engine for lease statements with the settings of the user's ``engine``: its
    pool where the backend can share it (PostgreSQL), else a pool of cronlease's own
    from the same URL (SQLite needs BEGIN IMMEDIATE and MySQL a UTC session: both
    are set when connecting)."""
    adopted = statements_for(engine).adopt(engine)
    return adopted if adopted is not None else create_store_engine(engine.url)
