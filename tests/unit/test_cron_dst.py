"""Cron fire times on daylight-saving days, rule by rule and zone by zone (cron(8)).

Each row is written out by hand from cron(8)'s "Daylight Saving Time and other
time changes" and checked twice: against cronlease, and against a model of
Debian cron's loop (``tests/support/debian_cron.py``). A job is *fixed-time*
when neither its minute nor its hour field starts with ``*``.
"""

# ruff: noqa: E501  (a table: one row per line reads better than wrapped rows)

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from cronlease._timing.schedule import MAX_TTL, Schedule
from tests.support.debian_cron import DebianCron

ROWS = [
    # --- spring gap, fixed-time: runs once, right after the change -------------------
    ("30 2 * * *", "Europe/Berlin", "2024-03-30T12:00+01:00", ["2024-03-31T03:00:00+02:00", "2024-04-01T02:30:00+02:00"]),
    ("30 1,2 * * *", "Europe/Berlin", "2024-03-31T00:00+01:00", ["2024-03-31T01:30:00+01:00", "2024-03-31T03:00:00+02:00", "2024-04-01T01:30:00+02:00"]),
    # two skipped times and the first minute after the change are one instant, once
    ("0,30 2,3 * * *", "Europe/Berlin", "2024-03-31T01:00+01:00", ["2024-03-31T03:00:00+02:00", "2024-03-31T03:30:00+02:00", "2024-04-01T02:00:00+02:00"]),
    ("50 2,3 * * *", "Europe/Berlin", "2024-03-31T00:00+01:00", ["2024-03-31T03:00:00+02:00", "2024-03-31T03:50:00+02:00", "2024-04-01T02:50:00+02:00"]),
    ("0 2 * * *", "America/New_York", "2024-03-09T12:00-05:00", ["2024-03-10T03:00:00-04:00", "2024-03-11T02:00:00-04:00"]),
    # --- spring gap, wildcard: follows the new wall clock ----------------------------
    ("0 */2 * * *", "Europe/Berlin", "2024-03-30T23:00+01:00", ["2024-03-31T00:00:00+01:00", "2024-03-31T04:00:00+02:00"]),
    ("*/30 2 * * *", "Europe/Berlin", "2024-03-30T12:00+01:00", ["2024-04-01T02:00:00+02:00"]),
    ("15 * * * *", "Europe/Berlin", "2024-03-31T01:00+01:00", ["2024-03-31T01:15:00+01:00", "2024-03-31T03:15:00+02:00"]),
    # --- autumn fold, fixed-time: once, in the first pass ----------------------------
    ("30 2 * * *", "Europe/Berlin", "2024-10-26T12:00+02:00", ["2024-10-27T02:30:00+02:00", "2024-10-28T02:30:00+01:00"]),
    ("0 1-5 * * *", "America/New_York", "2024-11-03T00:00-04:00", ["2024-11-03T01:00:00-04:00", "2024-11-03T02:00:00-05:00", "2024-11-03T03:00:00-05:00", "2024-11-03T04:00:00-05:00", "2024-11-03T05:00:00-05:00", "2024-11-04T01:00:00-05:00"]),
    # --- autumn fold, wildcard: both passes --------------------------------------------
    ("*/20 2 * * *", "Europe/Berlin", "2024-10-27T01:00+02:00", ["2024-10-27T02:00:00+02:00", "2024-10-27T02:20:00+02:00", "2024-10-27T02:40:00+02:00", "2024-10-27T02:00:00+01:00", "2024-10-27T02:20:00+01:00", "2024-10-27T02:40:00+01:00", "2024-10-28T02:00:00+01:00"]),
    ("0 * * * *", "America/New_York", "2024-11-03T00:30-04:00", ["2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00", "2024-11-03T02:00:00-05:00"]),
    # --- a 30-minute change: Australia/Lord_Howe --------------------------------------
    # spring (2024-10-06, 02:00 -> 02:30): 02:14-02:29 skipped, run at 02:30 with it
    ("14-50 2 * * *", "Australia/Lord_Howe", "2024-10-06T01:00+10:30", ["2024-10-06T02:30:00+11:00", "2024-10-06T02:31:00+11:00"]),
    ("44 2 * * *", "Australia/Lord_Howe", "2024-10-06T01:00+10:30", ["2024-10-06T02:44:00+11:00", "2024-10-07T02:44:00+11:00"]),
    ("* 2 * * *", "Australia/Lord_Howe", "2024-10-06T01:58+10:30", ["2024-10-06T02:30:00+11:00", "2024-10-06T02:31:00+11:00"]),
    ("10 2 * * *", "Australia/Lord_Howe", "2024-10-05T12:00+10:30", ["2024-10-06T02:30:00+11:00", "2024-10-07T02:10:00+11:00"]),
    # autumn (2024-04-07, 02:00 -> 01:30): 01:30-01:59 repeated
    ("45 1 * * *", "Australia/Lord_Howe", "2024-04-06T12:00+11:00", ["2024-04-07T01:45:00+11:00", "2024-04-08T01:45:00+10:30"]),
    ("*/20 1 * * *", "Australia/Lord_Howe", "2024-04-07T00:30+11:00", ["2024-04-07T01:00:00+11:00", "2024-04-07T01:20:00+11:00", "2024-04-07T01:40:00+11:00", "2024-04-07T01:40:00+10:30", "2024-04-08T01:00:00+10:30"]),
    # --- a midnight gap: America/Sao_Paulo, 2018-11-04 00:00 -> 01:00 ----------------
    ("0 0 * * *", "America/Sao_Paulo", "2018-11-03T12:00-03:00", ["2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"]),
    ("30 0 * * *", "America/Sao_Paulo", "2018-11-03T12:00-03:00", ["2018-11-04T01:00:00-02:00", "2018-11-05T00:30:00-02:00"]),
    ("*/30 0 * * *", "America/Sao_Paulo", "2018-11-03T12:00-03:00", ["2018-11-05T00:00:00-02:00"]),
    # its autumn, 2019-02-17 00:00 -> 2019-02-16 23:00: the last hour of the 16th repeats
    ("30 23 * * *", "America/Sao_Paulo", "2019-02-16T12:00-02:00", ["2019-02-16T23:30:00-02:00", "2019-02-17T23:30:00-03:00"]),
    ("*/30 23 * * *", "America/Sao_Paulo", "2019-02-16T12:00-02:00", ["2019-02-16T23:00:00-02:00", "2019-02-16T23:30:00-02:00", "2019-02-16T23:00:00-03:00", "2019-02-16T23:30:00-03:00", "2019-02-17T23:00:00-03:00"]),
    # --- Pacific/Chatham, +12:45 / +13:45, changes at 02:45 / 03:45 --------------------
    ("0 3 * * *", "Pacific/Chatham", "2024-09-28T12:00+12:45", ["2024-09-29T03:45:00+13:45", "2024-09-30T03:00:00+13:45"]),
    ("*/15 3 * * *", "Pacific/Chatham", "2024-09-28T12:00+12:45", ["2024-09-29T03:45:00+13:45", "2024-09-30T03:00:00+13:45"]),
    ("0 3 * * *", "Pacific/Chatham", "2024-04-06T12:00+13:45", ["2024-04-07T03:00:00+13:45", "2024-04-08T03:00:00+12:45"]),
    ("*/30 3 * * *", "Pacific/Chatham", "2024-04-07T02:50+13:45", ["2024-04-07T03:00:00+13:45", "2024-04-07T03:30:00+13:45", "2024-04-07T03:00:00+12:45", "2024-04-07T03:30:00+12:45"]),
    # --- a two-hour change is still a daylight-saving change; 24 hours is a jump -------
    ("30 2 * * *", "Antarctica/Troll", "2024-03-30T12:00+00:00", ["2024-03-31T03:00:00+02:00", "2024-04-01T02:30:00+02:00"]),
    ("0 12 * * *", "Pacific/Apia", "2011-12-29T13:00-10:00", ["2011-12-31T12:00:00+14:00"]),
    # --- no day skipped after a change (APScheduler 3 issues #606/#529) --------------
    ("0 0 * * *", "Europe/Berlin", "2024-03-29T12:00+01:00", ["2024-03-30T00:00:00+01:00", "2024-03-31T00:00:00+01:00", "2024-04-01T00:00:00+02:00", "2024-04-02T00:00:00+02:00"]),
    ("7 0 * * *", "Europe/Berlin", "2024-03-30T12:00+01:00", ["2024-03-31T00:07:00+01:00", "2024-04-01T00:07:00+02:00"]),
    ("0 0 * * 1", "Europe/Berlin", "2024-03-30T12:00+01:00", ["2024-04-01T00:00:00+02:00", "2024-04-08T00:00:00+02:00"]),
    ("@monthly", "America/New_York", "2024-02-15T12:00-05:00", ["2024-03-01T00:00:00-05:00", "2024-04-01T00:00:00-04:00"]),
    ("@yearly", "Pacific/Chatham", "2024-06-15T12:00+12:45", ["2025-01-01T00:00:00+13:45", "2026-01-01T00:00:00+13:45"]),
    # --- the rest of cron stays: weekday 7 is Sunday; both day fields restricted: either
    # matches; one starting with "*" (even "*/10"): both must
    ("0 12 1 * 7", "UTC", "2026-02-27T00:00+00:00", ["2026-03-01T12:00:00+00:00", "2026-03-08T12:00:00+00:00"]),
    ("0 12 */10 * 1", "UTC", "2026-03-01T13:00+00:00", ["2026-05-11T12:00:00+00:00"]),
]  # fmt: skip


def _local(zone: str) -> timezone | ZoneInfo:
    return timezone.utc if zone == "UTC" else ZoneInfo(zone)


def _fires(expression: str, zone: str, start: datetime, count: int) -> list[datetime]:
    schedule = Schedule.cron(expression, timezone=zone)
    found: list[datetime] = []
    moment: datetime | None = start
    for _ in range(count):
        assert moment is not None
        moment = schedule.next_fire_time(moment)
        assert moment is not None
        found.append(moment)
    return found


@pytest.mark.parametrize(("expression", "zone", "start", "expected"), ROWS)
def test_fire_times_on_change_days(
    expression: str, zone: str, start: str, expected: list[str]
) -> None:
    after = datetime.fromisoformat(start)
    fires = _fires(expression, zone, after, len(expected))
    assert [fire.astimezone(_local(zone)).isoformat() for fire in fires] == expected
    # Debian's loop, minute by minute, agrees
    minutes = int((fires[-1] - after).total_seconds() // 60) + 1
    debian = DebianCron(expression, zone).fire_times(after, len(expected), max_minutes=minutes)
    assert debian == fires


def _changes(zone: ZoneInfo, first: int, last: int) -> list[datetime]:
    moment = datetime(first, 1, 1, tzinfo=timezone.utc)
    end = datetime(last + 1, 1, 1, tzinfo=timezone.utc)
    found = []
    while moment < end:
        step = moment + timedelta(hours=1)
        if moment.astimezone(zone).utcoffset() != step.astimezone(zone).utcoffset():
            found.append(step)
        moment = step
    return found


@pytest.mark.parametrize(
    "zone",
    [
        "Europe/Berlin",
        "America/New_York",
        "Australia/Lord_Howe",
        "America/Sao_Paulo",
        "Pacific/Chatham",
    ],
)
def test_a_fixed_time_daily_job_runs_once_every_local_day_around_every_change(zone: str) -> None:
    tz = ZoneInfo(zone)
    changes = _changes(tz, 2018, 2027)
    assert len(changes) >= 2  # Sao_Paulo stopped changing in 2019
    for change in changes:
        for hour in (0, 1, 2, 3, 23):
            for minute in (0, 30, 45):
                schedule = Schedule.cron(f"{minute} {hour} * * *", timezone=zone)
                start = change - timedelta(days=3)
                fires = []
                moment = schedule.next_fire_time(start)
                while moment is not None and moment < change + timedelta(days=3):
                    fires.append(moment)
                    moment = schedule.next_fire_time(moment)
                days = [fire.astimezone(tz).date() for fire in fires]
                first = days[0]
                assert days == [first + timedelta(days=n) for n in range(len(days))], (
                    f"{minute} {hour} * * * in {zone} around {change}: {days}"
                )
                assert len(days) >= 5


@pytest.mark.parametrize(
    ("expression", "zone", "day"),
    [
        ("50 2,3 * * *", "Europe/Berlin", date(2024, 3, 31)),
        ("* 2 * * *", "Australia/Lord_Howe", date(2024, 10, 6)),
        ("0,30 2,3 * * *", "Europe/Berlin", date(2024, 3, 31)),
    ],
)
def test_next_fire_time_is_strictly_later_and_timing_uses_real_gaps(
    expression: str, zone: str, day: date
) -> None:
    schedule = Schedule.cron(expression, timezone=zone)
    start = datetime(day.year, day.month, day.day, tzinfo=ZoneInfo(zone)) - timedelta(hours=1)
    fires = _fires(expression, zone, start, 30)
    assert all(a < b for a, b in pairwise(fires))
    for fire in fires:
        gap = schedule.gap_after(fire)
        assert gap >= 60.0
        assert schedule.ttl(fire) == min(MAX_TTL, gap)


def test_a_daily_job_on_a_change_day_keeps_a_real_ttl() -> None:
    # APScheduler's trigger returned 03:00+02 twice: a TTL of 1 s and a grace of 0.5 ms
    schedule = Schedule.cron("50 2,3 * * *", timezone="Europe/Berlin")
    fire = datetime(2024, 3, 31, 3, tzinfo=ZoneInfo("Europe/Berlin"))
    assert schedule.gap_after(fire) == 50 * 60
    assert schedule.ttl(fire) == MAX_TTL
    assert schedule.grace(fire) == 60.0
