"""The ``cronlease_members`` rows a fleet test reads: when each member renewed and
until when its row promises the next renewal (docs/design.md §4.4)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import create_engine, select
from sqlalchemy.pool import NullPool

from cronlease._lease.database import normalize_url
from cronlease._lease.schema import members


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
