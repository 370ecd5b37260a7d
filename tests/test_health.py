"""scheduler.health(): overdue tasks and an unreachable database, for probes."""

from __future__ import annotations

from pathlib import Path

from cronlease import Scheduler
from cronlease.model import AcquireRequest
from tests.support.procs import wait_for


def test_overdue_task_is_reported_until_paused(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    scheduler.add_task(lambda: None, every="1s", name=task_name)
    scheduler.runner.ensure_schema()
    assert scheduler.health().ok  # never ran and not started: nothing is due yet
    lease = scheduler.store.acquire(
        AcquireRequest(name=task_name, slot=60_000, ttl=1, holder="long-ago", tolerance=1)
    )
    assert lease is not None
    scheduler.store.finish(lease, "succeeded")
    report = scheduler.health()
    assert not report.ok and report.overdue == (task_name,)
    assert f"{task_name} is overdue" in report.problems
    scheduler.pause(task_name)
    assert scheduler.health().ok


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
