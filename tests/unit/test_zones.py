"""The offset changes found by sampling (``_timing/zones.py``) are the zone files' transitions."""

from __future__ import annotations

import itertools
import zoneinfo
from datetime import datetime, timedelta, timezone

# the pure-Python implementation exposes the transitions read from the TZif file
from zoneinfo._zoneinfo import ZoneInfo as FileZone

import pytest

from cronlease._timing import zones

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "Pacific/Chatham",
    "America/Noronha",  # two changes a week apart (October 2000): the closest since 1970
    "Pacific/Apia",  # skipped 2011-12-30 entirely (a 24-hour gap)
    "Antarctica/Troll",  # two-hour changes
    "Africa/Casablanca",  # daylight saving suspended for Ramadan
]
_UTC = timezone.utc


def _file_changes(name: str, first: int, last: int) -> list[tuple[datetime, timedelta, timedelta]]:
    zone = FileZone.no_cache(name)
    found = []
    for seconds in zone._trans_utc:  # type: ignore[attr-defined]
        at = datetime.fromtimestamp(seconds, _UTC)
        if not first <= at.year <= last:
            continue
        before = (at - timedelta(seconds=1)).astimezone(zone).utcoffset()
        after = at.astimezone(zone).utcoffset()
        assert before is not None and after is not None
        if before != after:  # a transition may change only the abbreviation or DST flag
            found.append((at, before, after))
    return found


@pytest.mark.parametrize("name", ZONES)
def test_sampled_changes_are_the_zone_files_transitions(name: str) -> None:
    zone = zoneinfo.ZoneInfo(name)
    sampled = [
        (change.at, change.before, change.after)
        for year in range(1970, 2037)
        for change in zones.changes_in_year(zone, year)
    ]
    assert sampled == _file_changes(name, 1970, 2036)


def test_no_two_offset_changes_since_1970_lie_within_a_day_in_any_zone() -> None:
    """The sampling step (6 h) finds every change only if changes are never closer."""
    closest = timedelta(days=365)
    for name in sorted(zoneinfo.available_timezones()):
        changes = [at for at, _, _ in _file_changes(name, 1970, 2037)]
        for earlier, later in itertools.pairwise(changes):
            closest = min(closest, later - earlier)
    assert closest > timedelta(days=1)


def test_next_and_last_change() -> None:
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    spring = datetime(2024, 3, 31, 1, tzinfo=_UTC)
    following = zones.next_change(berlin, spring - timedelta(days=30), spring + timedelta(days=1))
    assert following is not None and following.at == spring and following.forward
    assert zones.next_change(berlin, spring, spring + timedelta(days=30)) is None
    assert zones.last_change(berlin, spring, spring - timedelta(days=1)) == following
    assert (
        zones.last_change(berlin, spring - timedelta(seconds=1), spring - timedelta(days=1)) is None
    )
    assert zones.changes_in_year(_UTC, 2024) == ()
