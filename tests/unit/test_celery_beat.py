"""Celery's beat_schedule translated into cronlease schedules: every documented form,
refusals naming the entry, and crontab proven against Celery's own ``is_due``, driven
the way beat drives it, over a week in a zone with a daylight-saving change."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

celery = pytest.importorskip("celery")
from celery.schedules import crontab, schedule, solar  # noqa: E402

from cronlease._send.celery_beat import beat_entries, schedule_options  # noqa: E402
from cronlease._timing.schedule import Schedule  # noqa: E402
from cronlease.errors import ConfigError  # noqa: E402

#: beat's default max_interval: it re-checks an entry at least this often
MAX_INTERVAL = 300.0


def make_app(zone: str | None = "UTC") -> Any:
    app = celery.Celery("t", set_as_current=False, broker="memory://")
    app.conf.timezone = zone
    return app


def a_solar() -> solar:
    """A solar schedule as beat_schedule holds it (without ephem, which only its
    computations need)."""
    made = solar.__new__(solar)
    made.event, made.lat, made.lon = "sunset", -37.81, 144.96
    return made


def test_every_documented_interval_form() -> None:
    app = make_app()
    assert schedule_options(app, "a", 10) == {"every": 10.0}
    assert schedule_options(app, "a", 2.5) == {"every": 2.5}
    assert schedule_options(app, "a", timedelta(minutes=5)) == {"every": timedelta(minutes=5)}
    assert schedule_options(app, "a", schedule(timedelta(hours=1))) == {"every": timedelta(hours=1)}


def test_crontab_fields_and_zone() -> None:
    app = make_app("Europe/Istanbul")
    got = schedule_options(app, "a", crontab(minute="*/15", hour="9-17", day_of_week="mon-fri"))
    assert got == {
        "cron": "0,15,30,45 9,10,11,12,13,14,15,16,17 * * 1,2,3,4,5",
        "timezone": "Europe/Istanbul",
    }
    assert schedule_options(make_app(None), "a", crontab())["timezone"] == "UTC"
    assert schedule_options(app, "a", crontab(0, 0, day_of_month="1", month_of_year="*/3")) == {
        "cron": "0 0 1 1,4,7,10 *",
        "timezone": "Europe/Istanbul",
    }


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (a_solar(), "solar schedules"),
        (crontab(0, 0, day_of_month="1", day_of_week="mon"), "both day_of_month"),
        (object(), "not a schedule cronlease can translate"),
        (True, "must be a number of seconds"),
    ],
)
def test_refused_naming_the_entry(value: object, words: str) -> None:
    with pytest.raises(ConfigError, match=rf"beat entry 'nightly', key 'schedule': .*{words}"):
        schedule_options(make_app(), "nightly", value)


def test_entries_and_their_keys() -> None:
    app = make_app()
    app.conf.beat_schedule = {
        "report": {
            "task": "proj.tasks.report",
            "schedule": 30.0,
            "args": (1,),
            "options": {"queue": "reports", "priority": 5},
        }
    }
    (entry,) = beat_entries(app)
    assert entry.name == "report" and entry.schedule == {"every": 30.0}
    assert entry.sender.options == {"queue": "reports", "priority": 5}
    app.conf.beat_schedule = {"x": {"task": "t", "schedule": 1, "sheduel": 2}}
    with pytest.raises(ConfigError, match="beat entry 'x', key 'sheduel': unknown key"):
        beat_entries(app)
    app.conf.beat_schedule = {"x": {"task": "t", "schedule": 1, "options": {"task_id": "a"}}}
    with pytest.raises(ConfigError, match="beat entry 'x': options: 'task_id' is cronlease's"):
        beat_entries(app)


def beat_fires_after(entry: crontab, now_box: dict[str, datetime], last: datetime) -> datetime:
    """When beat would run ``entry`` next after running it at ``last``: it asks
    ``is_due(last)`` and sleeps what it answers (at most MAX_INTERVAL) until due."""
    now = last
    for _ in range(10_000):
        now_box["now"] = now
        due, wait = entry.is_due(last)
        if due and now > last:
            return now
        now += timedelta(seconds=min(wait, MAX_INTERVAL)) if wait > 0 else timedelta(seconds=1)
    raise AssertionError("never due")


SPECS: list[dict[str, Any]] = [
    {"minute": 0, "hour": 2},
    {"minute": 30, "hour": 1},
    {"minute": "*/15"},
    {"minute": 0, "hour": "*/3"},
    {"minute": 0, "hour": 9, "day_of_week": "mon-fri"},
    {"minute": 5, "hour": "1-3"},
    {"minute": 0, "hour": 0, "day_of_month": "1,10"},
    {"minute": "*/30", "hour": "0-4", "month_of_year": "3,11"},
]


@pytest.mark.parametrize(
    ("zone", "week_of"),
    [
        ("America/New_York", datetime(2024, 3, 7, tzinfo=timezone.utc)),  # 10 March: +1 h
        ("America/New_York", datetime(2024, 10, 30, tzinfo=timezone.utc)),  # 3 November: -1 h
        ("UTC", datetime(2024, 2, 26, tzinfo=timezone.utc)),  # a leap day
    ],
)
def test_crontab_fires_when_celery_is_due(zone: str, week_of: datetime) -> None:
    """Every fire time of a week is Celery's, except on the day of a daylight-saving
    change, where cronlease follows cron's rules (design §5.11) and beat's own answer
    depends on how often it polls (it ran an entry twice, or an hour off)."""
    app = make_app(zone)
    tz = ZoneInfo(zone)
    changes = {
        day
        for day in (week_of.date() + timedelta(days=n) for n in range(8))
        if datetime(day.year, day.month, day.day, tzinfo=tz).utcoffset()
        != (datetime(day.year, day.month, day.day, tzinfo=tz) + timedelta(days=1)).utcoffset()
    }
    assert (zone == "UTC") == (not changes)
    compared = 0
    for spec in SPECS:
        box: dict[str, datetime] = {}
        entry = crontab(**spec, app=app, nowfun=lambda box=box: box["now"])
        ours = Schedule.cron(
            **{"expression": schedule_options(app, "e", entry)["cron"]}, timezone=zone
        )
        last = ours.next_fire_time(week_of)
        assert last is not None
        end = week_of + timedelta(days=7)
        while last < end:
            expected = ours.next_fire_time(last)
            assert expected is not None
            local = last.astimezone(tz)
            if local.date() in changes or expected.astimezone(tz).date() in changes:
                last = expected
                continue
            assert beat_fires_after(entry, box, local) == expected, (spec, local)
            compared += 1
            last = expected
    assert compared > 500
