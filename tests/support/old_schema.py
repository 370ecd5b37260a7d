"""The tables as cronlease made them before attempts (issue 13): the old DDL, by hand.

``cronlease_runs`` had no ``attempt`` column and a unique key (name, slot,
manual) named ``cronlease_runs_slot_key``; ``cronlease_leases`` is unchanged.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    Index,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    false,
    text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from cronlease._lease.database import normalize_url
from cronlease._lease.schema import MYSQL_TABLE_OPTIONS, _name_type, leases
from tests.support import databases

metadata = MetaData()
old_leases = leases.to_metadata(metadata)
old_runs = Table(
    "cronlease_runs",
    metadata,
    Column("name", _name_type(), nullable=False),
    Column("slot", BigInteger, nullable=False),
    Column("manual", Boolean, nullable=False, server_default=false()),
    Column("fence", BigInteger, nullable=False),
    Column("holder", String(255), nullable=False),
    Column("scheduled_for", Double, nullable=False),
    Column("started_at", Double, nullable=False),
    Column("finished_at", Double, nullable=True),
    Column("outcome", String(16), nullable=False),
    Column("error", String(2000), nullable=True),
    UniqueConstraint("name", "slot", "manual", name="cronlease_runs_slot_key"),
    Index("cronlease_runs_started", "name", "started_at"),
    Index("cronlease_runs_outcome", "name", "outcome"),
    **MYSQL_TABLE_OPTIONS,
)


def old_history(name: str, slots: list[int]) -> list[dict[str, object]]:
    """Finished runs of ``name`` at ``slots``, fences 1, 2, ... as an old version wrote them."""
    return [
        {
            "name": name,
            "slot": slot,
            "manual": False,
            "fence": fence,
            "holder": f"old:1#{secrets.token_hex(8)}",
            "scheduled_for": slot / 1000.0,
            "started_at": slot / 1000.0 + 0.5,
            "finished_at": slot / 1000.0 + 1.5,
            "outcome": "failed" if fence % 2 else "succeeded",
            "error": "boom" if fence % 2 else None,
        }
        for fence, slot in enumerate(slots, start=1)
    ]


def make_old_tables(engine: Engine, rows: list[dict[str, object]]) -> None:
    metadata.drop_all(engine, checkfirst=True)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(old_runs.insert(), rows)
        last = rows[-1]
        conn.execute(
            old_leases.insert().values(
                name=last["name"],
                holder=last["holder"],
                fence=last["fence"],
                slot=last["slot"],
                acquired_at=last["started_at"],
                expires_at=last["finished_at"],
                paused=False,
                fingerprint=None,
            )
        )


@contextmanager
def own_database(backend: str, sqlite_path: str) -> Iterator[str]:
    """A URL of a schema (PostgreSQL) / database (MySQL) / file of its own, dropped after:
    the run's shared one already has the new tables."""
    if backend == "sqlite":
        yield f"sqlite:///{sqlite_path}"
        return
    name = f"{databases.RUN_NAME}_m{uuid.uuid4().hex[:6]}"
    admin = create_engine(
        normalize_url(databases.url(backend)), poolclass=NullPool, isolation_level="AUTOCOMMIT"
    )
    quoted = f'"{name}"' if backend == "postgresql" else f"`{name}`"
    with admin.connect() as conn:
        conn.execute(text(f"CREATE {'SCHEMA' if backend == 'postgresql' else 'DATABASE'} {quoted}"))
    try:
        if backend == "postgresql":
            yield databases.postgres_run_url(databases.CONFIGURED["postgresql"], name)
        else:
            yield databases.mysql_run_url(databases.CONFIGURED["mysql"], name)
    finally:
        with admin.connect() as conn:
            what = "SCHEMA" if backend == "postgresql" else "DATABASE"
            cascade = " CASCADE" if backend == "postgresql" else ""
            conn.execute(text(f"DROP {what} IF EXISTS {quoted}{cascade}"))
        admin.dispose()
