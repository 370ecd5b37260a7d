"""A replica whose task hangs for good: ``hung_replica.py URL TASK``.

One sync task, every second, ``timeout="1s"``, that appends its slot to the
ledger and then blocks forever — a call no timeout can stop. The shutdown
grace is 1 s, so SIGTERM ends the script quickly although the call goes on.
Prints ``started`` once the scheduler runs.
"""

from __future__ import annotations

import logging
import sys
import threading

from cronlease import RunContext, Scheduler
from tests.support import ledger
from tests.support.foreground import run_forever_announced


def main() -> None:
    url, name = sys.argv[1], sys.argv[2]
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    scheduler = Scheduler(url, shutdown_grace=1)

    @scheduler.task(every="1s", name=name, timeout="1s")
    def hang(ctx: RunContext) -> None:
        ledger.append(url, name, ctx.slot)
        threading.Event().wait()

    run_forever_announced(scheduler)


if __name__ == "__main__":
    main()
