"""One status model for every surface: ``cronlease status``/``history``, the page, health().

The modules, one job each:

- ``rules``: how an error is summarized, a holder shown, a namespace matched,
  a tick judged overdue, a failure streak counted;
- ``model``: the frozen values (:class:`TaskStatus`, :class:`RunStatus`,
  :class:`StatusReport`, :class:`Health`);
- ``build``: :func:`build_report` (rows in, report out) and :func:`read_status`
  (reads the store, then builds);
- ``text`` and ``encode``: the model as text and as JSON, for every surface alike;
- ``cells``: the model as table cells, for the commands and the Django admin pages.

The surfaces read a report and format it; none derives a value of its own.
"""

from __future__ import annotations

# the page shows these red; the outcome table decides, the read model passes it on
from cronlease._lease.outcomes import BAD_OUTCOMES, FINAL_OUTCOMES
from cronlease._status.build import Snapshot, build_report, read_snapshot, read_status
from cronlease._status.encode import health_json, report_json, run_json, task_json
from cronlease._status.model import (
    RECENT_OUTCOMES,
    Health,
    RunStatus,
    ShownState,
    StatusReport,
    TaskSource,
    TaskState,
    TaskStatus,
    by_slot,
    failing_problem,
    invalid_problem,
)
from cronlease._status.rules import (
    FAILURE_OUTCOMES,
    MIN_SCRUBBED_PASSWORD,
    DeclaredTask,
    Scrubber,
    StoredTask,
    failure_streak,
    full_name,
    holder_id,
    in_namespace,
    is_overdue,
    streak_runs,
    summarize_error,
)
from cronlease._status.text import (
    format_duration,
    format_time,
    lease_text,
    no_job_words,
    no_replica_words,
    zone_of,
)

__all__ = [
    "BAD_OUTCOMES",
    "FAILURE_OUTCOMES",
    "FINAL_OUTCOMES",
    "MIN_SCRUBBED_PASSWORD",
    "RECENT_OUTCOMES",
    "DeclaredTask",
    "Health",
    "RunStatus",
    "Scrubber",
    "ShownState",
    "Snapshot",
    "StatusReport",
    "StoredTask",
    "TaskSource",
    "TaskState",
    "TaskStatus",
    "build_report",
    "by_slot",
    "failing_problem",
    "failure_streak",
    "format_duration",
    "format_time",
    "full_name",
    "health_json",
    "holder_id",
    "in_namespace",
    "invalid_problem",
    "is_overdue",
    "lease_text",
    "no_job_words",
    "no_replica_words",
    "read_snapshot",
    "read_status",
    "report_json",
    "run_json",
    "streak_runs",
    "summarize_error",
    "task_json",
    "zone_of",
]
