"""Hot statements compiled once and executed on the DB-API cursor of a pooled connection.

SQLAlchemy's execution path (execution context, parameter processing, result
wrapping) costs about 100 µs per statement, a third of a local PostgreSQL
round trip; a fleet sends an acquisition per replica per tick. Statements
still come from SQLAlchemy Core (built once, compiled once per dialect, so
psycopg sees one query text, which it prepares once where preparing is on:
cronlease's engines turn it off by default, cronlease/_lease/prepared.py), and still run on a
connection checked out through SQLAlchemy's pool. What this module adds is
the error path SQLAlchemy would have taken: a driver error becomes a
:class:`sqlalchemy.exc.DBAPIError`, and one that means the connection is gone
invalidates it, so :class:`cronlease._lease.store.LeaseStore` retries and checks
unknown outcomes exactly as for any other statement.

Bind processors run as SQLAlchemy would run them; results are the driver's
tuples, without result processing (the callers convert the values they read).
Expanding (``IN``) parameters are refused when compiled.

A statement with ``local`` settings (PostgreSQL: ``SET LOCAL statement_timeout
= ...``) sends them in the same request, ahead of the statement: one query of
two statements, which PostgreSQL runs as one implicit transaction, so the
setting holds for this statement alone and is never left on the server
connection (which PgBouncer in transaction pooling hands to other clients).
Two statements in one query need the simple query protocol, so such a
statement is bound on the client (psycopg's ``ClientCursor``, its own quoting),
and never prepared.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement

__all__ = ["DriverStatement"]


class _Compiled:
    __slots__ = ("defaults", "positions", "processors", "sql")

    def __init__(self, compiled: SQLCompiler, dialect: Dialect) -> None:
        self.processors: dict[str, Callable[[Any], Any]] = {}
        for key, bind in compiled.binds.items():
            if bind.expanding:
                raise TypeError(f"parameter {key!r} is an expanding IN list")
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                self.processors[key] = processor
        self.sql = compiled.string
        # values bound in the statement itself (literals): sent with every execution
        self.defaults = self._processed(
            {
                key: value
                for key, value in compiled.construct_params(_check=False).items()
                if not compiled.binds[key].required
            }
        )
        self.positions = tuple(compiled.positiontup) if compiled.positiontup else None

    def _processed(self, values: dict[str, Any]) -> dict[str, Any]:
        for key, processor in self.processors.items():
            if key in values:
                values[key] = processor(values[key])
        return values

    def parameters(self, params: Mapping[str, Any]) -> Any:
        values = {**self.defaults, **self._processed(dict(params))}
        if self.positions is None:
            return values
        return tuple(values[name] for name in self.positions)


class DriverStatement:
    """A Core statement run on the raw cursor; results are plain tuples."""

    def __init__(self, statement: ClauseElement, *, local: str | None = None) -> None:
        self.statement = statement
        self.local = local
        self._compiled: weakref.WeakKeyDictionary[Dialect, _Compiled] = weakref.WeakKeyDictionary()

    def compiled(self, dialect: Dialect) -> _Compiled:
        compiled = self._compiled.get(dialect)
        if compiled is None:
            compiled = _Compiled(self.statement.compile(dialect=dialect), dialect)  # type: ignore[arg-type]
            self._compiled[dialect] = compiled
        return compiled

    def execute(self, conn: Connection, params: Mapping[str, Any]) -> tuple[Sequence[Any], int]:
        """Run in its own transaction; return (rows, rowcount). Raises DBAPIError.

        The connection must be in autocommit (cronlease's PostgreSQL engines
        are); one that is not is committed here, so the statement is never
        left in an open transaction that the pool would roll back.
        """
        compiled = self.compiled(conn.dialect)
        dbapi_connection = conn.connection.dbapi_connection
        assert dbapi_connection is not None
        cursor = self._cursor(dbapi_connection)
        try:
            if self.local is None:
                cursor.execute(compiled.sql, compiled.parameters(params))
            else:
                cursor.execute(f"{self.local};\n{compiled.sql}", compiled.parameters(params))
                cursor.nextset()  # past the settings' result, to the statement's
            rows = cursor.fetchall() if cursor.description is not None else ()
            rowcount = cursor.rowcount
            if not getattr(dbapi_connection, "autocommit", False):
                dbapi_connection.commit()
            return rows, rowcount
        except conn.dialect.loaded_dbapi.Error as exc:
            gone = conn.dialect.is_disconnect(exc, dbapi_connection, cursor)
            if gone:
                conn.invalidate(exc)
            else:
                _rollback_quietly(dbapi_connection)
            raise DBAPIError.instance(
                compiled.sql,
                params,
                exc,
                conn.dialect.loaded_dbapi.Error,
                connection_invalidated=gone,
                dialect=conn.dialect,
            ) from exc
        finally:
            cursor.close()

    def _cursor(self, dbapi_connection: Any) -> Any:
        if self.local is None:
            return dbapi_connection.cursor()
        from psycopg import ClientCursor

        return ClientCursor(dbapi_connection)


def _rollback_quietly(dbapi_connection: Any) -> None:
    # the statement's own error is the one to report
    with contextlib.suppress(Exception):
        dbapi_connection.rollback()
