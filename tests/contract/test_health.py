"""scheduler.health(): overdue tasks and an unreachable database, for probes."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from cronlease import Scheduler
from cronlease._lease.model import AcquireRequest
from cronlease._run.housekeeping.pruning import HOUSEKEEPING_TASK
from tests.support.leases import set_lease_end, won
from tests.support.procs import wait_for


def test_overdue_task_is_reported_until_paused(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    scheduler.add_task(lambda: None, every="1s", name=task_name)
    scheduler.runner.ensure_schema()
    assert scheduler.health().ok  # never ran and not started: nothing is due yet
    lease = won(
        scheduler.store.acquire(
            AcquireRequest(name=task_name, slot=60_000, ttl=1, holder="long-ago", tolerance=1)
        )
    )
    assert lease is not None
    scheduler.store.finish(lease, "succeeded")
    set_lease_end(scheduler.store, task_name, 61.0)  # that run ended in 1970, not just now
    report = scheduler.health()
    assert not report.ok and report.overdue == (task_name,)
    assert f"{task_name} is overdue" in report.problems
    scheduler.pause(task_name)
    assert scheduler.health().ok


def test_a_resumed_task_is_not_overdue_for_the_ticks_it_was_paused_through(
    db_url: str, task_name: str
) -> None:
    """Paused past its next tick, then resumed: ticks due while paused were skipped on
    purpose, so nothing is overdue before the first tick after the resume (a readiness
    probe on ``status --check`` took pods out of service after a pause and resume)."""
    scheduler = Scheduler(db_url)
    scheduler.add_task(lambda: None, every="1h", name=task_name)
    scheduler.runner.ensure_schema()
    lease = won(
        scheduler.store.acquire(
            AcquireRequest(name=task_name, slot=3_600_000, ttl=1, holder="long-ago", tolerance=1)
        )
    )
    assert lease is not None
    scheduler.store.finish(lease, "succeeded")
    scheduler.pause(task_name)
    assert scheduler.health().ok
    scheduler.resume(task_name)
    report = scheduler.health()
    assert report.ok, report.problems
    [row] = scheduler.store.leases([task_name])
    assert not row.paused and not row.held(scheduler.store.database_time())  # free to run


@pytest.mark.slow
def test_running_fleet_is_healthy(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    slots: list[int] = []
    scheduler.add_task(lambda ctx: slots.append(ctx.slot), every="1s", name=task_name)
    with scheduler:
        wait_for(lambda: len(slots) >= 2, 15, "two runs")
        report = scheduler.health()
    assert report.ok, report.problems


def test_unreachable_database_fails_the_probe(tmp_path: Path) -> None:
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'missing' / 'db.sqlite'}")
    scheduler.add_task(lambda: None, every="1s", name="t")
    report = scheduler.health(database_threshold=0)
    assert not report.ok
    assert any("database unreachable" in problem for problem in report.problems)


@pytest.mark.slow
def test_housekeeping_prunes_old_history_of_its_own_tasks(db_url: str, task_name: str) -> None:
    other = Scheduler(db_url)
    other.add_task(lambda: None, every="1s", name=f"{task_name}-other")
    scheduler = Scheduler(db_url, namespace=task_name, history_retention="2s")
    scheduler.add_task(lambda: None, every="1s", name="ticker")
    housekeeping = scheduler._tasks[f"{task_name}:{HOUSEKEEPING_TASK}"]
    assert HOUSEKEEPING_TASK not in scheduler.tasks  # not a user task
    with scheduler, other:
        # both schedulers' tasks: the other one started after, and may be a tick behind
        wait_for(
            lambda: (
                len(scheduler.store.history(f"{task_name}:ticker", 50)) >= 4
                and len(other.store.history(f"{task_name}-other", 50)) >= 4
            ),
            20,
            "four runs of each task",
        )
        now = datetime.now(timezone.utc)
        assert scheduler.runner.run_tick(housekeeping, now, catch_up=True) == "succeeded"
        remaining = scheduler.store.history(f"{task_name}:ticker", 50)
        untouched = other.store.history(f"{task_name}-other", 50)
    newest = max(run.started_at for run in remaining)
    assert all(newest - run.started_at <= 2.5 for run in remaining), remaining
    assert len(remaining) < 4
    assert len(untouched) >= 4  # another application's history is not ours to prune
