"""What the queue-beat process tests (Celery, Dramatiq, RQ) check of a counted window.

The window is the whole seconds between the fleet being up and the stop: inside it
every tick must have been sent and run once, never twice. A machine starved of CPU
(the suite runs four tests at once on two cores) can stall every replica past a
one-second tick's half-second grace: that tick is recorded ``missed`` (the engine's
promise: released unsent, never sent late) or, behind a timer that woke late, not
decided at all (the schedule fires once, at the latest instant due). One such tick
per entry is allowed inside the window, and any at its edges, where replicas start
and stop; a tick recorded any other way than sent or missed is not.
"""

from __future__ import annotations

import signal
import time

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


#: ticks of one entry a window may lose to a stalled machine (the module docstring)
STALLED_TICKS = 1


def assert_window_ran(
    fleet: QueueFleet, by_entry: dict[str, set[int]], start: float, end: float
) -> None:
    """Every entry ran each tick of the window (``by_entry``: the slots its bodies ran)
    but at most :data:`STALLED_TICKS`, each recorded missed or not decided; the
    history records each tick sent or missed."""
    first, last = window(start, end)
    lost: dict[str, list[tuple[int, str | None]]] = {}
    for name in fleet.names():
        outcomes = {run.slot: run.outcome for run in fleet.store.history(name, 200)}
        for slot, outcome in outcomes.items():
            assert outcome in {"succeeded", "missed"}, (name, slot, outcome)
        gaps = missing_slots(by_entry.get(name, set()), start, end)
        if gaps:
            lost[name] = [(slot, outcomes.get(slot)) for slot in gaps]
    too_many = {
        name: gaps
        for name, gaps in lost.items()
        if len(gaps) > STALLED_TICKS or any(outcome == "succeeded" for _, outcome in gaps)
    }
    if too_many:
        logs = "\n".join(f"--- replica:\n{proc.stderr()[-2000:]}" for proc in fleet.replicas)
        raise AssertionError(
            f"ticks never run in [{first}, {last}] (slot, recorded outcome): {too_many}\n{logs}"
        )


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
