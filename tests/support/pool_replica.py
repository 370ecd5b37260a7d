"""A replica whose runs hold the application's whole pool: ``pool_replica.py URL TASK``.

The scheduler adopts the application's engine (``Scheduler(engine=app)``,
five connections, no overflow). Each run of the task (every 1 s, 1 s lease)
records its start in the ledger — and an ``#overlap`` entry if another run of
the task had started and not ended — then checks out all five connections
and holds them for 4 s (four TTLs), ends at 5 s and records its end. Prints
``started`` once the scheduler runs; ``stop`` on stdin ends it.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from contextlib import ExitStack

from sqlalchemy import create_engine

from cronlease import RunContext, Scheduler
from cronlease._lease.database import normalize_url
from tests.support import ledger

POOL = 5
HOLD = 4.0
RUN = 5.0


def main() -> None:
    url, name = sys.argv[1], sys.argv[2]
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    app = create_engine(normalize_url(url), pool_size=POOL, max_overflow=0, pool_timeout=60)
    scheduler = Scheduler(engine=app)

    @scheduler.task(every="1s", name=name, lease_ttl=1)
    def hog(ctx: RunContext) -> None:
        begun = time.monotonic()
        running = len(ledger.entries(url, name)) - len(ledger.entries(url, f"{name}#end"))
        if running > 0:
            ledger.append(url, f"{name}#overlap", ctx.slot)
        ledger.append(url, name, ctx.slot)
        with ExitStack() as held:
            for _ in range(POOL):
                held.enter_context(app.connect())
            time.sleep(HOLD)  # the application is busy: every connection is in use
        time.sleep(max(0.0, RUN - (time.monotonic() - begun)))
        ledger.append(url, f"{name}#end", ctx.slot)

    scheduler.start()
    print("started", flush=True)
    sys.stdin.readline()
    scheduler.shutdown()
    app.dispose()


if __name__ == "__main__":
    threading.current_thread().name = "main"
    main()
