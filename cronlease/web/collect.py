"""The data the status page shows: the status model as JSON, with this replica's state.

Reads only (never creates tables); the model has already scrubbed the
database password from any text that came from the driver or a task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Protocol

from cronlease._scheduler import Scheduler
from cronlease._service import INTERNAL_TASKS, connection
from cronlease._status import MIN_SCRUBBED_PASSWORD as MIN_SCRUBBED_PASSWORD
from cronlease._status import (
    RECENT_OUTCOMES,
    DeclaredTask,
    Scrubber,
    build_report,
    health_json,
    read_snapshot,
    report_json,
    streak_runs,
)
from cronlease._timing.words import describe
from cronlease.store import LeaseStore


class PageSource(Protocol):
    """What the page is built from (a :class:`cronlease.web.app.StatusPage`)."""

    @property
    def store(self) -> LeaseStore: ...

    reader: LeaseStore

    scheduler: Scheduler | None
    namespace: str | None
    runs: int
    title: str

    def declared_tasks(self) -> Sequence[DeclaredTask] | None: ...


def collect_status(page: PageSource) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data, from one snapshot read through
    the page's own pool (the replica's health too). Reads only; never raises StoreError."""
    return _collect(page, page.declared_tasks(), page.runs)


def collect_task(page: PageSource, name: str, runs: int) -> dict[str, Any] | None:
    """The status of one declared task (full name) with its last ``runs`` runs, or None
    when no such task is declared. The same data as :func:`collect_status`, one task long."""
    declared = page.declared_tasks()
    if declared is None:
        return None
    only = [task for task in declared if task.name == name]
    return _collect(page, only, runs, orphans=False) if only else None


def _collect(
    page: PageSource,
    declared: Sequence[DeclaredTask] | None,
    runs: int,
    orphans: bool = True,
) -> dict[str, Any]:
    now = datetime.now(timezone.utc)
    scheduler = page.scheduler
    # the strip shows the last RECENT_OUTCOMES; the failure streak needs alert_after + 1
    alerts = (task.alert_after for task in declared or ())
    snapshot = read_snapshot(
        page.reader,
        declared,
        runs=max(runs, RECENT_OUTCOMES, streak_runs(alerts)),
        orphans=orphans,
        # a replica measures its clock every 5 minutes: shown as measured, not again
        clock=scheduler is None,
        abandoned=True,
        empty_without_tables=True,  # a database no replica has used yet is shown empty
        fleet=True,  # a task with roles no live replica has is said so
        namespace=page.namespace,
        schedules=orphans,  # the overview shows the schedule rows as tasks (§5.37)
    )
    if scheduler is not None and snapshot.error is None:
        snapshot = replace(snapshot, clock=scheduler.clock_skew)
    report = build_report(
        snapshot,
        declared,
        database=page.store.url,
        now=now,
        namespace=page.namespace,
        internal=INTERNAL_TASKS,
        scrub=Scrubber.of(page.store),
        skipped=None if scheduler is None else scheduler.skipped_ticks,
    )
    result: dict[str, Any] = {**report_json(report), "title": page.title, "replica": None}
    stored = [row.declared for row in snapshot.schedules or () if row.declared is not None]
    words = {task.name: describe(task.schedule) for task in (*(declared or ()), *stored)}
    for task in result["tasks"]:
        task["schedule_words"] = words.get(task["name"])
    if scheduler is not None:
        result["replica"] = {
            "holder": scheduler.holder,
            "running": scheduler.running,
            "runs_in_progress": scheduler.running_tasks,
            "counters": dict(sorted(scheduler.stats.snapshot().items())),
            # the page already says the database is unavailable: no health to judge
            "health": (
                None if report.database_error else health_json(scheduler.health(snapshot=snapshot))
            ),
            "connection": connection(scheduler),
        }
    return result
