"""The project's scheduler. Task modules (settings.CRONLEASE_TASK_MODULES) declare on it."""

from __future__ import annotations

from django.conf import settings

from cronlease import Scheduler

scheduler = Scheduler(settings.CRONLEASE_DATABASE_URL)
