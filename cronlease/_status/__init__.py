"""One status model for every surface: ``cronlease status``/``history``, the page, health().

The modules, one job each:

- ``rules``: how an error is summarized, a holder shown, a namespace matched,
  a tick judged overdue;
- ``model``: the frozen values (:class:`TaskStatus`, :class:`RunStatus`,
  :class:`StatusReport`, :class:`Health`);
- ``build``: :func:`build_report` (rows in, report out) and :func:`read_status`
  (reads the store, then builds);
- ``text`` and ``encode``: the model as text and as JSON, for every surface alike.

The surfaces read a report and format it; none derives a value of its own.
"""

from __future__ import annotations

from cronlease._status.build import Snapshot, build_report, read_snapshot, read_status
from cronlease._status.encode import health_json, report_json, run_json, task_json
from cronlease._status.model import (
    Health,
    RunStatus,
    StatusReport,
    TaskState,
    TaskStatus,
    by_slot,
)
from cronlease._status.rules import (
    MIN_SCRUBBED_PASSWORD,
    DeclaredTask,
    Scrubber,
    full_name,
    holder_id,
    in_namespace,
    is_overdue,
    summarize_error,
)
from cronlease._status.text import format_duration, format_time, lease_text, zone_of

__all__ = [
    "MIN_SCRUBBED_PASSWORD",
    "DeclaredTask",
    "Health",
    "RunStatus",
    "Scrubber",
    "Snapshot",
    "StatusReport",
    "TaskState",
    "TaskStatus",
    "build_report",
    "by_slot",
    "format_duration",
    "format_time",
    "full_name",
    "health_json",
    "holder_id",
    "in_namespace",
    "is_overdue",
    "lease_text",
    "read_snapshot",
    "read_status",
    "report_json",
    "run_json",
    "summarize_error",
    "task_json",
    "zone_of",
]
