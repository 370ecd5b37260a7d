"""No server-side prepared statements on PostgreSQL unless asked: psycopg's ``prepare_threshold``.

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
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import Pool

from cronlease._safe_text import redact_secrets
from cronlease.errors import ConfigError

__all__ = [
    "PREPARE_THRESHOLD",
    "adopted",
    "threshold_for",
    "unprepared_pool",
    "unprepared_while_ours",
]

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
