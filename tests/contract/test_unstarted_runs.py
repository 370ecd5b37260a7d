"""Won leases whose run never starts: released and recorded, never held on.

- a run that cannot be handed to a worker (the pool's submit raises, as
  ``threading.Thread.start`` does with "can't start new thread") is recorded
  ``failed``, its heartbeat stopped and its lease released (issue 11, 9b);
- a lease won past the tick's grace — the acquisition waited on a lock that
  another connection held — is released at once and recorded ``missed``; the
  task is not called (docs/design.md §4.4, issue 11 item 11).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text

from cronlease import Scheduler
from cronlease._run.timer.ticks import Decision, Tick
from cronlease._task import Task
from tests.support.procs import wait_for


def _fire_time() -> datetime:
    at = datetime.now(timezone.utc) - timedelta(milliseconds=50)
    return at.replace(microsecond=(at.microsecond // 1000) * 1000)


def _finished(scheduler: Scheduler, task: Task) -> str | None:
    runs = scheduler.store.history(task.full_name)
    return runs[0].outcome if runs and runs[0].outcome != "running" else None


def _released(scheduler: Scheduler, task: Task) -> bool:
    # every="60s": a lease kept (or renewed) runs a minute past its acquisition;
    # a released one ends the moment it was released
    (info,) = scheduler.store.leases([task.full_name])
    return info.expires_at < info.acquired_at + 30


def test_a_run_that_cannot_be_handed_to_a_worker_is_recorded_and_released(
    db_url: str, task_name: str
) -> None:
    scheduler = Scheduler(db_url, history_retention=None)
    calls: list[int] = []
    task = scheduler.add_task(lambda: calls.append(1), every="60s", name=task_name)
    runner = scheduler.runner
    runner.ensure_schema()

    def cannot_start(work: object) -> None:
        raise RuntimeError("can't start new thread")

    try:
        decision = runner.acquire_ticks([Tick(task, _fire_time())], dispatch=cannot_start)
        assert decision.retries == []
        outcome = wait_for(lambda: _finished(scheduler, task), 10, "the run to be recorded")
        assert outcome == "failed"
        (run,) = scheduler.store.history(task.full_name)
        assert run.error is not None and "can't start new thread" in run.error
        assert _released(scheduler, task)
        assert runner.running == []  # its heartbeat stopped, its next tick may start here
        assert runner.workers.free == runner.workers.limit
        assert calls == []
    finally:
        runner.close()


def _hold_sqlite(url: str) -> tuple[threading.Event, threading.Event]:
    """A second connection holding the write lock (BEGIN IMMEDIATE) until released."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            holding.set()
            release.wait(60)
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    threading.Thread(target=hold, daemon=True).start()
    return holding, release


def _hold_row(scheduler: Scheduler, name: str) -> tuple[threading.Event, threading.Event]:
    """A second connection holding the lease row's lock (SELECT ... FOR UPDATE)."""
    holding, release = threading.Event(), threading.Event()
    engine = scheduler.store.engine.execution_options(isolation_level="READ COMMITTED")

    def hold() -> None:
        with engine.connect() as conn, conn.begin():
            conn.execute(
                text("SELECT fence FROM cronlease_leases WHERE name = :name FOR UPDATE"),
                {"name": name},
            ).all()
            holding.set()
            release.wait(60)

    threading.Thread(target=hold, daemon=True).start()
    return holding, release


@pytest.mark.slow
def test_a_lease_won_past_the_grace_is_released_and_its_task_not_called(
    backend: str, db_url: str, task_name: str
) -> None:
    scheduler = Scheduler(db_url, history_retention=None)
    calls: list[int] = []
    # grace 1 s: the other connection holds its lock past it, then lets go
    task = scheduler.add_task(lambda: calls.append(1), every="60s", name=task_name, grace=1)
    runner = scheduler.runner
    runner.ensure_schema()
    if backend == "sqlite":
        holding, release = _hold_sqlite(db_url)
    else:
        scheduler.store.pause(task.full_name)  # the row exists, so it can be locked
        scheduler.store.resume(task.full_name)
        holding, release = _hold_row(scheduler, task.full_name)
    assert holding.wait(10)
    fire_time = _fire_time()
    decided: list[Decision] = []
    acquiring = threading.Thread(
        target=lambda: decided.append(runner.acquire_ticks([Tick(task, fire_time)])), daemon=True
    )
    try:
        acquiring.start()
        deadline = fire_time.timestamp() + 1.3
        wait_for(lambda: time.time() > deadline, 10, "the grace to pass")
        assert acquiring.is_alive(), "the acquisition did not wait on the lock"
        release.set()
        acquiring.join(30)
        (decision,) = decided
        for run in decision.runs:  # old code: the late winner's run was handed out
            run()
        assert calls == [], "the task started past its grace"
        assert decision.runs == []
        outcome = wait_for(lambda: _finished(scheduler, task), 10, "the run to be recorded")
        assert outcome == "missed"
        assert _released(scheduler, task)
        stats = scheduler.stats.snapshot()
        assert stats.get("ticks_missed") == 1 and stats.get("ticks_skipped_misfire") == 1, stats
        assert runner.running == [] and runner.workers.free == runner.workers.limit
    finally:
        release.set()
        acquiring.join(30)
        runner.close()
