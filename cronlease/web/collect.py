"""The data the status page shows: the status model as JSON, with this replica's state.

Reads only (never creates tables); the model has already scrubbed the
database password from any text that came from the driver or a task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from cronlease._lease.store import LeaseStore
from cronlease._run.housekeeping import HOUSEKEEPING_TASK
from cronlease._run.watcher import STUCK_WATCHER_TASK
from cronlease._scheduler import Scheduler
from cronlease._status import MIN_SCRUBBED_PASSWORD as MIN_SCRUBBED_PASSWORD
from cronlease._status import DeclaredTask, health_json, read_status, report_json


class PageSource(Protocol):
    """What the page is built from (a :class:`cronlease.web.app.StatusPage`)."""

    @property
    def store(self) -> LeaseStore: ...

    scheduler: Scheduler | None
    namespace: str | None
    runs: int
    title: str

    def declared_tasks(self) -> Sequence[DeclaredTask] | None: ...


def collect_status(page: PageSource) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data. Reads only; never raises StoreError."""
    report = read_status(
        page.store,
        page.declared_tasks(),
        namespace=page.namespace,
        internal=(HOUSEKEEPING_TASK, STUCK_WATCHER_TASK),
        runs=page.runs,
        clock=True,
        abandoned=True,
        empty_without_tables=True,  # a database no replica has used yet is shown empty
    )
    result: dict[str, Any] = {**report_json(report), "title": page.title, "replica": None}
    scheduler = page.scheduler
    if scheduler is not None:
        result["replica"] = {
            "holder": scheduler.holder,
            "running": scheduler.running,
            "runs_in_progress": scheduler.running_tasks,
            "counters": dict(sorted(scheduler.stats.snapshot().items())),
            # the page already says the database is unavailable: no second read to fail
            "health": None if report.database_error else health_json(scheduler.health()),
        }
    return result
