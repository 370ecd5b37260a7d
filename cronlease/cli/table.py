"""The ``status`` table on a terminal: a narrow view that fits 100 columns, a wide one
with every column (the cells are :mod:`cronlease._status.cells`').

The narrow view fits :data:`NARROW_WIDTH` columns: when the cells are wider,
the task, schedule and holder columns give way, each cut cell ending in an
ellipsis (the wide view and ``--json`` have them whole).
"""

from __future__ import annotations

from collections.abc import Sequence

from cronlease._service import command_line
from cronlease._status import StatusReport, TaskStatus
from cronlease._status.cells import orphan_rows, status_rows
from cronlease.cli.output import fit_table, print_table

__all__ = [
    "NARROW_WIDTH",
    "ORPHANS_SHOWN",
    "orphans_summary",
    "orphans_table",
    "status_table",
]

NARROW_WIDTH = 100
#: orphaned rows named in the summary; ``status --orphaned`` lists them all
ORPHANS_SHOWN = 5
# (column, its narrowest) in the order they give way
_SHRINKABLE = {"TASK": 12, "SCHEDULE": 10, "HOLDER": 8}


def status_table(report: StatusReport, *, wide: bool) -> None:
    if wide:
        print_table(*status_rows(report, wide=True))
        return
    headers, rows = status_rows(report, wide=False)
    print_table(headers, fit_table(headers, rows, NARROW_WIDTH, _SHRINKABLE))


def orphans_table(rows: Sequence[TaskStatus]) -> None:
    print_table(*orphan_rows(rows))


def orphans_summary(rows: Sequence[TaskStatus]) -> str:
    """A few lines however many rows: a used database can have thousands."""
    names = ", ".join(row.name for row in rows[:ORPHANS_SHOWN])
    more = f" and {len(rows) - ORPHANS_SHOWN} more" if len(rows) > ORPHANS_SHOWN else ""
    return (
        f"{len(rows)} orphaned lease row(s), of tasks no longer declared: {names}{more}\n"
        f"  list them: {command_line('status --orphaned')}; "
        f"remove one: {command_line('forget TASK')}"
    )
