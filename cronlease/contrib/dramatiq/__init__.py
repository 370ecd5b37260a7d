"""``cronlease.contrib.dramatiq``: periodic Dramatiq messages sent by every replica, each
tick once (docs/how-to/dramatiq-rq.md). ``pip install 'cronlease[dramatiq]'``.

Sending, on the replicas: :func:`dramatiq_sender` makes a task body that enqueues one
message to an actor per tick::

    scheduler.add_task(dramatiq_sender(report, ("daily",), queue_name="reports"),
                       every="1h", recover=True)

The message id is derived from the tick, the same on every attempt; the run is
``succeeded`` once the broker confirmed the message (RabbitMQ's publisher confirm,
Redis's reply) and ``failed`` with the broker's error otherwise
(:mod:`cronlease._send.sending`).

Receiving, on the workers: :class:`OnceMiddleware` claims each guarded message's id in
the cronlease database before its actor runs and skips a message whose id it
claimed before (a resent tick, a redelivered message).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import dramatiq
from dramatiq.middleware import Middleware, MiddlewareError, SkipMessage

from cronlease._send.deliveries import KEEP_DELIVERIES, deliveries, delivery_id
from cronlease._send.dramatiq_send import DramatiqSender
from cronlease._send.sending import Message, Sender, SendTask, task_id_of
from cronlease.errors import ConfigError

__all__ = [
    "KEEP_DELIVERIES",
    "ClaimFailed",
    "Message",
    "OnceMiddleware",
    "SendTask",
    "Sender",
    "dramatiq_sender",
    "task_id_of",
]

logger = logging.getLogger("cronlease")


def dramatiq_sender(
    actor: Any,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    broker: Any = None,
    name: str | None = None,
    **options: Any,
) -> SendTask:
    """A task body that enqueues a message to ``actor`` with ``args``, ``kwargs`` and
    ``options`` once per tick; the task is named ``name`` (default: the actor's name).

    ``actor``: a ``dramatiq.Actor`` (its broker and queue are used), or an actor's name
    with ``broker=`` (the replicas need not import the actors' code; the queue is then
    ``queue_name=`` or ``"default"``). ``options``: ``queue_name``, ``delay``
    (milliseconds or a ``timedelta``) and message options as ``send_with_options``
    takes them (``max_retries``, ``time_limit``, ``broker_priority``, ...)."""
    if isinstance(actor, dramatiq.Actor):
        actor_name, queue_name = actor.actor_name, actor.queue_name
        broker = broker if broker is not None else actor.broker
    elif isinstance(actor, str):
        if broker is None:
            raise ConfigError(
                f"dramatiq_sender({actor!r}): an actor given by name needs broker=, the "
                "Dramatiq broker its workers consume"
            )
        actor_name, queue_name = actor, "default"
    else:
        raise ConfigError(
            f"dramatiq_sender: the actor must be a dramatiq.Actor or an actor's name, "
            f"not {type(actor).__name__}"
        )
    queue_name = options.pop("queue_name", queue_name)
    sender = DramatiqSender(broker, actor_name, queue_name, args, kwargs, options)
    return SendTask(name or actor_name, sender)


class ClaimFailed(MiddlewareError):
    """The guard could not claim a message's id (the database failed): the message fails
    without running its actor, and Dramatiq's Retries retry it as any failure."""


class OnceMiddleware(Middleware):
    """Runs a guarded actor at most once per message id (and retry).

    Add it to the workers' broker: ``broker.add_middleware(OnceMiddleware())``. It
    guards the actors declared with ``@dramatiq.actor(once=True)``, or every actor with
    ``OnceMiddleware(every_actor=True)`` (then ``once=False`` leaves one out).

    Before a guarded actor runs, one insert records the message's id in the cronlease
    database (``cronlease_deliveries``, ``database_url`` or else
    ``CRONLEASE_DATABASE_URL``); a message whose id is there already — a tick resent
    by a replica's recovery, a message RabbitMQ redelivered after its worker died, a
    duplicate of a publish Dramatiq repeated — is acknowledged without running the
    actor (Dramatiq's ``SkipMessage``; one INFO line). A retry Dramatiq's Retries
    middleware makes of a failed run is claimed apart (``<id>/retry <n>``): it runs.

    What it does not do: run the actor again when the first delivery died after the
    insert (a worker killed mid-message): at most once, not exactly once. A database
    error fails the message (:class:`ClaimFailed`) without running the actor.
    """

    def __init__(self, database_url: str | None = None, *, every_actor: bool = False) -> None:
        self.database_url = database_url
        self.every_actor = every_actor

    @property
    def actor_options(self) -> set[str]:
        return {"once"}

    def guarded(self, broker: Any, message: Any) -> bool:
        """Whether ``message``'s actor is guarded."""
        try:
            actor = broker.get_actor(message.actor_name)
        except Exception:  # an unknown actor: Dramatiq fails the message itself
            return False
        return bool(actor.options.get("once", self.every_actor))

    def before_process_message(self, broker: Any, message: Any) -> None:
        if message.failed or not self.guarded(broker, message):
            return
        claim = delivery_id(message.message_id, message.options.get("retries", 0))
        try:
            url = deliveries.url(self.database_url, "OnceMiddleware", "database_url=")
            claimed = deliveries.claim(url, claim, message.actor_name)
        except Exception as exc:
            # a plain exception would be logged by Dramatiq and the actor run unguarded
            raise ClaimFailed(f"{message.actor_name}[{claim}]: not claimed: {exc}") from exc
        if not claimed:
            logger.info(
                "%s[%s]: delivered before; its actor is not run again",
                message.actor_name,
                claim,
                extra={"cronlease_task_id": message.message_id},
            )
            raise SkipMessage(f"{message.actor_name}[{claim}] delivered before")
