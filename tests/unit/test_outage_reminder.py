"""A database that stays unavailable is said again every 10 minutes, not once and then
never (a replica that never connected to a full server looked alive and did nothing)."""

from __future__ import annotations

import logging

import pytest

from cronlease._events import EventBus
from cronlease._run.replica_log.outage import REMIND_SECONDS, OutageLog
from cronlease._stats import Stats
from cronlease.errors import StoreError


def test_an_outage_is_warned_at_its_start_every_ten_minutes_and_at_its_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    outage = OutageLog(Stats(), EventBus(), clock=lambda: now[0])
    error = StoreError("connection failed: FATAL:  sorry, too many clients already")
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        for _ in range(25):  # a tick every 60 s for 25 minutes
            outage.failed("a tick", error)
            now[0] += 60.0
        outage.succeeded()
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 4, lines
    assert lines[0].startswith("database unavailable, a tick skipped")
    assert lines[1] == (
        f"database still unavailable after {REMIND_SECONDS:.0f} s; 11 tick(s) skipped so far: "
        f"{error}"
    )
    assert lines[2].startswith("database still unavailable after 1200 s; 21 tick(s)")
    assert lines[3] == "database available again after 1500.0 s; 25 tick(s) were skipped"
