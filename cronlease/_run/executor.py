"""The APScheduler glue: fired ticks become leased runs, acquired in batches.

APScheduler 3 does not pass a job its scheduled run time; an executor's
``_do_submit_job(job, run_times)`` receives it, so the slot is the fire time
APScheduler computed, never the clock at execution. Backlogs are coalesced
by APScheduler (``coalesce=True``) into the latest fire time.

Tasks whose schedules are identical (same fingerprint: kind, expression,
time zone, anchor) share one APScheduler job, a *schedule group*: their
triggers would fire at the same instants anyway, and APScheduler's per-job
work (run-time computation, job-store update, submission event) then costs
once per distinct schedule per tick, not once per task. Everything that is
per task (grace, overlap, pause, lease, late pickup, catch-up, run now)
happens after the fire, in :class:`TickRunner`, for each member.

APScheduler calls ``submit_job`` once per due job within one pass of
``_process_jobs``. :class:`BatchingScheduler` tells the executor when a pass
ends; the executor then hands every tick of that pass, as one batch, to its
acquirer thread, which checks each tick's grace, acquires all their leases
with one statement (two at once for a large batch it expects to win; see
:mod:`cronlease._run.batching`) and gives the winners to the worker pool as soon
as each is registered. A thousand ticks due together therefore cost one or
two round trips, and losers never queue behind winners for a worker thread.
Ticks a replica expects to lose (another replica won the task's previous
tick) wait a little on the acquirer's timer, as do late pickups until the
held lease expires; each then goes with whatever else is due.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from apscheduler.executors.base import BaseExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from cronlease._run.runner import Tick, TickRunner
from cronlease._task import Task

__all__ = ["BatchingScheduler", "LeaseExecutor", "WorkerPool"]

logger = logging.getLogger("cronlease")
# how long shutdown waits for an acquisition in flight before giving up on it
ACQUIRER_JOIN_SECONDS = 5.0


class WorkerPool:
    """Daemon worker threads, started on demand up to ``max_workers``.

    Daemon threads, unlike ``concurrent.futures``' workers, never keep a
    process alive after shutdown gave up waiting for a task that hangs. Work
    submitted after :meth:`shutdown` still runs, on a thread of its own: a run
    whose lease was won must run (or its lease would block the next tick).
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


class LeaseExecutor(BaseExecutor):  # type: ignore[misc]
    """Acquires fired ticks in batches on one thread; runs the winners on worker threads.

    ``groups`` maps each APScheduler job id to the tasks it fires (a schedule
    group). It is read at every fire, so the scheduler may replace an entry
    (with a new tuple) while running to add a task.
    """

    def __init__(
        self, runner: TickRunner, groups: Mapping[str, Sequence[Task]], max_workers: int
    ) -> None:
        super().__init__()
        self._runner = runner
        self._groups = groups
        self._pool = WorkerPool(max_workers)
        # (job id, ticks) of the current _process_jobs pass, until flush() (scheduler thread)
        self._pending: list[tuple[str, list[Tick]]] = []
        self._pending_lock = threading.Lock()
        self._inbox: queue.SimpleQueue[list[tuple[str, list[Tick]]] | None] = queue.SimpleQueue()
        self._acquirer: threading.Thread | None = None
        #: set when the scheduler calls flush() after each pass (BatchingScheduler)
        self.flush_after_pass = False

    def start(self, scheduler: Any, alias: str) -> None:
        super().start(scheduler, alias)
        self.flush_after_pass = isinstance(scheduler, BatchingScheduler)
        self._acquirer = threading.Thread(
            target=self._acquire_loop, name="cronlease-acquirer", daemon=True
        )
        self._acquirer.start()

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        members = self._groups.get(job.id)
        if not members:
            return
        fire_time = run_times[-1]
        ticks = [Tick(task, fire_time) for task in members]
        with self._pending_lock:
            self._pending.append((job.id, ticks))
        if not self.flush_after_pass:
            self.flush()

    def flush(self) -> None:
        """Send the ticks submitted since the last flush to the acquirer, as one batch."""
        with self._pending_lock:
            pending, self._pending = self._pending, []
        if pending:
            self._inbox.put(pending)

    def _acquire_loop(self) -> None:
        retries: list[tuple[float, int, Tick]] = []
        order = itertools.count()
        while True:
            timeout = None if not retries else max(0.0, retries[0][0] - time.monotonic())
            try:
                first = self._inbox.get(timeout=timeout)
            except queue.Empty:
                first = []
            if first is None:
                return
            fired = list(first)
            stop = False
            while True:  # everything else already waiting goes in the same batch
                try:
                    more = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                fired.extend(more)
            # Overlap and lateness are the runner's: APScheduler's instance count is
            # released as soon as the tick is decided, not when its run ends.
            ticks: list[Tick] = []
            for job_id, group_ticks in fired:
                self._run_job_success(job_id, [])
                ticks.extend(group_ticks)
            ticks, later = self._runner.defer(ticks)
            for due, tick in later:
                heapq.heappush(retries, (due, next(order), tick))
            now = time.monotonic()
            while retries and retries[0][0] <= now:
                ticks.append(heapq.heappop(retries)[2])
            for batch in _distinct_tasks(ticks):
                try:
                    # winners go to the pool one by one while the rest are registered
                    decided = self._runner.acquire_ticks(batch, dispatch=self._pool.submit)
                except Exception:  # the acquirer must survive anything
                    logger.exception("unexpected error acquiring a batch of ticks")
                    continue
                for due, retry in decided.retries:
                    heapq.heappush(retries, (due, next(order), retry))
            if stop:
                return

    def shutdown(self, wait: bool = True) -> None:
        self._inbox.put(None)
        acquirer = self._acquirer
        if acquirer is not None and acquirer is not threading.current_thread():
            # Stop accepting was set before: queued ticks are skipped quickly.
            acquirer.join(ACQUIRER_JOIN_SECONDS)
        self._pool.shutdown()


def _distinct_tasks(ticks: list[Tick]) -> list[list[Tick]]:
    """Split ``ticks`` into batches that name each task at most once, oldest first."""
    names = {tick.task.full_name for tick in ticks}
    if len(names) == len(ticks):  # the usual case: one tick per task
        return [ticks] if ticks else []
    batches: list[list[Tick]] = []
    seen: list[set[str]] = []
    for tick in ticks:
        name = tick.task.full_name
        for names, batch in zip(seen, batches, strict=True):
            if name not in names:
                names.add(name)
                batch.append(tick)
                break
        else:
            seen.append({name})
            batches.append([tick])
    return batches


class BatchingScheduler(BackgroundScheduler):  # type: ignore[misc]
    """A BackgroundScheduler that tells its executors when a pass over due jobs has ended."""

    def _process_jobs(self) -> float | None:
        try:
            wait_seconds: float | None = super()._process_jobs()
        finally:
            for executor in list(self._executors.values()):
                if isinstance(executor, LeaseExecutor):
                    executor.flush()
        return wait_seconds
