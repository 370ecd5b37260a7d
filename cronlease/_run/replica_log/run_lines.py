"""The two log lines of every run, started and finished, telling who ran which tick.

From two replicas' logs one must tell who ran what: each line names the task,
the tick it ran for as a local ISO 8601 time in the task's zone (not a slot in
milliseconds), the replica (the holder id ``status`` shows), the fence and the
attempt; the finished line adds the outcome and the duration. The same facts go
in ``extra=`` fields for JSON formatters (docs/reference/log-lines.md, "Logging as JSON"):

``cronlease_task``, ``cronlease_scheduled_for``, ``cronlease_manual``,
``cronlease_replica``, ``cronlease_fence``, ``cronlease_attempt``, and on the
finished line ``cronlease_outcome`` and ``cronlease_duration`` (seconds).
"""

from __future__ import annotations

import logging
from typing import Any

from cronlease._lease.model import Lease, Outcome
from cronlease._lease.runs import holder_id
from cronlease._run.stopping import seconds_text
from cronlease._task import Task
from cronlease._timing.schedule import time_of_slot, zone_of

__all__ = ["log_finished", "log_interrupted", "log_started", "run_fields", "scheduled_text"]

logger = logging.getLogger("cronlease")


def scheduled_text(task: Task, lease: Lease) -> str:
    """The tick as a local time in the task's zone, to the second (to the millisecond
    when it has any: a manual run's slot is the moment it was asked for)."""
    moment = time_of_slot(lease.slot).astimezone(zone_of(task.schedule))
    return moment.isoformat(timespec="milliseconds" if moment.microsecond else "seconds")


def run_fields(task: Task, lease: Lease) -> dict[str, Any]:
    """The ``extra=`` fields both lines of a run carry."""
    return {
        "cronlease_task": task.full_name,
        "cronlease_scheduled_for": scheduled_text(task, lease),
        "cronlease_manual": lease.manual,
        "cronlease_replica": holder_id(lease.holder),
        "cronlease_fence": lease.fence,
        "cronlease_attempt": lease.attempt,
    }


def _what(fields: dict[str, Any]) -> str:
    tick = "manual run asked at" if fields["cronlease_manual"] else "tick"
    return (
        f"{tick} {fields['cronlease_scheduled_for']} replica={fields['cronlease_replica']} "
        f"fence={fields['cronlease_fence']} attempt={fields['cronlease_attempt']}"
    )


def log_started(task: Task, lease: Lease) -> None:
    if task.builtin or not logger.isEnabledFor(logging.INFO):  # a built-in's: every minute
        return
    fields = run_fields(task, lease)
    logger.info("%s: started, %s", task.full_name, _what(fields), extra=fields)


def log_finished(task: Task, lease: Lease, outcome: Outcome, duration: float) -> None:
    # a built-in's run is said only when it went wrong
    if (task.builtin and outcome == "succeeded") or not logger.isEnabledFor(logging.INFO):
        return
    fields = run_fields(task, lease)
    fields["cronlease_outcome"] = outcome
    fields["cronlease_duration"] = round(duration, 3)
    logger.info(
        "%s: %s in %.3f s, %s", task.full_name, outcome, duration, _what(fields), extra=fields
    )


def log_interrupted(
    task: Task, lease: Lease, duration: float, *, ended: bool, released: bool = False
) -> None:
    """The finished line of a run the replica's stop recorded ``interrupted`` (history
    says so): ``ended``, its task has returned (a command the stop terminated), and
    ``released``, its lease was released (a failed release was said just before); else
    its lease, no longer renewed, expires by itself."""
    fields = run_fields(task, lease)
    fields["cronlease_outcome"] = "interrupted"
    fields["cronlease_duration"] = round(duration, 3)
    expires = f"its lease expires within {seconds_text(lease.ttl)}"
    if ended:
        after = "its lease is released" if released else expires
    else:
        after = f"it ends with the process; {expires}"
    logger.warning(
        "%s: interrupted by shutdown after %s (recorded; %s), %s",
        task.full_name,
        seconds_text(duration),
        after,
        _what(fields),
        extra=fields,
    )
