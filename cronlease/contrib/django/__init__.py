"""``cronlease.contrib.django``: cronlease as a Django app (docs/how-to/django.md).

Add ``"cronlease.contrib.django"`` to ``INSTALLED_APPS``; declare tasks in
``settings.CRONLEASE["TASKS"]`` or with the decorator in a ``tasks.py`` of any
installed app (discovered as ``admin.py`` modules are)::

    from cronlease.contrib.django import scheduler

    @scheduler.task(every="5m")
    def purge_sessions() -> None: ...

The database is ``DATABASES[CRONLEASE["DATABASE"]]`` (default ``"default"``),
reached through cronlease's own pool. ``manage.py cronlease COMMAND`` runs the
CLI's commands on it (run, check, status, history, pause, resume, trigger,
forget, schedule, init-db). Nothing starts by itself unless
``CRONLEASE["AUTOSTART"] = True``, and then only in processes that serve requests.

The modules, one job each: ``_settings`` checks ``settings.CRONLEASE``,
``_database`` turns a ``DATABASES`` entry into a URL, ``_replica`` holds the
process's scheduler and starts it, ``apps`` is the AppConfig, ``views``/``urls``
the read-only admin pages, ``management/commands/cronlease`` the command.
"""

from __future__ import annotations

from cronlease._scheduler import Scheduler
from cronlease.contrib.django._replica import get_scheduler

__all__ = ["get_scheduler", "scheduler"]


def __getattr__(name: str) -> Scheduler:
    # ``scheduler`` is built on first use, once the settings are configured: importing
    # this package (INSTALLED_APPS does) must not read them.
    if name == "scheduler":
        return get_scheduler()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
