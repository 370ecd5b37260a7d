"""A replica with many tasks: ``python -m tests.support.batch_replica URL PREFIX COUNT``.

``COUNT`` tasks ``PREFIX-000``... every second, each appending its slot to the
ledger; prints ``started`` once the scheduler runs, and on SIGTERM a line
``stats key=value...`` of its batching counters and a line ``unrun task@slot=reason...``
of the ticks it did not run (each skip's reason, or ``failed`` for a run that
failed), then exits 0. Log lines (stderr)
carry their level.

- ``CRONLEASE_TEST_LONE=1``: one more task, ``PREFIX-lone``, every second half a
  second after the others (its ticks travel alone: a batch of one).
- ``CRONLEASE_TEST_LEDGER``: the ledger's database URL (default: ``URL``), and
  ``CRONLEASE_TEST_LEDGER_POOL`` its pool size (default 16, and 10 more at a peak).
- ``CRONLEASE_TEST_WORKERS``: ``max_workers`` (default: ``COUNT``); and the fleet
  knobs of tests/support/fleet_knobs.py.
- ``CRONLEASE_TEST_TASK_SECONDS``: how long each run works before it appends (default 0).
- ``CRONLEASE_TEST_SAY_HOLDER=1``: a line ``holder HOLDER`` (its member row's) before
  ``started``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine

from cronlease import RunContext, RunFinished, Scheduler, TickSkipped
from cronlease._lease.database import normalize_url
from cronlease._timing.schedule import EPOCH
from tests.support import fleet_knobs, ledger
from tests.support.foreground import run_forever_announced

if TYPE_CHECKING:
    from tests.support.procs import Proc


def replica_main(url: str, prefix: str, count: int) -> None:
    """One replica process: ``count`` tasks every second, each appending its slot to the ledger."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(process)d %(levelname)s %(message)s",
    )
    ledger_url = os.environ.get("CRONLEASE_TEST_LEDGER", url)
    pool = int(os.environ.get("CRONLEASE_TEST_LEDGER_POOL", "16"))
    # a pool size given: that many connections and no more (a server shared by many replicas)
    overflow = 0 if "CRONLEASE_TEST_LEDGER_POOL" in os.environ else 10
    # A worker for each task: this is about batching, and three replicas of 16
    # workers have 48 slots for 50 ticks a second (capacity: test_capacity.py).
    fleet_knobs.apply()
    workers = int(os.environ.get("CRONLEASE_TEST_WORKERS", count))
    scheduler = Scheduler(url, history_retention=None, max_workers=workers)
    # A pooled ledger connection per worker: a connection per append (as in
    # tests/support/ledger.py) costs MariaDB more than the runs can spare here.
    connect_args = {"timeout": 30} if ledger_url.startswith("sqlite") else {}
    engine = create_engine(
        normalize_url(ledger_url),
        pool_size=pool,
        max_overflow=overflow,
        connect_args=connect_args,
    )
    # Open the ledger's connections before the first tick: sixteen MariaDB
    # connections opened at once by each of three replicas took up to 1.6 s, so
    # the first runs outlived the next tick and, with every worker busy, a
    # replica may take no tick (capacity); the test is about the tick path, not
    # the ledger's start-up.
    warm = [engine.connect() for _ in range(pool)]
    for conn in warm:
        conn.close()
    # SQLite: one ledger writer at a time in this process. Threads that meet on the
    # file's write lock wait in SQLite's busy handler, in sleeps of up to 100 ms, and
    # with the runs of a tick spread over the replicas one append took 1.6 s: the
    # next tick of that task was then skipped for overlap.
    sqlite = ledger_url.startswith("sqlite")
    one_writer: Any = threading.Lock() if sqlite else contextlib.nullcontext()
    works = float(os.environ.get("CRONLEASE_TEST_TASK_SECONDS", "0"))
    names = [f"{prefix}-{index:03d}" for index in range(count)]
    if os.environ.get("CRONLEASE_TEST_LONE") == "1":
        names.append(f"{prefix}-lone")
    for name in names:

        def write(ctx: RunContext, name: str = name) -> None:
            if works:
                time.sleep(works)  # the task's own work, holding its worker
            with one_writer, engine.begin() as conn:
                conn.execute(
                    ledger.ledger.insert().values(task=name, slot=ctx.slot, pid=os.getpid())
                )

        anchor = EPOCH + timedelta(seconds=0.5) if name.endswith("-lone") else None
        scheduler.add_task(write, every="1s", name=name, anchor=anchor)

    unrun: list[str] = []  # list.append is atomic: listeners run on several threads
    scheduler.listen(lambda e: unrun.append(f"{e.task}@{e.slot}={e.reason}"), TickSkipped)
    scheduler.listen(
        lambda e: e.outcome == "succeeded" or unrun.append(f"{e.task}@{e.slot}=failed"),
        RunFinished,
    )
    if os.environ.get("CRONLEASE_TEST_SAY_HOLDER") == "1":
        print("holder", scheduler.holder, flush=True)
    run_forever_announced(scheduler)
    stats = scheduler.stats.snapshot()
    keys = ["acquire_batches", "acquire_batch_ticks", "ticks_missed", "ticks_left_to_peers"]
    keys += sorted(key for key in stats if key.startswith("ticks_skipped_") or "lease" in key)
    print("stats", " ".join(f"{key}={stats.get(key, 0)}" for key in keys), flush=True)
    print("unrun", *unrun, flush=True)


def read_stats(replica: Proc) -> dict[str, int]:
    """The counters of a replica's ``stats`` line (printed on SIGTERM)."""
    line = replica.expect("stats", timeout=10)
    return {key: int(value) for key, value in (pair.split("=") for pair in line.split()[1:])}


def read_unrun(replica: Proc) -> dict[tuple[str, int], str]:
    """The ticks a replica did not run, with why (its ``unrun`` line, after ``stats``)."""
    line = replica.expect("unrun", timeout=10)
    unrun: dict[tuple[str, int], str] = {}
    for item in line.split()[1:]:
        key, reason = item.rsplit("=", 1)
        task, slot = key.rsplit("@", 1)
        unrun[task, int(slot)] = reason
    return unrun


if __name__ == "__main__":
    replica_main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
