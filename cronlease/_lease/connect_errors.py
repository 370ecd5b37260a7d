"""Why a database could not be opened, in one line an operator can act on.

"unreachable" is for the network: connection refused, a timeout, a name that
does not resolve. A server that answered and said no (wrong password, unknown
role or database) is "cannot connect", with the server's own reason; a SQLite
file that is something else is "not a database".
"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from cronlease._lease.recovery import describe_error

__all__ = ["connect_failure"]

#: MySQL/MariaDB client-side error codes (CR_*) start here; below are the server's (ER_*)
_MYSQL_CLIENT_ERRORS = 2000


def connect_failure(where: str, exc: SQLAlchemyError) -> str:
    """One line for a failure to open ``where`` (a redacted URL)."""
    orig = getattr(exc, "orig", None)
    if getattr(orig, "sqlite_errorname", None) == "SQLITE_NOTADB":
        return f"not a database: {where}: {orig}"
    if getattr(orig, "sqlite_errorname", None) is not None:
        return f"cannot connect: {where}: {orig}"
    refused = _server_refusal(orig)
    if refused is not None:
        return f"cannot connect: {where}: {refused}"
    return f"database unreachable: {where}: {describe_error(exc)}"


def _server_refusal(orig: object) -> str | None:
    """The server's reason when it answered and refused; None when it was not reached."""
    if orig is None:
        return None
    module = type(orig).__module__
    text = str(orig).strip()
    if module.startswith("psycopg"):
        # libpq reports the server's refusal as "... failed: FATAL:  <reason>"
        _, fatal, reason = text.partition("FATAL:")
        return reason.strip().splitlines()[0] if fatal and reason.strip() else None
    if module.startswith("pymysql") or module.startswith("MySQLdb"):
        args: tuple[object, ...] = tuple(getattr(orig, "args", ()))
        code = args[0] if args and isinstance(args[0], int) else None
        if code is not None and code < _MYSQL_CLIENT_ERRORS:
            return str(args[1]) if len(args) > 1 else text
    return None
