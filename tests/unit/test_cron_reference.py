"""cronlease's cron fire times against an independent reference, cronsim (it mimics Debian cron).

A fixed-seed corpus: 1,000 expressions x 7 zones, half of the start instants
within days of an offset change, 10 fire times each. Where the two disagree,
Debian cron's own loop decides (``tests/support/debian_cron.py``, written from
cron.c: it shares no code with cronlease) over the window of the disagreement,
and the disagreement must be one of cronsim's known defects below — each named
with the crontab(5)/cron(8) rule that decides it. The counts are printed
(``pytest -s``) for the closing note.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import cronsim  # a test dependency (pyproject's "test" extra): never skipped

from cronlease._timing.schedule import Schedule
from tests.support.cron_corpus import ZONES, corpus
from tests.support.debian_cron import MACROS, DebianCron

FIRES = 10
SEED = 20261201
EXPRESSIONS = 1000

# cronsim's known defects, each decided by a rule of Debian cron:
KNOWN_DEFECTS = {
    # crontab(5): "Step values can be used in conjunction with ranges"; "5-5/1" is
    # the range 5..5 stepped by 1, i.e. 5. cronsim reads a range whose ends are equal,
    # with a step, as running to the field's maximum ("5-5/1" = "5-59/1").
    "single-value range with a step": re.compile(r"(^|[ ,])(\d+)-\2/\d+"),
    # cron(8): "If time has moved forward, those jobs that would have run in the
    # interval that has been skipped will be run immediately. Conversely, if time
    # has moved backward, care is taken to avoid running jobs twice" — for jobs at a
    # particular time; wildcard jobs "are run based on the new time immediately".
    # cronsim walks an aware datetime field by field (datetime.replace keeps a stale
    # offset), so in zones whose changes are not one hour at 02:00 (Lord_Howe's 30
    # minutes, Chatham's 02:45, Sao_Paulo's midnight) it drifts from the new wall
    # clock: a minute or hour late, a day or a week skipped, the repeated minutes of
    # a wildcard job lost.
    "wildcard job near an offset change": None,
}


def _zone(name: str) -> timezone | ZoneInfo:
    return timezone.utc if name == "UTC" else ZoneInfo(name)


def ours(expression: str, zone: str, after: datetime, count: int) -> list[datetime]:
    schedule = Schedule.cron(expression, timezone=zone)
    times: list[datetime] = []
    moment = after
    for _ in range(count):
        following = schedule.next_fire_time(moment)
        assert following is not None and following > moment
        times.append(following)
        moment = following
    return times


def reference(expression: str, zone: str, after: datetime, count: int) -> list[datetime]:
    # cronsim knows no macros; cron(5) defines them as these five-field expressions
    iterator = cronsim.CronSim(MACROS.get(expression, expression), after.astimezone(_zone(zone)))
    return [next(iterator).astimezone(timezone.utc) for _ in range(count)]


def _ours_between(expression: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    schedule = Schedule.cron(expression, timezone=zone)
    found = []
    moment = schedule.next_fire_time(start)
    while moment is not None and moment <= end:
        found.append(moment)
        moment = schedule.next_fire_time(moment)
    return found


def _debian_between(expression: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    tz = _zone(zone)
    # the loop model starts as a cron that has run normally until `start`: not inside
    # the repeated hours after a change
    while (start - timedelta(hours=4)).astimezone(tz).utcoffset() != start.astimezone(
        tz
    ).utcoffset():
        start -= timedelta(hours=4)
    minutes = int((end - start).total_seconds() // 60) + 1
    fires = DebianCron(expression, zone).fire_times(start, 10**9, max_minutes=minutes)
    return [fire for fire in fires if fire <= end]


def _defect(expression: str, zone: str, window: tuple[datetime, datetime]) -> str | None:
    step_range = KNOWN_DEFECTS["single-value range with a step"]
    assert step_range is not None
    if step_range.search(expression):
        return "single-value range with a step"
    text = MACROS.get(expression, expression)
    minute, hour = text.split()[:2]
    tz = _zone(zone)
    start, end = window
    before = (start - timedelta(days=1)).astimezone(tz).utcoffset()
    changed = before != end.astimezone(tz).utcoffset()
    if changed and (minute.startswith("*") or hour.startswith("*")):
        return "wildcard job near an offset change"
    return None


def test_fire_times_match_the_reference_or_a_known_defect_of_it() -> None:
    cases = corpus(SEED, EXPRESSIONS)
    assert len(cases) == EXPRESSIONS * len(ZONES)
    disagreements: Counter[tuple[str, str]] = Counter()
    unexplained: list[str] = []
    for expression, zone, start in cases:
        mine = ours(expression, zone, start, FIRES)
        theirs = reference(expression, zone, start, FIRES)
        if mine == theirs:
            continue
        first = next(i for i in range(FIRES) if mine[i] != theirs[i])
        window = (
            min(mine[first], theirs[first]) - timedelta(days=1),
            max(mine[first], theirs[first]),
        )
        debian = _debian_between(expression, zone, *window)
        ours_in_window = _ours_between(expression, zone, *window)
        defect = _defect(expression, zone, window)
        if debian != ours_in_window or defect is None:
            local = _zone(zone)
            unexplained.append(
                f"{expression!r} in {zone} after {start.isoformat()}: cronlease "
                f"{mine[first].astimezone(local).isoformat()}, cronsim "
                f"{theirs[first].astimezone(local).isoformat()}, Debian's loop "
                f"{[t.astimezone(local).isoformat() for t in debian][-3:]} "
                f"({defect or 'no known defect'})"
            )
            continue
        disagreements[(defect, zone)] += 1
    total = sum(disagreements.values())
    print(
        f"\n{len(cases)} cases x {FIRES} fire times: {len(cases) - total - len(unexplained)} agree "
        f"with cronsim, {total} disagree where Debian's loop sides with cronlease:"
    )
    for (defect, zone), count in sorted(disagreements.items()):
        print(f"  {count:4d}  {zone:20s} {defect}")
    assert not unexplained, "\n".join(unexplained[:20])
    # the corpus reaches the rules: disagreements show it hits changes in the hard zones
    assert sum(count for (_, zone), count in disagreements.items() if zone == "Australia/Lord_Howe")


def test_fire_times_around_changes_match_debian_crons_loop() -> None:
    """Where both agree they could both be wrong: around a sample of the corpus's offset
    changes, every fire time in two days is checked against Debian's loop itself."""
    checked = 0
    for expression, zone, start in corpus(SEED, EXPRESSIONS)[::5]:
        tz = _zone(zone)
        change = next(
            (
                start + timedelta(hours=hour)
                for hour in range(4 * 24)
                if (start + timedelta(hours=hour)).astimezone(tz).utcoffset()
                != (start + timedelta(hours=hour + 1)).astimezone(tz).utcoffset()
            ),
            None,
        )
        if change is None:
            continue
        window = (change - timedelta(days=1), change + timedelta(days=1))
        assert _ours_between(expression, zone, *window) == _debian_between(
            expression, zone, *window
        ), f"{expression!r} in {zone} around {change.isoformat()}"
        checked += 1
    print(f"\n{checked} windows of two days around an offset change checked minute by minute")
    assert checked > 100
