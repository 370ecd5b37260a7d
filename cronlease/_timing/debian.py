"""Cron fire times in a time zone, by Debian cron's daylight-saving rules (cron(8)).

Debian's cron wakes every minute and compares its wall clock with the minute it
expected (cron.c). When a change skips local times (spring forward), a job
*at a particular time* (neither minute nor hour field starting with ``*``)
whose time was skipped runs once, right after the change; wildcard jobs follow
the new wall clock, so their skipped minutes are gone. When a change repeats
local times (autumn), fixed-time jobs run in the first pass only; wildcard jobs
run in both. Changes of three hours or more are "the clock jumped": every job
follows the new wall clock; changes of under five minutes are caught up minute
by minute, wildcard jobs included.

Times are computed per stretch of constant UTC offset between two changes
(``_timing/zones.py``): within one the wall clock is the UTC instant plus the
offset, so a match is one calendar search, and each change is judged by the
rules above. A fire time is the UTC instant; two rules yielding the same
instant yield one fire time.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo

from cronlease._timing import zones
from cronlease._timing.crontab import Crontab

__all__ = ["next_fire"]

# cron.c: a forward step of 1-4 minutes catches up every job; of 5-179, fixed-time
# jobs only; of 180 or more, none. A backward step of up to 180 minutes repeats only
# wildcard jobs; a longer one, every job.
_CATCH_UP_ALL = timedelta(minutes=5)
_JUMP_FORWARD = timedelta(minutes=180)
_JUMP_BACK = timedelta(minutes=181)
# how far back a change can still shape the minutes after it: the repeated local
# times of the longest backward step that is not a jump
_LOOK_BACK = timedelta(days=1)
_SEGMENT = timedelta(days=366)
_HORIZON_YEARS = 50
_MINUTE = timedelta(minutes=1)
_UTC = timezone.utc


def _wall(instant: datetime, offset: timedelta) -> datetime:
    return (instant + offset).replace(tzinfo=None)


def _ceil_minute(wall: datetime, *, strictly: bool) -> datetime:
    floor = wall.replace(second=0, microsecond=0)
    if floor < wall or strictly:
        return floor + _MINUTE
    return floor


def _instant(wall: datetime, offset: timedelta) -> datetime:
    return (wall - offset).replace(tzinfo=_UTC)


def next_fire(crontab: Crontab, zone: tzinfo, after: datetime) -> datetime | None:
    """The first fire time strictly after ``after`` (an aware datetime), as a UTC instant;
    ``None`` if there is none in the next 50 years."""
    after = after.astimezone(_UTC)
    horizon = datetime(min(after.year + _HORIZON_YEARS, 9998), 1, 1, tzinfo=_UTC)
    if zones.is_fixed(zone):
        offset = zones.offset_at(zone, after)
        start = _ceil_minute(_wall(after, offset), strictly=True)
        found = crontab.next_minute(start, _wall(horizon, offset))
        return None if found is None else _instant(found, offset)

    change = zones.last_change(zone, after, after - _LOOK_BACK)
    offset = zones.offset_at(zone, after)
    start, strictly = after, True
    while start < horizon:
        following = zones.next_change(zone, start, min(horizon, start + _SEGMENT))
        end = following.at if following is not None else min(horizon, start + _SEGMENT)
        if change is not None:
            credit = _skipped_minute_credit(crontab, change)
            if credit is not None and credit > after:
                return credit
        lowest = _ceil_minute(_wall(start, offset), strictly=strictly)
        if change is not None and crontab.fixed and _repeats_wildcards_only(change):
            # the repeated local times: fixed-time jobs ran in the first pass
            lowest = max(lowest, _ceil_minute(_wall(change.at, change.before), strictly=False))
        found = crontab.next_minute(lowest, _wall(end, offset))
        if found is not None:
            return _instant(found, offset)
        change = following
        if following is not None:
            offset = following.after
        start, strictly = end, False
    return None


def _repeats_wildcards_only(change: zones.Change) -> bool:
    return not change.forward and change.before - change.after < _JUMP_BACK


def _skipped_minute_credit(crontab: Crontab, change: zones.Change) -> datetime | None:
    """When a forward change skipped a minute this job matches and cron runs it right
    after the change: that instant (the first whole local minute after it)."""
    if not change.forward:
        return None
    skipped = change.after - change.before
    if skipped >= _JUMP_FORWARD or (skipped >= _CATCH_UP_ALL and not crontab.fixed):
        return None
    first = _ceil_minute(_wall(change.at, change.before), strictly=False)
    past = _ceil_minute(_wall(change.at, change.after), strictly=False)
    if not crontab.matches_between(first, past):
        return None
    return _instant(past, change.after)
