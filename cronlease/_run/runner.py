"""One tick, start to end: grace check, lease, run, record, release.

This is everything that happens when APScheduler fires a task; it knows
nothing of APScheduler, so tests and tools can drive a tick directly. Order
matters: the grace check comes before the acquisition, so a tick that waited
in a queue never takes a lease it is too late to use.

Two ways in, with the same per-tick rules:

- :meth:`TickRunner.run_tick` runs one tick in the calling thread (catch-up,
  tools, tests).
- :meth:`TickRunner.acquire_ticks` takes every tick that fell due together,
  checks each one's grace, overlap and shutdown, acquires all the survivors'
  leases in one batch (:mod:`cronlease._run.batching`), and hands out the
  winners' runs to dispatch, so only winners ever occupy a worker thread.
  Their outcomes are recorded by a finisher thread (:mod:`cronlease._run.finisher`):
  runs that end together share one statement, so a tick of many short tasks
  costs one acquire (two for a large batch) and about one finish.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from cronlease._events import (
    DatabaseRecovered,
    DatabaseUnavailable,
    EventBus,
    LeaseLost,
    RunFinished,
    RunStarted,
    SkipReason,
    TickSkipped,
)
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.store import LeaseStore
from cronlease._run.batching import BatchDecider, warn_future
from cronlease._run.finisher import Finisher
from cronlease._run.heartbeat import Heartbeats
from cronlease._run.ticks import Batch, Tick, Timing
from cronlease._stats import Stats
from cronlease._task import Liveness, RunContext, Task
from cronlease._timing.schedule import slot_of, time_of_slot
from cronlease.errors import StoreError, TaskTimeout

__all__ = ["Batch", "Tick", "TickRunner"]

logger = logging.getLogger("cronlease")


@dataclass(eq=False)
class _ActiveRun:
    task: Task
    lease: Lease
    liveness: Liveness
    started: float
    interrupted: bool = False


@dataclass(eq=False)
class _Finished:
    active: _ActiveRun
    outcome: str
    error: str | None
    duration: float


class DatabaseHealth:
    """Logs an outage once when it starts and once when it ends, not once per tick."""

    def __init__(self, stats: Stats, events: EventBus) -> None:
        self._stats = stats
        self._events = events
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._skipped = 0

    @property
    def down_since(self) -> float | None:
        return self._down_since

    def failed(self, what: str, error: StoreError) -> None:
        self._stats.add("lease_errors")
        with self._lock:
            self._skipped += 1
            if self._down_since is not None:
                logger.debug("%s skipped: %s", what, error)
                return
            self._down_since = time.monotonic()
        logger.warning(
            "database unavailable, %s skipped (and later ticks until it answers): %s", what, error
        )
        self._events.emit(DatabaseUnavailable(error=str(error)))

    def succeeded(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is None:
                return
            outage, skipped = time.monotonic() - self._down_since, self._skipped
            self._down_since, self._skipped = None, 0
        logger.warning(
            "database available again after %.1f s; %d tick(s) were skipped", outage, skipped
        )
        self._events.emit(DatabaseRecovered(outage=outage, skipped_ticks=skipped))


class TickRunner:
    """Runs ticks of declared tasks on this replica."""

    def __init__(
        self,
        store: LeaseStore,
        holder: str,
        *,
        stats: Stats | None = None,
        loop_getter: Callable[[], asyncio.AbstractEventLoop | None] = lambda: None,
        on_schema_ready: Callable[[], None] = lambda: None,
        events: EventBus | None = None,
    ) -> None:
        self.store = store
        self.holder = holder
        self.stats = stats or Stats()
        self.events = events or EventBus()
        self.health = DatabaseHealth(self.stats, self.events)
        self.heartbeats = Heartbeats(store)
        self._loop_getter = loop_getter
        self._active: dict[str, _ActiveRun] = {}
        self._active_changed = threading.Condition()
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        self._on_schema_ready = on_schema_ready
        self._stopped = threading.Event()
        # runs dispatched from batches are recorded together by the finisher
        self._finisher: Finisher[_Finished] = Finisher(self._finish_batch)
        self._batches = BatchDecider(self)

    # --- schema -----------------------------------------------------------

    @property
    def schema_ready(self) -> bool:
        return self._schema_ready

    def ensure_schema(self) -> None:
        """Create the tables once per process, then run the ready hook; raises StoreError."""
        if self._schema_ready:
            return
        with self._schema_lock:
            if not self._schema_ready:
                self.store.create_tables()
                self._schema_ready = True
                try:
                    self._on_schema_ready()
                except StoreError as exc:
                    logger.debug("start-up check skipped: %s", exc)

    # --- ticks ------------------------------------------------------------

    def _skipped(self, task: Task, slot: int, reason: SkipReason) -> None:
        self.stats.add(f"ticks_skipped_{reason}")
        self.events.emit(TickSkipped(task=task.full_name, slot=slot, reason=reason))

    def run_tick(self, task: Task, fire_time: datetime, *, catch_up: bool = False) -> str | None:
        """Run the tick of ``task`` scheduled at ``fire_time`` if this replica wins it.

        Returns the recorded outcome, or None when the tick was skipped here.
        Never raises for a database error or a failing task. A ``catch_up``
        tick (missed while every replica was down) is exempt from the grace.
        """
        request = self._admit(task, fire_time, datetime.now(timezone.utc), exempt=catch_up)
        if request is None:
            return None
        pickup_until = None if catch_up else fire_time.timestamp() + task.grace_for(fire_time)
        return self._acquire_and_run(task, request, fire_time, pickup_until)

    def _admit(
        self,
        task: Task,
        fire_time: datetime,
        now: datetime,
        *,
        exempt: bool,
        timings: dict[tuple[str, datetime], Timing] | None = None,
        running: Collection[str] | None = None,
    ) -> AcquireRequest | None:
        """The per-tick checks before any acquisition: grace (unless ``exempt``), then
        local overlap. Returns the request to send, or None (skip emitted).

        A batch passes ``timings`` (shared by the tasks of one schedule) and
        ``running`` (the names in progress when it began) so that each check
        costs a dictionary look-up, not a schedule computation and a lock.
        """
        key = (task.schedule_key, fire_time)
        timing = None if timings is None else timings.get(key)
        if timing is None:
            schedule = task.schedule
            timing = Timing(
                slot=slot_of(fire_time),
                lateness=(now - fire_time).total_seconds(),
                ttl=schedule.ttl(fire_time),
                grace=schedule.grace(fire_time),
                tolerance=schedule.tolerance(fire_time),
            )
            if timings is not None:
                timings[key] = timing
        slot = timing.slot
        grace = timing.grace if task.grace is None else task.grace
        if timing.lateness > grace and not exempt:
            self.stats.add("ticks_missed")
            self._skipped(task, slot, "misfire")
            logger.warning(
                "%s: tick %s skipped: it started %.3f s late, past its grace of %.3g s",
                task.full_name,
                fire_time.isoformat(),
                timing.lateness,
                grace,
            )
            return None
        if running is None:
            with self._active_changed:
                overlapping = task.full_name in self._active
        else:
            overlapping = task.full_name in running
        if overlapping:
            self._skipped(task, slot, "overlap")
            logger.debug(
                "%s: tick %s skipped: the previous run is still going", task.full_name, slot
            )
            return None
        return AcquireRequest(
            name=task.full_name,
            slot=slot,
            ttl=timing.ttl if task.lease_ttl is None else task.lease_ttl,
            holder=self.holder,
            tolerance=timing.tolerance,
            fingerprint=task.schedule_key,
        )

    def defer(self, ticks: Sequence[Tick]) -> tuple[list[Tick], list[tuple[float, Tick]]]:
        """Split ``ticks`` into those to acquire now and those to acquire a little later
        (:meth:`BatchDecider.defer`)."""
        return self._batches.defer(ticks)

    def acquire_ticks(
        self,
        ticks: Sequence[Tick],
        dispatch: Callable[[Callable[[], str]], object] | None = None,
    ) -> Batch:
        """Decide ticks that fell due together: the survivors' leases in one batch.

        Per tick, exactly as :meth:`run_tick`: shutdown, then grace, then local
        overlap; then one acquisition for all survivors (each task at most once
        in ``ticks``); refusals emit TickSkipped with their reason, and a tick
        refused because an older slot's lease is still held comes back in
        :attr:`Batch.retries` if that lease expires within the tick's grace.
        Winners are registered as running (their heartbeats started) before
        their run is handed out: to ``dispatch`` one by one as each is
        registered, so the first start while the rest are registered, or else
        in :attr:`Batch.runs`. Call each run once, on a worker thread, to run
        the task and record its outcome. Never raises for a database error.
        """
        return self._batches.acquire(ticks, dispatch)

    def _start_grouped(self, task: Task, lease: Lease) -> Callable[[], str]:
        """Register a won lease of a batch as running; its run, to call on a worker thread."""
        active = self._begin(task, lease)
        self._finisher.started()
        return functools.partial(self._execute, active, grouped=True)

    def _running_names(self) -> set[str]:
        with self._active_changed:
            return set(self._active)

    @property
    def accepting(self) -> bool:
        """False once :meth:`stop_accepting` was called: new ticks are skipped."""
        return not self._stopped.is_set()

    def _refused(self, task: Task, slot: int, reason: SkipReason, fire_time: datetime) -> None:
        self.stats.add("ticks_not_acquired")
        self._skipped(task, slot, reason)
        if reason == "future":
            warn_future(task, fire_time)
        else:
            logger.debug(
                "%s: tick %s: not acquired (%s)", task.full_name, fire_time.isoformat(), reason
            )

    def run_now(self, task: Task) -> str | None:
        """A manual run: through the lease (never beside a scheduled run), slot cursor untouched."""
        now = datetime.now(timezone.utc)
        request = AcquireRequest(
            name=task.full_name,
            slot=slot_of(now),
            ttl=task.ttl(now),
            holder=self.holder,
            fingerprint=task.schedule.fingerprint,
            manual=True,
        )
        return self._acquire_and_run(task, request, now, None)

    def _acquire_and_run(
        self,
        task: Task,
        request: AcquireRequest,
        fire_time: datetime,
        pickup_until: float | None,
    ) -> str | None:
        """Acquire and run; with ``pickup_until``, wait once for a dead holder's lease to expire.

        A replica refused only because an older slot's lease is still held
        retries once at that lease's expiry if that comes before
        ``pickup_until`` (epoch seconds): a holder that died mid-run then costs
        the tick it interrupted, not the next one as well.
        """
        what = f"{task.full_name}: tick {fire_time.isoformat()}"
        for attempt in (1, 2):
            if self._stopped.is_set():
                logger.debug("%s skipped: the scheduler is shutting down", what)
                self._skipped(task, request.slot, "shutdown")
                return None
            try:
                self.ensure_schema()
                result = self.store.try_acquire(request)
            except StoreError as exc:
                self._skipped(task, request.slot, "error")
                self.health.failed(what, exc)
                return None
            self.health.succeeded()
            if isinstance(result, Lease):
                if attempt == 2:
                    logger.info("%s: taken over once the previous holder's lease expired", what)
                return self._run(task, result)
            wait = None if result.expires_in is None else result.expires_in + 0.002
            if (
                attempt == 1
                and result.reason == "held"
                and wait is not None
                and pickup_until is not None
                and time.time() + wait <= pickup_until
            ):
                logger.debug(
                    "%s: an earlier run's lease is still held; trying again when it expires "
                    "in %.3f s",
                    what,
                    wait,
                )
                self.stats.add("late_pickups")
                if self._stopped.wait(wait):
                    self._skipped(task, request.slot, "shutdown")
                    return None
                continue
            self._refused(task, request.slot, result.reason, fire_time)
            return None
        return None

    def _run(self, task: Task, lease: Lease) -> str:
        return self._execute(self._begin(task, lease), grouped=False)

    def _begin(self, task: Task, lease: Lease) -> _ActiveRun:
        """Start renewing a won lease and count the run as in progress (overlap gate)."""

        def on_lost() -> None:
            self.stats.add("leases_lost")
            self.events.emit(LeaseLost(task=task.full_name, slot=lease.slot, fence=lease.fence))

        liveness = self.heartbeats.track(lease, on_lost)
        active = _ActiveRun(task, lease, liveness, started=time.monotonic())
        with self._active_changed:
            self._active[task.full_name] = active
        return active

    def _execute(self, active: _ActiveRun, *, grouped: bool) -> str:
        """Run the task of a won lease, then record the outcome and release the lease."""
        task, lease, liveness = active.task, active.lease, active.liveness
        active.started = time.monotonic()
        context = RunContext(
            name=task.name,
            slot=lease.slot,
            fence=lease.fence,
            scheduled_for=time_of_slot(lease.slot),
            manual=lease.manual,
            liveness=liveness,
        )
        error: str | None = None
        outcome = "succeeded"
        if self.events.wants(RunStarted):
            self.events.emit(
                RunStarted(
                    task=task.full_name, slot=lease.slot, fence=lease.fence, manual=lease.manual
                )
            )
        try:
            self._call(task, context)
        except TaskTimeout as exc:
            outcome, error = "timed_out", str(exc)
            logger.warning("%s (slot %s) timed out: %s", task.full_name, lease.slot, exc)
        except Exception as exc:
            outcome = "failed"
            error = "".join(traceback.format_exception(exc)).strip()
            logger.exception("%s (slot %s) failed", task.full_name, lease.slot)
        except BaseException:
            outcome, error = "interrupted", "the replica was interrupted during the run"
            raise
        finally:
            self.heartbeats.stop_tracking(liveness)
            if liveness.lost:
                summary = f"the task {outcome}" + (f": {error}" if error else "")
                outcome, error = "lost", f"lease lost during the run; {summary}"
            duration = time.monotonic() - active.started
            if grouped:
                # recorded, logged and reported by the finisher thread, with others
                self._finisher.ended(_Finished(active, outcome, error, duration))
            else:
                self._record(active, outcome, error)
                self._report_finished(lease, outcome, duration, error, info=True, report=True)
        return outcome

    def _report_finished(
        self,
        lease: Lease,
        outcome: str,
        duration: float,
        error: str | None,
        *,
        info: bool,
        report: bool,
    ) -> None:
        """The run's INFO line (with ``info``) and its RunFinished event (with ``report``)."""
        if info:
            logger.info(
                "%s slot=%s fence=%s outcome=%s duration=%.3fs",
                lease.name,
                lease.slot,
                lease.fence,
                outcome,
                duration,
            )
        if report:
            self.events.emit(
                RunFinished(
                    task=lease.name,
                    slot=lease.slot,
                    fence=lease.fence,
                    manual=lease.manual,
                    outcome=outcome,
                    duration=duration,
                    error=error,
                )
            )

    def _finish_batch(self, batch: list[_Finished]) -> None:
        """Record outcomes and release leases in one statement; then report each run."""
        error: StoreError | None = None
        released = [entry for entry in batch if not entry.active.interrupted]
        try:
            self.store.finish_many([(e.active.lease, e.outcome, e.error) for e in released])
        except StoreError as exc:
            error = exc
        for outcome, count in Counter(entry.outcome for entry in batch).items():
            self.stats.add(f"runs_{outcome}", count)
        for entry in batch:
            active = entry.active
            try:
                if active.interrupted:
                    # Shutdown recorded it as interrupted; free its lease now it ended.
                    self.store.release(active.lease)
                elif error is not None:
                    raise error
            except StoreError as exc:
                self._not_recorded(active, entry.outcome, exc)
            except Exception:
                logger.exception("unexpected error recording %s", active.task.full_name)
        with self._active_changed:
            for entry in batch:
                name = entry.active.task.full_name
                if self._active.get(name) is entry.active:
                    del self._active[name]
            self._active_changed.notify_all()
        info = logger.isEnabledFor(logging.INFO)
        report = self.events.wants(RunFinished)
        for entry in batch:
            self._report_finished(
                entry.active.lease,
                entry.outcome,
                entry.duration,
                entry.error,
                info=info,
                report=report,
            )

    @staticmethod
    def _not_recorded(active: _ActiveRun, outcome: str, error: StoreError) -> None:
        logger.warning(
            "%s (slot %s): could not record the outcome %s: %s; the lease expires by itself",
            active.task.full_name,
            active.lease.slot,
            outcome,
            error,
        )

    def _record(self, active: _ActiveRun, outcome: str, error: str | None) -> None:
        """Record the outcome of a run of its own (not of a batch) and release its lease."""
        self.stats.add(f"runs_{outcome}")
        try:
            if not active.interrupted:
                # Release only here, when the task has really returned.
                self.store.finish(active.lease, outcome, error, release=True)
            else:
                # Shutdown already recorded it as interrupted; free the lease now it ended.
                self.store.release(active.lease)
        except StoreError as exc:
            self._not_recorded(active, outcome, exc)
        finally:
            with self._active_changed:
                if self._active.get(active.task.full_name) is active:
                    del self._active[active.task.full_name]
                self._active_changed.notify_all()

    def _call(self, task: Task, context: RunContext) -> None:
        args: tuple[Any, ...] = (context, *task.args) if task.wants_context else task.args
        if not task.is_async:
            task.func(*args, **task.kwargs)
            return
        loop = self._loop_getter()
        if loop is not None and loop.is_running():
            # On the application's loop; this worker thread just waits for it.
            asyncio.run_coroutine_threadsafe(task.func(*args, **task.kwargs), loop).result()
        else:
            asyncio.run(task.func(*args, **task.kwargs))

    # --- lifecycle --------------------------------------------------------

    @property
    def running(self) -> list[str]:
        with self._active_changed:
            return sorted(self._active)

    def stop_accepting(self) -> None:
        """Take no new leases from now on (ticks already queued are skipped)."""
        self._stopped.set()

    def start_accepting(self) -> None:
        self._stopped = threading.Event()

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until no run is in progress; False if some still are at the deadline."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._active_changed:
            while self._active:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._active_changed.wait(remaining)
            return True

    def interrupt_running(self) -> None:
        """Record runs still executing as interrupted; keep their leases until they expire."""
        with self._active_changed:
            still = [run for run in self._active.values() if not run.interrupted]
        for run in still:
            run.interrupted = True
            self.heartbeats.stop_tracking(run.liveness)
            logger.warning(
                "%s (slot %s) still running at shutdown: recorded as interrupted; "
                "its lease expires in at most %.3g s",
                run.task.full_name,
                run.lease.slot,
                run.lease.ttl,
            )
            try:
                self.store.finish(
                    run.lease,
                    "interrupted",
                    "the scheduler shut down while the run was in progress",
                    release=False,
                )
            except StoreError as exc:
                logger.warning("%s: could not record the interruption: %s", run.task.full_name, exc)

    def close(self) -> None:
        self._finisher.close()  # it writes what is queued, then stops
        self._batches.close()
        self.heartbeats.close()
