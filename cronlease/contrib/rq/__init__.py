"""``cronlease.contrib.rq``: periodic RQ jobs enqueued by every replica, each tick once
(docs/how-to/dramatiq-rq.md). ``pip install 'cronlease[rq]'``.

Sending, on the replicas: :func:`rq_sender` makes a task body that enqueues one job per
tick::

    queue = rq.Queue("reports", connection=redis.Redis())
    scheduler.add_task(rq_sender(queue, "proj.jobs.report", ("daily",)),
                       every="1h", recover=True)

The job id is derived from the tick, the same on every attempt, and the job is
enqueued with RQ's ``unique=True`` (a resend of a tick already in Redis is refused by
Redis itself, and counts as sent); the run is ``succeeded`` once Redis answered and
``failed`` with its error otherwise (:mod:`cronlease._send.sending`).

Receiving, on the workers: :func:`once` wraps a job function so that its body runs at
most once per job id (and retry), claimed in the cronlease database.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

from cronlease._send.deliveries import KEEP_DELIVERIES, deliveries, delivery_id
from cronlease._send.rq_send import RqSender
from cronlease._send.sending import Message, Sender, SendTask, task_id_of

__all__ = [
    "KEEP_DELIVERIES",
    "Message",
    "SendTask",
    "Sender",
    "once",
    "rq_sender",
    "task_id_of",
]

logger = logging.getLogger("cronlease")

F = TypeVar("F", bound=Callable[..., Any])


def rq_sender(
    queue: Any,
    func: str | Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    **options: Any,
) -> SendTask:
    """A task body that enqueues job ``func`` (a callable, or its dotted path: the
    replicas need not import the jobs' code) on ``queue`` (an ``rq.Queue``) with
    ``args``, ``kwargs`` and ``options`` (``enqueue_call``'s: ``timeout``,
    ``result_ttl``, ``ttl``, ``failure_ttl``, ``description``, ``at_front``, ``meta``,
    ``retry``, callbacks) once per tick; the task is named ``name`` (default: the
    function's dotted path)."""
    sender = RqSender(queue, func, args, kwargs, options)
    return SendTask(name or sender.func_name, sender)


def _retry_of(job: Any) -> str | None:
    """What tells one of RQ's retries of a job apart: a job enqueued with ``Retry(max)``
    counts its retries down (``retries_left``), one that returned a ``Retry`` counts
    them up (``number_of_retries``); None for a job with neither."""
    marks = []
    if job.retries_left is not None:
        marks.append(f"left {job.retries_left}")
    if job.number_of_retries:
        marks.append(f"done {job.number_of_retries}")
    return ", ".join(marks) or None


@overload
def once(func: F, /) -> F: ...
@overload
def once(*, database_url: str | None = None) -> Callable[[F], F]: ...
def once(func: Any = None, /, *, database_url: str | None = None) -> Any:
    """A job function's decorator: its body runs at most once per job id (and retry).

    ``@once`` or ``@once(database_url=...)`` (else ``CRONLEASE_DATABASE_URL``). Run
    by an RQ worker, one insert records the job's id in the cronlease database
    (``cronlease_deliveries``) before the body; an id recorded before — a tick
    enqueued again after its first job expired, a job requeued by hand — returns
    None without running the body (one INFO line). A retry RQ makes of a failed job
    (``Retry``) is claimed apart: it runs. Called outside a job (directly, or by
    a queue with ``is_async=False`` too), the function is not guarded.

    What it does not do: run the body again when the first run died after the
    insert (a work horse killed mid-job): at most once, not exactly once. A database
    error fails the job (the body does not run).
    """

    def decorate(body: F) -> F:
        @functools.wraps(body)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            from rq import get_current_job

            job = get_current_job()
            if job is None:
                return body(*args, **kwargs)
            claim = delivery_id(job.id, _retry_of(job))
            url = deliveries.url(database_url, "cronlease.contrib.rq.once", "database_url=")
            if not deliveries.claim(url, claim, job.func_name or job.id):
                logger.info(
                    "%s[%s]: delivered before; its body is not run again",
                    job.func_name,
                    claim,
                    extra={"cronlease_task_id": job.id},
                )
                return None
            return body(*args, **kwargs)

        return guarded  # type: ignore[return-value]

    return decorate(func) if func is not None else decorate
