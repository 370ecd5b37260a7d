"""The APScheduler glue: an executor that turns each fire into a leased tick.

APScheduler 3 does not pass a job its scheduled run time; an executor's
``_do_submit_job(job, run_times)`` receives it, so the slot is the fire time
APScheduler computed, never the clock at execution. Backlogs are coalesced
by APScheduler (``coalesce=True``) into the latest fire time.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from apscheduler.executors.base import BaseExecutor

from cronlease.runner import TickRunner
from cronlease.task import Task

__all__ = ["LeaseExecutor", "WorkerPool"]

logger = logging.getLogger("cronlease")


class WorkerPool:
    """Daemon worker threads, started on demand up to ``max_workers``.

    Daemon threads, unlike ``concurrent.futures``' workers, never keep a
    process alive after shutdown gave up waiting for a task that hangs.
    """

    def __init__(self, max_workers: int) -> None:
        self._max_workers = max_workers
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0

    def submit(self, work: Callable[[], None]) -> None:
        with self._lock:
            if self._idle == 0 and len(self._threads) < self._max_workers:
                thread = threading.Thread(
                    target=self._work,
                    name=f"cronlease-worker-{len(self._threads) + 1}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
            else:
                self._idle -= 1 if self._idle else 0
        self._queue.put(work)

    def _work(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            try:
                work()
            except BaseException:  # a worker must survive anything a tick throws
                logger.exception("unexpected error in a cronlease worker")
            with self._lock:
                self._idle += 1

    def shutdown(self) -> None:
        with self._lock:
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)


class LeaseExecutor(BaseExecutor):  # type: ignore[misc]
    """Runs each fired tick through :class:`TickRunner` on a worker thread."""

    def __init__(self, runner: TickRunner, tasks: Mapping[str, Task], max_workers: int) -> None:
        super().__init__()
        self._runner = runner
        self._tasks = tasks
        self._pool = WorkerPool(max_workers)

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        task = self._tasks.get(job.id)
        fire_time = run_times[-1]

        def tick() -> None:
            try:
                if task is not None:
                    self._runner.run_tick(task, fire_time)
            finally:
                self._run_job_success(job.id, [])

        self._pool.submit(tick)

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown()
