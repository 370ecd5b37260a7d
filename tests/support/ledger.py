"""The side-effect ledger: a table tasks append to, so tests count real executions.

It has no unique constraint on purpose: a duplicate run shows up as two rows.
It is written with plain SQLAlchemy, not through cronlease.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from functools import cache

from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, create_engine, select
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from cronlease._lease.database import normalize_url
from cronlease._lease.pool import FORK_GATE

_metadata = MetaData()
ledger = Table(
    "cronlease_test_ledger",
    _metadata,
    Column("task", String(255), nullable=False, index=True),
    Column("slot", BigInteger, nullable=False),
    Column("pid", Integer, nullable=False),
)


@cache
def _engine(url: str) -> Engine:
    if not url.startswith("sqlite"):
        return create_engine(normalize_url(url), poolclass=NullPool)
    engine = create_engine(normalize_url(url), poolclass=NullPool, connect_args={"timeout": 30})
    # a test that forks a running scheduler forks this process's ledger writes too:
    # held like cronlease's own SQLite connections (a child could not write otherwise)
    FORK_GATE.watch(engine, url)
    return engine


def setup(url: str) -> None:
    _metadata.create_all(_engine(url), checkfirst=True)


def append(url: str, task: str, slot: int) -> None:
    with _engine(url).begin() as conn:
        conn.execute(ledger.insert().values(task=task, slot=slot, pid=os.getpid()))


def timed_run(url: str, task: str, slot: int, seconds: float) -> None:
    """A run of ``seconds`` that appends its start, and ``TASK#end`` when it ends; an
    ``TASK#overlap`` entry first if another run of the task had started and not ended."""
    if len(entries(url, task)) > len(entries(url, f"{task}#end")):
        append(url, f"{task}#overlap", slot)
    append(url, task, slot)
    time.sleep(seconds)
    append(url, f"{task}#end", slot)


def entries(url: str, task: str) -> list[tuple[int, int]]:
    """(slot, pid) rows for ``task``, in slot order."""
    with _engine(url).connect() as conn:
        rows = conn.execute(
            select(ledger.c.slot, ledger.c.pid).where(ledger.c.task == task).order_by(ledger.c.slot)
        ).all()
    return [(int(slot), int(pid)) for slot, pid in rows]


def rows_like(url: str, prefix: str) -> list[tuple[str, int, int]]:
    """(task, slot, pid) rows of every task whose name starts with ``prefix``."""
    with _engine(url).connect() as conn:
        rows = conn.execute(
            select(ledger.c.task, ledger.c.slot, ledger.c.pid).where(
                ledger.c.task.like(f"{prefix}%")
            )
        ).all()
    return [(str(task), int(slot), int(pid)) for task, slot, pid in rows]


def assert_every_slot_once(slots: list[int], step_ms: int = 1000) -> None:
    counts = Counter(slots)
    duplicates = {slot: n for slot, n in counts.items() if n > 1}
    assert not duplicates, f"slots run more than once: {duplicates}"
    expected = list(range(min(slots), max(slots) + step_ms, step_ms))
    missing = sorted(set(expected) - set(slots))
    assert not missing, f"slots never run: {missing}"
