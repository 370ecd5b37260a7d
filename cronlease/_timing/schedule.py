"""Schedules: durations, APScheduler triggers and lease timing.

A :class:`Schedule` is made once per task and checked where it is made. It knows
the APScheduler trigger that drives the timing and, for any fire time, the
lease TTL, the misfire grace and the future-slot tolerance that tick needs.
Crontab expressions are read by ``_timing/crontab.py`` and their fire times
follow Debian cron's daylight-saving rules (``_timing/debian.py``). All gaps are
measured between UTC instants, so a DST change never yields a zero or negative gap.
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
from apscheduler.triggers.interval import IntervalTrigger

from cronlease._timing.crontab import Crontab
from cronlease._timing.debian import next_fire
from cronlease.errors import ConfigError

__all__ = [
    "EPOCH",
    "MAX_FINGERPRINT_LENGTH",
    "MAX_TTL",
    "MIN_INTERVAL",
    "MIN_TTL",
    "Schedule",
    "parse_duration",
    "slot_of",
    "time_of_slot",
    "zone_of",
]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MIN_INTERVAL = timedelta(seconds=1)
#: a fingerprint's longest text: the lease row's column (``_lease/schema.py``) is this wide
MAX_FINGERPRINT_LENGTH = 200
MIN_TTL = 1.0
MAX_TTL = 300.0
#: where :meth:`Schedule.smallest_gap` starts counting (any fixed instant would do)
GAP_REFERENCE = datetime(2001, 1, 1, tzinfo=timezone.utc)
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


class CrontabTrigger(BaseTrigger):  # type: ignore[misc]
    """APScheduler's face of a crontab: fire times by Debian cron's rules (``_timing/debian.py``).

    APScheduler 3's own ``CronTrigger`` walks wall-clock fields and so skips days
    after a daylight-saving change, returns one instant twice, and repeats
    fixed-time jobs in the autumn fold (issue 12); APScheduler still drives the timing.
    """

    def __init__(self, crontab: Crontab, zone: tzinfo) -> None:
        self.crontab = crontab
        self.timezone = zone

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        # after a fire: the next one strictly later, whatever the clock says now;
        # first: the first at or after now, as APScheduler's own triggers do
        if previous_fire_time is not None:
            return next_fire(self.crontab, self.timezone, previous_fire_time)
        return next_fire(self.crontab, self.timezone, now - timedelta(microseconds=1))

    def __str__(self) -> str:
        return f"cron[{self.crontab.text!r}, {self.timezone}]"

    def __repr__(self) -> str:
        return f"<CrontabTrigger ({self.crontab.text!r}, timezone={str(self.timezone)!r})>"


def _crontab_trigger(expression: str, zone: tzinfo) -> tuple[str, BaseTrigger]:
    crontab = Crontab.parse(expression)
    trigger = CrontabTrigger(crontab, zone)
    # A field that can never match (e.g. "0 0 31 2 *") would make a task that never runs.
    if trigger.get_next_fire_time(None, datetime.now(timezone.utc)) is None:
        raise ConfigError(f"cron expression {expression!r} never fires")
    return crontab.text, trigger


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
        # On the wall clock (UTC) from a fixed instant: an answer checked at declaration
        # must not depend on the day it is asked (a daily task's gap is 23 h on a DST
        # day); each tick's own gap (gap_after) still sees the zone's changes.
        wall = self if self.timezone == "UTC" else Schedule.cron(self.expression)
        times = wall.upcoming(GAP_REFERENCE, 25)
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


def zone_of(schedule: Schedule) -> tzinfo:
    """The zone a schedule's fire times are shown in (its own; UTC for ``every``)."""
    if schedule.timezone.upper() == "UTC":
        return timezone.utc
    return ZoneInfo(schedule.timezone)  # the schedule validated the name
