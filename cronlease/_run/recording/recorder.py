"""Recording outcomes and releasing leases: the end of every tick path.

One rule for every run (docs/design.md §4.8): a run that ended is recorded
with its outcome and its lease released in one fenced statement — together
with the other runs that end about then. Runs dispatched from a batch go
through the finisher thread (:class:`Finisher`), which groups them: runs of
one batch end at about the same moment, so it waits up to
FINISH_LINGER_SECONDS for those still going and a tick of many short tasks
costs about one finishing statement (a release is delayed by at most that; no
start ever is). A run made in the caller's thread (catch-up, run now) is
recorded at once, as a group of one, before its caller gets the outcome. A
run that shutdown already recorded as interrupted only has its lease
released, now that its task really returned: a lease is never released while
its task executes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from cronlease._events import EventBus, RunFinished
from cronlease._lease.model import FinishRequest, Outcome
from cronlease._lease.store import LeaseStore
from cronlease._run.replica_log.failure_lines import FailureLines, Finished
from cronlease._run.replica_log.run_lines import log_finished, log_interrupted
from cronlease._run.workers.active import SHUTDOWN_ERROR, ActiveRun, ActiveRuns
from cronlease._run.workers.execution import Ended
from cronlease._stats import Stats
from cronlease.errors import RowRefused, StoreError

__all__ = ["FINISH_LINGER_SECONDS", "Finisher", "Recorder"]

logger = logging.getLogger("cronlease")

#: how long the finisher waits for other runs of a batch to end before it writes
FINISH_LINGER_SECONDS = 0.02

T = TypeVar("T")


class Finisher(Generic[T]):
    """Collects ended runs and records them in groups, on a thread started on first use."""

    def __init__(self, record: Callable[[list[T]], None]) -> None:
        self._record = record
        self._changed = threading.Condition()
        self._queue: list[T] = []
        self._running = 0
        self._thread: threading.Thread | None = None
        self._closed = False
        #: a batch taken from the queue is being recorded
        self._writing = False

    def started(self) -> None:
        """Count a dispatched run as going: the finisher waits for it before writing."""
        with self._changed:
            self._running += 1

    def hold(self) -> None:
        """Count a batch still handing out runs as going, until :meth:`release`.

        Its first runs can end before the last are handed out; without the
        hold they would be written alone (a transaction more per tick).
        """
        self.started()

    def release(self) -> None:
        with self._changed:
            self._running -= 1
            if self._running == 0 and self._queue:
                self._changed.notify_all()

    def ended(self, item: T) -> None:
        """A counted run ended: record ``item`` with the others that end about now."""
        with self._changed:
            self._running -= 1
            self._queue.append(item)
            # The thread waits for a first entry, then for the last run of the
            # batch to end: wake it for those, not for each of a thousand runs.
            if len(self._queue) == 1 or self._running == 0:
                self._changed.notify_all()
            if self._thread is None or not self._thread.is_alive():
                self._closed = False
                self._thread = threading.Thread(
                    target=self._loop, name="cronlease-finisher", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._changed:
                while not self._queue and not self._closed:
                    self._changed.wait()
                if not self._queue:
                    return
                deadline = time.monotonic() + FINISH_LINGER_SECONDS
                while self._running > 0 and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(remaining)
                batch, self._queue = self._queue, []
                self._writing = True
            try:
                self._record(batch)
            except Exception:  # the thread must outlive any batch it records
                logger.exception("unexpected error recording %d finished run(s)", len(batch))
            finally:
                with self._changed:
                    self._writing = False

    def stop(self) -> threading.Thread | None:
        """Write what is queued, then stop the thread (started again if runs end later);
        returns the thread, to be joined within the shutdown's deadline — None when it
        has nothing to write (it ends by itself: a shutdown has nothing to wait for)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            return self._thread if self._queue or self._writing else None

    def close(self, timeout: float = 10.0) -> None:
        """:meth:`stop`, then wait up to ``timeout`` for the last write."""
        thread = self.stop()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)


class Recorder:
    """Writes ended runs to the store and reports them; owns the finisher thread."""

    def __init__(
        self, store: LeaseStore, active: ActiveRuns, stats: Stats, events: EventBus
    ) -> None:
        self._store = store
        self._active = active
        self._stats = stats
        self._events = events
        self._finisher: Finisher[Ended] = Finisher(self.record)
        self._failure_lines = FailureLines(store)

    # --- how a run reaches the recorder -------------------------------------

    def expect(self) -> None:
        """A run was handed to a worker: the finisher waits for it before writing."""
        self._finisher.started()

    def hold(self) -> None:
        """A batch is still handing out runs (until :meth:`unhold`): wait for it too."""
        self._finisher.hold()

    def unhold(self) -> None:
        self._finisher.release()

    def later(self, ended: Ended) -> None:
        """Record an expected run with the others of its batch, on the finisher thread."""
        self._finisher.ended(ended)

    def now(self, ended: Ended) -> None:
        """Record a run made in the caller's thread before returning."""
        self.record([ended])

    # --- the one rule -------------------------------------------------------

    def record(self, batch: Sequence[Ended]) -> None:
        """Record outcomes and release leases in one statement; then report each run.

        Whatever the write raises, the runs leave the running set: a run stuck
        there would have every later tick of its task skipped as an overlap.
        """
        # a run recorded before its task returned was counted then
        # a built-in task's runs are not counted (docs/design.md §4.11)
        counted = Counter(
            entry.outcome
            for entry in batch
            if not entry.run.interrupted and not entry.run.task.builtin
        )
        for outcome, count in counted.items():
            self._stats.add(f"runs_{outcome}", count)
        failures: dict[Ended, StoreError] = {}
        unreleased: set[int] = set()  # id() of the interrupted runs whose release failed
        try:
            failures = self._finish([entry for entry in batch if not entry.run.interrupted])
            for entry in batch:
                try:
                    if entry.run.interrupted:
                        unreleased.add(id(entry))
                        self._store.release(entry.run.lease)
                        unreleased.discard(id(entry))
                    elif entry in failures:
                        raise failures[entry]
                except StoreError as exc:
                    _not_recorded(entry.run, entry.outcome, exc)
                except Exception:
                    logger.exception("unexpected error recording %s", entry.run.task.full_name)
        finally:
            self._active.end(entry.run for entry in batch)
        report = self._events.wants(RunFinished)
        for entry in batch:
            lease = entry.run.lease
            if entry.run.recorded_as == "interrupted":
                log_interrupted(
                    entry.run.task,
                    lease,
                    entry.duration,
                    ended=True,
                    released=id(entry) not in unreleased,
                )
            else:
                log_finished(entry.run.task, lease, entry.outcome, entry.duration)
            if report:
                self._events.emit(
                    RunFinished(
                        task=lease.name,
                        slot=lease.slot,
                        fence=lease.fence,
                        manual=lease.manual,
                        outcome=entry.outcome,
                        duration=entry.duration,
                        error=entry.error,
                        attempt=lease.attempt,
                    )
                )
        self._failure_lines.recorded(
            [
                Finished(entry.run.task, entry.run.lease, entry.outcome)
                for entry in batch
                if not entry.run.interrupted and entry not in failures
            ]
        )

    def _finish(self, finishing: Sequence[Ended]) -> dict[Ended, StoreError]:
        """Record ``finishing`` in one statement; the entries that could not be recorded.

        A batch the database refused for one row's sake (not an outage) is
        recorded entry by entry, so one bad row costs one run's record.
        """
        try:
            self._store.finish_many(
                [
                    FinishRequest.of(entry.run.lease, entry.outcome, entry.error)
                    for entry in finishing
                ]
            )
        except RowRefused as exc:
            if len(finishing) == 1:
                return {finishing[0]: exc}
            failures: dict[Ended, StoreError] = {}
            for entry in finishing:
                failures.update(self._finish([entry]))
            return failures
        except StoreError as exc:
            return dict.fromkeys(finishing, exc)
        except Exception as exc:  # a driver error SQLAlchemy did not wrap, say
            logger.exception("unexpected error recording %d run(s)", len(finishing))
            return dict.fromkeys(finishing, StoreError(f"recording failed: {exc!r}"))
        return {}

    def interrupt(self, runs: Sequence[ActiveRun]) -> None:
        """Shutdown: record runs still executing as interrupted; keep their leases. Each
        is said once, by whoever sees it end (run_lines.log_interrupted)."""
        if not runs:
            return
        self._stats.add("runs_interrupted", sum(not run.task.builtin for run in runs))
        try:
            self._store.finish_many(
                [
                    FinishRequest.of(
                        run.lease,
                        "interrupted",
                        SHUTDOWN_ERROR,
                        release=False,
                    )
                    for run in runs
                ]
            )
        except StoreError as exc:
            names = ", ".join(run.task.full_name for run in runs)
            logger.warning("%s: could not record the interruption: %s", names, exc)

    def timed_out(self, run: ActiveRun) -> None:
        """A sync task still runs past its timeout: record it ``timed_out``, keep the lease
        (no longer renewed, it expires within its TTL), say so once."""
        timeout = run.task.timeout
        logger.warning(
            "%s (slot %s) is still running past its timeout of %g s: recorded timed_out; "
            "its lease is no longer renewed and expires within %.3g s, after which another "
            "replica may start the task. A Python thread cannot be stopped: the call goes on, "
            "and this replica starts the task again only once it returns",
            run.task.full_name,
            run.lease.slot,
            timeout,
            run.lease.ttl,
        )
        self._stats.add("runs_timed_out", not run.task.builtin)
        error = f"still running past its timeout of {timeout:g} s (the thread cannot be stopped)"
        try:
            self._store.finish_many(
                [FinishRequest.of(run.lease, "timed_out", error, release=False)]
            )
        except StoreError as exc:
            logger.warning("%s: could not record the timeout: %s", run.task.full_name, exc)

    def stop(self) -> threading.Thread | None:
        """Write what is queued, then stop the finisher thread; returns it, to join.

        A run that ends later starts the thread again: it is recorded whenever it ends.
        """
        return self._finisher.stop()


def _not_recorded(run: ActiveRun, outcome: Outcome, error: StoreError) -> None:
    logger.warning(
        "%s (slot %s): could not record the outcome %s: %s; the lease expires by itself",
        run.task.full_name,
        run.lease.slot,
        outcome,
        error,
    )
