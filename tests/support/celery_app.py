"""A Celery app for the process tests of ``cronlease.contrib.celery`` (tests/processes/
test_celery_beat.py): real workers (``celery -A tests.support.celery_app worker``) and
replicas (``cronlease run --celery-app tests.support.celery_app:app``) on a real broker.

Configured from the environment the test sets:

- ``CRONLEASE_TEST_BROKER``: the broker URL (RabbitMQ, Redis, or a TcpProxy before one);
- ``CRONLEASE_TEST_QUEUE``: the queue of this test alone (every message is routed to it);
- ``CRONLEASE_TEST_LEDGER``: the side-effect ledger's database (tests/support/ledger.py);
- ``CRONLEASE_TEST_ENTRIES``: how many beat entries ``<queue>.0``... every
  ``CRONLEASE_TEST_EVERY`` seconds (default 1);
- ``CRONLEASE_TEST_GUARD``: ``0`` makes the tasks plain Celery tasks (a negative control),
  else they are :class:`~cronlease.contrib.celery.OnceTask` s (the guard on).

Every body appends one ledger row ``<queue>|<task>|<cronlease key or ->|<task id>`` with
the slot of the key (0 without one) and the worker's pid: a body run twice is two rows.
"""

from __future__ import annotations

import os
import time

from celery import Celery, Task

from cronlease.contrib.celery import OnceTask
from tests.support import ledger

QUEUE = os.environ.get("CRONLEASE_TEST_QUEUE", "cronlease-test")
LEDGER = os.environ.get("CRONLEASE_TEST_LEDGER", "")
GUARDED = os.environ.get("CRONLEASE_TEST_GUARD", "1") != "0"

app = Celery(
    "cronlease_test",
    broker=os.environ.get("CRONLEASE_TEST_BROKER", "memory://"),
    set_as_current=False,
)
app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    broker_connection_timeout=2.0,
    beat_schedule={
        f"{QUEUE}.{n}": {
            "task": "tests.support.celery_app.tick",
            "schedule": float(os.environ.get("CRONLEASE_TEST_EVERY", "1")),
            "args": (n,),
        }
        for n in range(int(os.environ.get("CRONLEASE_TEST_ENTRIES", "0")))
    },
)

BASE: type[Task] = OnceTask if GUARDED else Task


def _record(task: Task, what: str) -> None:
    headers = task.request.headers or {}
    key = getattr(task.request, "cronlease_key", None) or headers.get("cronlease_key") or "-"
    slot = int(key.rsplit("@", 1)[1]) if "@" in key else 0
    ledger.append(LEDGER, f"{QUEUE}|{what}|{key}|{task.request.id}", slot)


@app.task(bind=True, base=BASE, name="tests.support.celery_app.tick")
def tick(self: Task, n: int) -> None:
    _record(self, f"tick-{n}")


@app.task(
    bind=True,
    base=BASE,
    name="tests.support.celery_app.block",
    acks_late=True,
    task_reject_on_worker_lost=True,
)
def block(self: Task, seconds: float) -> None:
    """Its side effect first, then a long wait: the worker is killed during it."""
    _record(self, "block")
    time.sleep(seconds)


def purge(broker: str, queue: str) -> None:
    """Delete the test's queue on the broker (its messages with it) and its exchange
    (Celery's default one is named after the queue; on Redis, its binding keys)."""
    from kombu import Connection, Exchange
    from kombu import Queue as KombuQueue

    with Connection(broker, connect_timeout=5) as conn:
        channel = conn.default_channel
        KombuQueue(queue, channel=channel).delete()
        if conn.transport.driver_type == "redis":  # the exchange's bindings (named as it)
            channel.client.delete(f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        else:
            Exchange(queue, channel=channel).delete()
