"""Declares the ledger task on the example Django project's scheduler (discovered as
the example's own periodic/tasks.py is)."""

from __future__ import annotations

from cronlease.contrib.django import scheduler
from tests.support.recipes import attach

attach(scheduler)
