"""Jitter's offset: a pure function of (task, slot), bounded, clamped to half the gap."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from cronlease import Task
from cronlease._timing.jitter import offset
from cronlease._timing.schedule import slot_of
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
