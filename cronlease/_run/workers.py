"""The worker threads that run won ticks' tasks."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

__all__ = ["WorkerPool"]

logger = logging.getLogger("cronlease")


class WorkerPool:
    """Daemon worker threads, started on demand up to ``max_workers``.

    Daemon threads, unlike ``concurrent.futures``' workers, never keep a
    process alive after shutdown gave up waiting for a task that hangs. Work
    submitted after :meth:`shutdown` still runs, on a thread of its own: a run
    whose lease was won must run (or its lease would block the next tick).
    The runner never hands it more than ``max_workers`` runs at once
    (:mod:`cronlease._run.capacity`), so a won run does not wait in its queue.
    """

    def __init__(self, max_workers: int) -> None:
        self._max_workers = max_workers
        self._queue: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    def submit(self, work: Callable[[], object]) -> None:
        with self._lock:
            if self._closed:
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

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
