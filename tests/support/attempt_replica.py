"""A replica whose one task records every attempt: ``attempt_replica.py URL TASK EVERY``.

The task appends to the attempts ledger (tests/support/attempt_ledger.py),
then, with ``CRONLEASE_TEST_BLOCK_FIRST=1``, blocks in a slot's first
attempt, so a test can kill the replica mid-run. ``CRONLEASE_TEST_RECOVER=1``
declares it ``recover=True``; ``CRONLEASE_TEST_TTL`` sets its lease TTL
(default 2 s); ``CRONLEASE_TEST_ANCHOR`` (seconds since the epoch) anchors its schedule
there, so a test's first tick comes when it is ready for it (every replica of a test must
be given the same: it is part of the schedule's fingerprint). Prints ``started`` once the
scheduler runs, exits 0 on SIGTERM.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from datetime import datetime, timezone

from cronlease import RunContext, Scheduler
from tests.support import attempt_ledger
from tests.support.foreground import run_forever_announced


def main() -> None:
    url, name, every = sys.argv[1], sys.argv[2], sys.argv[3]
    block_first = os.environ.get("CRONLEASE_TEST_BLOCK_FIRST") == "1"
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    anchor_at = os.environ.get("CRONLEASE_TEST_ANCHOR")
    anchor = datetime.fromtimestamp(float(anchor_at), timezone.utc) if anchor_at else None
    scheduler = Scheduler(url)

    @scheduler.task(
        every=every,
        anchor=anchor,
        name=name,
        lease_ttl=float(os.environ.get("CRONLEASE_TEST_TTL", "2")),
        recover=os.environ.get("CRONLEASE_TEST_RECOVER") == "1",
    )
    def record(ctx: RunContext) -> None:
        attempt_ledger.append(url, name, ctx)
        if block_first and ctx.attempt == 1:
            threading.Event().wait()

    run_forever_announced(scheduler)


if __name__ == "__main__":
    main()
