"""A replica for the schedule-row tests: ``schedule_replica.py URL NAMESPACE JOBS``.

It declares no task: it offers the jobs named in ``JOBS`` (comma-separated, of
``x``, ``y`` and ``slow``) and runs the schedule rows of ``NAMESPACE`` that use
them, polling every 0.2 s. Each job appends its slot to the ledger under its
``tag`` argument (``slow`` as :func:`tests.support.ledger.timed_run`). Prints
``started`` once the scheduler runs; exits 0 on SIGTERM.
"""

from __future__ import annotations

import logging
import sys

from cronlease import RunContext, Scheduler
from tests.support import ledger
from tests.support.foreground import run_forever_announced

#: seconds between two polls of the schedule rows (the tests' "one poll")
POLL = 0.2


def main() -> None:
    url, namespace, offered = sys.argv[1:4]
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    scheduler = Scheduler(url, namespace=namespace, schedule_poll=POLL)

    def x(ctx: RunContext, tag: str) -> None:
        ledger.append(url, tag, ctx.slot)

    def y(ctx: RunContext, tag: str) -> None:
        ledger.append(url, tag, ctx.slot)

    def slow(ctx: RunContext, tag: str, seconds: float) -> None:
        ledger.timed_run(url, tag, ctx.slot, seconds)

    for job in (x, y, slow):
        if job.__name__ in offered.split(","):
            scheduler.register(job)
    run_forever_announced(scheduler)


if __name__ == "__main__":
    main()
