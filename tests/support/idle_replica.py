"""A replica of rare tasks: ``python -m tests.support.idle_replica URL PREFIX COUNT DUE``.

``COUNT`` tasks ``PREFIX-000``... every 60 s, anchored at ``DUE`` (epoch
seconds, a whole second): the first tick of each is at ``DUE``, the next a
minute later, so a replica started some seconds before ``DUE`` is idle until
then. Each run appends ``(task, slot, pid)`` to the ledger, and
``(task#late, lateness in ms, pid)``: how long after its instant the run
started. Prints ``holder HOLDER`` (this replica's holder id, as in its member
row), then ``started`` once the scheduler runs; exits 0 on SIGTERM. ``DUE`` ``-``:
after ``holder``, it reads a line ``due DUE`` first (so that a test can count
the seconds to ``DUE`` from once the process is up, not from its start).

The built-in stuck watcher fires every minute on the minute: here it fires
once a day instead, so the only instants in a test's window are ``DUE``'s (the
watcher's would bring its own renewals before each minute, by the same rule).
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import datetime, timezone

from cronlease import RunContext, Scheduler
from cronlease._run.housekeeping import watcher
from tests.support import fleet_knobs, ledger
from tests.support.foreground import run_forever_announced


def main(url: str, prefix: str, count: int, due: int | None) -> None:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(process)d %(levelname)s %(message)s",
    )
    watcher.WATCH_EVERY = "24h"  # read when the Scheduler declares it
    fleet_knobs.apply()  # tests/support/fleet_knobs.py
    scheduler = Scheduler(url, history_retention=None, max_workers=count)
    print("holder", scheduler.holder, flush=True)
    if due is None:
        due = int(sys.stdin.readline().removeprefix("due "))
    anchor = datetime.fromtimestamp(due, timezone.utc)
    for index in range(count):
        name = f"{prefix}-{index:03d}"

        def write(ctx: RunContext, name: str = name) -> None:
            late_ms = int(time.time() * 1000) - ctx.slot
            ledger.append(url, name, ctx.slot)
            ledger.append(url, f"{name}#late", late_ms)

        scheduler.add_task(write, every="60s", name=name, anchor=anchor)
    run_forever_announced(scheduler)


if __name__ == "__main__":
    main(
        sys.argv[1], sys.argv[2], int(sys.argv[3]), None if sys.argv[4] == "-" else int(sys.argv[4])
    )
