"""``python manage.py cronlease_run``: a replica that only runs tasks (no web server).

Run it beside your web workers or instead of them: every process shares the
leases, so each tick still runs once. Stops cleanly on SIGINT/SIGTERM.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run this project's cronlease tasks in the foreground until SIGINT/SIGTERM."

    def handle(self, *args: Any, **options: Any) -> None:
        from periodic.cron import scheduler

        names = ", ".join(sorted(scheduler.tasks)) or "none"
        self.stdout.write(f"cronlease: running tasks {names} on {scheduler.store.url}")
        self.stdout.flush()
        scheduler.run_forever()
