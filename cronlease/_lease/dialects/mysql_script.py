"""One round trip per lease transaction on MySQL/MariaDB: multi-statement scripts.

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
"""

from __future__ import annotations

from typing import Any

import pymysql.connections  # type: ignore[import-untyped]
from pymysql.constants import CLIENT, SERVER_STATUS  # type: ignore[import-untyped]
from sqlalchemy import TextClause, event, text
from sqlalchemy.engine import Connection, Engine

__all__ = ["ScriptConnection", "enable_scripts", "run_script", "script", "scripts_enabled"]

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
