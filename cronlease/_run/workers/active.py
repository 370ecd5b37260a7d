"""The runs in progress on this replica: the local overlap gate, renewed leases, shutdown.

A won lease is registered here before its run is handed to a worker, so a
tick of the same task that fires meanwhile is skipped as ``overlap`` rather
than sent to the database, and its heartbeat (:mod:`cronlease._run.workers.heartbeat`)
starts at once: the lease is renewed even while the run waits for a thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from cronlease._events import EventBus, RunLost
from cronlease._lease.model import Lease, Outcome
from cronlease._lease.store import LeaseStore
from cronlease._run.replica_log.outage import OutageLog
from cronlease._run.workers.heartbeat import Heartbeats
from cronlease._stats import Stats
from cronlease._task import Liveness, Task

__all__ = ["SHUTDOWN_ERROR", "ActiveRun", "ActiveRuns"]

#: the error of a run recorded ``interrupted`` because the replica stopped during it
SHUTDOWN_ERROR = "the scheduler shut down while the run was in progress"


@dataclass(eq=False)
class ActiveRun:
    """A run that holds its lease on this replica, from the win until it is recorded."""

    task: Task
    lease: Lease
    liveness: Liveness
    started: float
    #: what was recorded while the task still executed — ``interrupted`` (the process
    #: exits) or ``timed_out`` (its timeout) — with the lease left to expire; once the
    #: task returns, the lease is only released
    recorded_as: Outcome | None = None
    #: the task returned (set with the registry's lock, so a timeout cannot race it)
    returned: bool = False
    #: this attempt follows one whose replica died mid-run (RunContext.recovering)
    recovering: bool = False

    @property
    def interrupted(self) -> bool:
        """Recorded before its task returned: the end of the run only releases the lease."""
        return self.recorded_as is not None


class ActiveRuns:
    """The registry of runs in progress; thread-safe."""

    def __init__(
        self, store: LeaseStore, stats: Stats, events: EventBus, outage: OutageLog
    ) -> None:
        self._stats = stats
        self._events = events
        self._heartbeats = Heartbeats(store, outage)
        self._runs: dict[str, ActiveRun] = {}
        self._changed = threading.Condition()
        # closed while runs were still going: close the heartbeats when the last one ends
        self._close_when_idle = False

    def begin(self, task: Task, lease: Lease, *, recovering: bool = False) -> ActiveRun:
        """Start renewing a won lease and count its run as in progress."""

        def on_lost() -> None:
            self._stats.add("leases_lost", not task.builtin)  # its event is not heard either
            self._events.emit(RunLost(task=task.full_name, slot=lease.slot, fence=lease.fence))

        liveness = self._heartbeats.track(lease, on_lost)
        run = ActiveRun(task, lease, liveness, started=time.monotonic(), recovering=recovering)
        with self._changed:
            self._runs[task.full_name] = run
            self._close_when_idle = False
        return run

    def stop_renewing(self, run: ActiveRun) -> None:
        """The run's task returned (or shutdown gave up on it): no more renewals."""
        self._heartbeats.stop_tracking(run.liveness)

    def end(self, runs: Iterable[ActiveRun]) -> None:
        """The runs were recorded: their tasks may start again here."""
        with self._changed:
            for run in runs:
                name = run.task.full_name
                if self._runs.get(name) is run:
                    del self._runs[name]
            self._changed.notify_all()
            close = self._close_when_idle and not self._runs
            self._close_when_idle = self._close_when_idle and not close
        if close:
            self._heartbeats.close()

    def names(self, *, include_manual: bool = True) -> set[str]:
        with self._changed:
            if include_manual:
                return set(self._runs)
            return {name for name, run in self._runs.items() if not run.lease.manual}

    def interrupt(self) -> list[ActiveRun]:
        """Mark every run still executing (and not yet recorded) interrupted, stop
        renewing it; return them."""
        with self._changed:
            still = [
                run for run in self._runs.values() if run.recorded_as is None and not run.returned
            ]
            for run in still:
                run.recorded_as = "interrupted"
        for run in still:
            self.stop_renewing(run)
        return still

    def give_up(self, run: ActiveRun, outcome: Outcome) -> bool:
        """The task of ``run`` is still executing past its limit: mark it ``outcome`` and
        stop renewing its lease, unless it returned (or was recorded) already."""
        with self._changed:
            if run.returned or run.recorded_as is not None:
                return False
            run.recorded_as = outcome
        self.stop_renewing(run)
        return True

    def returned(self, run: ActiveRun) -> Outcome | None:
        """The task of ``run`` returned; what was recorded for it meanwhile, if anything."""
        with self._changed:
            run.returned = True
            return run.recorded_as

    def wait_gone(self, names: set[str], timeout: float) -> bool:
        """Wait until none of ``names`` is in progress; False if some still are then."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while names & self._runs.keys():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until no run is in progress; False if some still are at the deadline."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while self._runs:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

    def close(self) -> None:
        """Stop the heartbeat thread — now if no run is in progress, else when the last
        one ends: a run keeps its lease renewed until it really ends (§4.10)."""
        with self._changed:
            self._close_when_idle = bool(self._runs)
            if self._close_when_idle:
                return
        self._heartbeats.close()
