"""A replica for failover tests: ``failover_replica.py DB_URL LEDGER_URL``.

Two tasks, their ledger on a database that survives the failover:
``fast`` every 1 s, each run 1.5 s long, and ``slow`` every 10 s with
catch-up ``all``. Each run records its start (and an ``#overlap`` entry if
another run of the task had started and not ended) and its end; the wall-clock
bounds of each run (``TASK#began_ms``, ``TASK#ended_ms``: the slot column holds
epoch ms, the pid pairs them) and ``TASK#lost`` (its slot) for a run told
``ctx.lost`` by its end. Prints ``started``; ``stop`` on stdin ends it.
"""

from __future__ import annotations

import logging
import sys
import time

from cronlease import RunContext, Scheduler
from tests.support import ledger


def main() -> None:
    url, ledger_url = sys.argv[1], sys.argv[2]
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    scheduler = Scheduler(url)

    def run(name: str, ctx: RunContext, seconds: float) -> None:
        ledger.append(ledger_url, f"{name}#began_ms", int(time.time() * 1000))
        ledger.timed_run(ledger_url, name, ctx.slot, seconds)
        ledger.append(ledger_url, f"{name}#ended_ms", int(time.time() * 1000))
        if ctx.lost:
            ledger.append(ledger_url, f"{name}#lost", ctx.slot)

    @scheduler.task(every="1s", name="fast", lease_ttl=2, catchup="skip")
    def fast(ctx: RunContext) -> None:
        run("fast", ctx, 1.5)

    @scheduler.task(every="10s", name="slow", catchup="all")
    def slow(ctx: RunContext) -> None:
        run("slow", ctx, 0.2)

    scheduler.start()
    print("started", flush=True)
    sys.stdin.readline()
    scheduler.shutdown()


if __name__ == "__main__":
    main()
