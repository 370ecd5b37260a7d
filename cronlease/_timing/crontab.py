"""Crontab expressions: parsed the way cron reads them, matched against wall-clock minutes.

This module knows the calendar only; which instants a wall-clock minute
stands for around a daylight-saving change is ``_timing/debian.py``'s.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from cronlease.errors import ConfigError

__all__ = ["MACROS", "Crontab"]

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
# Crontab counts weekdays from Sunday = 0 (7 is Sunday too).
_WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_FIELDS: list[tuple[str, int, int, list[str]]] = [
    ("minute", 0, 59, []),
    ("hour", 0, 23, []),
    ("day of month", 1, 31, []),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _WEEKDAYS),
]
_ELEMENT = re.compile(r"^(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(\d+))?$")
_DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]  # February at its longest
_MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)


def _field_values(text: str, index: int, expression: str) -> tuple[int, ...]:
    """Expand one crontab field into its sorted values, validating it the way cron does."""
    label, low, high, names = _FIELDS[index]

    def number(token: str) -> int:
        if token.isdigit():
            value = int(token)
        elif token in names:
            value = names.index(token) + (1 if label == "month" else 0)
        else:
            raise ConfigError(f"cron expression {expression!r}: {label} field has {token!r}")
        if not low <= value <= high:
            raise ConfigError(
                f"cron expression {expression!r}: {label} {value} is outside {low}-{high}"
            )
        return value

    values: set[int] = set()
    for element in text.split(","):
        match = _ELEMENT.match(element)
        if not match:
            raise ConfigError(
                f"cron expression {expression!r}: {label} field {text!r} is not valid"
            )
        span, step_text = match.groups()
        if span == "*":
            start, stop = low, high
        elif "-" in span:
            first, last = span.split("-")
            start, stop = number(first), number(last)
            if start > stop:
                raise ConfigError(
                    f"cron expression {expression!r}: {label} range {span!r} runs backwards"
                )
        else:
            start = number(span)
            stop = high if step_text else start
        step = int(step_text) if step_text else 1
        if step == 0:
            raise ConfigError(f"cron expression {expression!r}: {label} step must not be 0")
        values.update(range(start, stop + 1, step))
    return tuple(sorted(values))


@dataclass(frozen=True)
class Crontab:
    """A five-field crontab expression: the values each field allows, and cron's two flags.

    ``day_or``: both day fields are restricted (neither starts with ``*``), so a day
    matches when *either* does (cron(5)); otherwise both must. ``fixed``: neither the
    minute nor the hour field starts with ``*`` — a job "at a particular time",
    which cron(8)'s daylight-saving rules treat apart from wildcard jobs.
    """

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: frozenset[int]  # 0 = Sunday .. 6 = Saturday
    day_or: bool
    fixed: bool

    def __post_init__(self) -> None:
        for values, low, high in (
            (self.minutes, 0, 59),
            (self.hours, 0, 23),
            (self.days, 1, 31),
            (self.months, 1, 12),
        ):
            if not values or list(values) != sorted(set(values)) or values[0] < low:
                raise ValueError(f"field values {values!r} are not sorted and unique")
            if values[-1] > high:
                raise ValueError(f"field value {values[-1]} is above {high}")
        if not self.weekdays or not self.weekdays <= set(range(7)):
            raise ValueError(f"weekdays {sorted(self.weekdays)!r} are not 0-6")
        possible = (day <= _DAYS_IN_MONTH[month - 1] for month in self.months for day in self.days)
        if not self.day_or and not any(possible):
            raise ConfigError(f"cron expression {self.text!r} never fires")

    @classmethod
    def parse(cls, expression: str) -> Crontab:
        """Read ``expression`` as cron does; raises :class:`ConfigError` naming what is wrong."""
        text = " ".join(expression.strip().lower().split())
        text = MACROS.get(text, text)
        if text.startswith("@"):
            raise ConfigError(
                f"cron expression {expression!r}: unsupported macro (use a five-field expression)"
            )
        fields = text.split(" ")
        if len(fields) != 5:
            raise ConfigError(
                f"cron expression {expression!r} must have five fields "
                f"(minute hour day-of-month month day-of-week), it has {len(fields)}"
            )
        minutes, hours, days, months, weekdays = (
            _field_values(part, index, expression) for index, part in enumerate(fields)
        )
        # Debian cron's flags (entry.c) look at the first character of the field only:
        # "*/2" is a wildcard, "0-59" is not.
        return cls(
            text=text,
            minutes=minutes,
            hours=hours,
            days=days,
            months=months,
            weekdays=frozenset(day % 7 for day in weekdays),
            day_or=not fields[2].startswith("*") and not fields[4].startswith("*"),
            fixed=not fields[0].startswith("*") and not fields[1].startswith("*"),
        )

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.weekday() + 1) % 7 in self.weekdays
        return (in_days or in_weekdays) if self.day_or else (in_days and in_weekdays)

    def next_minute(self, start: datetime, end: datetime) -> datetime | None:
        """The first wall-clock minute in [``start``, ``end``) that matches (naive datetimes,
        ``start`` on a whole minute)."""
        moment = start
        while moment < end:
            if moment.month not in self.months:
                later = bisect.bisect_right(self.months, moment.month)
                if later < len(self.months):
                    moment = datetime(moment.year, self.months[later], 1)
                else:
                    moment = datetime(moment.year + 1, self.months[0], 1)
                continue
            if not self.matches_day(moment.date()):
                moment = datetime.combine(moment.date() + _DAY, datetime.min.time())
                continue
            if moment.hour not in self.hours:
                later = bisect.bisect_right(self.hours, moment.hour)
                if later < len(self.hours):
                    moment = moment.replace(hour=self.hours[later], minute=0)
                else:
                    moment = datetime.combine(moment.date() + _DAY, datetime.min.time())
                continue
            if moment.minute not in self.minutes:
                later = bisect.bisect_right(self.minutes, moment.minute)
                if later < len(self.minutes):
                    moment = moment.replace(minute=self.minutes[later])
                else:
                    moment = moment.replace(minute=0) + timedelta(hours=1)
                continue
            return moment
        return None

    def matches_between(self, start: datetime, end: datetime) -> bool:
        """Whether any wall-clock minute in [``start``, ``end``) matches (naive, whole minutes)."""
        return self.next_minute(start, end) is not None
