"""Listeners observe real runs, skips, lost leases and outages."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import update

from cronlease import (
    DatabaseRecovered,
    DatabaseUnavailable,
    Event,
    RunContext,
    RunFinished,
    RunLost,
    RunStarted,
    Scheduler,
    TickSkipped,
)
from cronlease._lease.schema import leases
from tests.support.procs import wait_for


@pytest.mark.slow
def test_runs_are_reported_with_outcome_and_duration(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    events: list[Event] = []
    scheduler.listen(events.append, RunStarted, RunFinished)
    calls: list[int] = []

    @scheduler.task(every="1s", name=task_name)
    def sometimes_fails(ctx: RunContext) -> None:
        calls.append(ctx.slot)
        if len(calls) == 2:
            raise ValueError("second run fails")

    with scheduler:
        wait_for(lambda: sum(isinstance(e, RunFinished) for e in events) >= 3, 20, "3 runs")
    finished = [e for e in events if isinstance(e, RunFinished)]
    started = [e for e in events if isinstance(e, RunStarted)]
    assert [e.slot for e in started[:3]] == [e.slot for e in finished[:3]] == calls[:3]
    assert [e.outcome for e in finished[:3]] == ["succeeded", "failed", "succeeded"]
    assert finished[1].error is not None and "second run fails" in finished[1].error
    assert all(e.duration >= 0 and e.task == task_name for e in finished)
    assert all(e.fence == s.fence for e, s in zip(finished, started, strict=False))


def test_skipped_ticks_say_why(db_url: str, task_name: str) -> None:
    first, second = Scheduler(db_url), Scheduler(db_url)
    skips: list[TickSkipped] = []
    second.listen(skips.append, TickSkipped)
    # a grace of 10 s: on a loaded host the ticks below are still within it when tried
    tasks = [
        s.add_task(lambda: None, every="1s", grace="10s", name=task_name) for s in (first, second)
    ]
    fire_time = datetime.now(timezone.utc)
    assert first.runner.run_tick(tasks[0], fire_time) == "succeeded"
    assert second.runner.run_tick(tasks[1], fire_time) is None
    second.pause(task_name)
    assert second.runner.run_tick(tasks[1], fire_time + timedelta(milliseconds=1)) is None
    assert [s.reason for s in skips] == ["taken", "paused"]
    late = datetime(2020, 1, 1, tzinfo=timezone.utc)
    assert second.runner.run_tick(tasks[1], late) is None
    assert skips[-1].reason == "misfire" and skips[-1].slot == 1577836800000
    for scheduler in (first, second):
        scheduler.runner.close()


def test_a_taken_over_lease_is_reported_lost(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url)
    lost: list[RunLost] = []
    scheduler.listen(lost.append, RunLost)
    contexts: list[RunContext] = []
    done = threading.Event()

    def long_run(ctx: RunContext) -> None:
        contexts.append(ctx)
        wait_for(lambda: ctx.lost, 10, "ctx.lost")
        done.set()

    task = scheduler.add_task(long_run, every="1s", lease_ttl=1, name=task_name, grace="30s")
    thread = threading.Thread(
        target=scheduler.runner.run_tick, args=(task, datetime.now(timezone.utc))
    )
    thread.start()
    wait_for(lambda: contexts, 10, "the run to start")
    # Another acquisition bumps the fence (as a takeover after expiry would).
    with scheduler.store.engine.begin() as conn:
        conn.execute(
            update(leases).where(leases.c.name == task_name).values(fence=leases.c.fence + 1)
        )
    assert done.wait(10)
    thread.join(10)
    assert [(e.task, e.slot, e.fence) for e in lost] == [
        (task_name, contexts[0].slot, contexts[0].fence)
    ]
    assert scheduler.store.history(task_name)[0].outcome == "lost"
    scheduler.runner.close()


@pytest.mark.slow
def test_outage_events_and_a_failing_listener(tmp_path: Path) -> None:
    directory = tmp_path / "later"
    scheduler = Scheduler(f"sqlite:///{directory / 'db.sqlite'}")
    seen: list[Event] = []

    def broken(_event: Event) -> None:
        raise RuntimeError("listener bug")

    scheduler.listen(broken)
    scheduler.listen(seen.append, DatabaseUnavailable, DatabaseRecovered)
    runs: list[int] = []
    scheduler.add_task(lambda ctx: runs.append(ctx.slot), every="1s", name="t")
    with scheduler:
        wait_for(lambda: scheduler.stats["lease_errors"] >= 2, 15, "failed ticks")
        directory.mkdir()
        wait_for(lambda: runs, 15, "a run after recovery")
    kinds = [type(e) for e in seen]
    assert kinds[:2] == [DatabaseUnavailable, DatabaseRecovered]
    recovered = seen[1]
    assert isinstance(recovered, DatabaseRecovered)
    assert recovered.skipped_ticks >= 2 and recovered.outage > 0
