"""Wall-clock steps as the timer sees them (docs/design.md §5.10); the real thing, three
replica processes under libfaketime, is tests/processes/test_clock_steps.py."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pytest
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.triggers.interval import IntervalTrigger

from cronlease._run.timer.clock_steps import STEP_THRESHOLD, WAKE_INTERVAL, StepWatch
from cronlease._run.timer.fire import BatchingScheduler

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def test_a_step_is_the_wall_clock_moving_unlike_the_monotonic_clock() -> None:
    wall, monotonic = [1_000_000.0], [10.0]
    watch = StepWatch(wall=lambda: wall[0], monotonic=lambda: monotonic[0])
    assert watch.step() is None  # the first look has nothing to compare with
    wall[0] += 30.0
    monotonic[0] += 30.0  # a late wake moves both clocks alike
    assert watch.step() is None
    wall[0] += 1.0 + STEP_THRESHOLD - 0.01  # within the threshold: slewing, jitter
    monotonic[0] += 1.0
    assert watch.step() is None
    wall[0] += 1.0 - 3600.0
    monotonic[0] += 1.0
    assert watch.step() == pytest.approx(-3600.0)
    wall[0] += 1.0 + 3600.0
    monotonic[0] += 1.0
    assert watch.step() == pytest.approx(3600.0)
    wall[0] += 1.0
    monotonic[0] += 1.0
    assert watch.step() is None  # each step is reported once


def noop() -> None:
    pass


@pytest.fixture
def paused() -> BatchingScheduler:
    """A started scheduler that processes nothing by itself: the test calls its steps."""
    scheduler = BatchingScheduler(timezone=timezone.utc)
    scheduler.run_after_step = ("upkeep",)
    scheduler.start(paused=True)
    yield scheduler  # type: ignore[misc]
    scheduler.shutdown(wait=False)


def test_a_step_back_moves_every_job_to_the_new_time(
    paused: BatchingScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    # next run times as the clock computed them before it stepped back an hour
    old = datetime.now(timezone.utc) + timedelta(hours=1)
    every_second = IntervalTrigger(seconds=1, start_date=EPOCH, timezone=timezone.utc)
    paused.add_job(noop, every_second, id="tick", next_run_time=old)
    paused.add_job(noop, IntervalTrigger(seconds=300), id="upkeep", next_run_time=old)
    paused.add_job(noop, every_second, id="held", next_run_time=None)  # a paused job
    before = datetime.now(timezone.utc)
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        paused._reanchor(-3600.0)
    after = datetime.now(timezone.utc)
    tick = paused.get_job("tick").next_run_time
    assert before <= tick <= after + timedelta(seconds=1)
    assert before <= paused.get_job("upkeep").next_run_time <= after  # the clock check, now
    assert paused.get_job("held").next_run_time is None
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "this host's wall clock stepped -3600.0 s" in warning
    assert "1 schedule(s) re-anchored" in warning


def test_a_step_forward_leaves_the_backlog_to_coalescing(
    paused: BatchingScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    due = datetime.now(timezone.utc) - timedelta(hours=1)  # every tick of the hour is due
    every_second = IntervalTrigger(seconds=1, start_date=EPOCH, timezone=timezone.utc)
    job = paused.add_job(noop, every_second, id="tick", next_run_time=due, coalesce=True)
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        paused._reanchor(3600.0)
    assert paused.get_job("tick").next_run_time == due  # one fire, at the latest of them
    assert job.coalesce
    assert "stepped +3600.0 s" in caplog.text and "not run" in caplog.text


def test_the_timer_wakes_at_least_every_second_however_far_the_next_job() -> None:
    scheduler = BatchingScheduler(timezone=timezone.utc)
    scheduler.add_job(noop, "interval", days=1, id="daily")
    scheduler.start()
    try:
        # the main loop may be in a pass too: the wait returned is this call's own
        assert scheduler._process_jobs() == WAKE_INTERVAL
    finally:
        scheduler.shutdown(wait=False)


def test_the_next_due_instant_is_the_tasks_jobs_not_the_upkeep_jobs() -> None:
    """The member row's renewal plan (docs/design.md §4.4) reads jobstore "default" only:
    an upkeep job in "local" due sooner is not an instant of the replica's tasks."""
    scheduler = BatchingScheduler(
        timezone=timezone.utc,
        jobstores={"default": MemoryJobStore(), "local": MemoryJobStore()},
    )
    scheduler.start(paused=True)
    try:
        assert scheduler.next_due() is None  # no task: nothing due
        soon = datetime.now(timezone.utc) + timedelta(seconds=5)
        later = soon + timedelta(seconds=50)
        scheduler.add_job(noop, IntervalTrigger(seconds=300), id="upkeep", jobstore="local",
                          next_run_time=soon)  # fmt: skip
        scheduler.add_job(noop, IntervalTrigger(seconds=60), id="tasks", next_run_time=later)
        assert scheduler.next_due() == pytest.approx(later.timestamp())
        scheduler.pause_job("tasks")  # a paused job fires nothing
        assert scheduler.next_due() is None
    finally:
        scheduler.shutdown(wait=False)
