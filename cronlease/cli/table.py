"""The ``status`` table: a narrow view that fits 100 columns, a wide one with every column.

One time format per view: the narrow view says how long ago or how soon
("3m ago", "in 12s"), read at a glance; the wide view and ``--json`` give ISO
8601 instants (what a script or a bug report needs). Durations (``LAST RUN``)
are durations in both.

The narrow view fits :data:`NARROW_WIDTH` columns: when the cells are wider,
the task, schedule and holder columns give way, each cut cell ending in an
ellipsis (the wide view and ``--json`` have them whole). The state column is
the model's ``shown_state``, what to look at first: ``paused``, ``failing``
(its last ``alert_after`` runs failed), ``overdue``, ``running`` or ``idle``;
the wide view adds the failure streak (``FAILURES``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from cronlease._status import StatusReport, TaskStatus, format_duration
from cronlease.cli.output import fit_table, print_table, relative, short_time

__all__ = [
    "NARROW_WIDTH",
    "ORPHANS_SHOWN",
    "orphans_summary",
    "orphans_table",
    "status_rows",
    "status_table",
]

NARROW_WIDTH = 100
#: orphaned rows named in the summary; ``status --orphaned`` lists them all
ORPHANS_SHOWN = 5
# (column, its narrowest) in the order they give way
_SHRINKABLE = {"TASK": 12, "SCHEDULE": 10, "HOLDER": 8}
_CRON = re.compile(r"^cron '(?P<expression>.*)' \((?P<zone>.*)\)$")


def status_table(report: StatusReport, *, wide: bool) -> None:
    if wide:
        print_table(*status_rows(report, wide=True))
        return
    headers, rows = status_rows(report, wide=False)
    print_table(headers, fit_table(headers, rows, NARROW_WIDTH, _SHRINKABLE))


def status_rows(report: StatusReport, *, wide: bool) -> tuple[list[str], list[list[str]]]:
    """The headers and cells of the table, whole (a terminal's width not applied): what
    ``status`` prints and the Django admin page shows (cronlease/contrib/django)."""
    if wide:
        return list(_WIDE), [_wide_row(task) for task in report.tasks]
    return list(_NARROW), [_narrow_row(task, report) for task in report.tasks]


def orphans_table(rows: Sequence[TaskStatus]) -> None:
    print_table(
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


def orphans_summary(rows: Sequence[TaskStatus]) -> str:
    """A few lines however many rows: a used database can have thousands."""
    names = ", ".join(row.name for row in rows[:ORPHANS_SHOWN])
    more = f" and {len(rows) - ORPHANS_SHOWN} more" if len(rows) > ORPHANS_SHOWN else ""
    return (
        f"{len(rows)} orphaned lease row(s), of tasks no longer declared: {names}{more}\n"
        "  list them: cronlease status --orphaned; remove one: cronlease forget TASK"
    )


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
