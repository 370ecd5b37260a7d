"""Jitter's offset: a pure function of (task, slot), bounded, clamped to half the gap."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from cronlease import Task
from cronlease._lease.model import LeaseInfo
from cronlease._status.rules import DeclaredTask, is_overdue
from cronlease._timing.jitter import offset
from cronlease._timing.schedule import Schedule, slot_of
from cronlease.errors import ConfigError


def job() -> None:
    pass


def test_the_offset_is_the_same_for_one_task_and_slot_and_within_the_jitter() -> None:
    offsets = [offset("reports", slot, 2.0, 5.0) for slot in range(0, 200_000, 1000)]
    assert offsets == [offset("reports", slot, 2.0, 5.0) for slot in range(0, 200_000, 1000)]
    assert all(0.0 <= value < 2.0 for value in offsets)
    # spread over the window, not one fixed delay: both halves are used
    assert min(offsets) < 0.5 and max(offsets) > 1.5
    assert offset("reports", 1000, 2.0, 5.0) != offset("other", 1000, 2.0, 5.0)


def test_the_offset_is_clamped_to_half_the_gap_and_zero_without_jitter() -> None:
    assert all(offset("r", slot, 60.0, 10.0) < 5.0 for slot in range(0, 100_000, 1000))
    assert offset("r", 1000, 0.0, 10.0) == 0.0


def test_a_task_offsets_its_ticks_by_its_stored_name_and_slot() -> None:
    task = Task.declare(job, name="report", namespace="ns", every="5s", jitter="2s")
    fire = datetime(2026, 1, 1, 0, 0, 5, tzinfo=timezone.utc)
    assert task.jitter == 2.0
    assert task.jitter_for(fire) == offset("ns:report", slot_of(fire), 2.0, 5.0)
    assert Task.declare(job, every="5s").jitter_for(fire) == 0.0


def test_a_cron_task_refuses_jitter_past_half_its_shortest_gap() -> None:
    with pytest.raises(ConfigError, match="key 'jitter': must be at most half the gap"):
        Task.declare(job, cron="*/2 * * * *", jitter="61s")
    assert Task.declare(job, cron="*/2 * * * *", jitter="60s").jitter == 60.0


def test_the_status_counts_the_grace_from_the_jittered_start() -> None:
    # an hourly task with 10 min of jitter and 60 s of grace: not overdue while its
    # tick may still be waiting out its offset (review: it showed overdue for minutes)
    schedule = Schedule.every("1h")
    plain = DeclaredTask(name="report", schedule=schedule, grace=60.0)
    jittered = DeclaredTask(name="report", schedule=schedule, grace=60.0, jitter=600.0)
    previous = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    expected = datetime(2026, 12, 1, 11, 0, tzinfo=timezone.utc)
    start = jittered.start_for(expected)
    assert start == offset("report", slot_of(expected), 600.0, 3600.0) and start > 61
    row = LeaseInfo("report", "web-1", 3, slot_of(previous), 0.0, 0.0, False, None)
    before_start = expected.timestamp() + start - 1
    assert is_overdue(plain, row, db_now=before_start)
    assert not is_overdue(jittered, row, db_now=before_start)
    assert not is_overdue(jittered, row, db_now=expected.timestamp() + start + 59)
    assert is_overdue(jittered, row, db_now=expected.timestamp() + start + 61)


def test_the_jitter_allowed_does_not_depend_on_the_day_it_is_checked() -> None:
    # weekly on Sunday 03:00 in Berlin: a window of fire times that holds a DST change
    # has a 6 d 23 h gap; the check measures the wall-clock gap, the same any day
    weekly = Schedule.cron("0 3 * * 0", timezone="Europe/Berlin")
    assert weekly.smallest_gap() == 7 * 86400
    assert Task.declare(job, cron="0 3 * * 0", timezone="Europe/Berlin", jitter="1d").jitter
