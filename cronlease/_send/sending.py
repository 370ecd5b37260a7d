"""A tick sent as a message to a task queue: the sender protocol and the task body.

A *sender* hands one message per tick to a broker (Celery's first; the protocol
is the broker library's only contract with the engine). :class:`SendTask` is the
task body, as :class:`~cronlease._shell_task.CommandTask` is a command's: the
lease, the schedule, retries, recovery, history, alerting, status and metrics are
an ordinary task's. A send *is* the run:

- **succeeded** when :meth:`Sender.send` returned: the broker confirmed the
  message (RabbitMQ's publisher confirm, Redis's reply to the write);
- **failed** when it raised: the error text is the broker's, recorded as the
  run's (a :class:`~cronlease.errors.SendError`, which the engine records
  without a traceback: the message is the whole story).

Each message carries a **task id derived from the tick** (:func:`task_id_of`:
a UUID made from ``ctx.key``), the same on every attempt of a slot, so a tick
resent by the recovery path (``recover=True``: a replica killed between winning
the lease and the broker's confirm) is the same message to the worker, and a
worker-side guard can run its body once.

**An outage is said once** (the house rule, ``_run/replica_log/log_streaks.py``):
a send the broker could not be reached for starts a streak keyed by the broker
(one WARNING), the next ones are counted (a summary every 10 minutes while it
lasts), the first send confirmed ends it (one WARNING with the count). A send
the broker *answered* with a refusal is a streak of its task, not the broker's.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

from cronlease._run.replica_log.log_streaks import LogStreaks
from cronlease._task import RunContext
from cronlease.errors import SendError

__all__ = ["OUTAGE", "REFUSED", "Message", "SendTask", "Sender", "task_id_of"]

logger = logging.getLogger("cronlease")

#: the streak reasons of the log lines: the broker could not be reached / it refused
OUTAGE = "broker unavailable"
REFUSED = "refused by the broker"
#: the namespace of the task ids derived from ticks (a constant: every replica derives alike)
TICK_IDS = uuid.UUID("5b0f4a53-8d0e-4c4f-9e71-2f3c6b1d7a10")

# one per process: every sender of one broker shares its outage streak
_streaks = LogStreaks(logger)


def task_id_of(key: str) -> str:
    """The message's task id for the tick whose ``ctx.key`` is ``key``: a UUID (version 5),
    so tools that expect one accept it, the same for every attempt of the tick."""
    return str(uuid.uuid5(TICK_IDS, key))


@dataclass(frozen=True)
class Message:
    """What a sender is asked to send for one tick."""

    #: the tick's idempotency key (``ctx.key``): ``<full name>@<slot>``
    key: str
    #: :func:`task_id_of` the key
    task_id: str
    #: the scheduled time of the tick (UTC), not the time of sending
    scheduled_for: datetime
    #: 1 for the tick's first attempt, 2... for a resend (retry or recovery)
    attempt: int

    @classmethod
    def of(cls, ctx: RunContext) -> Message:
        return cls(
            key=ctx.key,
            task_id=task_id_of(ctx.key),
            scheduled_for=ctx.scheduled_for.astimezone(timezone.utc),
            attempt=ctx.attempt,
        )

    @property
    def scheduled_text(self) -> str:
        """The scheduled time as a header carries it: ISO 8601, UTC, milliseconds."""
        return (
            self.scheduled_for.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            if self.scheduled_for.utcoffset() is not None
            else self.scheduled_for.isoformat(timespec="milliseconds")
        )


class Sender(Protocol):
    """Sends one tick's message to a broker; returns only once the broker confirmed it."""

    #: the broker as the log names it, without a password: one outage streak per broker
    @property
    def broker(self) -> str: ...

    #: what is sent, for people: ``proj.tasks.report (Celery)``
    @property
    def target(self) -> str: ...

    def send(self, message: Message) -> None:
        """Send ``message``; raise if the broker did not confirm it."""

    def unreachable(self, exc: BaseException) -> bool:
        """Whether ``exc`` (raised by :meth:`send`) means the broker could not be reached
        (an outage), rather than that it answered with a refusal."""


class SendTask:
    """The task body that sends each tick's message through ``sender``."""

    def __init__(self, name: str, sender: Sender) -> None:
        self.name = name
        self.sender = sender
        self.__name__ = name  # shown by the scheduler like a function's name

    def __repr__(self) -> str:
        return f"SendTask({self.name!r}, {self.sender.target!r})"

    def __call__(self, ctx: RunContext) -> None:
        message = Message.of(ctx)
        broker = self.sender.broker
        try:
            self.sender.send(message)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            text = f"{self.sender.target} not sent to {broker}: {error}"
            if self.sender.unreachable(exc):
                _streaks.warn(
                    broker,
                    OUTAGE,
                    "not sent",
                    "broker %s unavailable: %s; its ticks are recorded failed",
                    broker,
                    error,
                )
            else:
                _streaks.warn(
                    ctx.name,
                    REFUSED,
                    "not sent",
                    "%s: tick %s not sent: %s",
                    ctx.name,
                    message.scheduled_text,
                    error,
                )
            raise SendError(text) from exc
        _streaks.ended(broker, OUTAGE)
        _streaks.ended(ctx.name, REFUSED)
