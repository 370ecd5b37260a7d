"""A replica whose process outlives its scheduler: ``lingering_replica.py URL TASK SECONDS``.

One task, every second, that appends its slot to the ledger, prints
``running <slot>`` and then takes SECONDS. On a ``shutdown`` line the script
calls ``shutdown(timeout=1)`` while that run goes on, prints ``returned``,
keeps the process alive until the run has ended (``ended``), then waits for
``stop``. Without ``wait`` (``shutdown-nowait``) it calls ``shutdown(wait=False)``.
"""

from __future__ import annotations

import logging
import sys
import time

from cronlease import RunContext, Scheduler
from tests.support import ledger


def main() -> None:
    url, name, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    scheduler = Scheduler(url)

    @scheduler.task(every="1s", name=name)
    def linger(ctx: RunContext) -> None:
        ledger.append(url, name, ctx.slot)
        print(f"running {ctx.slot}", flush=True)
        time.sleep(seconds)

    scheduler.start()
    for line in sys.stdin:
        command = line.strip()
        if command in ("shutdown", "shutdown-nowait"):
            if command == "shutdown":
                scheduler.shutdown(timeout=1)
            else:
                scheduler.shutdown(wait=False)
            print("returned", flush=True)
            deadline = time.monotonic() + 60
            while scheduler.running_tasks and time.monotonic() < deadline:
                time.sleep(0.05)
            print("ended", flush=True)
        elif command == "stop":
            break


if __name__ == "__main__":
    main()
