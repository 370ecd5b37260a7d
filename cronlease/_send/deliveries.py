"""The worker-side guard's store: one message id claimed once in ``cronlease_deliveries``.

Every queue's guard (Celery's ``OnceTask``, Dramatiq's ``OnceMiddleware``, RQ's
``once``) asks :data:`deliveries` to claim the id of the message it is about to run
(Celery's task id, Dramatiq's message id, RQ's job id): True the first time, False
for an id claimed before (a resent tick, a redelivered message). The decision is
the table's primary key (docs/design.md §5.36), so it holds across processes,
workers and hosts sharing the database.

The database is the one named by the guard (an explicit URL: an app setting, an
argument) or else by ``CRONLEASE_DATABASE_URL``. Stores are opened on first use in
each process, after a fork too (a forking worker's children never share the
parent's connections), one per URL, shared by every guard of the process.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from cronlease._lease.store import LeaseStore
from cronlease.errors import ConfigError

__all__ = [
    "DATABASE_ENV",
    "FORGET_EVERY",
    "KEEP_DELIVERIES",
    "Deliveries",
    "deliveries",
    "delivery_id",
]

logger = logging.getLogger("cronlease")

#: the environment variable naming the database when the guard is given none (the one
#: the replicas read: cronlease/config/_validate.py's DATABASE_ENV, equal by test)
DATABASE_ENV = "CRONLEASE_DATABASE_URL"
#: seconds a delivery is remembered: a redelivery later than this runs the body again
KEEP_DELIVERIES = 7 * 86400.0
#: how often a worker process deletes deliveries older than that
FORGET_EVERY = 3600.0


def delivery_id(message_id: str, retry: str | int | None = None) -> str:
    """The id a guard claims for one run of a message: the message id for its first run;
    for a retry the queue makes of a failed run (the same message id enqueued again:
    Celery's ``self.retry()``, Dramatiq's Retries, RQ's ``Retry``), the id suffixed with
    what tells that retry apart, so the retry runs and a duplicate of it does not."""
    return message_id if not retry else f"{message_id}/retry {retry}"


class Deliveries:
    """This process's stores for the guards, one per database URL, opened on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: dict[str, LeaseStore] = {}
        self._forgot_at: dict[str, float] = {}
        self._pid = os.getpid()

    @staticmethod
    def url(explicit: str | None, guard: str, setting: str) -> str:
        """``explicit``, else ``CRONLEASE_DATABASE_URL``; a ConfigError naming ``guard``
        and where to set it (``setting``) when neither is."""
        url = explicit or os.environ.get(DATABASE_ENV)
        if not url:
            raise ConfigError(
                f"{guard} needs the cronlease database: set {setting} or {DATABASE_ENV}"
            )
        return url

    def store(self, url: str) -> LeaseStore:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's stores are not ours
                self._stores, self._forgot_at, self._pid = {}, {}, os.getpid()
            found = self._stores.get(url)
            if found is None:
                found = LeaseStore.from_url(url)
                found.create_tables()
                self._stores[url] = found
            return found

    def claim(self, url: str, task_id: str, name: str) -> bool:
        """Claim message ``task_id`` (of worker task ``name``): True the first time, False
        when it was claimed before. Raises the store's error when the database fails."""
        store = self.store(url)
        claimed = store.claim_delivery(task_id, name)
        now = time.monotonic()
        with self._lock:
            due = now - self._forgot_at.get(url, -FORGET_EVERY) >= FORGET_EVERY
            if due:
                self._forgot_at[url] = now
        if due:
            try:
                store.forget_deliveries(KEEP_DELIVERIES)
            except Exception as exc:  # the claim is what matters; the next hour tries again
                logger.debug("old deliveries not deleted: %s", exc)
        return claimed


#: the process's one instance, shared by every queue's guard
deliveries = Deliveries()
