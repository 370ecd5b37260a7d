"""The status model: what :meth:`Scheduler.health() <cronlease.Scheduler.health>`, the
status page and ``cronlease status --json`` report.

:class:`Health` is the replica's verdict (``ok``, the overdue and failing
tasks); :class:`StatusReport` the fleet's view of every task
(:class:`TaskStatus`, with its recent runs as :class:`RunStatus`);
:class:`ClockCheck` the last measure of this host's clock against the
database's (``Scheduler.clock_skew``); :class:`DeclaredTask` what the status
page of a bare :class:`~cronlease.store.LeaseStore` is told about a task;
:class:`Snapshot` the rows one read returns, which ``health(snapshot=...)``
judges without reading again; :class:`StoredTask` a schedule kept in the database as
the report judges it.
"""

from __future__ import annotations

from cronlease._status import (
    DeclaredTask,
    Health,
    RunStatus,
    Snapshot,
    StatusReport,
    StoredTask,
    TaskStatus,
)
from cronlease._timing.clock import ClockCheck

__all__ = [
    "ClockCheck",
    "DeclaredTask",
    "Health",
    "RunStatus",
    "Snapshot",
    "StatusReport",
    "StoredTask",
    "TaskStatus",
]
