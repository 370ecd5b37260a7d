"""A replica whose tasks take time: ``python -m tests.support.capacity_replica URL PREFIX
COUNT EVERY SECONDS MAX_WORKERS``.

``COUNT`` tasks ``PREFIX-000``... run every ``EVERY`` (an ``every=`` string);
each appends its slot to the ledger, notes how late it started (against its
tick's grace) and sleeps ``SECONDS``. It prints ``started`` once the
scheduler runs, and on SIGTERM a line ``stats key=value...`` with its skip
counters, ``started_late`` (runs whose task began past the tick's grace) and
``most_at_once`` (the most tasks executing at the same time) and ``latest_ms``
(the latest start after its fire time), then exits 0.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from sqlalchemy import create_engine

from cronlease import RunContext, Scheduler
from cronlease._lease.database import normalize_url
from tests.support import ledger
from tests.support.foreground import run_forever_announced


def replica_main(
    url: str, prefix: str, count: int, every: str, seconds: float, max_workers: int
) -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    scheduler = Scheduler(url, history_retention=None, max_workers=max_workers)
    connect_args = {"timeout": 30} if url.startswith("sqlite") else {}
    engine = create_engine(normalize_url(url), pool_size=max_workers, connect_args=connect_args)
    # Connect the ledger's pool before the first tick: connecting under load
    # (MariaDB) took a second, and made the first runs overrun their period.
    warm = [engine.connect() for _ in range(max_workers)]
    for conn in warm:
        conn.close()
    lock = threading.Lock()
    figures = {"started_late": 0, "executing": 0, "most_at_once": 0, "latest_ms": 0}

    for index in range(count):
        name = f"{prefix}-{index:03d}"

        def work(ctx: RunContext, name: str = name) -> None:
            task = scheduler.get_task(name)
            lateness = time.time() - ctx.scheduled_for.timestamp()
            with lock:
                figures["started_late"] += lateness > task.grace_for(ctx.scheduled_for)
                figures["latest_ms"] = max(figures["latest_ms"], int(lateness * 1000))
                figures["executing"] += 1
                figures["most_at_once"] = max(figures["most_at_once"], figures["executing"])
            print(f"began {name} {ctx.slot} {lateness * 1000:.0f} ms late", file=sys.stderr)
            try:
                with engine.begin() as conn:
                    conn.execute(
                        ledger.ledger.insert().values(task=name, slot=ctx.slot, pid=os.getpid())
                    )
                time.sleep(seconds)
            finally:
                with lock:
                    figures["executing"] -= 1

        scheduler.add_task(work, every=every, name=name)

    run_forever_announced(scheduler)
    stats = scheduler.stats.snapshot()
    keys = sorted(key for key in stats if key.startswith(("ticks_skipped_", "runs_")))
    values = {key: stats.get(key, 0) for key in keys}
    values.update((key, figures[key]) for key in ("started_late", "most_at_once", "latest_ms"))
    print("stats", " ".join(f"{key}={value}" for key, value in values.items()), flush=True)


if __name__ == "__main__":
    replica_main(
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        sys.argv[4],
        float(sys.argv[5]),
        int(sys.argv[6]),
    )
