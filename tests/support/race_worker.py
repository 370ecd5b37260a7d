"""A replica process for the start-gate race: ``race_worker.py URL TASK``.

For each round it prints ``ready``, waits for ``go <fire-time-ms> <start-at>``
on stdin, sleeps until the wall-clock instant ``start-at`` (the start gate:
both processes leave it together, whichever read its line first), runs that
tick through the real TickRunner, and prints ``done <outcome>``. The task
appends to the ledger.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone

from cronlease import Scheduler
from cronlease._timing.schedule import time_of_slot
from tests.support import ledger


def main() -> None:
    url, name = sys.argv[1], sys.argv[2]
    scheduler = Scheduler(url)

    def write_ledger(ctx: object) -> None:
        ledger.append(url, name, ctx.slot)  # type: ignore[attr-defined]

    task = scheduler.add_task(write_ledger, every="1s", name=name, grace="30s")
    scheduler.runner.ensure_schema()
    print("ready", flush=True)
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] != "go":
            break
        fire_time: datetime = time_of_slot(int(command[1])).astimezone(timezone.utc)
        time.sleep(max(0.0, float(command[2]) - time.time()))
        outcome = scheduler.runner.run_tick(task, fire_time)
        print("done", outcome, flush=True)
        print("ready", flush=True)
    scheduler.store.dispose()


if __name__ == "__main__":
    main()
