"""A whole replica process: ``replica.py URL TASK [EVERY [CATCHUP]]``.

Runs ``Scheduler.run_forever()`` with one task that appends its slot to the
ledger, prints ``started`` once the scheduler runs, and exits 0 on SIGTERM.
With ``CRONLEASE_TEST_BLOCK=1`` the task blocks after writing the ledger, so
a test can kill the replica mid-run (``CRONLEASE_TEST_BLOCK=first``: only in the task's
first run fleet-wide, one with no ledger entry before it, so whichever replica wins the
first tick is the one to kill); with ``CRONLEASE_TEST_RUN_SECONDS=N`` it
takes N seconds. With ``CRONLEASE_TEST_GO=1`` the script prints ``ready`` and
waits for a ``go`` line before it starts the scheduler, so a test can start
it on cue without waiting for the interpreter. ``CRONLEASE_TEST_LEDGER`` puts
the ledger in another database than the leases (a test that deletes the lease file).
``CRONLEASE_TEST_JSON_LOG=1`` logs with the README's JSON recipe (tests/support/json_log.py).
``CRONLEASE_TEST_ANCHOR`` (seconds since the epoch) anchors the schedule there, not at the
epoch (every scheduler of the task must be given the same: it is part of its fingerprint).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from datetime import datetime, timezone

from cronlease import RunContext, Scheduler
from tests.support import faketime_sleep, ledger
from tests.support.json_log import JsonFormatter


def main() -> None:
    faketime_sleep.install()
    url, name = sys.argv[1], sys.argv[2]
    every = sys.argv[3] if len(sys.argv) > 3 else "1s"
    catchup = sys.argv[4] if len(sys.argv) > 4 else "latest"
    block = os.environ.get("CRONLEASE_TEST_BLOCK", "")
    ledger_url = os.environ.get("CRONLEASE_TEST_LEDGER", url)
    run_seconds = float(os.environ.get("CRONLEASE_TEST_RUN_SECONDS", "0"))
    if os.environ.get("CRONLEASE_TEST_JSON_LOG") == "1":
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=logging.INFO, handlers=[handler])
    else:
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
        )
    scheduler = Scheduler(url)
    anchor_at = os.environ.get("CRONLEASE_TEST_ANCHOR")
    anchor = datetime.fromtimestamp(float(anchor_at), timezone.utc) if anchor_at else None

    @scheduler.task(every=every, name=name, catchup=catchup, anchor=anchor)
    def write_ledger(ctx: RunContext) -> None:
        first = block == "first" and not ledger.entries(ledger_url, name)
        ledger.append(ledger_url, name, ctx.slot)
        if block == "1" or first:
            threading.Event().wait()
        if run_seconds:
            threading.Event().wait(run_seconds)

    def announce() -> None:
        while not scheduler.running:
            threading.Event().wait(0.01)
        print("started", flush=True)

    if os.environ.get("CRONLEASE_TEST_GO") == "1":
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            return
    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()


if __name__ == "__main__":
    main()
