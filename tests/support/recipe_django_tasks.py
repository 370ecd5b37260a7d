"""Declares the ledger task on the example Django project's scheduler."""

from __future__ import annotations

from periodic.cron import scheduler

from tests.support.recipes import attach

attach(scheduler)
