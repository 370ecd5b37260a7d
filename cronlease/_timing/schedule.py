"""Schedules: durations, crontab expressions, APScheduler triggers and lease timing.

A :class:`Schedule` is made once per task and checked where it is made. It knows
the APScheduler trigger that drives the timing and, for any fire time, the
lease TTL, the misfire grace and the future-slot tolerance that tick needs.
All gaps are measured between UTC instants, so a DST change never yields a
zero or negative gap.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from itertools import pairwise
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from cronlease._lease.schema import MAX_FINGERPRINT_LENGTH
from cronlease.errors import ConfigError

__all__ = [
    "EPOCH",
    "MAX_TTL",
    "MIN_INTERVAL",
    "MIN_TTL",
    "Schedule",
    "parse_duration",
    "slot_of",
    "time_of_slot",
]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MIN_INTERVAL = timedelta(seconds=1)
MIN_TTL = 1.0
MAX_TTL = 300.0
MAX_GRACE = 60.0
# A replica whose clock runs fast may take a slot at most this early (issue 12): half
# the gap alone let a daily tick run 12 hours ahead of the rest of the fleet.
MAX_TOLERANCE = 60.0

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(value: object, *, what: str = "duration") -> timedelta:
    """Turn ``30``, ``1.5``, ``"30s"``, ``"5m"``, ``"1h30m"`` or a timedelta into a timedelta.

    A bare number (or a string of digits) means seconds. Raises
    :class:`ConfigError` for anything else, or for a duration that is not positive.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a duration such as 30, '90s' or '1h30m', not {value!r}")
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, (int, float)):
        result = _seconds_delta(value, value, what)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(\.\d+)?", text):
            result = _seconds_delta(float(text), value, what)
        else:
            pos, seconds = 0, 0.0
            for match in _DURATION_PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNITS[match.group(2)]
                pos = match.end()
            if not text or pos != len(text):
                raise ConfigError(
                    f"{what} {value!r} is not a duration: use a number of seconds or units "
                    "such as '90s', '5m', '1h30m', '2d'"
                )
            result = _seconds_delta(seconds, value, what)
    else:
        raise ConfigError(f"{what} must be a duration such as 30, '90s' or '1h30m', not {value!r}")
    if result <= timedelta(0):
        raise ConfigError(f"{what} must be positive, got {value!r}")
    return result


def _seconds_delta(seconds: float, value: object, what: str) -> timedelta:
    # NaN, infinity and huge numbers make timedelta raise ValueError/OverflowError.
    try:
        return timedelta(seconds=seconds)
    except (ValueError, OverflowError) as exc:
        raise ConfigError(f"{what} {value!r} is not a usable duration") from exc


def slot_of(fire_time: datetime) -> int:
    """The slot of a fire time: the instant as whole milliseconds since the Unix epoch."""
    return round(fire_time.timestamp() * 1000)


def time_of_slot(slot: int) -> datetime:
    """The UTC instant a slot stands for."""
    return EPOCH + timedelta(milliseconds=slot)


def _zone(name: str) -> tzinfo:
    if name.upper() == "UTC":
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"unknown time zone {name!r}: use an IANA name such as 'Europe/Istanbul'"
        ) from exc


# --- crontab ---------------------------------------------------------------

_MACROS = {
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


def _field_values(text: str, index: int, expression: str) -> list[int]:
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
    return sorted(values)


def _as_list(values: list[int], spec: tuple[str, int, int, list[str]]) -> str:
    _, low, high, _ = spec
    return "*" if values == list(range(low, high + 1)) else ",".join(map(str, values))


def _crontab_trigger(expression: str, zone: tzinfo) -> tuple[str, BaseTrigger]:
    """Translate a crontab expression into APScheduler triggers with cron's own meaning.

    Two differences from ``CronTrigger.from_crontab`` matter: crontab's weekday 0
    (and 7) is Sunday, not Monday; and when both day-of-month and day-of-week are
    restricted, cron fires when *either* matches, where APScheduler wants both.
    """
    text = " ".join(expression.strip().lower().split())
    text = _MACROS.get(text, text)
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
    expanded = [_field_values(part, index, expression) for index, part in enumerate(fields)]
    # Hand APScheduler explicit value lists: its own field syntax differs from
    # cron's at the edges (it rejects a step larger than the range, e.g. */12 months).
    minute, hour, dom, month = (
        _as_list(values, _FIELDS[index]) for index, values in enumerate(expanded[:4])
    )
    weekdays = sorted({day % 7 for day in expanded[4]})
    dow = ",".join(_WEEKDAYS[day][:3] for day in weekdays) if len(weekdays) < 7 else "*"
    dom_restricted = not fields[2].startswith("*")
    dow_restricted = not fields[4].startswith("*")

    def cron(day: str, day_of_week: str) -> CronTrigger:
        return CronTrigger(
            minute=minute, hour=hour, day=day, month=month, day_of_week=day_of_week, timezone=zone
        )

    trigger: BaseTrigger
    if dom_restricted and dow_restricted:
        trigger = OrTrigger([cron(dom, "*"), cron("*", dow)])
    else:
        trigger = cron(dom, dow)
    # A field that can never match (e.g. "0 0 31 2 *") would make a task that never runs.
    if trigger.get_next_fire_time(None, datetime.now(timezone.utc)) is None:
        raise ConfigError(f"cron expression {expression!r} never fires")
    return text, trigger


# --- schedule --------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """When a task fires: ``every`` an interval from an anchor, or a ``cron`` expression.

    Build one with :meth:`every` or :meth:`cron`; both raise :class:`ConfigError`
    for invalid input.
    """

    kind: Literal["every", "cron"]
    expression: str
    timezone: str = "UTC"
    anchor: datetime = EPOCH
    interval: timedelta | None = None
    trigger: BaseTrigger = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        zone = _zone(self.timezone)
        if self.anchor.tzinfo is None:
            raise ConfigError("anchor must be a time-zone-aware datetime")
        trigger: BaseTrigger
        if self.kind == "every":
            if self.interval is None or self.interval < MIN_INTERVAL:
                raise ConfigError(f"every must be at least 1 second, got {self.interval}")
            trigger = IntervalTrigger(
                seconds=self.interval.total_seconds(), start_date=self.anchor, timezone=timezone.utc
            )
        elif self.kind == "cron":
            normalized, trigger = _crontab_trigger(self.expression, zone)
            object.__setattr__(self, "expression", normalized)
        else:
            raise ConfigError(f"unknown schedule kind {self.kind!r}")
        object.__setattr__(self, "trigger", trigger)

    @classmethod
    def every(cls, value: object, *, anchor: datetime | None = None) -> Schedule:
        interval = parse_duration(value, what="every")
        return cls(
            kind="every",
            expression=_format_seconds(interval.total_seconds()),
            anchor=anchor or EPOCH,
            interval=interval,
        )

    @classmethod
    def cron(cls, expression: str, *, timezone: str | None = None) -> Schedule:
        if not isinstance(expression, str):
            raise ConfigError(f"cron must be a string such as '0 3 * * *', not {expression!r}")
        return cls(
            kind="cron", expression=expression, timezone="UTC" if timezone is None else timezone
        )

    @functools.cached_property
    def fingerprint(self) -> str:
        """Identifies the schedule, so replicas can notice they disagree about a task.

        At most MAX_FINGERPRINT_LENGTH characters, the lease row's column: a
        longer one (a long cron list in a long zone name) keeps its start and
        ends with a hash of the whole, so it still tells schedules apart.
        """
        if self.kind == "every":
            text = f"every {self.expression} from {slot_of(self.anchor)}"
        else:
            text = f"cron {self.expression} in {self.timezone}"
        if len(text) <= MAX_FINGERPRINT_LENGTH:
            return text
        digest = hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:16]
        return f"{text[: MAX_FINGERPRINT_LENGTH - 22]}... #{digest}"

    def __str__(self) -> str:
        if self.kind == "every":
            return f"every {self.expression}"
        return f"cron '{self.expression}' ({self.timezone})"

    def next_fire_time(self, after: datetime) -> datetime | None:
        """The first fire time strictly after ``after``."""
        result: datetime | None = self.trigger.get_next_fire_time(after, after)
        return result

    def upcoming(self, now: datetime, count: int) -> list[datetime]:
        """The next ``count`` fire times at or after ``now``."""
        times: list[datetime] = []
        fire: datetime | None = self.trigger.get_next_fire_time(None, now)
        while fire is not None and len(times) < count:
            times.append(fire)
            fire = self.next_fire_time(fire)
        return times

    def missed(self, after: datetime, now: datetime, limit: int) -> list[datetime]:
        """Fire times in (``after``, ``now``], oldest first, keeping only the latest ``limit``."""
        if self.interval is not None:
            step = self.interval.total_seconds()
            origin = self.anchor.timestamp()
            last = math.floor((now.timestamp() - origin) / step)
            first = max(math.floor((after.timestamp() - origin) / step) + 1, last - limit + 1)
            return [
                datetime.fromtimestamp(origin + step * index, tz=timezone.utc)
                for index in range(first, last + 1)
            ]
        # Cron: walk forward, but never more than a year of fire times.
        found: deque[datetime] = deque(maxlen=limit)
        fire = self.next_fire_time(max(after, now - timedelta(days=366)))
        while fire is not None and fire <= now:
            found.append(fire)
            fire = self.next_fire_time(fire)
        return list(found)

    def smallest_gap(self) -> float:
        """The interval, or for cron the shortest gap among the next few fire times."""
        if self.interval is not None:
            return self.interval.total_seconds()
        times = self.upcoming(datetime.now(timezone.utc), 25)
        gaps = [b.timestamp() - a.timestamp() for a, b in pairwise(times)]
        return min(gaps, default=MAX_TTL)

    def gap_after(self, fire_time: datetime) -> float:
        """Seconds from ``fire_time`` to the next fire time, between UTC instants."""
        if self.interval is not None:
            return self.interval.total_seconds()
        following = self.next_fire_time(fire_time)
        if following is None:
            return MAX_TTL
        return max(0.001, following.timestamp() - fire_time.timestamp())

    def ttl(self, fire_time: datetime) -> float:
        """The lease TTL for the tick at ``fire_time``: the gap, clamped to 1 s .. 5 min."""
        return min(MAX_TTL, max(MIN_TTL, self.gap_after(fire_time)))

    def grace(self, fire_time: datetime) -> float:
        """How late the tick may start: half the gap, at most a minute."""
        return min(MAX_GRACE, self.gap_after(fire_time) / 2)

    def tolerance(self, fire_time: datetime) -> float:
        """How far ahead of the database clock this tick's slot may be: half the gap,
        at most a minute."""
        return min(MAX_TOLERANCE, self.gap_after(fire_time) / 2)


def _format_seconds(seconds: float) -> str:
    if seconds == int(seconds):
        whole = int(seconds)
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if whole % size == 0:
                return f"{whole // size}{unit}"
        return f"{whole}s"
    return f"{seconds:g}s"
