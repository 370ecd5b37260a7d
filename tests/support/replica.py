"""A whole replica process: ``replica.py URL TASK [EVERY]``.

Runs ``Scheduler.run_forever()`` with one task that appends its slot to the
ledger, prints ``started`` once the scheduler runs, and exits 0 on SIGTERM.
"""

from __future__ import annotations

import logging
import sys
import threading

from cronlease import RunContext, Scheduler
from tests.support import ledger


def main() -> None:
    url, name = sys.argv[1], sys.argv[2]
    every = sys.argv[3] if len(sys.argv) > 3 else "1s"
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    scheduler = Scheduler(url)

    @scheduler.task(every=every, name=name)
    def write_ledger(ctx: RunContext) -> None:
        ledger.append(url, name, ctx.slot)

    def announce() -> None:
        while not scheduler.running:
            threading.Event().wait(0.01)
        print("started", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()


if __name__ == "__main__":
    main()
