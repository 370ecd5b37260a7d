"""The rules every status surface shares: namespaces, overdue ticks, the runs to read
for a failure streak (the streak itself, error summaries and holders are
:mod:`cronlease._lease.runs`, shared with the engine's log lines).

Each rule lives here once, so the CLI, the page and the health probe cannot
drift apart again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from cronlease._lease.model import LeaseInfo
from cronlease._lease.runs import (
    FAILURE_OUTCOMES,
    STREAK_NEUTRAL_OUTCOMES,
    failure_streak,
    holder_id,
    summarize_error,
)
from cronlease._lease.store import LeaseStore
from cronlease._safe_text import MIN_SCRUBBED_PASSWORD, redact_secrets
from cronlease._task import Task
from cronlease._timing.jitter import start_after
from cronlease._timing.schedule import Schedule, slot_of, time_of_slot

__all__ = [
    "FAILURE_OUTCOMES",
    "MIN_SCRUBBED_PASSWORD",
    "STREAK_NEUTRAL_OUTCOMES",
    "DeclaredTask",
    "Scrubber",
    "StoredTask",
    "failure_streak",
    "full_name",
    "holder_id",
    "in_namespace",
    "is_overdue",
    "streak_runs",
    "summarize_error",
]


def streak_runs(alert_after: Iterable[int]) -> int:
    """Runs to read per task to judge ``alert_after`` failures in a row: the largest, and
    one more for a run still going (a running run does not break a streak)."""
    return max(alert_after, default=1) + 1


def full_name(name: str, namespace: str | None) -> str:
    """The stored name of a task declared as ``name`` in ``namespace``."""
    return f"{namespace}:{name}" if namespace else name


def in_namespace(name: str, namespace: str | None) -> bool:
    """Whether a lease row belongs to ``namespace`` (no namespace: the rows without one)."""
    if namespace:
        return name.startswith(f"{namespace}:")
    return ":" not in name


@dataclass(frozen=True)
class Scrubber:
    """Hides the database password in text that came from a driver or a task: as it is
    and URL-encoded if it has at least MIN_SCRUBBED_PASSWORD characters, and any
    URL's password or ``password=`` value whatever its length (:mod:`cronlease._safe_text`)."""

    password: str | None

    def __post_init__(self) -> None:
        if self.password is not None and len(self.password) < MIN_SCRUBBED_PASSWORD:
            object.__setattr__(self, "password", None)

    @classmethod
    def of(cls, store: LeaseStore) -> Scrubber:
        password = store.engine.url.password
        return cls(None if password is None else str(password))

    def __call__(self, text: str) -> str:
        return redact_secrets(text, self.password)


@dataclass(frozen=True)
class DeclaredTask:
    """A task whose status is asked for: declared by a scheduler, a config file or a page.

    ``name`` is the stored name (namespace included), ``task`` the name as
    declared (default: ``name``); ``grace`` None means the schedule's;
    ``alert_after`` the failures in a row that make it ``failing``; ``roles`` the
    replica roles that may run it (none: any replica).
    """

    name: str
    schedule: Schedule
    task: str = ""
    enabled: bool = True
    grace: float | None = None
    alert_after: int = 1
    #: only replicas with one of these run it (cronlease/_roles.py)
    roles: tuple[str, ...] = ()
    #: seconds at most a tick starts after its slot (cronlease/_timing/jitter.py)
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a declared task needs its stored name")
        if not self.task:
            object.__setattr__(self, "task", self.name)
        if self.grace is not None and not self.grace > 0:
            raise ValueError(f"grace must be positive, got {self.grace!r}")
        if not _counts_from_one(self.alert_after):
            raise ValueError(f"alert_after counts from 1, got {self.alert_after!r}")

    @classmethod
    def of(cls, task: Task) -> DeclaredTask:
        return cls(
            name=task.full_name,
            schedule=task.schedule,
            task=task.name,
            grace=task.grace,
            alert_after=task.alert_after,
            enabled=task.enabled,
            roles=task.roles,
            jitter=task.jitter,
        )

    def grace_for(self, fire_time: datetime) -> float:
        return self.grace if self.grace is not None else self.schedule.grace(fire_time)

    def start_for(self, fire_time: datetime) -> float:
        """Seconds after ``fire_time`` its tick starts: its jitter offset (0 without)."""
        return start_after(self.name, self.schedule, fire_time, self.jitter)


@dataclass(frozen=True)
class StoredTask:
    """A schedule row (docs/design.md §5.37) as the status model judges it: a declared task
    whose schedule and options are the row's.

    ``declared`` is the task a replica builds from it, None when the row is ``invalid``
    (then no replica runs it; ``invalid`` says why, and ``schedule`` is the row's text).
    ``offered``: a live replica offers its ``job`` (read with the rows).
    """

    name: str
    task: str
    job: str
    schedule: str
    enabled: bool
    declared: DeclaredTask | None
    invalid: str | None = None
    offered: bool = True

    def __post_init__(self) -> None:
        if (self.declared is None) == (self.invalid is None):
            raise ValueError("a schedule row is invalid exactly when no task is made of it")

    @property
    def alert_after(self) -> int:
        return 1 if self.declared is None else self.declared.alert_after

    @property
    def unoffered(self) -> bool:
        """The one rule of a row no replica runs for want of its job: enabled, valid, and
        no live replica offers the job (none up at all, or none of this code)."""
        return self.enabled and self.invalid is None and not self.offered


def is_overdue(
    task: DeclaredTask,
    row: LeaseInfo | None,
    *,
    db_now: float,
    since: datetime | None = None,
) -> bool:
    """Whether the first tick after the last one the fleet took is later than its grace,
    by the database clock (``db_now``).

    The database's, not this host's: a replica whose wall clock stepped back an
    hour judged by its own clock that nothing was due yet while the fleet ran
    nothing. Paused and disabled tasks are never overdue, nor is one whose lease a
    run holds (ticks inside a held lease are skipped). ``since`` ignores fire
    times before it (e.g. before this replica started, when a task that never
    ran has no slot cursor yet).
    """
    if not task.enabled:
        return False
    if row is not None and (row.paused or row.expires_at >= db_now):
        return False
    cursor = row.slot if row is not None and row.slot >= 0 else None
    # the lease's last expiry too: ticks inside a held lease are skipped, and a resume
    # marks the lease free at that moment (ticks due while paused were skipped on purpose)
    freed = (
        datetime.fromtimestamp(row.expires_at, timezone.utc)
        if row is not None and row.expires_at > 0
        else None
    )
    floors = [t for t in (since, None if cursor is None else time_of_slot(cursor), freed) if t]
    if not floors:
        return False
    now = datetime.fromtimestamp(db_now, timezone.utc)
    expected = task.schedule.next_fire_time(max(floors))
    if expected is None or expected > now:
        return False
    if cursor is not None and slot_of(expected) <= cursor:
        return False
    # the grace counts from the jittered start, as admission's does (design §5.33)
    late = (now - expected).total_seconds() - task.start_for(expected)
    return late > task.grace_for(expected)


def _counts_from_one(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= 1
