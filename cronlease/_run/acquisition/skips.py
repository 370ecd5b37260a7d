"""A skipped tick: counted by reason, tallied per task, reported to listeners, one rule
for every stage that skips one (docs/design.md §4.3, §4.4).

Admission skips (shutdown, misfire, overlap), the slot check (taken), the
acquisition (refusals, errors) and the capacity rule (no worker free within
the grace) all report here, and so does a lease won past its tick's grace
(counted a misfire, like admission's). Each skip is also tallied per task and
reason (:meth:`Skips.by_task`), for the status model's ``TaskStatus.skipped``:
this replica's count since it started. Capacity skips are the replica
working as meant, but a task losing most of its ticks must be seen: one INFO
line per streak (:mod:`~cronlease._run.replica_log.log_streaks`).

A built-in task's skips (:attr:`Task.builtin <cronlease._task.Task.builtin>`:
the stuck watcher's ``taken`` on every replica but one, each minute) are not
reported at all: :meth:`Skips.skipped` says so to the callers that count in
bulk, so they leave them out too.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime

from cronlease._events import EventBus, SkipReason, TickSkipped
from cronlease._run.replica_log.log_streaks import LogStreaks, say
from cronlease._run.replica_log.outage import OutageLog
from cronlease._run.timer.ticks import Tick
from cronlease._stats import Stats
from cronlease._task import Task
from cronlease._timing.schedule import slot_of

__all__ = ["Skips", "heard"]

logger = logging.getLogger("cronlease")


def heard(tasks: Iterable[Task]) -> int:
    """How many of ``tasks`` are the user's, not built-in: what a bulk counter counts."""
    return sum(not task.builtin for task in tasks)


class Skips:
    """A replica's skipped ticks: counters, the per-task tally, events; thread-safe."""

    def __init__(self, stats: Stats, events: EventBus, outage: OutageLog) -> None:
        self._stats = stats
        self._outage = outage
        self._events = events
        self._by_task: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()
        self._capacity_lines = LogStreaks(logger, level=logging.INFO)

    def skipped(self, task: Task, slot: int, reason: SkipReason, count: bool = True) -> bool:
        """Report one skip; with ``count=False`` the caller counts in bulk (:meth:`count`).

        Whether the caller says a line of its own about it. False for a built-in
        task's (not reported at all: a caller counting in bulk leaves it out too,
        :func:`heard`) and for one a database outage absorbed (reported and counted,
        but said in the outage's end line). An ``error`` skip is counted by the
        caller's :meth:`OutageLog.failed`, with its statement."""
        if task.builtin:
            return False
        absorbed = reason != "error" and self._outage.absorbs(slot)
        if count:
            self._stats.add(f"ticks_skipped_{reason}")
        with self._lock:
            tally = self._by_task.get(task.full_name)
            if tally is None:
                tally = self._by_task[task.full_name] = Counter()
            tally[reason] += 1
        if self._events.wants(TickSkipped):
            self._events.emit(TickSkipped(task=task.full_name, slot=slot, reason=reason))
        return not absorbed

    def by_task(self) -> dict[str, dict[str, int]]:
        """Ticks skipped here since this replica started, by stored task name and reason."""
        with self._lock:
            return {name: dict(tally) for name, tally in self._by_task.items()}

    def count(self, reason: str, amount: int) -> None:
        self._stats.add(f"ticks_skipped_{reason}", amount)

    def for_capacity(self, ticks: Sequence[Tick]) -> None:
        """Ticks no worker of this replica was free for within their grace; never sent
        to the database, so another replica was free to take them."""
        for tick in ticks:
            if not self.skipped(tick.task, slot_of(tick.fire_time), "capacity"):
                continue
            self._capacity_lines.counted(
                tick.task.full_name, "capacity", "every worker of this replica was busy"
            )

    def served(self, names: Iterable[str]) -> None:
        """Ticks a worker was free for: each ends its task's capacity streak, if any."""
        for name in names:
            self._capacity_lines.ended(name, "capacity")

    def won_too_late(self, task: Task, fire_time: datetime, slot: int, late: float) -> None:
        """A lease won past the tick's grace: the tick counts as missed, like one
        admission refused (the acquisition answered that late)."""
        if task.builtin:
            return
        self._stats.add("ticks_missed")
        if not self.skipped(task, slot, "misfire"):
            return  # it waited behind an outage: said with it
        say(
            logger,
            logging.WARNING,
            task.full_name,
            "%s: tick %s not run: its lease was won %.3f s past its grace "
            "(the database was slow to answer); released",
            task.full_name,
            fire_time.isoformat(),
            late,
        )
