"""Why a database could not be opened, in one line an operator can act on.

"unreachable" is for the network: connection refused, a timeout, a name that
does not resolve. A server that answered and said no (wrong password, unknown
role or database) is "cannot connect", with the server's own reason; a SQLite
file that is something else is "not a database".
"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from cronlease._lease.dialects import installed_backends
from cronlease._lease.recovery import describe_error

__all__ = ["connect_failure"]


def connect_failure(where: str, exc: SQLAlchemyError) -> str:
    """One line for a failure to open ``where`` (a redacted URL)."""
    orig = getattr(exc, "orig", None)
    if orig is not None:
        for backend in installed_backends():
            line = backend.connect_failure(where, orig)
            if line is not None:
                return line
    return f"database unreachable: {where}: {describe_error(exc)}"
