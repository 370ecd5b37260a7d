"""A time zone's offset changes, as UTC instants: what cron's DST rules are about.

``zoneinfo`` answers "what offset at this instant" but lists no transitions.
They are found by sampling the offset every 6 hours of a year and bisecting
each change to the second, once per zone and year (cached). Sampling finds
every change as long as no two changes lie within 6 hours of each other: in
the tz database the closest two offset changes since 1970 are 167 hours apart
(Brazil, October 2000; ``tests/unit/test_zones.py`` checks the data and the
sampled changes against the transitions in the zone files).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo

__all__ = ["Change", "changes_in_year", "last_change", "next_change", "offset_at"]

_SAMPLE = timedelta(hours=6)
_SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class Change:
    """The zone's offset changes from ``before`` to ``after`` at the UTC instant ``at``
    (the first instant with the new offset)."""

    at: datetime
    before: timedelta
    after: timedelta

    def __post_init__(self) -> None:
        if self.at.utcoffset() != timedelta(0):
            raise ValueError(f"a change is a UTC instant, got {self.at!r}")
        if self.before == self.after:
            raise ValueError("a change must change the offset")

    @property
    def forward(self) -> bool:
        """Clocks go forward: local times between ``at + before`` and ``at + after`` never occur."""
        return self.after > self.before


def offset_at(zone: tzinfo, instant: datetime) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None  # an aware datetime converted to a zone has an offset
    return offset


def is_fixed(zone: tzinfo) -> bool:
    return isinstance(zone, timezone)


@functools.lru_cache(maxsize=2048)
def changes_in_year(zone: tzinfo, year: int) -> tuple[Change, ...]:
    """The offset changes with ``at`` in the UTC year ``year``, oldest first."""
    if is_fixed(zone):
        return ()
    start = datetime(year, 1, 1, tzinfo=timezone.utc)
    end = datetime(year + 1, 1, 1, tzinfo=timezone.utc)
    found: list[Change] = []
    # the sample just before the year, so a change in the year's first 6 hours is found
    low, low_offset = start - _SECOND, offset_at(zone, start - _SECOND)
    while low < end:
        high = min(low + _SAMPLE, end - _SECOND)
        high_offset = offset_at(zone, high)
        if high_offset != low_offset:
            found.append(_bisect(zone, low, high, low_offset, high_offset))
        low, low_offset = high, high_offset
        if high == end - _SECOND:
            break
    return tuple(found)


def _bisect(
    zone: tzinfo, low: datetime, high: datetime, before: timedelta, after: timedelta
) -> Change:
    # invariant: offset(low) == before, offset(high) == after; offsets change on whole seconds
    while high - low > _SECOND:
        middle = low + (high - low) // 2
        middle = middle.replace(microsecond=0)
        if offset_at(zone, middle) == before:
            low = middle
        else:
            high = middle
    return Change(at=high, before=before, after=after)


def next_change(zone: tzinfo, after: datetime, until: datetime) -> Change | None:
    """The first change with ``after < at <= until``."""
    for year in range(after.year, until.year + 1):
        for change in changes_in_year(zone, year):
            if change.at > until:
                return None
            if change.at > after:
                return change
    return None


def last_change(zone: tzinfo, at_or_before: datetime, since: datetime) -> Change | None:
    """The latest change with ``since < at <= at_or_before``."""
    for year in range(at_or_before.year, since.year - 1, -1):
        for change in reversed(changes_in_year(zone, year)):
            if change.at <= since:
                return None
            if change.at <= at_or_before:
                return change
    return None
