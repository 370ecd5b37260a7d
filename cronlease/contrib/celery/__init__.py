"""``cronlease.contrib.celery``: Celery's beat run by every replica, each tick sent once
(docs/how-to/celery-beat.md).

Sending, on the replicas (``pip install 'cronlease[celery]'``):

- ``cronlease run --celery-app proj.celery:app`` (or ``[celery] app = "proj.celery:app"``
  in ``cronlease.toml``) runs the app's ``beat_schedule``;
- in Python, :func:`add_beat_schedule` declares the same tasks on a scheduler, and
  :func:`celery_sender` makes one task body that sends one Celery task::

      scheduler.add_task(celery_sender(app, "proj.tasks.report", queue="reports"),
                         every="1h", recover=True)

Each tick is sent with ``app.send_task`` and a task id derived from the tick, once the
lease is won; the run is ``succeeded`` when the broker confirmed the message and
``failed`` with the broker's error otherwise (:mod:`cronlease._send.sending`).

Receiving, on the workers: :class:`OnceTask`, a task base class, records each message's
task id in the cronlease database before the body runs and skips the body of a task id
it recorded before (a resent or redelivered message).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from celery import Task as _CeleryTask

from cronlease._scheduler import Scheduler
from cronlease._send.celery_beat import CelerySender
from cronlease._send.deliveries import KEEP_DELIVERIES, deliveries, delivery_id
from cronlease._send.sending import Message, Sender, SendTask, task_id_of
from cronlease._task import Task
from cronlease.config import celery_specs

__all__ = [
    "DATABASE_SETTING",
    "KEEP_DELIVERIES",
    "Message",
    "OnceTask",
    "SendTask",
    "Sender",
    "add_beat_schedule",
    "celery_sender",
    "task_id_of",
]

logger = logging.getLogger("cronlease")

#: the app setting that names the guard's database (else ``CRONLEASE_DATABASE_URL``)
DATABASE_SETTING = "cronlease_database_url"


def celery_sender(
    app: Any,
    task: str,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    **options: Any,
) -> SendTask:
    """A task body that sends Celery task ``task`` (by name) with ``args``, ``kwargs`` and
    ``options`` (``apply_async``'s: queue, routing_key, priority, expires, headers, ...)
    once per tick; the task is named ``name`` (default: ``task``)."""
    sender = CelerySender(app, task, args, kwargs, options)
    return SendTask(name or task, sender)


def add_beat_schedule(scheduler: Scheduler, app: Any, **options: Any) -> list[Task]:
    """Declare every entry of ``app.conf.beat_schedule`` on ``scheduler`` (each entry a
    task of its name); ``options``: task options for every entry (``recover`` is True
    unless given). ConfigError naming the first entry that cannot be translated."""
    return [spec.add_to(scheduler) for spec in celery_specs(app, options)]


def _claim(app: Any, task_id: str, name: str) -> bool:
    url = deliveries.url(app.conf.get(DATABASE_SETTING), "OnceTask", f"app.conf.{DATABASE_SETTING}")
    return deliveries.claim(url, task_id, name)


class OnceTask(_CeleryTask):  # type: ignore[misc]
    """A Celery task base class whose body runs at most once per task id.

    Before the body, one insert records the message's task id in the cronlease
    database (``cronlease_deliveries``); an id recorded before — a tick resent by
    a replica's recovery, a message the broker redelivered — is acknowledged
    without running the body (logged at INFO, the task returns None). What it
    does not do: run the body again when the first delivery died after the
    insert (a worker killed mid-task): the body ran at most once, not exactly
    once. A retry of a failed run (``self.retry()``, ``autoretry_for``: the same
    task id sent again) is claimed apart (``<task id>/retry <n>``): it runs. A
    database error fails the task (the body does not run). A call without a message
    (``task()``, ``task.apply()`` eagerly) is not guarded.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = self.request
        task_id = request.id
        guarded = task_id is not None and not request.called_directly
        # a retry (self.retry(), autoretry_for) is the same task id sent again: its own claim
        claim = delivery_id(task_id, request.retries) if guarded else task_id
        if guarded and not _claim(self.app, claim, self.name):
            logger.info(
                "%s[%s]: delivered before; its body is not run again",
                self.name,
                claim,
                extra={"cronlease_task_id": task_id},
            )
            return None
        return super().__call__(*args, **kwargs)
