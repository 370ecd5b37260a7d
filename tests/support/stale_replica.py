"""A replica whose tasks ask for crash recovery: ``stale_replica.py URL PREFIX COUNT``.

Declares COUNT tasks ``PREFIX-0`` .. ``PREFIX-<COUNT-1>``, each ``recover=True``
(``CRONLEASE_TEST_RECOVER=0``: not), every ``CRONLEASE_TEST_EVERY`` (default
15s) with a lease TTL of ``CRONLEASE_TEST_TTL`` (default 2s). A run prints
``running NAME slot=S attempt=A recovering=R key=K`` when it begins, then:

- attempt 1 with ``CRONLEASE_TEST_HOLD=block``: blocks for ever (kill -9 it);
- attempt 1 with ``CRONLEASE_TEST_HOLD=<seconds>``: sleeps that long (SIGSTOP it);
- attempt 1 with ``CRONLEASE_TEST_HOLD=resume``: waits for a ``resume`` line on stdin
  (SIGSTOP it, SIGCONT it when the test is ready for its stale attempt, then send it);
- then, in one transaction on the lease database, appends its slot to the
  ledger and calls ``ctx.verify(connection)`` — a stale attempt's append is
  rolled back with its transaction — and prints ``committed NAME slot=S
  attempt=A`` or ``refused NAME slot=S attempt=A LeaseLostError``;
- with ``CRONLEASE_TEST_WORK=<seconds>`` it then takes that long;
- with ``CRONLEASE_TEST_FAIL_BELOW=N`` it then raises while its attempt is below N
  (declared with ``CRONLEASE_TEST_RETRIES`` retries, ``CRONLEASE_TEST_RETRY_DELAY`` apart).

``CRONLEASE_TEST_ANCHOR`` (seconds since the epoch) anchors the schedule there instead
of at the epoch, so a test's first tick comes when it is ready for it, not up to a whole
period later; every replica of a test must be given the same one (it is part of the
schedule's fingerprint).

``CRONLEASE_TEST_NAMESPACE`` gives the scheduler a namespace (its tasks and its
stuck watcher's lease row are then the test's own); ``CRONLEASE_TEST_WATCH_EVERY``
replaces the stuck watcher's minute, so a test waits seconds for its pass — only
with a namespace, or the fleet-wide watcher row of other tests would change schedule.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from datetime import datetime, timezone

from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from cronlease import LeaseLostError, RunContext, Scheduler
from cronlease._lease.database import normalize_url
from cronlease._run.housekeeping import watcher
from tests.support import ledger

_print_lock = threading.Lock()


def say(line: str) -> None:
    # many runs print at once: one line at a time, or two merge into one
    with _print_lock:
        print(line, flush=True)


def main() -> None:
    url, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    every = os.environ.get("CRONLEASE_TEST_EVERY", "15s")
    ttl = os.environ.get("CRONLEASE_TEST_TTL", "2s")
    hold = os.environ.get("CRONLEASE_TEST_HOLD", "")
    work = float(os.environ.get("CRONLEASE_TEST_WORK", "0"))
    recover = os.environ.get("CRONLEASE_TEST_RECOVER", "1") == "1"
    max_workers = int(os.environ.get("CRONLEASE_TEST_WORKERS", "16"))
    fail_below = int(os.environ.get("CRONLEASE_TEST_FAIL_BELOW", "0"))
    retries = int(os.environ.get("CRONLEASE_TEST_RETRIES", "0"))
    retry_delay = os.environ.get("CRONLEASE_TEST_RETRY_DELAY", "10s")
    anchor_at = os.environ.get("CRONLEASE_TEST_ANCHOR")
    anchor = datetime.fromtimestamp(float(anchor_at), timezone.utc) if anchor_at else None
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    connect_args = {"timeout": 30} if url.startswith("sqlite") else {}
    effects = create_engine(normalize_url(url), poolclass=NullPool, connect_args=connect_args)
    namespace = os.environ.get("CRONLEASE_TEST_NAMESPACE") or None
    watch_every = os.environ.get("CRONLEASE_TEST_WATCH_EVERY")
    if watch_every:
        assert namespace, "a shorter stuck watcher needs a namespace of its own"
        watcher.WATCH_EVERY = watch_every
    scheduler = Scheduler(url, max_workers=max_workers, namespace=namespace)

    def run(ctx: RunContext) -> None:
        name = ctx.name
        say(
            f"running {name} slot={ctx.slot} attempt={ctx.attempt} "
            f"recovering={ctx.recovering} key={ctx.key}"
        )
        if ctx.attempt == 1 and hold == "block":
            threading.Event().wait()
        elif ctx.attempt == 1 and hold == "resume":
            if sys.stdin.readline().strip() != "resume":
                return  # the test ended: stdin closed
        elif ctx.attempt == 1 and hold:
            time.sleep(float(hold))
        try:
            with effects.begin() as connection:
                connection.execute(
                    ledger.ledger.insert().values(task=name, slot=ctx.slot, pid=os.getpid())
                )
                ctx.verify(connection)
        except LeaseLostError:
            say(f"refused {name} slot={ctx.slot} attempt={ctx.attempt} LeaseLostError")
            raise
        say(f"committed {name} slot={ctx.slot} attempt={ctx.attempt}")
        if work:
            time.sleep(work)
        if ctx.attempt < fail_below:
            raise RuntimeError(f"attempt {ctx.attempt} fails on purpose")

    for index in range(count):
        scheduler.task(
            every=every,
            anchor=anchor,
            name=f"{prefix}-{index}",
            lease_ttl=ttl,
            recover=recover,
            retries=retries,
            retry_delay=retry_delay,
        )(run)

    def announce() -> None:
        while not scheduler.running:
            threading.Event().wait(0.01)
        say("started")

    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()


if __name__ == "__main__":
    main()
