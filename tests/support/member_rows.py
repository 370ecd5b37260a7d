"""The ``cronlease_members`` rows a fleet test reads: when each member renewed and
until when its row promises the next renewal (docs/design.md §4.4)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from sqlalchemy import create_engine, select
from sqlalchemy.pool import NullPool

from cronlease._lease.database import normalize_url
from cronlease._lease.schema import members
from tests.support.procs import wait_for


def member_rows(db_url: str, holders: Iterable[str]) -> dict[str, tuple[float, float]]:
    """holder -> (renewed_at, expires_at) of the member rows of ``holders``, live or not."""
    engine = create_engine(normalize_url(db_url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            query = select(members.c.holder, members.c.renewed_at, members.c.expires_at).where(
                members.c.holder.in_(list(holders))
            )
            return {str(h): (float(r), float(e)) for h, r, e in conn.execute(query)}
    finally:
        engine.dispose()


def wait_read_by_all(
    db_url: str,
    holders: Iterable[str],
    *,
    readers: Iterable[str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Wait until each of ``readers`` (default: ``holders``) has renewed since all the
    rows of ``holders`` were there: a renewal reads the live rows, so its view has all
    of them by then. (A member that started after the others' rows committed read them
    at its start: not a reader to wait for.)"""
    holders = list(holders)
    readers = holders if readers is None else list(readers)
    wait_for(
        lambda: len(member_rows(db_url, holders)) == len(holders),
        timeout,
        lambda: f"the member rows of {holders}: {member_rows(db_url, holders)}",
    )
    # Our read saw every row committed: a renewal whose statement starts later (its
    # renewed_at, the database's clock: this host's on a local server) reads them all.
    all_there = time.time()

    def renewed_since() -> bool:
        rows = member_rows(db_url, readers)
        return len(rows) == len(readers) and all(r > all_there for r, _ in rows.values())

    wait_for(
        renewed_since,
        timeout,
        lambda: f"{readers} to renew after {all_there}: {member_rows(db_url, readers)}",
    )
