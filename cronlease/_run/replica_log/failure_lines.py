"""One log line when a task becomes failing, one when it recovers — fleet-wide.

Every failed run logs its own ERROR; what an operator also needs is the alert
the status model raises (docs/design.md §5.28) said once in the log: "NAME is
failing: 3 runs in a row failed". The streak is the fleet's, so it is read from
the history, not counted here: after a batch of runs is recorded, the tasks
among them that failed have their latest runs read (one statement for all of
them; failures are rare, so the tick path pays nothing). The run whose failure
makes the streak reach ``alert_after`` logs the WARNING — one run, on one
replica, so one line per streak across the fleet. A success logs the INFO
"recovered" line when the runs before it were a failing streak; only tasks this
replica saw failing are checked, so a healthy fleet's successes read nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from cronlease._lease.model import Lease, Outcome, RunRecord
from cronlease._lease.runs import FAILURE_OUTCOMES, failure_streak, summarize_error
from cronlease._lease.store import LeaseStore
from cronlease._task import Task
from cronlease.errors import StoreError

__all__ = ["FailureLines", "Finished"]

logger = logging.getLogger("cronlease")

#: runs read after a failure or a recovery: "recovered after N" is exact up to about this
RECOVERY_LOOKBACK = 21


@dataclass(frozen=True)
class Finished:
    """A run as recorded: its task, its lease and its outcome."""

    task: Task
    lease: Lease
    outcome: Outcome


class FailureLines:
    """Says when a task starts and stops failing, after each recorded batch (the finisher
    thread's, or a run-now caller's: the set is only added to and discarded from)."""

    def __init__(self, store: LeaseStore) -> None:
        self._store = store
        #: tasks this replica saw failing: their next success here is checked for recovery
        self._failing: set[str] = set()

    def recorded(self, runs: Sequence[Finished]) -> None:
        failed = [run for run in runs if run.outcome in FAILURE_OUTCOMES]
        failing = self._failing
        succeeded = [r for r in runs if r.outcome == "succeeded" and r.task.full_name in failing]
        if not failed and not succeeded:
            return
        watched = (*failed, *succeeded)
        try:
            # the run itself, the streak before it (alert_after runs at least, and one
            # still running), and enough to count a short streak exactly when it ends
            history = self._store.recent_runs(
                [run.task.full_name for run in watched],
                max(self._limit(run) for run in watched),
            )
        except StoreError as exc:
            # the runs themselves are recorded and logged; only the summary line is lost
            logger.debug("failure streaks not read: %s", exc)
            return
        for run in failed:
            self._after_failure(run, history.get(run.task.full_name, []))
        for run in succeeded:
            self._after_success(run, history.get(run.task.full_name, []))

    @staticmethod
    def _limit(run: Finished) -> int:
        return max(RECOVERY_LOOKBACK, run.task.alert_after + 2)

    def _after_failure(self, run: Finished, runs: list[RunRecord]) -> None:
        name, alert_after = run.task.full_name, run.task.alert_after
        count, _ = failure_streak([record.outcome for record in runs])
        if count >= alert_after:
            self._failing.add(name)
        newest = next((r for r in runs if r.outcome in FAILURE_OUTCOMES), None)
        if count != alert_after or newest is None or newest.fence != run.lease.fence:
            return  # not the run that made the task failing (or a later one did)
        summary = summarize_error(newest.error) if newest.error else newest.outcome
        logger.warning(
            "%s is failing: %d run%s in a row did not succeed (alert_after=%d); last: %s",
            name,
            count,
            "" if count == 1 else "s",
            alert_after,
            summary,
            extra={"cronlease_task": name, "cronlease_failures": count},
        )

    def _after_success(self, run: Finished, runs: list[RunRecord]) -> None:
        name = run.task.full_name
        self._failing.discard(name)
        ours = next((i for i, r in enumerate(runs) if r.fence == run.lease.fence), None)
        if ours is None:
            return
        before = [record.outcome for record in runs[ours + 1 :]]
        count, more = failure_streak(before, read_all=len(runs) < self._limit(run))
        if count < run.task.alert_after:
            return  # another replica's success ended the streak first
        logger.info(
            "%s recovered: succeeded after %s%d run%s in a row that did not",
            name,
            "at least " if more else "",
            count,
            "" if count == 1 else "s",
            extra={"cronlease_task": name, "cronlease_failures": count},
        )
