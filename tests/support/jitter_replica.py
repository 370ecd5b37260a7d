"""A replica for the jitter and roles tests: ``jitter_replica.py URL TASK EVERY JITTER``.

One task that appends its slot to the ledger and, as the row ``TASK#SLOT``, the
epoch millisecond its run started (the ledger's slot column holds it), so a test
reads when each slot started and on which replica. Prints ``started`` once the
scheduler runs; exits 0 on SIGTERM. ``CRONLEASE_TEST_ROLES`` (comma-separated)
are the replica's roles, ``CRONLEASE_TEST_TASK_ROLES`` the task's.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from cronlease import RunContext, Scheduler
from tests.support import ledger
from tests.support.foreground import run_forever_announced


def _names(variable: str) -> list[str]:
    return [name for name in os.environ.get(variable, "").split(",") if name]


def main() -> None:
    url, name, every, jitter = sys.argv[1:5]
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    replica: dict[str, Any] = {}
    task: dict[str, Any] = {}
    if _names("CRONLEASE_TEST_ROLES"):
        replica["roles"] = _names("CRONLEASE_TEST_ROLES")
    if _names("CRONLEASE_TEST_TASK_ROLES"):
        task["roles"] = _names("CRONLEASE_TEST_TASK_ROLES")
    scheduler = Scheduler(url, **replica)

    @scheduler.task(every=every, jitter=jitter, name=name, **task)
    def write_ledger(ctx: RunContext) -> None:
        started = round(time.time() * 1000)
        ledger.append(url, name, ctx.slot)
        ledger.append(url, f"{name}#{ctx.slot}", started)

    run_forever_announced(scheduler)


if __name__ == "__main__":
    main()
