"""A replica's first contact with the database: schedule conflicts, then catch-up.

Catch-up is one more way a run begins: each missed tick goes down the tick
path as a ``catch_up`` tick (a batch of one, exempt from the grace), so the
slot gate makes it once fleet-wide even when many replicas start together
(docs/design.md §5.8).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from datetime import datetime, timezone

from cronlease._lease.model import LeaseInfo
from cronlease._lease.store import LeaseStore
from cronlease._run.runner import TickRunner
from cronlease._stats import Stats
from cronlease._task import Task
from cronlease.errors import StoreError

__all__ = ["report_schedule_conflicts", "start_catch_up"]

logger = logging.getLogger("cronlease")


def report_schedule_conflicts(
    rows: list[LeaseInfo], tasks: Mapping[str, Task], stats: Stats
) -> None:
    """Log each task this replica declares differently from the schedule it last ran with."""
    for row in rows:
        task = tasks.get(row.name)
        if task and row.fingerprint and row.fingerprint != task.schedule.fingerprint:
            stats.add("schedule_conflicts")
            logger.error(
                "task %s is declared here as %r but was last run as %r: replicas disagree "
                "(during a rolling deploy both schedules may run)",
                row.name,
                task.schedule.fingerprint,
                row.fingerprint,
            )


def start_catch_up(
    runner: TickRunner, store: LeaseStore, tasks: Mapping[str, Task], stats: Stats
) -> None:
    """Run the ticks missed while every replica was down, per each task's policy, one
    thread per task that has any."""
    now = datetime.now(timezone.utc)
    try:
        rows = store.leases(sorted(tasks))
    except StoreError as exc:
        logger.warning("catch-up skipped: %s", exc)
        return
    for row in rows:
        task = tasks.get(row.name)
        missed = task.missed_ticks(row.slot, now) if task else []
        if task and missed:
            threading.Thread(
                target=_catch_up,
                args=(runner, task, missed, stats),
                name=f"cronlease-catchup-{task.name}",
                daemon=True,
            ).start()


def _catch_up(runner: TickRunner, task: Task, missed: list[datetime], stats: Stats) -> None:
    logger.info(
        "%s: %d tick(s) were missed while no replica ran it; catching up (%s)",
        task.full_name,
        len(missed),
        task.catchup,
    )
    for fire_time in missed:
        if runner.run_tick(task, fire_time, catch_up=True) is not None:
            stats.add("ticks_caught_up")
