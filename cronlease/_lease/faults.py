"""Did the database answer? A driver error told apart: no answer, or an answer that is an error.

An outage (docs/design.md §1.5) is a database that does not answer: the
connection cannot be made or broke, the server is shutting down or out of
connections, a lock or statement timed out. Those pass, and every replica
rides them out with one warning. A database that *answers* with an error
about the statement — a missing table or column, a privilege revoked, bad
data — is up, and the statement will fail the same way until someone changes
the schema or the grants: an ERROR to act on, not an outage (§5.19).

Exception classes alone do not tell: SQLite raises ``OperationalError`` for
"no such column" as for "database is locked", and PyMySQL for "Unknown
column" as for "Lost connection". So each driver's own code decides, read
by its backend's module (``Statements.answered``): the SQLite result code, the
PostgreSQL SQLSTATE class, the MySQL error number.
An error this module cannot place counts as no answer, which is what every
error counted as before.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from cronlease._lease.dialects import installed_backends

__all__ = ["answered"]


def answered(exc: SQLAlchemyError) -> bool:
    """Whether the database answered ``exc`` (an error about the statement: not an outage)."""
    if not isinstance(exc, DBAPIError) or exc.connection_invalidated:
        return False  # no connection from the pool, or the connection broke
    for backend in installed_backends():
        said = backend.answered(exc.orig)
        if said is not None:
            return said
    return False
