"""A Dramatiq broker and actors for the process tests of ``cronlease.contrib.dramatiq``
(tests/processes/test_dramatiq_beat.py): real workers (``python -m dramatiq
tests.support.dramatiq_app``) on a real broker, and the replicas' broker
(tests/support/queue_replica.py imports :func:`make_broker`).

Configured from the environment the test sets:

- ``CRONLEASE_TEST_BROKER``: the broker URL (``amqp://...`` RabbitMQ, ``redis://...``);
- ``CRONLEASE_TEST_QUEUE``: the queue of this test alone (on Redis, also the key prefix);
- ``CRONLEASE_TEST_LEDGER``: the side-effect ledger's database (tests/support/ledger.py);
- ``CRONLEASE_TEST_GUARD``: ``0`` leaves the actors unguarded (a negative control), else
  :class:`~cronlease.contrib.dramatiq.OnceMiddleware` guards them (``once=True``).

Every body appends one ledger row ``<queue>|<actor>|<cronlease key or ->|<message id>``
with the slot of the key (0 without one) and the worker's pid: a body run twice is two rows.
"""

from __future__ import annotations

import os
from typing import Any

import dramatiq
from dramatiq.middleware import CurrentMessage

from cronlease.contrib.dramatiq import OnceMiddleware
from tests.support import ledger

QUEUE = os.environ.get("CRONLEASE_TEST_QUEUE", "cronlease-test")
LEDGER = os.environ.get("CRONLEASE_TEST_LEDGER", "")
GUARDED = os.environ.get("CRONLEASE_TEST_GUARD", "1") != "0"


def namespace(queue: str) -> str:
    """The Redis key prefix of a test's Dramatiq broker."""
    return f"cronlease-test-{queue}"


def make_broker(url: str, queue: str) -> Any:
    """A broker on ``url``, as an application makes it (RabbitMQ without publisher
    confirms: the sender adds them)."""
    if url.startswith("redis"):
        from dramatiq.brokers.redis import RedisBroker

        return RedisBroker(url=url, namespace=namespace(queue))
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    return RabbitmqBroker(url=url)


broker = make_broker(os.environ.get("CRONLEASE_TEST_BROKER", "redis://127.0.0.1:6379/0"), QUEUE)
broker.add_middleware(CurrentMessage())
broker.add_middleware(OnceMiddleware())
dramatiq.set_broker(broker)


def _record(actor: str) -> None:
    message = CurrentMessage.get_current_message()
    assert message is not None
    key = str(message.options.get("cronlease_key") or "-")
    slot = int(key.rsplit("@", 1)[1]) if "@" in key else 0
    ledger.append(LEDGER, f"{QUEUE}|{actor}|{key}|{message.message_id}", slot)


@dramatiq.actor(actor_name="tick", queue_name=QUEUE, max_retries=0, once=GUARDED)
def tick(n: int) -> None:
    _record(f"tick-{n}")
