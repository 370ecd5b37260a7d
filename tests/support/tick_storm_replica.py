"""A replica of many tasks due at one instant: ``tick_storm_replica.py URL PREFIX N GRACE
LEDGER WORKERS PAUSE``, then ``go ANCHOR`` on stdin.

Prints ``ready`` once imported; on ``go ANCHOR`` declares N tasks named PREFIX-0000 ...
``every="1h"`` anchored at ANCHOR (epoch seconds), so all fall due at that one instant
(the test picks it once every replica is ready), each with a grace of GRACE seconds,
on ``max_workers`` WORKERS. A run appends ``NAME SLOT`` to LEDGER, a file of this
replica's own (no database connection: the storm is the tick path's), then sleeps
PAUSE seconds. WARNING lines on stderr; prints ``started`` once it runs, and on
SIGTERM, after the shutdown, ``stats {json}`` (its counters) and exits 0.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from datetime import datetime, timezone

from cronlease import RunContext, Scheduler
from tests.support.foreground import run_forever_announced


def main() -> None:
    url, prefix, count, grace, ledger, workers, pause = sys.argv[1:8]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    scheduler = Scheduler(url, max_workers=int(workers), history_retention=None)
    out = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    seconds = float(pause)

    def note(ctx: RunContext) -> None:
        os.write(out, f"{ctx.name} {ctx.slot}\n".encode())  # one write: whole lines
        if seconds:
            time.sleep(seconds)

    print("ready", flush=True)
    word, anchor = sys.stdin.readline().split()
    assert word == "go", word
    instant = datetime.fromtimestamp(float(anchor), timezone.utc)
    for index in range(int(count)):
        scheduler.add_task(
            note, name=f"{prefix}-{index:04d}", every="1h", anchor=instant, grace=float(grace)
        )
    run_forever_announced(scheduler)
    print("stats " + json.dumps(scheduler.stats.snapshot()), flush=True)


if __name__ == "__main__":
    main()
