"""Periodic tasks of this app, discovered as admin.py modules are: each tick runs once
across all workers and replicas."""

from __future__ import annotations

import logging
import os

from cronlease import RunContext
from cronlease.contrib.django import scheduler

log = logging.getLogger(__name__)  # "periodic.tasks": settings.LOGGING shows it


@scheduler.task(every="30s")
def clear_expired_sessions(ctx: RunContext) -> None:
    log.info("clearing sessions for %s on pid %s", ctx.scheduled_for.isoformat(), os.getpid())


@scheduler.job()
def export_report(customer: str, fmt: str = "csv") -> None:
    """A job, not a task: schedules kept in the database run it, added and changed in
    the admin ("Schedules" under cronlease) with the customer as an argument."""
    log.info("exporting the report of %s as %s", customer, fmt)
