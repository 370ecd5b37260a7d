"""Start the scheduler when Django is ready, in every process that serves requests."""

from __future__ import annotations

import atexit
import logging
import os
import sys
from importlib import import_module

from django.apps import AppConfig
from django.conf import settings

log = logging.getLogger(__name__)


def should_start() -> bool:
    """True in a serving process: a gunicorn/uWSGI worker, or runserver's child process.

    manage.py sets ``CRONLEASE_AUTOSTART=0`` for every other command (migrate,
    shell, cronlease_run, ...). runserver's autoreloader runs ``ready()`` in
    its watching parent too; only the child (``RUN_MAIN=true``) serves.
    """
    if os.environ.get("CRONLEASE_AUTOSTART", "1") != "1":
        return False
    if "runserver" in sys.argv and "--noreload" not in sys.argv:
        return os.environ.get("RUN_MAIN") == "true"
    return True


class PeriodicConfig(AppConfig):
    name = "periodic"

    def ready(self) -> None:
        from periodic.cron import scheduler

        for module in settings.CRONLEASE_TASK_MODULES:
            import_module(module)  # declares its tasks
        if should_start():
            # Under gunicorn this runs in each worker, after the fork. (With --preload it
            # runs in the master; cronlease then restarts the scheduler in each worker.)
            scheduler.start()
            atexit.register(scheduler.shutdown)
