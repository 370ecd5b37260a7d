"""A replica for the clock-step test: ``stepped_replica.py URL PREFIX``.

Declares ``PREFIX-every`` (every 1 s) and ``PREFIX-cron`` (``* * * * *``);
with ``CRONLEASE_TEST_SOLO=1`` also ``PREFIX-solo`` (every 1 s), a task no
other replica declares, so its runs show that this replica's own timer fires.
Each run appends (task, slot, pid, the database clock at its start, the
monotonic clock just after) to ``cronlease_test_step_ledger``: the database's
time, not this process's wall clock, which the test fakes; the monotonic
clock is the host's, unfaked and shared with the test. Every tick it decides is logged to stderr
as ``TICK <task> <slot> <started|reason>``, so the test sees it fire even
when the lease refuses every tick. Prints ``started`` once running; exits 0
on SIGTERM.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from functools import cache

from sqlalchemy import BigInteger, Column, Double, Integer, MetaData, String, Table, create_engine
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from cronlease import RunContext, RunStarted, Scheduler, TickSkipped
from cronlease._lease.database import normalize_url
from cronlease._lease.store import LeaseStore
from tests.support import faketime_sleep
from tests.support.foreground import run_forever_announced

_metadata = MetaData()
step_ledger = Table(
    "cronlease_test_step_ledger",
    _metadata,
    Column("task", String(255), nullable=False, index=True),
    Column("slot", BigInteger, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("db_time", Double, nullable=False),
    Column("monotonic", Double, nullable=False),
)


@cache
def _engine(url: str) -> Engine:
    connect_args = {"timeout": 30} if url.startswith("sqlite") else {}
    return create_engine(normalize_url(url), poolclass=NullPool, connect_args=connect_args)


def setup(url: str) -> None:
    _metadata.create_all(_engine(url), checkfirst=True)
    # made before the replicas start: replicas creating tables at once is
    # tests/contract/test_migration.py::test_replicas_upgrading_at_once's
    store = LeaseStore.from_url(url)
    try:
        store.create_tables()
    finally:
        store.dispose()


def entries(url: str, task: str) -> list[tuple[int, int, float, float]]:
    """(slot, pid, database time and monotonic time at the run's start) of ``task``'s
    runs, in slot order."""
    columns = (step_ledger.c.slot, step_ledger.c.pid, step_ledger.c.db_time)
    with _engine(url).connect() as conn:
        rows = conn.execute(
            sa_select(*columns, step_ledger.c.monotonic)
            .where(step_ledger.c.task == task)
            .order_by(step_ledger.c.slot)
        ).all()
    return [(int(slot), int(pid), float(at), float(mono)) for slot, pid, at, mono in rows]


def main() -> None:
    url, prefix = sys.argv[1], sys.argv[2]
    faketime_sleep.install()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    ticks = logging.getLogger("steptest")
    scheduler = Scheduler(url)

    def record(ctx: RunContext) -> None:
        at = scheduler.store.database_time()
        # read after the database clock: a run that read a stepped-back clock then has a
        # monotonic reading after the step too (read before it, a run held up between the
        # two reads on a loaded machine looked started before the step back though the
        # clock it read was the stepped-back one)
        started = time.monotonic()
        with _engine(url).begin() as conn:
            conn.execute(
                step_ledger.insert().values(
                    task=ctx.name, slot=ctx.slot, pid=os.getpid(), db_time=at, monotonic=started
                )
            )

    scheduler.task(every="1s", name=f"{prefix}-every")(record)
    scheduler.task(cron="* * * * *", name=f"{prefix}-cron")(record)
    if os.environ.get("CRONLEASE_TEST_SOLO") == "1":
        scheduler.task(every="1s", name=f"{prefix}-solo")(record)

    def decided(event: RunStarted | TickSkipped) -> None:
        outcome = event.reason if isinstance(event, TickSkipped) else "started"
        ticks.info("TICK %s %d %s", event.task, event.slot, outcome)

    scheduler.listen(decided, RunStarted, TickSkipped)

    run_forever_announced(scheduler)


if __name__ == "__main__":
    main()
