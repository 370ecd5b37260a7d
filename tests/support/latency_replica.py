"""A replica for the latency test: ``latency_replica.py URL LEDGER_URL PREFIX COUNT``.

``PREFIX-0`` .. ``PREFIX-{COUNT-1}``, every 1 s, each run appending its slot
to the ledger at ``LEDGER_URL`` and returning. The leases go to ``URL`` (for
a replica behind latency: through the delaying proxy), the ledger straight to
the database, so that what the test counts is the lease protocol's doing, not
the time the ledger's own connection takes through the delay. Log lines on
stderr (``T LEVEL message``, T this host's clock); prints ``started``; exits
0 on SIGTERM. ``CRONLEASE_TEST_GRACE`` (seconds) sets every task's grace (default:
the schedule's, half the gap: 0.5 s).
"""

from __future__ import annotations

import logging
import os
import sys

from cronlease import RunContext, Scheduler
from tests.support import ledger
from tests.support.foreground import run_forever_announced


def main() -> None:
    url, ledger_url, prefix, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(created).3f %(levelname)s %(message)s"
    )
    scheduler = Scheduler(url, shutdown_grace=5)
    grace = os.environ.get("CRONLEASE_TEST_GRACE")
    options = {"grace": float(grace)} if grace else {}

    def write_ledger(ctx: RunContext) -> None:
        ledger.append(ledger_url, ctx.name, ctx.slot)

    for index in range(count):
        scheduler.add_task(write_ledger, every="1s", name=f"{prefix}-{index}", **options)

    run_forever_announced(scheduler)


if __name__ == "__main__":
    main()
