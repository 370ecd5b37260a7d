"""A replica that forks a ``multiprocessing`` pool: ``fork_pool_replica.py URL TASK``.

The scheduler runs a task every second (appending to the ledger); once it has
run, a fork Pool of three workers does three seconds of work each — across
several ticks — and is closed. The script prints ``pool <pid> <pid> <pid>``
with the workers' pids, then ``done`` after two more runs of its own, and exits.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import time

from cronlease import RunContext, Scheduler
from tests.support import ledger
from tests.support.procs import wait_for


def pool_work(seconds: float) -> int:
    time.sleep(seconds)  # ordinary work of a pool worker, across several ticks
    return os.getpid()


def main() -> None:
    url, name = sys.argv[1], sys.argv[2]
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    scheduler = Scheduler(url)

    @scheduler.task(every="1s", name=name)
    def write_ledger(ctx: RunContext) -> None:
        ledger.append(url, name, ctx.slot)

    def own_runs() -> int:
        return sum(pid == os.getpid() for _, pid in ledger.entries(url, name))

    scheduler.start()
    try:
        wait_for(own_runs, 30, "a run in the parent")
        with multiprocessing.get_context("fork").Pool(3) as pool:
            pids = pool.map(pool_work, [3.0, 3.0, 3.0], chunksize=1)
        print("pool", *sorted(set(pids)), flush=True)
        seen = own_runs()
        wait_for(lambda: own_runs() >= seen + 2, 30, "two more runs in the parent")
    finally:
        scheduler.shutdown()
    print("done", flush=True)


if __name__ == "__main__":
    main()
