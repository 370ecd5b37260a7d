"""A replica sending ticks to a task queue: ``queue_replica.py dramatiq|rq``.

Declares ``CRONLEASE_TEST_ENTRIES`` tasks ``<queue>.0``... every second (``recover=True``)
on the lease database ``CRONLEASE_DATABASE_URL``, each a
:func:`~cronlease.contrib.dramatiq.dramatiq_sender` to actor ``tick`` (by name, on a
broker made as tests/support/dramatiq_app.py makes it) or an
:func:`~cronlease.contrib.rq.rq_sender` of ``tests.support.rq_jobs.tick`` (by dotted
path) with the entry's number as argument; prints ``started`` once the scheduler runs,
exits 0 on SIGTERM. ``CRONLEASE_TEST_BROKER`` and ``CRONLEASE_TEST_QUEUE`` name the
broker and the test's queue.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from cronlease import Scheduler
from cronlease._send.sending import SendTask


def senders(kind: str, url: str, queue: str, entries: int) -> list[SendTask]:
    if kind == "dramatiq":
        from cronlease.contrib.dramatiq import dramatiq_sender
        from tests.support.dramatiq_app import make_broker

        broker = make_broker(url, queue)
        return [
            dramatiq_sender("tick", (n,), broker=broker, queue_name=queue, name=f"{queue}.{n}")
            for n in range(entries)
        ]
    from redis import Redis
    from rq import Queue

    from cronlease.contrib.rq import rq_sender

    rq_queue = Queue(queue, connection=Redis.from_url(url))
    return [
        rq_sender(rq_queue, "tests.support.rq_jobs.tick", (n,), name=f"{queue}.{n}")
        for n in range(entries)
    ]


def main() -> None:
    kind = sys.argv[1]
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    url, queue = os.environ["CRONLEASE_TEST_BROKER"], os.environ["CRONLEASE_TEST_QUEUE"]
    scheduler = Scheduler(os.environ["CRONLEASE_DATABASE_URL"])
    for body in senders(kind, url, queue, int(os.environ["CRONLEASE_TEST_ENTRIES"])):
        scheduler.add_task(body, every="1s", recover=True)

    def announce() -> None:
        while not scheduler.running:
            threading.Event().wait(0.01)
        print("started", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()


if __name__ == "__main__":
    main()
