"""When a statement failed: the StoreError to raise, and the nonce check of an
acquisition whose outcome is unknown (docs/design.md §3.8)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from cronlease._lease import faults
from cronlease._lease.dialects import Statements
from cronlease._lease.model import AcquireRequest, LeaseState
from cronlease.errors import RowRefused, StatementError, StoreError

__all__ = ["describe_error", "recover", "store_error"]


def store_error(what: str, exc: SQLAlchemyError, statements: Statements) -> StoreError:
    """The StoreError for a driver error: RowRefused when the database refused a row."""
    message = f"{what} failed: {describe_error(exc)}"
    if isinstance(exc, DBAPIError) and statements.refuses_row(exc):
        return RowRefused(message)
    return StatementError(message) if faults.answered(exc) else StoreError(message)


def describe_error(exc: BaseException) -> str:
    """A one-line summary of a driver error, for a warning."""
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def recover(
    statements: Statements,
    conn: Connection,
    requests: Sequence[AcquireRequest],
    nonces: Sequence[str],
) -> list[int | LeaseState | None]:
    """After an unknown outcome: the rows that carry our nonces won; retry the others once."""
    rows = {row.name: row for row in statements.leases(conn, [r.name for r in requests])}
    results: list[int | LeaseState | None] = [None] * len(requests)
    retry: list[int] = []
    for index, (request, nonce) in enumerate(zip(requests, nonces, strict=True)):
        row = rows.get(request.name)
        # A manual run keeps the row's slot; the nonce alone identifies it.
        if row is not None and row.holder == nonce and (request.manual or row.slot == request.slot):
            results[index] = row.fence
        else:
            retry.append(index)
    if retry:
        again = statements.acquire(conn, [requests[i] for i in retry], [nonces[i] for i in retry])
        for index, result in zip(retry, again, strict=True):
            results[index] = result
    return results
