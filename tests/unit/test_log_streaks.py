"""LogStreaks: the first of a streak logged, the rest counted, a count line periodically
and at the end (the tick path's use of it: tests/contract/test_log_streaks.py)."""

from __future__ import annotations

import logging

import pytest

from cronlease._run.replica_log.log_streaks import LogStreaks


def test_a_long_streak_says_how_many_so_far_every_summary_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="test-streaks")
    now = [100.0]
    streaks = LogStreaks(logging.getLogger("test-streaks"), summary_every=60, clock=lambda: now[0])
    for _ in range(10):  # a tick every 10 s for 100 s
        streaks.warn("t", "misfire", "skipped past their grace", "t: tick skipped")
        now[0] += 10
    messages = [record.getMessage() for record in caplog.records]
    # the first, then at 60 s: 6 more since the first line, 7 in a row
    assert len(messages) == 2, messages
    assert messages[0].startswith("t: tick skipped (misfire")
    assert "6 more tick(s)" in messages[1] and "7 in a row over 60 s" in messages[1]
    streaks.ended("t", "misfire")
    assert "10 tick(s) in a row" in caplog.records[-1].getMessage()
    assert streaks.open == 0
    streaks.ended("t", "misfire")  # nothing open: nothing logged
    assert len(caplog.records) == 3


def test_a_streak_of_one_ends_without_a_second_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="test-streaks")
    streaks = LogStreaks(logging.getLogger("test-streaks"))
    streaks.warn("t", "future", "refused", "t: refused")
    streaks.warn("u", "future", "refused", "u: refused")  # another task: its own streak
    streaks.ended("t", "future")
    assert [record.getMessage().split(" (")[0] for record in caplog.records] == [
        "t: refused",
        "u: refused",
    ]
    assert streaks.open == 1


def test_a_counted_streak_logs_one_line_at_its_level_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="test-streaks")
    now = [0.0]
    streaks = LogStreaks(
        logging.getLogger("test-streaks"),
        level=logging.INFO,
        summary_every=60,
        clock=lambda: now[0],
    )
    for _ in range(3):  # an 8 s task every 3 s: two ticks skipped, one run, again and again
        streaks.counted("t", "overlap", "still running")
        streaks.counted("t", "overlap", "still running")
        streaks.ended("t", "overlap")
        now[0] += 9
    lines = [(record.levelno, record.getMessage()) for record in caplog.records]
    assert lines == [(logging.INFO, "t: skipped 2 of the last 3 ticks: still running")] * 3
    streaks.counted("t", "capacity", "every worker of this replica was busy")
    streaks.ended("t", "capacity")  # a streak of one is still said: nothing said it before
    assert caplog.records[-1].getMessage() == (
        "t: skipped 1 of the last 2 ticks: every worker of this replica was busy"
    )
    for _ in range(8):  # one that lasts: a line every summary period while it does
        streaks.counted("u", "overlap", "still running")
        now[0] += 10
    assert caplog.records[-1].getMessage().startswith("u: 7 more tick(s) still running (overlap)")
    assert len(caplog.records) == 5
