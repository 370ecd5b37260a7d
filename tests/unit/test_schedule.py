"""Schedules: durations, epoch-aligned intervals, crontab with cron's meaning, DST, lease timing."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronlease._timing.schedule import (
    EPOCH,
    MAX_TTL,
    MIN_TTL,
    Schedule,
    parse_duration,
    slot_of,
    time_of_slot,
)
from cronlease.errors import ConfigError

UTC = timezone.utc


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def fire_times(schedule: Schedule, start: datetime, count: int) -> list[datetime]:
    times = schedule.upcoming(start, count)
    assert len(times) == count
    return times


# --- parse_duration -----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (30, 30),
        (1.5, 1.5),
        ("30", 30),
        ("2.5", 2.5),
        ("90s", 90),
        ("5m", 300),
        ("1h30m", 5400),
        ("2d", 172_800),
        ("1w", 604_800),
        ("1.5h", 5400),
        ("250ms", 0.25),
        ("1m30s", 90),
        ("5M", 300),  # case does not matter
        (" 5m ", 300),
        # Spaces between parts are accepted: "1h 30m" reads as "1h30m".
        ("1h 30m", 5400),
        (timedelta(minutes=2), 120),
    ],
)
def test_parse_duration_accepts(value: object, seconds: float) -> None:
    assert parse_duration(value) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "value",
    [
        0,
        0.0,
        -1,
        -0.5,
        "0",
        "0s",
        "-5",
        "-5m",
        "abc",
        "5x",
        "m",
        "5m5",
        "1.h",
        "1h-30m",
        "",
        "   ",
        True,
        False,
        None,
        [30],
        timedelta(0),
        timedelta(seconds=-1),
        math.nan,
        math.inf,
        "99999999999d",
        1e300,
    ],
    ids=repr,
)
def test_parse_duration_rejects(value: object) -> None:
    with pytest.raises(ConfigError):
        parse_duration(value)


def test_parse_duration_names_what_and_value() -> None:
    with pytest.raises(ConfigError, match=r"every 'soon' is not a duration"):
        parse_duration("soon", what="every")
    with pytest.raises(ConfigError, match=r"lease_ttl must be positive"):
        parse_duration(0, what="lease_ttl")


# --- every ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [0.5, "999ms", "0.9s", timedelta(milliseconds=500)])
def test_every_below_one_second_is_rejected(value: object) -> None:
    with pytest.raises(ConfigError, match="at least 1 second"):
        Schedule.every(value)


def test_every_one_second_is_the_minimum() -> None:
    schedule = Schedule.every(1)
    assert schedule.interval == timedelta(seconds=1)


def test_every_is_aligned_on_the_epoch_whatever_the_start() -> None:
    schedule = Schedule.every("7s")
    starts = [
        utc(2026, 5, 1, 12, 0, 0),
        utc(2026, 5, 1, 12, 0, 3) + timedelta(microseconds=123_456),
        utc(2026, 5, 1, 12, 0, 19),
    ]
    grids = [fire_times(schedule, start, 5) for start in starts]
    for start, times in zip(starts, grids, strict=True):
        assert times[0] >= start
        assert times[0] - start < timedelta(seconds=7)
        for fire in times:
            assert slot_of(fire) % 7000 == 0, fire
        gaps = {(b - a).total_seconds() for a, b in pairwise(times)}
        assert gaps == {7.0}
    # Replicas started at different moments fire at the same instants.
    assert grids[1][0] in grids[0]
    assert grids[2][0] in grids[0]


def test_every_aligns_from_two_replicas_with_different_clocks() -> None:
    schedule = Schedule.every("7s")
    replica_a = fire_times(schedule, utc(2026, 1, 1, 0, 0, 1), 20)
    replica_b = fire_times(schedule, utc(2026, 1, 1, 0, 0, 50), 5)
    assert set(replica_b) <= set(replica_a)
    assert {slot_of(t) for t in replica_b} <= {slot_of(t) for t in replica_a}


def test_anchor_shifts_the_grid() -> None:
    anchored = Schedule.every("7s", anchor=EPOCH + timedelta(seconds=3))
    for fire in fire_times(anchored, utc(2026, 5, 1, 12, 0, 0), 5):
        assert slot_of(fire) % 7000 == 3000
    hourly_at_quarter = Schedule.every("1h", anchor=utc(2020, 1, 1, 0, 15))
    for fire in fire_times(hourly_at_quarter, utc(2026, 5, 1, 12, 20), 3):
        assert (fire.minute, fire.second) == (15, 0)


def test_naive_anchor_is_rejected() -> None:
    with pytest.raises(ConfigError, match="anchor"):
        Schedule.every("1m", anchor=datetime(2026, 1, 1))


def test_next_fire_time_is_strictly_after() -> None:
    schedule = Schedule.every("10s")
    on_grid = utc(2026, 1, 1, 0, 0, 10)
    assert schedule.next_fire_time(on_grid) == utc(2026, 1, 1, 0, 0, 20)
    assert schedule.upcoming(on_grid, 1) == [on_grid]


# --- cron: crontab meaning ----------------------------------------------------------


def test_weekday_0_is_sunday() -> None:
    schedule = Schedule.cron("0 9 * * 0")
    times = fire_times(schedule, utc(2026, 1, 1), 6)
    assert {t.strftime("%A") for t in times} == {"Sunday"}
    assert {(t.hour, t.minute) for t in times} == {(9, 0)}
    assert times[0] == utc(2026, 1, 4, 9, 0)  # 2026-01-04 is a Sunday


def test_weekday_7_is_sunday_too() -> None:
    times = fire_times(Schedule.cron("* * * * 7"), utc(2026, 1, 1), 3)
    assert {t.strftime("%A") for t in times} == {"Sunday"}
    assert times[0] == utc(2026, 1, 4, 0, 0)
    assert times[1] == utc(2026, 1, 4, 0, 1)


def test_weekday_1_is_monday() -> None:
    times = fire_times(Schedule.cron("30 6 * * 1"), utc(2026, 1, 1), 3)
    assert {t.strftime("%A") for t in times} == {"Monday"}


def test_weekday_range_across_sunday() -> None:
    times = fire_times(Schedule.cron("0 0 * * 5-7"), utc(2026, 1, 1), 9)
    assert {t.strftime("%a") for t in times} == {"Fri", "Sat", "Sun"}


def test_weekday_and_month_names() -> None:
    weekdays = fire_times(Schedule.cron("0 8 * * mon-fri"), utc(2026, 1, 1), 15)
    assert {t.strftime("%a") for t in weekdays} == {"Mon", "Tue", "Wed", "Thu", "Fri"}
    january = fire_times(Schedule.cron("0 0 1 jan *"), utc(2026, 3, 1), 2)
    assert january == [utc(2027, 1, 1), utc(2028, 1, 1)]
    upper = fire_times(Schedule.cron("0 0 * JAN-MAR SAT"), utc(2026, 1, 1), 4)
    assert all(t.month in (1, 2, 3) and t.strftime("%a") == "Sat" for t in upper)


def test_macros() -> None:
    daily = Schedule.cron("@daily")
    assert daily.expression == "0 0 * * *"
    assert fire_times(daily, utc(2026, 1, 1, 0, 0, 1), 2) == [utc(2026, 1, 2), utc(2026, 1, 3)]
    hourly = Schedule.cron("@hourly")
    assert hourly.expression == "0 * * * *"
    assert fire_times(hourly, utc(2026, 1, 1, 0, 30), 2) == [
        utc(2026, 1, 1, 1),
        utc(2026, 1, 1, 2),
    ]
    weekly = fire_times(Schedule.cron("@weekly"), utc(2026, 1, 1), 2)
    assert {t.strftime("%A") for t in weekly} == {"Sunday"}


def test_day_of_month_and_weekday_both_restricted_fire_on_either() -> None:
    # cron semantics: "0 0 1 * 1" fires on the 1st of each month AND on Mondays.
    times = fire_times(Schedule.cron("0 0 1 * 1"), utc(2026, 6, 1), 12)
    assert all(t.day == 1 or t.strftime("%a") == "Mon" for t in times)
    assert utc(2026, 7, 1) in times  # a Wednesday, fired because it is the 1st
    assert utc(2026, 6, 8) in times  # a Monday, fired because it is Monday
    assert any(t.day != 1 for t in times) and any(t.strftime("%a") != "Mon" for t in times)


def test_day_of_month_with_star_weekday_is_and() -> None:
    times = fire_times(Schedule.cron("0 0 13 * *"), utc(2026, 1, 1), 3)
    assert [t.day for t in times] == [13, 13, 13]


def test_steps_ranges_and_lists() -> None:
    times = fire_times(Schedule.cron("*/15 9-10 * * *"), utc(2026, 1, 1), 9)
    assert [(t.hour, t.minute) for t in times[:8]] == [
        (9, 0),
        (9, 15),
        (9, 30),
        (9, 45),
        (10, 0),
        (10, 15),
        (10, 30),
        (10, 45),
    ]
    assert times[8] == utc(2026, 1, 2, 9, 0)
    listed = fire_times(Schedule.cron("5,35 * * * *"), utc(2026, 1, 1), 3)
    assert [t.minute for t in listed] == [5, 35, 5]


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("* * * *", "five fields.*it has 4"),
        ("* * * * * *", "five fields.*it has 6"),
        ("", "five fields.*it has"),
        ("60 * * * *", "minute 60 is outside 0-59"),
        ("0 24 * * *", "hour 24 is outside 0-23"),
        ("0 0 0 * *", "day of month 0 is outside 1-31"),
        ("0 0 * 13 *", "month 13 is outside 1-12"),
        ("0 0 * * 8", "day of week 8 is outside 0-7"),
        ("*/0 * * * *", "minute step must not be 0"),
        ("5-1 * * * *", "minute range '5-1' runs backwards"),
        ("0 0 * * fri-mon", "day of week range 'fri-mon' runs backwards"),
        ("0 0 * * xyz", "day of week field has 'xyz'"),
        ("0 0 * foo *", "month field has 'foo'"),
        ("0 0 * * mon#2", "day of week field"),
        ("0 0 L * *", "day of month field has 'l'"),
        ("0 0 31 2 *", "never fires"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("@reboot", "unsupported macro"),
        ("@every 5m", "unsupported macro"),
    ],
)
def test_invalid_cron_expressions(expression: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as info:
        Schedule.cron(expression)
    assert repr(expression) in str(info.value)


def test_cron_must_be_a_string() -> None:
    with pytest.raises(ConfigError, match="cron must be a string"):
        Schedule.cron(5)  # type: ignore[arg-type]


def test_february_29_is_a_valid_cron() -> None:
    times = fire_times(Schedule.cron("0 0 29 2 *"), utc(2026, 1, 1), 2)
    assert times == [utc(2028, 2, 29), utc(2032, 2, 29)]


def test_unknown_timezone() -> None:
    with pytest.raises(ConfigError, match="unknown time zone 'Mars/Olympus_Mons'"):
        Schedule.cron("0 9 * * *", timezone="Mars/Olympus_Mons")
    with pytest.raises(ConfigError, match="unknown time zone"):
        Schedule.cron("0 9 * * *", timezone="../../etc/passwd")


def test_cron_in_a_timezone_fires_at_local_time() -> None:
    times = fire_times(Schedule.cron("0 3 * * *", timezone="Europe/Istanbul"), utc(2026, 1, 1), 2)
    assert [t.astimezone(UTC) for t in times] == [utc(2026, 1, 1, 0), utc(2026, 1, 2, 0)]
    assert all(t.astimezone(ZoneInfo("Europe/Istanbul")).hour == 3 for t in times)


# --- DST --------------------------------------------------------------------------


def test_new_york_9am_across_spring_forward() -> None:
    schedule = Schedule.cron("0 9 * * *", timezone="America/New_York")
    times = [t.astimezone(UTC) for t in fire_times(schedule, utc(2026, 3, 6), 4)]
    assert times == [
        utc(2026, 3, 6, 14),  # EST, UTC-5
        utc(2026, 3, 7, 14),
        utc(2026, 3, 8, 13),  # EDT from 2026-03-08, UTC-4
        utc(2026, 3, 9, 13),
    ]
    assert schedule.gap_after(times[1]) == 23 * 3600


def test_berlin_hourly_across_fall_back_has_hour_gaps() -> None:
    schedule = Schedule.cron("0 * * * *", timezone="Europe/Berlin")
    times = fire_times(schedule, utc(2026, 10, 24, 21, 30), 10)
    instants = [t.timestamp() for t in times]
    assert [b - a for a, b in pairwise(instants)] == [3600.0] * 9
    # The repeated local 02:00 is two distinct instants, hence two distinct slots.
    assert len({slot_of(t) for t in times}) == 10
    for fire in times:
        assert schedule.gap_after(fire) == 3600.0
        assert schedule.ttl(fire) == MAX_TTL
        assert schedule.grace(fire) == 60.0
        assert schedule.tolerance(fire) == 60.0


def test_daily_cron_gap_is_measured_in_utc_at_fall_back() -> None:
    schedule = Schedule.cron("30 3 * * *", timezone="Europe/Berlin")
    before, after = fire_times(schedule, utc(2026, 10, 23, 12), 2)
    # 25 real hours between the two local 03:30s.
    assert schedule.gap_after(before) == 25 * 3600
    assert after.timestamp() - before.timestamp() == 90_000


# --- TTL, grace, tolerance -----------------------------------------------------------


@pytest.mark.parametrize(
    ("every", "ttl", "grace", "tolerance"),
    [
        (1, 1.0, 0.5, 0.5),
        ("2s", 2.0, 1.0, 1.0),
        ("10s", 10.0, 5.0, 5.0),
        ("2m", 120.0, 60.0, 60.0),
        ("10m", 300.0, 60.0, 60.0),
        ("1d", 300.0, 60.0, 60.0),
    ],
)
def test_every_timing(every: object, ttl: float, grace: float, tolerance: float) -> None:
    schedule = Schedule.every(every)
    fire = utc(2026, 1, 1)
    assert schedule.ttl(fire) == ttl
    assert schedule.grace(fire) == grace
    assert schedule.tolerance(fire) == tolerance
    assert MIN_TTL <= schedule.ttl(fire) <= MAX_TTL


def test_cron_timing() -> None:
    hourly = Schedule.cron("0 * * * *")
    fire = utc(2026, 1, 1, 5)
    assert hourly.gap_after(fire) == 3600.0
    assert hourly.ttl(fire) == 300.0
    assert hourly.grace(fire) == 60.0
    assert hourly.tolerance(fire) == 60.0
    minutely = Schedule.cron("* * * * *")
    assert minutely.ttl(fire) == 60.0
    assert minutely.grace(fire) == 30.0
    # An irregular cron: the gap (and so the TTL) depends on the tick.
    irregular = Schedule.cron("0,1 * * * *")
    assert irregular.ttl(utc(2026, 1, 1, 5, 0)) == 60.0
    assert irregular.ttl(utc(2026, 1, 1, 5, 1)) == 300.0
    assert irregular.tolerance(utc(2026, 1, 1, 5, 0)) == 30.0
    assert irregular.tolerance(utc(2026, 1, 1, 5, 1)) == 60.0


# --- slots ------------------------------------------------------------------------------


def test_slot_is_epoch_milliseconds() -> None:
    assert slot_of(EPOCH) == 0
    assert slot_of(utc(2026, 1, 1)) == 1_767_225_600_000
    assert slot_of(utc(2026, 1, 1) + timedelta(milliseconds=123)) == 1_767_225_600_123
    # The same instant in another zone is the same slot.
    new_york = datetime(2026, 3, 9, 9, tzinfo=ZoneInfo("America/New_York"))
    assert slot_of(new_york) == slot_of(utc(2026, 3, 9, 13))


def test_time_of_slot() -> None:
    assert time_of_slot(0) == EPOCH
    assert time_of_slot(1_767_225_600_123) == utc(2026, 1, 1) + timedelta(milliseconds=123)
    assert time_of_slot(5).tzinfo is not None


@given(st.integers(min_value=0, max_value=253_402_300_799_999))
def test_slot_round_trip(slot: int) -> None:
    assert slot_of(time_of_slot(slot)) == slot


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.just(UTC),
    )
)
def test_fire_time_round_trip_at_ms_precision(fire: datetime) -> None:
    at_ms = fire.replace(microsecond=fire.microsecond // 1000 * 1000)
    assert time_of_slot(slot_of(at_ms)) == at_ms


# --- fingerprint -------------------------------------------------------------------------


def test_fingerprint_identifies_the_schedule() -> None:
    base = Schedule.cron("0 3 * * *", timezone="Europe/Istanbul")
    assert base.fingerprint == Schedule.cron("0  3 * * *", timezone="Europe/Istanbul").fingerprint
    different = [
        Schedule.cron("0 4 * * *", timezone="Europe/Istanbul"),
        Schedule.cron("0 3 * * *", timezone="Europe/Berlin"),
        Schedule.cron("0 3 * * *"),
        Schedule.every("1d"),
        Schedule.every("1d", anchor=utc(2026, 1, 1, 3)),
        Schedule.every("12h"),
    ]
    prints = [base.fingerprint] + [schedule.fingerprint for schedule in different]
    assert len(set(prints)) == len(prints), prints


def test_fingerprint_of_every_depends_on_interval_and_anchor() -> None:
    assert Schedule.every("5m").fingerprint == Schedule.every(300).fingerprint
    assert Schedule.every("5m").fingerprint != Schedule.every("6m").fingerprint
    assert (
        Schedule.every("5m").fingerprint
        != Schedule.every("5m", anchor=EPOCH + timedelta(seconds=1)).fingerprint
    )
    assert len(Schedule.every("1h30m").fingerprint) <= 200  # fits the column


def test_str() -> None:
    assert str(Schedule.every(90)) == "every 90s"
    assert str(Schedule.every("2h")) == "every 2h"
    assert str(Schedule.cron("@daily", timezone="Europe/Istanbul")) == (
        "cron '0 0 * * *' (Europe/Istanbul)"
    )
