"""A minute-by-minute model of Debian cron's main loop (cron.c), written from its source.

It is the arbiter when cronlease and the reference library (cronsim) disagree:
slow (one step per minute), but it follows cron.c line by line, with its own
parser, sharing no code with cronlease:

    timeRunning = local minutes now;  timeDiff = timeRunning - virtualTime
    timeDiff == 1          -> virtualTime = timeRunning; run every job at it
    0 < timeDiff <= 5      -> virtualTime++ up to timeRunning, every job at each
    5 < timeDiff <= 180    -> wildcard jobs at timeRunning, then virtualTime++ up to
                              timeRunning, fixed-time jobs at each
    -180 < timeDiff <= 0   -> wildcard jobs at timeRunning; virtualTime stays
    otherwise              -> virtualTime = timeRunning; every job at it

"Wildcard" is Debian's MIN_STAR|HR_STAR: the minute or hour field starts with
``*``. A job found by any case runs at the real instant of that wake-up.
"""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

__all__ = ["MACROS", "DebianCron"]

_LIMITS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
_NAMES = [
    {},
    {},
    {},
    {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m},
    {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])},
]
# cron(5): each macro is this five-field expression (kept apart from cronlease's own
# table on purpose: the model shares no code with what it checks)
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _field(text: str, index: int) -> set[int]:
    low, high = _LIMITS[index]
    out: set[int] = set()
    for part in text.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, b = span.split("-")
            first, last = _value(a, index), _value(b, index)
        else:
            first = _value(span, index)
            last = high if step else first
        out.update(range(first, last + 1, int(step) if step else 1))
    return out


def _value(token: str, index: int) -> int:
    return int(token) if token.isdigit() else _NAMES[index][token]


class DebianCron:
    def __init__(self, expression: str, zone: str) -> None:
        text = MACROS.get(expression.strip().lower(), expression.strip().lower())
        fields = text.split()
        self.minute, self.hour, self.dom, self.month, dow = (
            _field(f, i) for i, f in enumerate(fields)
        )
        self.dow = {d % 7 for d in dow}
        self.dom_star = fields[2].startswith("*")
        self.dow_star = fields[4].startswith("*")
        self.wild = fields[0].startswith("*") or fields[1].startswith("*")
        self.zone = timezone.utc if zone == "UTC" else ZoneInfo(zone)

    def _matches(self, local_minutes: int) -> bool:
        # find_jobs: gmtime() of the virtual local minute gives the wall-clock fields
        tm = datetime(1970, 1, 1) + timedelta(minutes=local_minutes)
        dom = tm.day in self.dom
        dow = (tm.weekday() + 1) % 7 in self.dow
        day = (dom and dow) if (self.dom_star or self.dow_star) else (dom or dow)
        return tm.minute in self.minute and tm.hour in self.hour and tm.month in self.month and day

    def _local_minutes(self, utc_minute: int) -> int:
        instant = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=utc_minute)
        offset = instant.astimezone(self.zone).utcoffset()
        assert offset is not None
        return utc_minute + int(offset.total_seconds()) // 60

    def fire_times(self, after: datetime, count: int, *, max_minutes: int) -> list[datetime]:
        """The first ``count`` instants strictly after ``after`` at which this job runs,
        simulating at most ``max_minutes`` minutes."""
        epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
        utc_minute = int((after - epoch).total_seconds() // 60)
        virtual = self._local_minutes(utc_minute)  # cron has been running normally
        found: list[datetime] = []
        for _ in range(max_minutes):
            utc_minute += 1
            running = self._local_minutes(utc_minute)
            diff = running - virtual
            runs = False
            if diff == 1:
                virtual = running
                runs = self._matches(virtual)
            elif 0 < diff <= 5:
                while virtual < running:
                    virtual += 1
                    runs = runs or self._matches(virtual)
            elif 5 < diff <= 180:
                runs = self.wild and self._matches(running)
                while virtual < running:
                    virtual += 1
                    runs = runs or (not self.wild and self._matches(virtual))
            elif -180 < diff <= 0:
                runs = self.wild and self._matches(running)
            else:
                virtual = running
                runs = self._matches(running)
            if runs:
                found.append(epoch + timedelta(minutes=utc_minute))
                if len(found) == count:
                    break
        return found
