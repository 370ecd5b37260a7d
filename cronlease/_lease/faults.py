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
column" as for "Lost connection". So each driver's own code decides: the
SQLite result code, the PostgreSQL SQLSTATE class, the MySQL error number.
An error this module cannot place counts as no answer, which is what every
error counted as before.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

__all__ = ["answered"]

# SQLite primary result codes of a file that cannot be used now (busy, locked,
# out of memory, read-only, I/O, corrupt, full, cannot open, lock protocol, not a database)
_SQLITE_NO_ANSWER = frozenset({5, 6, 7, 8, 10, 11, 13, 14, 15, 26})
# PostgreSQL SQLSTATE classes of a server that did not do the work: connection
# exception, transaction rollback (serialization, deadlock), insufficient
# resources, operator intervention (shutdown, cancel, timeouts), system error
_PG_NO_ANSWER_CLASSES = frozenset({"08", "40", "53", "57", "58"})
_PG_NO_ANSWER = frozenset({"55P03", "55006"})  # lock not available, object in use
# MySQL/MariaDB server errors of the same kind; every client error (2000-2999) too
_MYSQL_NO_ANSWER = frozenset(
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


def answered(exc: SQLAlchemyError) -> bool:
    """Whether the database answered ``exc`` (an error about the statement: not an outage)."""
    if not isinstance(exc, DBAPIError) or exc.connection_invalidated:
        return False  # no connection from the pool, or the connection broke
    orig = exc.orig
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF not in _SQLITE_NO_ANSWER
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)  # psycopg 3, 2
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        return sqlstate[:2] not in _PG_NO_ANSWER_CLASSES and sqlstate not in _PG_NO_ANSWER
    args = getattr(orig, "args", ())
    mysql = type(orig).__module__.startswith(("pymysql", "MySQLdb"))
    if mysql and args and isinstance(args[0], int):
        number = args[0]
        client = 2000 <= number < 3000  # the driver's own: no connection, lost, gone away
        return number >= 1000 and not client and number not in _MYSQL_NO_ANSWER
    return False
