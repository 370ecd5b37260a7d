"""Health: is the fleet running its tasks, and can this replica reach the database?

Usable as a Kubernetes probe through :meth:`cronlease.Scheduler.health` or
``cronlease status --check``. A task is *overdue* when a tick is due, later
than its grace, after the last slot the fleet took, and no run holds its lease.
Paused tasks are never overdue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from cronlease._lease.model import LeaseInfo
from cronlease._task import Task
from cronlease._timing.schedule import slot_of, time_of_slot

__all__ = ["Health", "overdue_tasks"]


@dataclass(frozen=True)
class Health:
    """``ok`` is False when any problem is listed."""

    ok: bool
    problems: tuple[str, ...]
    overdue: tuple[str, ...] = ()
    database_down_for: float | None = None


def overdue_tasks(
    tasks: Iterable[Task],
    rows: Mapping[str, LeaseInfo],
    *,
    now: datetime,
    db_now: float,
    since: datetime | None = None,
) -> list[str]:
    """Names of tasks with a tick overdue by more than its grace.

    ``since`` ignores fire times before it (e.g. before this replica started,
    when a task that never ran has no cursor yet).
    """
    overdue = []
    for task in tasks:
        row = rows.get(task.full_name)
        if row is not None and (row.paused or row.expires_at >= db_now):
            continue  # paused, or a run holds the lease (ticks inside it are skipped)
        cursor = row.slot if row is not None and row.slot >= 0 else None
        floors = [t for t in (since, None if cursor is None else time_of_slot(cursor)) if t]
        if not floors:
            continue
        # The first tick after the last one taken should have started within its grace.
        expected = task.schedule.next_fire_time(max(floors))
        if expected is None or expected > now:
            continue
        if cursor is not None and slot_of(expected) <= cursor:
            continue
        if (now - expected).total_seconds() > task.grace_for(expected):
            overdue.append(task.full_name)
    return overdue
