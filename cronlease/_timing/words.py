"""A schedule in words, as an operator reads it: ``every 5 minutes``, ``at 02:30 on weekdays``.

The words are read from the parsed fields (:class:`~cronlease._timing.crontab.Crontab`),
never from the text, so ``*/15``, ``0,15,30,45`` and ``0-59/15`` read alike.
What has no short phrase falls back to the fields listed (``at minute 7, 19 past
hour 3, 9``): never a guess. Times are wall-clock times in the schedule's zone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cronlease._timing.crontab import Crontab
from cronlease._timing.schedule import Schedule

__all__ = ["describe", "describe_interval"]

_DAY_NAMES = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
_MONTH_NAMES = [
    *("Jan", "Feb", "Mar", "Apr", "May", "Jun"),
    *("Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
]
_UNITS = [("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)]
# more fire times a day than this read as a list of minutes and hours, not of times
_MAX_TIMES = 4


def describe(schedule: Schedule) -> str:
    """``schedule`` in words."""
    if schedule.kind == "every":
        assert schedule.interval is not None  # Schedule.every always sets it
        return describe_interval(schedule.interval.total_seconds())
    return describe_crontab(Crontab.parse(schedule.expression))


def describe_interval(seconds: float) -> str:
    """``every minute``, ``every 1 minute 30 seconds``: whole units, largest first."""
    if seconds != int(seconds):
        return f"every {seconds:g} seconds"
    left, parts = int(seconds), []
    for unit, size in _UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count > 1 else ''}")
    if len(parts) == 1 and parts[0].startswith("1 "):
        return f"every {parts[0][2:]}"  # "every minute", not "every 1 minute"
    return "every " + " ".join(parts)


def describe_crontab(cron: Crontab) -> str:
    days = _days(cron)
    when = _time_of_day(cron)
    if not days and when.startswith("at ") and not when.startswith("at minute"):
        days = "every day"  # "at 02:00" alone reads as once
    return f"{when} {days}" if days else when


def _step(values: Sequence[int], size: int) -> int | None:
    """The step of ``values`` if they are 0, s, 2s, ... covering the whole field (s divides it)."""
    if len(values) < 2 or values[0] != 0:
        return None
    step = values[1] - values[0]
    if size % step or list(values) != list(range(0, size, step)):
        return None
    return step


def _time_of_day(cron: Crontab) -> str:
    minutes, hours = cron.minutes, cron.hours
    every_minute, every_hour = len(minutes) == 60, len(hours) == 24
    if every_minute and every_hour:
        return "every minute"
    minute_step = _step(minutes, 60)
    if every_hour and minute_step:
        return f"every {minute_step} minutes"
    if every_hour:
        return "every hour" + (
            "" if minutes == (0,) else " at " + _list(f":{m:02d}" for m in minutes)
        )
    hour_step = _step(hours, 24)
    if hour_step and len(minutes) == 1:
        at = "" if minutes == (0,) else f" at :{minutes[0]:02d}"
        return f"every {hour_step} hours{at}"
    if every_minute:
        return "every minute " + _hours_phrase(hours)
    if minute_step:
        return f"every {minute_step} minutes " + _hours_phrase(hours)
    if len(minutes) * len(hours) <= _MAX_TIMES:
        return "at " + _list(f"{h:02d}:{m:02d}" for h in hours for m in minutes)
    return f"at minute {_numbers(minutes)} past hour {_numbers(hours)}"


def _hours_phrase(hours: Sequence[int]) -> str:
    if list(hours) == list(range(hours[0], hours[-1] + 1)):
        return f"from {hours[0]:02d}:00 to {hours[-1]:02d}:59"
    return f"during hour {_numbers(hours)}"


def _days(cron: Crontab) -> str:
    every_day = len(cron.days) == 31
    every_weekday = len(cron.weekdays) == 7
    weekdays = _weekdays(cron.weekdays)
    month_days = "on day " + _numbers(cron.days) + " of the month"
    if every_day and every_weekday:
        phrase = ""
    elif every_day:
        phrase = weekdays
    elif every_weekday:
        phrase = month_days
    elif cron.day_or:  # cron(5): either field matching is enough
        phrase = f"{month_days} or {weekdays}"
    else:
        phrase = f"{month_days} if {weekdays}"
    if len(cron.months) != 12:
        phrase = f"{phrase} in {_list(_MONTH_NAMES[m - 1] for m in cron.months)}".strip()
    return phrase


def _weekdays(days: frozenset[int]) -> str:
    if days == {1, 2, 3, 4, 5}:
        return "on weekdays"
    if days == {0, 6}:
        return "on weekends"
    ordered = sorted(days, key=lambda day: (day + 6) % 7)  # Monday first, as people list them
    return "on " + _list(_DAY_NAMES[day] for day in ordered)


def _numbers(values: Sequence[int]) -> str:
    """``1-5``, ``1, 15``: runs of three or more written as ranges."""
    parts: list[str] = []
    start = prev = values[0]
    for value in [*values[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(f"{start}-{prev}" if prev - start >= 2 else _list_plain(start, prev))
        if value is not None:
            start = prev = value
    return ", ".join(parts)


def _list_plain(start: int, end: int) -> str:
    return ", ".join(str(v) for v in range(start, end + 1))


def _list(items: Iterable[str]) -> str:
    return ", ".join(items)
