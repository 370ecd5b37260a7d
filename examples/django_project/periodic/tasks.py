"""Periodic tasks of this app: each tick runs once across all workers and replicas."""

from __future__ import annotations

import logging
import os

from cronlease import RunContext
from periodic.cron import scheduler

log = logging.getLogger(__name__)


@scheduler.task(every="30s")
def clear_expired_sessions(ctx: RunContext) -> None:
    log.info("clearing sessions for %s on pid %s", ctx.scheduled_for.isoformat(), os.getpid())


@scheduler.task(cron="0 3 * * *", timezone="Europe/Istanbul", name="nightly-report")
def nightly_report() -> None:
    log.info("nightly report")
