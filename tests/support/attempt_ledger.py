"""The attempts ledger: every attempt a task makes appends (task, slot, attempt, recovering,
key, pid, at), so tests count real executions per attempt.

No unique constraint on purpose (a duplicate attempt shows up as two rows);
written with plain SQLAlchemy, not through cronlease. ``at`` is the writer's
wall clock, epoch seconds.
"""

from __future__ import annotations

import os
import time
from functools import cache
from typing import NamedTuple

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    select,
)
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from cronlease import RunContext
from cronlease._lease.database import normalize_url

_metadata = MetaData()
attempts = Table(
    "cronlease_test_attempts",
    _metadata,
    Column("task", String(255), nullable=False, index=True),
    Column("slot", BigInteger, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("recovering", Boolean, nullable=False),
    Column("ctx_key", String(400), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("at", Double, nullable=False),
)


class Entry(NamedTuple):
    slot: int
    attempt: int
    recovering: bool
    key: str
    pid: int
    at: float


@cache
def _engine(url: str) -> Engine:
    connect_args = {"timeout": 30} if url.startswith("sqlite") else {}
    return create_engine(normalize_url(url), poolclass=NullPool, connect_args=connect_args)


def setup(url: str) -> None:
    _metadata.create_all(_engine(url), checkfirst=True)


def append(url: str, task: str, ctx: RunContext) -> None:
    row = {
        "task": task,
        "slot": ctx.slot,
        "attempt": ctx.attempt,
        "recovering": ctx.recovering,
        "ctx_key": ctx.key,
        "pid": os.getpid(),
        "at": time.time(),
    }
    with _engine(url).begin() as conn:
        conn.execute(attempts.insert().values(**row))


def entries(url: str, task: str) -> list[Entry]:
    """The attempts of ``task``, by slot then attempt."""
    columns = [attempts.c[name] for name in ("slot", "attempt", "recovering", "ctx_key", "pid")]
    query = (
        select(*columns, attempts.c.at)
        .where(attempts.c.task == task)
        .order_by(attempts.c.slot, attempts.c.attempt, attempts.c.at)
    )
    with _engine(url).connect() as conn:
        rows = conn.execute(query).all()
    return [Entry(int(s), int(a), bool(r), str(k), int(p), float(t)) for s, a, r, k, p, t in rows]
