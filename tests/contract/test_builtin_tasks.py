"""cronlease's own tasks (the stuck watcher, housekeeping) run on every scheduler, silently.

Every replica competes for their leases on every pass: a user's listener, the
Stats counters and the log must not hear of them (no 'taken' skip, no run
started or finished, no run line), while the watcher still does its work.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from cronlease import Event, RunFinished, RunLost, Scheduler, TickSkipped
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.store import LeaseStore
from cronlease._run.housekeeping import pruning, watcher
from cronlease._run.housekeeping.builtin import BUILTIN_TASKS, HOUSEKEEPING_TASK
from cronlease._run.housekeeping.watcher import STUCK_WATCHER_TASK
from cronlease._timing.schedule import slot_of
from tests.support.procs import wait_for

pytestmark = pytest.mark.slow

#: watcher passes (and housekeeping passes) the test waits for
PASSES = 4


def about_builtin(text: str) -> bool:
    return any(name in text for name in BUILTIN_TASKS)


def test_builtin_tasks_are_silent_to_listeners_stats_and_log(
    db_url: str,
    task_name: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # due every second instead of every minute (hour): read when a scheduler declares
    # them; in a namespace of the test's own, so their lease rows are this test's
    monkeypatch.setattr(watcher, "WATCH_EVERY", "1s")
    monkeypatch.setattr(pruning, "HOUSEKEEPING_EVERY", "1s")
    schedulers = [Scheduler(db_url, namespace=task_name) for _ in range(2)]
    heard: list[list[Event]] = [[], []]
    ran: list[int] = []
    for scheduler, events in zip(schedulers, heard, strict=True):
        scheduler.listen(events.append)  # every event
        # a plain task: nothing asks for retries or recovery
        scheduler.add_task(lambda ctx: ran.append(ctx.slot), every="1s", name="plain")
        assert STUCK_WATCHER_TASK in {task.name for task in scheduler._tasks.values()}
    store = LeaseStore.from_url(db_url)
    try:
        store.create_tables()
        # a replica that died mid-run of a task no scheduler declares: its run row
        # 'running', its lease left to expire; only the watcher can mark it
        dead = f"{task_name}-dead"
        slot = slot_of(datetime.now(timezone.utc) - timedelta(seconds=1))  # not ahead of the db
        lease = store.acquire(AcquireRequest(name=dead, slot=slot, ttl=0.2, holder="dead:1"))
        assert isinstance(lease, Lease)
        builtins = [f"{task_name}:{name}" for name in (STUCK_WATCHER_TASK, HOUSEKEEPING_TASK)]

        def passes() -> list[int]:
            fences = {row.name: row.fence for row in store.leases(builtins)}
            return [fences.get(name, 0) for name in builtins]

        with caplog.at_level(logging.INFO, logger="cronlease"), schedulers[0], schedulers[1]:
            wait_for(
                lambda: store.history(dead, 1)[0].outcome == "abandoned",
                30,
                "the dead run marked abandoned by the watcher",
            )
            wait_for(
                lambda: min(passes()) >= PASSES,
                30,
                lambda: f"{PASSES} passes of each built-in task, not {passes()}",
            )
        assert store.history(dead, 1)[0].error == "its holder stopped renewing the lease"
    finally:
        store.dispose()

    user = f"{task_name}:plain"
    for scheduler, events in zip(schedulers, heard, strict=True):
        about = [event for event in events if about_builtin(str(getattr(event, "task", "")))]
        assert about == [], about
        assert not any(about_builtin(name) for name in scheduler.skipped_ticks)
        # every counter of runs and skips is the user's task's, as its events say
        stats = scheduler.stats.snapshot()
        finished = Counter(e.outcome for e in events if isinstance(e, RunFinished))
        skipped = Counter(e.reason for e in events if isinstance(e, TickSkipped))
        runs = {key[len("runs_") :]: n for key, n in stats.items() if key.startswith("runs_")}
        skips = {
            key[len("ticks_skipped_") :]: n
            for key, n in stats.items()
            if key.startswith("ticks_skipped_")
        }
        assert runs == dict(finished), (stats, events)
        assert skips == dict(skipped), (stats, events)
        assert stats.get("leases_lost", 0) == sum(isinstance(e, RunLost) for e in events)
        assert stats.get("late_pickups", 0) == 0
    # the user's task was heard: both replicas competed for it as for the built-ins
    user_events = [e for events in heard for e in events if getattr(e, "task", None) == user]
    assert sum(isinstance(e, RunFinished) for e in user_events) == len(ran) > 0
    # nor a line: no run line, no skip line of a built-in task
    lines = [record.getMessage() for record in caplog.records]
    assert not [line for line in lines if about_builtin(line)]


def test_an_overdue_builtin_task_is_no_health_problem(
    db_url: str, task_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watcher pass missed by the whole fleet (every replica busy or restarting at its
    minute) is cronlease's to catch up at the next one, not a probe's to fail on."""
    monkeypatch.setattr(watcher, "WATCH_EVERY", "1s")
    scheduler = Scheduler(db_url, namespace=task_name)
    scheduler.add_task(lambda: None, every="1s", name="plain", enabled=False)
    try:
        scheduler.store.create_tables()
        # as if started 10 s ago and no pass of the watcher ran since: ten seconds
        # behind its schedule, far past its grace (what health() called overdue)
        scheduler._started_at = datetime.now(timezone.utc) - timedelta(seconds=10)
        health = scheduler.health()
        assert health.ok, health.problems
        assert not health.overdue
    finally:
        scheduler.store.dispose()
