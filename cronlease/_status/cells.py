"""The status model as table cells: what ``cronlease status`` and ``history`` print
and the Django admin pages show, cell for cell.

One time format per view: the narrow view says how long ago or how soon
("3m ago", "in 12s"), read at a glance; the wide view and ``--json`` give ISO
8601 instants (what a script or a bug report needs). Durations (``LAST RUN``)
are durations in both. The state column is the model's ``shown_state``, what to
look at first: ``paused``, ``failing`` (its last ``alert_after`` runs failed),
``overdue``, ``running`` or ``idle``; the wide view adds the failure streak
(``FAILURES``). Cells are whole: a terminal's width is the CLI's to apply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from cronlease._status.model import RunStatus, StatusReport, TaskStatus
from cronlease._status.text import format_duration, format_time, no_job_words, no_replica_words

__all__ = ["history_rows", "orphan_rows", "relative", "short_time", "status_rows", "task_notes"]

_CRON = re.compile(r"^cron '(?P<expression>.*)' \((?P<zone>.*)\)$")


def task_notes(report: StatusReport) -> list[str]:
    """What a state word does not say, a line per task below the table: no live replica
    can run it (roles), why a schedule row is invalid, no live replica offers its job."""
    notes = []
    for task in report.tasks:
        if task.no_live_replica:
            notes.append(f"{task.task}: {no_replica_words(task.roles)}")
        if task.invalid is not None:
            notes.append(f"{task.task}: invalid schedule, not run: {task.invalid}")
        if task.unoffered and task.job is not None:
            notes.append(f"{task.task}: {no_job_words(task.job)}")
    return notes


def status_rows(report: StatusReport, *, wide: bool) -> tuple[list[str], list[list[str]]]:
    """The headers and cells of the status table."""
    if wide:
        return list(_WIDE), [_wide_row(task) for task in report.tasks]
    return list(_NARROW), [_narrow_row(task, report) for task in report.tasks]


def orphan_rows(rows: Sequence[TaskStatus]) -> tuple[list[str], list[list[str]]]:
    """The headers and cells of ``status --orphaned``: lease rows of undeclared tasks."""
    return (
        ["TASK", "STATE", "HOLDER", "FENCE", "LAST SLOT", "ABANDONED", "LEASE UNTIL"],
        [
            [
                row.name,
                row.state,
                row.holder or "-",
                str(row.fence or "-"),
                short_time(row.last_slot_time),
                _count(row.abandoned),
                _lease_until(row),
            ]
            for row in rows
        ],
    )


def history_rows(runs: Sequence[RunStatus]) -> tuple[list[str], list[list[str]]]:
    """The headers and cells of a task's history."""
    headers = ["SCHEDULED FOR", "ATTEMPT", "OUTCOME", "DURATION", "FENCE", "HOLDER", "ERROR"]
    return headers, [
        [
            short_time(run.scheduled_for) + (" (manual)" if run.manual else ""),
            str(run.attempt),
            run.outcome,
            "-" if run.duration is None else format_duration(run.duration),
            str(run.fence),
            run.holder,
            (run.error_summary or "")[:100],
        ]
        for run in runs
    ]


def short_time(moment: datetime | None) -> str:
    """A time for a table cell: :func:`format_time` with a space for the ``T``."""
    return "-" if moment is None else format_time(moment).replace("T", " ")


def relative(moment: datetime, now: datetime) -> str:
    """How long ago or how soon, coarse enough to read at a glance: ``3m ago``, ``in 12s``."""
    seconds = (moment - now).total_seconds()
    if abs(seconds) < 1:
        return "now"
    span = _coarse(abs(seconds))
    return f"in {span}" if seconds > 0 else f"{span} ago"


def _coarse(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h" if hours else f"{days}d"


_NARROW = ["TASK", "SCHEDULE", "STATE", "LAST RUN", "NEXT", "HOLDER"]
_WIDE = [
    "TASK",
    "SCHEDULE",
    "STATE",
    "HOLDER",
    "FENCE",
    "LAST SLOT",
    "LAST RUN",
    "FAILURES",
    "ABANDONED",
    "LEASE UNTIL",
    "NEXT",
]


def _narrow_row(task: TaskStatus, report: StatusReport) -> list[str]:
    last = task.last_run
    # recorded instants are the database clock's; next fire times this host's
    recorded_now = report.database_time or report.generated_at
    if last is None:
        last_text = "never"
    else:
        last_text = f"{last.outcome} {relative(last.started_at, recorded_now)}"
    if task.enabled is False:
        next_text = "disabled"
    elif task.next_fire is None:
        next_text = "-"
    else:
        next_text = relative(task.next_fire, report.generated_at)
    return [
        task.task,
        _compact_schedule(task.schedule),
        task.shown_state,
        last_text,
        next_text,
        task.holder or "-",
    ]


def _wide_row(task: TaskStatus) -> list[str]:
    last = task.last_run
    if last is None:
        last_text = "never"
    elif last.duration is None:
        last_text = last.outcome
    else:
        last_text = f"{last.outcome} ({format_duration(last.duration)})"
    if last is not None and last.manual:
        last_text += " manual"
    schedule = task.schedule or "?"
    if task.enabled is False:
        schedule += " (disabled)"
    return [
        task.task,
        schedule,
        task.shown_state,
        task.holder or "-",
        str(task.fence or "-"),
        short_time(task.last_slot_time),
        last_text,
        _failures(task),
        _count(task.abandoned),
        _lease_until(task),
        short_time(task.next_fire),
    ]


def _compact_schedule(schedule: str | None) -> str:
    """``cron '0 3 * * *' (Europe/Istanbul)`` as ``0 3 * * * Europe/Istanbul`` (no UTC)."""
    if schedule is None:
        return "?"
    match = _CRON.match(schedule)
    if match is None:
        return schedule
    zone = match["zone"]
    return match["expression"] + ("" if zone == "UTC" else f" {zone}")


def _lease_until(task: TaskStatus) -> str:
    expires: datetime | None = task.lease_expires_at
    if expires is None:
        return "-"
    if task.lease_expires_in is not None and task.lease_expires_in <= 0:
        return "free"
    return short_time(expires)


def _failures(task: TaskStatus) -> str:
    """The failure streak: ``3`` runs in a row (``20+``: at least, more were not read)."""
    count = task.consecutive_failures
    if not count:
        return "-"
    return f"{count}+" if task.streak_capped else str(count)


def _count(count: int | None) -> str:
    return "-" if count is None else str(count)
