"""What the queue-beat process tests (Celery, Dramatiq, RQ) check of a counted window.

The window is the whole seconds between the fleet being up and the stop: inside it
every tick must have been sent and run once. At its edges, replicas start and stop
on a loaded machine, and a tick won past its grace is recorded ``missed`` (the
engine's promise: released unsent, never sent late); that is allowed there only.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable

from cronlease._lease.store import LeaseStore
from cronlease.config import DATABASE_ENV
from tests.support import ledger
from tests.support.procs import Proc, wait_for


def queue_rows(url: str, queue: str) -> list[tuple[str, str, str, int, int]]:
    """(task, key, task id, slot, pid) of every ledger row of ``queue``."""
    rows = []
    for name, slot, pid in ledger.rows_like(url, f"{queue}|"):
        _, task, key, task_id = name.split("|")
        rows.append((task, key, task_id, slot, pid))
    return rows


def window(start: float, end: float) -> tuple[int, int]:
    """The first and last whole second (epoch seconds) of the counted window."""
    return int(start) + 1, int(end)


def missing_slots(slots: set[int], start: float, end: float) -> list[int]:
    """The whole seconds in [start, end] (epoch seconds) with no slot (epoch ms)."""
    first, last = window(start, end)
    return [s * 1000 for s in range(first, last + 1) if s * 1000 not in slots]


def assert_sent_outcomes(store: LeaseStore, names: Iterable[str], start: float, end: float) -> None:
    """Every recorded tick of the window succeeded; one at its edges succeeded or was missed."""
    first, last = window(start, end)
    for name in names:
        for run in store.history(name, 200):
            inside = first * 1000 <= run.slot <= last * 1000
            allowed = {"succeeded"} if inside else {"succeeded", "missed"}
            assert run.outcome in allowed, (name, run.slot, run.outcome, inside)


class QueueFleet:
    """Replicas and workers of one test, on one queue; everything stopped at the end.

    What the Celery, Dramatiq and RQ tests share: the ledger and lease database, the
    entries' names, what was sent and what ran. Each queue's test says how its
    replicas and workers start, when they are up, and how they are stopped."""

    def __init__(self, broker: str, queue: str, db: str, entries: int) -> None:
        self.broker = broker
        self.queue = queue
        self.db = db
        self.entries = entries
        self.replicas: list[Proc] = []
        self.workers: list[Proc] = []
        ledger.setup(db)
        self.store = LeaseStore.from_url(db)
        self.store.create_tables()

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "CRONLEASE_TEST_BROKER": self.broker,
            "CRONLEASE_TEST_QUEUE": self.queue,
            "CRONLEASE_TEST_LEDGER": self.db,
            "CRONLEASE_TEST_ENTRIES": str(self.entries),
            DATABASE_ENV: self.db,
            **extra,
        }

    def replica_up(self, proc: Proc, timeout: float) -> None:
        raise NotImplementedError

    def worker_up(self, proc: Proc, timeout: float) -> None:
        raise NotImplementedError

    def all_up(self, timeout: float = 30.0) -> float:
        """Wait until every replica started and every worker is ready; the time then."""
        for proc in self.replicas:
            self.replica_up(proc, timeout)
        for proc in self.workers:
            self.worker_up(proc, timeout)
        return time.time()

    def names(self) -> list[str]:
        return [f"{self.queue}.{n}" for n in range(self.entries)]

    def rows(self) -> list[tuple[str, str, str, int, int]]:
        """(task, key, message id, slot, pid) of every body run, from the ledger."""
        return queue_rows(self.db, self.queue)

    def keys(self) -> set[str]:
        return {key for _, key, _, _, _ in self.rows()}

    def succeeded(self) -> set[str]:
        """The keys of the ticks whose send the history records succeeded."""
        return {
            f"{run.name}@{run.slot}"
            for name in self.names()
            for run in self.store.history(name, 200)
            if run.outcome == "succeeded"
        }

    def stop_replicas(self) -> None:
        for proc in self.replicas:  # all at once; once each (a second one stops waiting)
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGTERM)
        for proc in self.replicas:
            proc.popen.wait(timeout=30)

    def drained(self, timeout: float = 20.0) -> None:
        """Wait until every tick sent has been executed by a worker."""

        def why() -> str:
            logs = "\n".join(f"--- worker:\n{w.stderr()[-3000:]}" for w in self.workers)
            return f"sent, never run: {sorted(self.succeeded() - self.keys())}\n{logs}"

        wait_for(lambda: self.succeeded() <= self.keys(), timeout, why)
