"""start() then shutdown() at once, while catch-up is due: nothing is left behind.

Catch-up goes through the tick path like any tick (admission, acquisition, the
worker pool, bounded by ``max_workers``) and shutdown joins it: once
``shutdown()`` returns, no lease of this replica is held and no run of it is
``running`` — on every backend.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

import pytest

from cronlease import Scheduler
from cronlease._lease.model import AcquireRequest
from cronlease._lease.store import LeaseStore
from cronlease._timing.schedule import slot_of
from tests.support.leases import set_lease_end, won

HOUR_MS = 3_600_000
ROUNDS = 50
TASKS = 4
MAX_WORKERS = 2


def last_ran_hours_ago(store: LeaseStore, name: str, hours: int) -> None:
    now_ms = slot_of(datetime.now(timezone.utc))
    slot = (now_ms // HOUR_MS - hours) * HOUR_MS
    lease = won(
        store.acquire(AcquireRequest(name=name, slot=slot, ttl=1, holder="before", tolerance=60))
    )
    assert lease is not None
    store.finish(lease, "succeeded")
    set_lease_end(store, name, slot / 1000 + 1)


@pytest.mark.slow
def test_start_then_shutdown_during_catch_up_leaves_no_lease_held_and_no_run_running(
    db_url: str, task_name: str, store: LeaseStore
) -> None:
    names = [[f"{task_name}-{r}-{t}" for t in range(TASKS)] for r in range(ROUNDS)]
    for round_names in names:
        for name in round_names:
            last_ran_hours_ago(store, name, 2)  # each round's tasks have a tick to catch up
    lock = threading.Lock()
    running = peak = ran = 0

    def work() -> None:
        nonlocal running, peak, ran
        with lock:
            running += 1
            peak = max(peak, running)
            ran += 1
        time.sleep(0.02)  # the task's own work: long enough for runs to coincide
        with lock:
            running -= 1

    problems = []
    for round_names in names:
        scheduler = Scheduler(db_url, max_workers=MAX_WORKERS, history_retention=None)
        for name in round_names:
            scheduler.add_task(work, every="1h", name=name)
        scheduler.start()
        scheduler.shutdown()
        db_now = store.database_time()
        held = [row.name for row in store.leases(round_names) if row.held(db_now)]
        left_running = [
            (name, run.slot)
            for name in round_names
            for run in store.history(name)
            if run.outcome == "running"
        ]
        if held or left_running:
            problems.append((held, left_running))
        scheduler.store.dispose()
    assert not problems, problems[:5]
    assert peak <= MAX_WORKERS, f"{peak} tasks ran at once with max_workers={MAX_WORKERS}"
    assert ran > 0  # some catch-up did start before its shutdown
