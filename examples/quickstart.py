"""Quick start: two periodic tasks on the default SQLite file (./cronlease.db).

    python examples/quickstart.py

Start it in two terminals at once: each tick still runs once, on one of them.
Stop with Ctrl-C (or SIGTERM): running tasks finish and their leases are released.
"""

from __future__ import annotations

import logging
import os

from cronlease import RunContext, Scheduler

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("quickstart")

# CRONLEASE_DATABASE_URL lets you point the same code at PostgreSQL or MySQL.
scheduler = Scheduler(os.environ.get("CRONLEASE_DATABASE_URL"))


@scheduler.task(every="2s")
def refresh_cache(ctx: RunContext) -> None:
    log.info("refresh_cache ran for slot %s on pid %s", ctx.scheduled_for.isoformat(), os.getpid())


@scheduler.task(cron="* * * * *", name="minutely-report")
async def minutely_report() -> None:
    log.info("minutely report (async task)")


if __name__ == "__main__":
    scheduler.run_forever()
