"""A fixed-seed corpus of crontab expressions and start instants, daylight-saving weeks targeted."""

from __future__ import annotations

import calendar
import random
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from tests.support.debian_cron import DebianCron

__all__ = ["ZONES", "Case", "corpus"]

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Pacific/Chatham",
]

Case = tuple[str, str, datetime]


def _changes(zone: str, first_year: int, last_year: int) -> list[datetime]:
    """The instants the zone's offset changed, by the hour (an independent, crude scan)."""
    if zone == "UTC":
        return []
    tz = ZoneInfo(zone)
    found = []
    moment = datetime(first_year, 1, 1, tzinfo=timezone.utc)
    end = datetime(last_year + 1, 1, 1, tzinfo=timezone.utc)
    previous = moment.astimezone(tz).utcoffset()
    while moment < end:
        moment += timedelta(hours=1)
        offset = moment.astimezone(tz).utcoffset()
        if offset != previous:
            found.append(moment)
        previous = offset
    return found


def _number(rng: random.Random, low: int, high: int, hot: tuple[int, ...] = ()) -> int:
    if hot and rng.random() < 0.5:
        return rng.choice(hot)
    return rng.randint(low, high)


def _field(rng: random.Random, low: int, high: int, hot: tuple[int, ...], star: float) -> str:
    roll = rng.random()
    if roll < star:
        return "*"
    roll = rng.random()
    if roll < 0.15:
        return f"*/{rng.randint(1, max(1, (high - low) // 2))}"
    if roll < 0.45:
        return str(_number(rng, low, high, hot))
    if roll < 0.65:
        a = _number(rng, low, high, hot)
        b = rng.randint(a, min(high, a + rng.randint(0, high - low)))
        return f"{a}-{b}"
    if roll < 0.75:
        a = _number(rng, low, high, hot)
        b = rng.randint(a, high)
        return f"{a}-{b}/{rng.randint(1, max(1, (high - low) // 3))}"
    values = sorted({_number(rng, low, high, hot) for _ in range(rng.randint(2, 4))})
    return ",".join(map(str, values))


def _expression(rng: random.Random) -> str:
    if rng.random() < 0.04:
        return rng.choice(["@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@midnight"])
    minute = _field(rng, 0, 59, (0, 15, 30, 45, 50, 14), 0.2)
    # DST changes happen between 00:00 and 04:00 local in the corpus zones
    hour = _field(rng, 0, 23, (0, 1, 2, 3), 0.25)
    dom = _field(rng, 1, 31, (1, 31, 29), 0.7)
    month = _field(rng, 1, 12, (3, 4, 9, 10, 11), 0.75)
    dow = _field(rng, 0, 7, (0, 7), 0.75)
    expression = f"{minute} {hour} {dom} {month} {dow}"
    job = DebianCron(expression, "UTC")
    if not (job.dom_star or job.dow_star) or any(
        day <= calendar.monthrange(2024, month)[1] for month in job.month for day in job.dom
    ):
        return expression
    return _expression(rng)  # "31 4" never comes: cron refuses it, so does cronlease


def corpus(seed: int, expressions: int) -> list[Case]:
    """``expressions`` expressions x every zone, each with one start instant: half of
    them within three days before (or one after) one of the zone's offset changes."""
    rng = random.Random(seed)
    changes = {zone: _changes(zone, 2018, 2030) for zone in ZONES}
    cases: list[Case] = []
    for _ in range(expressions):
        expression = _expression(rng)
        for zone in ZONES:
            if changes[zone] and rng.random() < 0.5:
                change = rng.choice(changes[zone])
                start = change - timedelta(seconds=rng.randint(-86_400, 3 * 86_400))
            else:
                start = datetime(2020, 1, 1, tzinfo=timezone.utc) + timedelta(
                    seconds=rng.randint(0, 10 * 365 * 86_400)
                )
            cases.append((expression, zone, start.replace(microsecond=0)))
    return cases
