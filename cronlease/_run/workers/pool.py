"""A replica's workers: ``max_workers`` slots, and the threads that run won ticks' tasks.

One object counts the workers and runs them, so the count that decides how
many ticks a replica sends to the database (docs/design.md §4.3) is the count
of threads it can run them on:

- **slots**: a replica takes no more ticks than it has free workers
  (db-scheduler's rule): a lease won for a run that waits for a thread is a
  tick no other replica can run, started late or not at all. A slot is taken
  right before the acquisition and given back when the task returns, so runs
  won but not started count as busy. The slots live as long as the runner:
  a run still going from before a restart still holds one.
- **threads**: daemon threads started on demand up to ``max_workers``; since
  no more runs than slots are handed out, a won run never waits in the queue.
  Daemon threads, unlike ``concurrent.futures``' workers, never keep a process
  alive after shutdown gave up waiting for a task that hangs. Work submitted
  to a closed set of threads still runs, on a thread of its own: a run
  whose lease was won must run (or its lease would block the next tick).
  Each start of the scheduler opens a new set of threads.

Manual runs (run now) and ``run_tick`` take no slot: they run in the caller's
thread, not on a worker. Everything that runs on the pool does, catch-up and
further attempts included.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

__all__ = ["WorkerPool"]

logger = logging.getLogger("cronlease")


class WorkerPool:
    """``limit`` worker slots and the threads that run what took one; thread-safe."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a replica needs at least one worker slot")
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()
        # the acquirer and a catch-up may both wait for a slot
        self._waiters: list[Callable[[], None]] = []
        self._threads = _Threads(limit)

    # --- slots ------------------------------------------------------------

    @property
    def free(self) -> int:
        with self._lock:
            return self.limit - self._used

    def take(self, wanted: int) -> int:
        """Take up to ``wanted`` slots; return how many were taken (maybe 0)."""
        with self._lock:
            granted = max(0, min(wanted, self.limit - self._used))
            self._used += granted
            return granted

    def give_back(self, count: int = 1) -> None:
        """Return slots (a run ended, or a taken slot was not used); wakes a waiter."""
        if count <= 0:
            return
        with self._lock:
            if count > self._used:
                raise ValueError(f"{count} slot(s) given back, but only {self._used} taken")
            self._used -= count
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter()

    def when_free(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, at the next give-back, or at once if a slot is free now."""
        with self._lock:
            if self._used >= self.limit:
                if callback not in self._waiters:
                    self._waiters.append(callback)
                return
        callback()

    # --- threads ----------------------------------------------------------

    def submit(self, work: Callable[[], object]) -> None:
        """Run ``work`` on a worker thread (its slot was taken by the caller)."""
        self._threads.submit(work)

    def open(self) -> Callable[[], None]:
        """A new set of threads for a start of the scheduler; returns what closes that set
        and no other: a shutdown still closing while the next start opens closes its own
        threads, never the new start's. Closing lets idle threads end; work submitted
        to a closed set runs on a thread of its own."""
        threads = _Threads(self.limit)
        self._threads = threads
        return threads.close


class _Threads:
    """One start's daemon worker threads, started on demand up to ``max_workers``."""

    def __init__(self, max_workers: int) -> None:
        self._max_workers = max_workers
        self._queue: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self.closed = False

    def submit(self, work: Callable[[], object]) -> None:
        with self._lock:
            if self.closed:
                threading.Thread(
                    target=self._run_one, args=(work,), name="cronlease-worker-late", daemon=True
                ).start()
                return
            if self._idle > 0:
                self._idle -= 1
            elif len(self._threads) < self._max_workers:
                thread = threading.Thread(
                    target=self._work,
                    name=f"cronlease-worker-{len(self._threads) + 1}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
        self._queue.put(work)

    @staticmethod
    def _run_one(work: Callable[[], object]) -> None:
        try:
            work()
        except BaseException:  # a worker must survive anything a tick throws
            logger.exception("unexpected error in a cronlease worker")

    def _work(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            self._run_one(work)
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        with self._lock:
            self.closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
