"""Pools of their own beside the store's: lease renewals and the status page's reads.

Each connects as the store's engine does (its pool creator, connect listeners,
recycle and reset rules, idle timeout and connect gate), so what is set for the
store — URL, connect arguments, driver hooks, search_path, SQLite pragmas,
never preparing (docs/design.md §3.10) — holds on them too, while they never
wait for, nor take, a connection of the store's pool (§4.5, §8).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from cronlease._lease.dialects import statements_for
from cronlease._lease.dialects.base import HEARTBEAT_TIMEOUT
from cronlease._lease.pool import StorePool
from cronlease._lease.settings import DEFAULT_POOL, READER_POOL, PoolSettings

__all__ = ["RenewalEngine", "heartbeat_engine", "reader_engine", "side_pool"]

#: how long a page's read waits for its one connection (another request's read)
READER_TIMEOUT = 10.0


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
    # Bound server-side by session settings, except on PostgreSQL: a setting made on
    # connect stays on the server connection, which PgBouncer in transaction pooling
    # hands to other clients, while our next statement may run on another one. The
    # renewal statement carries its own bound there (dialects/postgresql.py).
    bounds = statements_for(engine).renewal_session(engine.dialect)

    @event.listens_for(pool, "connect")
    def _bound(dbapi_connection: Any, _record: Any) -> None:
        if not bounds:
            return
        cursor = dbapi_connection.cursor()
        try:
            for statement in bounds:
                cursor.execute(statement)
        finally:
            cursor.close()

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
    statements_for(engine).configure_sibling(own)  # SQLite: BEGIN IMMEDIATE
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
    statements_for(engine).configure_side_pool(engine, pool)  # PostgreSQL: never prepare
    return pool


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
