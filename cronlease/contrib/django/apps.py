"""The Django app: ``INSTALLED_APPS = [..., "cronlease.contrib.django"]``."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.core.signals import request_started
from django.utils.module_loading import autodiscover_modules

from cronlease.contrib.django._replica import get_scheduler, on_request, refuse, settings_of
from cronlease.errors import ConfigError

__all__ = ["CronleaseConfig"]


class CronleaseConfig(AppConfig):
    name = "cronlease.contrib.django"
    label = "cronlease"
    verbose_name = "cronlease"

    def ready(self) -> None:
        # Declaring connects to nothing: a plain django.setup() (a script, `check`,
        # `migrate`, a test run, a Celery worker) writes no row and starts nothing.
        try:
            autostart = settings_of().autostart
            get_scheduler()  # the settings' tasks, before tasks.py adds its own
            autodiscover_modules("tasks")  # as admin.py modules are
        except ConfigError as exc:
            refuse(exc)  # `manage.py check` reports it; `manage.py cronlease` exits 2
            return
        if autostart:
            request_started.connect(on_request, dispatch_uid="cronlease-autostart")


@checks.register()
def settings_check(app_configs: Any = None, **_: Any) -> list[checks.CheckMessage]:
    """``manage.py check``: a mistake in ``settings.CRONLEASE``, as one line."""
    try:
        get_scheduler()
    except ConfigError as exc:
        return [checks.Error(str(exc), id="cronlease.E001")]
    return []
