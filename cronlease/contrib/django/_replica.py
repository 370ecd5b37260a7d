"""This process's scheduler: built once from the settings, started only where asked.

:func:`get_scheduler` builds it on first use (``from cronlease.contrib.django
import scheduler`` in a ``tasks.py``, or the app's ``ready()``): the settings'
tasks are declared on it, the ``tasks.py`` decorators add theirs. Building
it connects to nothing; nothing starts unless ``CRONLEASE["AUTOSTART"]`` is
True, and then only in a process that serves a request (:func:`on_request`).
``manage.py cronlease run`` runs this same scheduler in the foreground.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.wsgi import WSGIHandler

from cronlease._options import OPTIONS, SCHEDULE_KEYS
from cronlease._scheduler import Scheduler
from cronlease._service import config_scheduler
from cronlease._task import Task
from cronlease.config import Config, TaskSpec
from cronlease.contrib.django._settings import DjangoSettings, read_settings
from cronlease.errors import ConfigError

__all__ = ["PROG", "declared_config", "get_scheduler", "on_request", "refuse", "settings_of"]

logger = logging.getLogger("cronlease")

#: the command line under Django, as help and hints name it
PROG = "manage.py cronlease"

_lock = threading.Lock()
_built: tuple[DjangoSettings, Scheduler] | None = None
_refused: ConfigError | None = None
_started_in: int | None = None  # the pid whose scheduler was started


def settings_of() -> DjangoSettings:
    """The validated settings (ConfigError, naming the setting, task and key)."""
    return read_settings(getattr(settings, "CRONLEASE", None), settings.DATABASES)


def refuse(error: ConfigError) -> None:
    """Remember a settings error found in ``ready()``: every later use raises it again,
    so a bad setting never half-starts (``manage.py cronlease`` prints it, exits 2)."""
    global _refused
    _refused = error


def get_scheduler() -> Scheduler:
    """The process's scheduler (built once; raises the settings' error, if any)."""
    global _built
    with _lock:
        if _refused is not None:
            raise _refused
        if _built is None:
            found = settings_of()
            config = found.config
            scheduler = config_scheduler(config.database, config, roles=config.roles)
            for spec in config.tasks.values():
                spec.add_to(scheduler)
            for job in config.jobs.values():  # what schedule rows may run (§5.37)
                job.add_to(scheduler)
            _built = found, scheduler
        return _built[1]


def declared_config() -> Config:
    """The settings' :class:`Config` with the decorated tasks too: what ``status``,
    ``history`` and ``run`` read, as the CLI reads a file's."""
    scheduler = get_scheduler()
    assert _built is not None
    config = _built[0].config
    tasks = dict(config.tasks)
    for name, task in scheduler.tasks.items():
        tasks.setdefault(name, _spec_of(task))
    return replace(config, tasks=tasks)


def _spec_of(task: Task) -> TaskSpec:
    func = task.func
    target = f"{getattr(func, '__module__', '?')}:{getattr(func, '__qualname__', func)}"
    # every option by its name (Task and TaskSpec share them): none left behind
    options = {key: getattr(task, key) for key in OPTIONS if key not in SCHEDULE_KEYS}
    return TaskSpec(name=task.name, schedule=task.schedule, call=target, func=func, **options)


def _under_test() -> bool:
    """Whether Django's test environment is set up (its runner, pytest-django): a
    live-server test serves through a plain WSGIHandler, and must not become a replica
    (its settings' database would be the one the tests renamed away from).
    ``django.core.mail.outbox`` exists exactly then (Django's testing docs)."""
    from django.core import mail

    return hasattr(mail, "outbox")


def on_request(sender: Any, **_: Any) -> None:
    """``request_started``: start the scheduler in a process that serves (a WSGI or ASGI
    handler: runserver's serving child, each gunicorn/uvicorn/daphne worker), once per
    process. Django's test client sends the signal too, from its own handler class: a
    test never becomes a replica, nor does a command, a shell or a Celery worker (none
    serves a request)."""
    global _started_in
    if not (isinstance(sender, type) and issubclass(sender, (WSGIHandler, ASGIHandler))):
        return
    if _under_test():
        return
    pid = os.getpid()
    if _started_in == pid:  # the common case, without the lock
        return
    with _lock:
        if _started_in == pid:
            return
        _started_in = pid
    scheduler = get_scheduler()
    scheduler.start()
    atexit.register(scheduler.shutdown)
    logger.info("started in serving process %d (CRONLEASE['AUTOSTART'])", pid)
