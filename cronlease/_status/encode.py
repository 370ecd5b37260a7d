"""The status model as JSON-ready data: one shape for ``cronlease status --json`` and the page.

Times are :func:`~cronlease._status.text.format_time` strings, durations
seconds rounded to the millisecond.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cronlease._status.model import Health, RunStatus, StatusReport, TaskStatus
from cronlease._status.text import format_time

__all__ = ["health_json", "report_json", "run_json", "task_json"]


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else format_time(moment)


def run_json(run: RunStatus) -> dict[str, Any]:
    return {
        "name": run.name,
        "slot": run.slot,
        "scheduled_for": format_time(run.scheduled_for),
        "manual": run.manual,
        "attempt": run.attempt,
        "fence": run.fence,
        "holder": run.holder,
        "started_at": format_time(run.started_at),
        "finished_at": _time(run.finished_at),
        "duration": None if run.duration is None else round(run.duration, 3),
        "outcome": run.outcome,
        "error": run.error,
        "error_summary": run.error_summary,
    }


def task_json(task: TaskStatus) -> dict[str, Any]:
    last, success = task.last_run, task.last_success
    return {
        "name": task.name,
        "task": task.task,
        "declared": task.declared,
        "source": task.source,
        "job": task.job,
        "invalid": task.invalid,
        "unoffered": task.unoffered,
        "enabled": task.enabled,
        "schedule": task.schedule,
        "state": task.state,
        "shown_state": task.shown_state,
        "paused": task.paused,
        "running": task.running,
        "overdue": task.overdue,
        "roles": list(task.roles),
        "no_live_replica": task.no_live_replica,
        "holder": task.holder,
        "last_holder": task.last_holder,
        "fence": task.fence,
        "last_slot": task.last_slot,
        "last_slot_time": _time(task.last_slot_time),
        "lease_expires_at": _time(task.lease_expires_at),
        "lease_expires_in": task.lease_expires_in,
        "next_fire_time": _time(task.next_fire),
        "last_run": None if last is None else run_json(last),
        "last_success_at": None if success is None else _time(success.finished_at),
        "error_summary": task.error_summary,
        "abandoned": task.abandoned,
        "failing": task.failing,
        "consecutive_failures": task.consecutive_failures,
        "consecutive_failures_at_least": task.streak_capped,
        "alert_after": task.alert_after,
        "recent_outcomes": list(task.recent_outcomes),
        "skipped": dict(sorted(task.skipped.items())),
        "runs": [run_json(run) for run in task.runs],
    }


def health_json(health: Health) -> dict[str, Any]:
    return {
        "ok": health.ok,
        "problems": list(health.problems),
        "overdue": list(health.overdue),
        "failing": list(health.failing),
        "invalid": list(health.invalid),
        "database_down_for": health.database_down_for,
    }


def report_json(report: StatusReport) -> dict[str, Any]:
    clock = report.clock
    skew = None if clock is None else {"skew": clock.skew, "round_trip": clock.round_trip}
    return {
        "generated_at": format_time(report.generated_at),
        "database": report.database,
        "database_time": _time(report.database_time),
        "database_error": report.database_error,
        "namespace": report.namespace,
        "clock_skew": skew,
        "overdue": list(report.overdue),
        "failing": list(report.failing),
        "invalid": list(report.invalid),
        "tasks": [task_json(task) for task in report.tasks],
        "orphaned": [task_json(task) for task in report.orphaned],
    }
