"""Misfire and "slot is ahead" warnings: once per streak, with a count (issue 11, item 13).

Both conditions last: a replica too slow to start ticks within their grace,
or whose clock runs ahead of the database's, meets them on every tick. One
warning per tick per replica drowned the log (48 "slot is ahead" lines in
70 s; 84 misfire lines against 2 outage lines). Now the first of a streak
is a WARNING naming the task and the reason, the next ones are counted, and
the first tick that is not skipped ends the streak with one line carrying
the count. Stats and ``TickSkipped`` events stay per tick.

Driven through the real tick path (``TickRunner.run_tick``: admission, then
acquisition on a real database); the "future" refusal comes from the
database's own clock.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cronlease import Scheduler, TickSkipped


def lines_about(caplog: pytest.LogCaptureFixture, task: str) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "cronlease"
        and record.levelno >= logging.WARNING
        and record.getMessage().startswith(f"{task}:")
    ]


def test_misfires_are_logged_once_per_streak_and_counted_per_tick(
    tmp_path: Path, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cronlease")
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'leases.db'}")
    skips: list[TickSkipped] = []
    scheduler.listen(skips.append, TickSkipped)
    task = scheduler.add_task(lambda: None, every="1s", grace="1s", name=task_name)
    now = datetime.now(timezone.utc)
    try:
        for late in range(30, 25, -1):  # five ticks, each 26-30 s late
            assert scheduler.runner.run_tick(task, now - timedelta(seconds=late)) is None
        lines = lines_about(caplog, task_name)
        assert len(lines) == 1, lines
        assert "skipped" in lines[0] and "past its grace" in lines[0] and "misfire" in lines[0]
        assert [skip.reason for skip in skips] == ["misfire"] * 5
        assert scheduler.stats.snapshot()["ticks_missed"] == 5

        # an on-time tick ends the streak: one line with the count
        assert scheduler.runner.run_tick(task, datetime.now(timezone.utc)) == "succeeded"
        lines = lines_about(caplog, task_name)
        assert len(lines) == 2, lines
        assert "5 tick(s) in a row" in lines[1] and "misfire" in lines[1]

        # the next late tick starts a new streak, warned again
        late = datetime.now(timezone.utc) - timedelta(seconds=20)
        assert scheduler.runner.run_tick(task, late) is None
        lines = lines_about(caplog, task_name)
        assert len(lines) == 3 and "past its grace" in lines[2], lines
    finally:
        scheduler.store.dispose()


def test_slots_ahead_of_the_database_clock_are_logged_once_per_streak(
    db_url: str, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cronlease")
    scheduler = Scheduler(db_url)
    skips: list[TickSkipped] = []
    scheduler.listen(skips.append, TickSkipped)
    task = scheduler.add_task(lambda: None, every="1s", name=task_name)
    ahead = datetime.now(timezone.utc) + timedelta(hours=1)
    try:
        for step in range(4):
            assert scheduler.runner.run_tick(task, ahead + timedelta(seconds=step)) is None
        assert [skip.reason for skip in skips] == ["future"] * 4
        assert scheduler.stats.snapshot()["ticks_skipped_future"] == 4
        lines = lines_about(caplog, task_name)
        assert len(lines) == 1, lines
        assert "ahead of the database clock" in lines[0] and "future" in lines[0]

        assert scheduler.runner.run_tick(task, datetime.now(timezone.utc)) == "succeeded"
        lines = lines_about(caplog, task_name)
        assert len(lines) == 2, lines
        assert "4 tick(s) in a row" in lines[1] and "ahead of the database clock" in lines[1]
    finally:
        scheduler.store.dispose()
