"""Dramatiq as a sender: each tick one ``dramatiq.Message`` enqueued on the actor's broker.

**Sending** (:class:`DramatiqSender`): a message to actor ``actor_name`` on
``queue_name`` with the given args and kwargs, and:

- ``message_id``: derived from the tick (:func:`~cronlease._send.sending.task_id_of`),
  the same on every attempt of the tick;
- message options ``cronlease_key`` (``ctx.key``) and ``cronlease_scheduled_for``
  (ISO 8601, UTC) beside the caller's (``max_retries``, ``time_limit``,
  ``broker_priority``, ...); ``delay`` (milliseconds or a ``timedelta``) is the
  broker's, as in ``send_with_options``.

**Confirmed**: on RabbitMQ the publish returns once RabbitMQ confirmed it (publisher
confirms; a broker made without ``confirm_delivery=True`` is sent through a twin of
it that has them: the same connection parameters, priorities and middleware); on
Redis once Redis answered the enqueue script. Other brokers confirm what their
``enqueue`` confirms. Dramatiq's RabbitMQ broker itself publishes again after a
broken connection (up to 6 times): a message may then reach the queue twice, with
one message id, which the worker-side guard runs once.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from cronlease._send.sending import Message
from cronlease.errors import ConfigError

__all__ = ["DramatiqSender", "broker_name"]

#: message options cronlease sets (or the broker does): refused from the caller
RESERVED = ("message_id", "cronlease_key", "cronlease_scheduled_for", "eta", "redis_message_id")


def broker_name(broker: Any) -> str:
    """The broker as logs name it: scheme, host, port and vhost or database, no password."""
    parameters = getattr(broker, "parameters", None)
    if parameters is not None:  # RabbitmqBroker: pika's parameters, one or a list
        first = parameters[0] if isinstance(parameters, list) else parameters
        vhost = str(getattr(first, "virtual_host", "/"))
        return f"amqp://{first.host}:{first.port}/{'' if vhost == '/' else vhost}"
    client = getattr(broker, "client", None)
    pool = getattr(client, "connection_pool", None)
    if pool is not None:  # RedisBroker
        found = dict(getattr(pool, "connection_kwargs", {}))
        if "path" in found:
            return f"redis+socket://{found['path']}"
        where = f"{found.get('host', 'localhost')}:{found.get('port', 6379)}"
        return f"redis://{where}/{found.get('db', 0)}"
    return type(broker).__name__


_twins: dict[int, Any] = {}
_twins_lock = threading.Lock()


def _confirming(broker: Any) -> Any:
    """``broker``, or for a RabbitMQ broker without publisher confirms, its twin with them
    (one per broker, kept: its connections are reused by every send)."""
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    if not isinstance(broker, RabbitmqBroker) or broker.confirm_delivery:
        return broker
    with _twins_lock:
        twin = _twins.get(id(broker))
        if twin is None:
            twin = RabbitmqBroker(
                confirm_delivery=True,
                middleware=list(broker.middleware),  # enqueue hooks run as on the original
                max_priority=broker.max_priority,  # queues declared with the same arguments
            )
            twin.parameters = broker.parameters
            _twins[id(broker)] = twin
        return twin


def _delay_ms(value: Any) -> int:
    if isinstance(value, timedelta):
        value = int(value.total_seconds() * 1000)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"delay must be whole milliseconds (an int >= 0) or a timedelta, not {value!r}"
        )
    return value


class DramatiqSender:
    """Enqueues a message to a Dramatiq actor by name for each tick
    (:class:`~cronlease._send.sending.Sender`)."""

    def __init__(
        self,
        broker: Any,
        actor_name: str,
        queue_name: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(actor_name, str) or not actor_name:
            raise ConfigError(f"the Dramatiq actor must be a name (a string), not {actor_name!r}")
        if not isinstance(queue_name, str) or not queue_name:
            raise ConfigError(f"queue_name must be a non-empty string, not {queue_name!r}")
        if not isinstance(args, (list, tuple)):
            raise ConfigError(f"args must be a list or tuple, not {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ConfigError(f"kwargs must be a dict, not {type(kwargs).__name__}")
        options = dict(options or {})
        for reserved in RESERVED:
            if reserved in options:
                raise ConfigError(f"options: {reserved!r} is cronlease's to set")
        if "priority" in options:
            raise ConfigError(
                "options: 'priority' is a Dramatiq actor's (set it on @dramatiq.actor); "
                "a message's own priority is 'broker_priority' (RabbitMQ, with max_priority)"
            )
        for callback in ("on_success", "on_failure"):
            value = options.get(callback)
            if value is not None and not isinstance(value, str):
                options[callback] = getattr(value, "actor_name", value)  # an Actor: its name
        delay = options.pop("delay", None)
        self.delay = None if delay is None else _delay_ms(delay)
        self.actor_name = actor_name
        self.queue_name = queue_name
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.options = options
        self._broker = _confirming(broker)
        self._name = broker_name(broker)

    def __repr__(self) -> str:
        return (
            f"DramatiqSender({self.actor_name!r}, queue_name={self.queue_name!r}, "
            f"options={self.options!r})"
        )

    @property
    def broker(self) -> str:
        return self._name

    @property
    def target(self) -> str:
        return f"{self.actor_name} (Dramatiq)"

    def message(self, message: Message) -> Any:
        """The ``dramatiq.Message`` of one tick."""
        import dramatiq

        return dramatiq.Message(
            queue_name=self.queue_name,
            actor_name=self.actor_name,
            args=self.args,
            kwargs=self.kwargs,
            options={
                **self.options,
                "cronlease_key": message.key,
                "cronlease_scheduled_for": message.scheduled_text,
            },
            message_id=message.task_id,
        )

    def send(self, message: Message) -> None:
        self._broker.enqueue(self.message(message), delay=self.delay)

    def unreachable(self, exc: BaseException) -> bool:
        from dramatiq.errors import BrokerConnectionError

        if isinstance(exc, BrokerConnectionError):
            # Dramatiq wraps pika's error; a nack or an unroutable message was answered
            cause = getattr(exc, "message", None)
            return not _answered(cause)
        return _connection_error(exc)


def _answered(exc: object) -> bool:
    try:
        from pika.exceptions import NackError, UnroutableError
    except ImportError:  # pragma: no cover - no pika, no RabbitMQ broker
        return False
    return isinstance(exc, (NackError, UnroutableError))


def _connection_error(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return True
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # pragma: no cover
        pass
    else:
        if isinstance(exc, (RedisConnectionError, RedisTimeoutError)):
            return True
    try:
        from pika.exceptions import AMQPConnectionError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, AMQPConnectionError)
