"""Sentry Crons check-ins for a scheduler's runs, built on its listeners.

Install the extra: ``pip install 'cronlease[sentry]'``.

::

    import sentry_sdk
    from cronlease.sentry import instrument

    sentry_sdk.init(dsn="https://...@o0.ingest.sentry.io/0")
    instrument(scheduler)

Every attempt of a task (a scheduled tick, its retries and recoveries, a
manual run) checks in twice: ``in_progress`` when it starts, then ``ok`` when
it succeeded or ``error`` for any other outcome (failed, timed out, lost,
interrupted), the second with the first's check-in id and the run's duration.
Sentry then alerts on a failed run and, from the monitor config sent with each
check-in, on a missed or overrunning one:

- the **slug** is the task's full name (namespace included) slugified, at most 50
  characters (a longer one ends in a hash of the whole name);
- the **schedule** is the task's ``cron`` expression with its ``timezone``, or its
  ``every`` interval in whole days, hours or minutes (Sentry has no seconds: an
  interval under a minute, or not a whole number of them, is rounded up to minutes);
- ``checkin_margin`` is the task's grace in minutes, rounded up (at least 1);
- ``max_runtime`` is the task's ``timeout`` in minutes, rounded up; without one it
  is left to Sentry's default, since a lease is renewed as long as its run lives.

``capture_checkin`` only queues an envelope for the SDK's own transport thread,
so the check-in is made on the thread that emits the event (the run's worker
for the start, the recorder for the end) without a network call on it.
Every replica checks in for the runs it executes, so one check-in pair per
attempt reaches Sentry from the whole fleet.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import unicodedata
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Literal

from sentry_sdk.crons import capture_checkin
from sentry_sdk.crons.consts import MonitorStatus

from cronlease._events import Event, RunFinished, RunStarted
from cronlease._task import Task

if TYPE_CHECKING:
    from sentry_sdk._types import MonitorConfig

    from cronlease._scheduler import Scheduler

__all__ = [
    "MAX_SLUG_LENGTH",
    "SentryCrons",
    "instrument",
    "monitor_config",
    "monitor_slug",
    "task_named",
]

#: Sentry refuses longer monitor slugs
MAX_SLUG_LENGTH = 50

_Key = tuple[str, int, int, int]


def monitor_slug(full_name: str) -> str:
    """The task's name as a Sentry slug: lowercase ASCII letters, digits, ``-`` and ``_``."""
    ascii_name = unicodedata.normalize("NFKD", full_name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9_]+", "-", ascii_name.lower()).strip("-")
    if slug and len(slug) <= MAX_SLUG_LENGTH and slug == full_name:
        return slug
    # two names that slugify alike ("a:b", "a b"), or a cut one, stay two monitors
    digest = hashlib.sha256(full_name.encode()).hexdigest()[:8]
    return f"{slug[: MAX_SLUG_LENGTH - 9].rstrip('-')}-{digest}".lstrip("-")


def _minutes(seconds: float) -> int:
    return max(1, math.ceil(seconds / 60 - 1e-9))


def monitor_config(task: Task, now: datetime | None = None) -> MonitorConfig:
    """What Sentry should expect of ``task``'s monitor (see the module's docstring)."""
    schedule = task.schedule
    when = now or datetime.now(timezone.utc)
    config: MonitorConfig = {
        # a jittered run starts up to `jitter` after its slot, and its grace counts
        # from there: without it Sentry would call a late jittered start missed
        "checkin_margin": _minutes(task.jitter + task.grace_for(when)),
        "timezone": schedule.timezone,
    }
    if schedule.kind == "cron":
        config["schedule"] = {"type": "crontab", "value": schedule.expression}
    else:
        assert schedule.interval is not None  # an "every" schedule has one
        seconds = schedule.interval.total_seconds()
        units: tuple[tuple[Literal["day", "hour", "minute"], int], ...] = (
            ("day", 86400),
            ("hour", 3600),
            ("minute", 60),
        )
        for unit, size in units:
            if seconds >= size and seconds % size == 0:
                config["schedule"] = {
                    "type": "interval",
                    "value": int(seconds // size),
                    "unit": unit,
                }
                break
        else:
            config["schedule"] = {"type": "interval", "value": _minutes(seconds), "unit": "minute"}
    if task.timeout is not None:
        config["max_runtime"] = _minutes(task.timeout)
    return config


def task_named(scheduler: Scheduler, full_name: str) -> Task | None:
    """The declared task of that full name; None for cronlease's own (housekeeping, ...)."""
    prefix = f"{scheduler.namespace}:" if scheduler.namespace else ""
    if not full_name.startswith(prefix):
        return None
    task = scheduler.tasks.get(full_name[len(prefix) :])
    return task if task is not None and task.full_name == full_name else None


class SentryCrons:
    """The check-ins of one scheduler's runs; :meth:`close` stops them."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._lock = threading.Lock()
        # the in_progress check-in of each attempt still running, for its closing one
        self._open: dict[_Key, str] = {}
        self._unsubscribe: Callable[[], None] | None = scheduler.listen(
            self._on_event, RunStarted, RunFinished
        )

    def _task(self, full_name: str) -> Task | None:
        return task_named(self._scheduler, full_name)

    def _on_event(self, event: Event) -> None:
        if not isinstance(event, (RunStarted, RunFinished)):
            return
        task = self._task(event.task)
        if task is None:  # cronlease's own tasks (housekeeping, the stuck watcher)
            return
        key = (event.task, event.slot, event.fence, event.attempt)
        slug, config = monitor_slug(task.full_name), monitor_config(task)
        if isinstance(event, RunStarted):
            check_in = capture_checkin(
                monitor_slug=slug, status=MonitorStatus.IN_PROGRESS, monitor_config=config
            )
            if check_in is not None:
                with self._lock:
                    self._open[key] = check_in
            return
        with self._lock:
            started = self._open.pop(key, None)
        capture_checkin(
            monitor_slug=slug,
            check_in_id=started,  # None: a run started before instrument(), one check-in
            status=MonitorStatus.OK if event.outcome == "succeeded" else MonitorStatus.ERROR,
            duration=event.duration,
            monitor_config=config,
        )

    @property
    def open(self) -> int:
        """Attempts checked in as in progress and not yet closed."""
        return len(self._open)

    def close(self) -> None:
        """Stop checking in (the runs in progress get no closing check-in from here)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None


def instrument(scheduler: Scheduler) -> SentryCrons:
    """Check in every run of ``scheduler`` to Sentry Crons; call after ``sentry_sdk.init``."""
    return SentryCrons(scheduler)
