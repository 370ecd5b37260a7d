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

    def announce() -> None:
        while not scheduler.running:
            threading.Event().wait(0.01)
        print("started", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()


if __name__ == "__main__":
    main()
