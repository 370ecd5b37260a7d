"""The metrics read at a scrape rather than counted from events (:mod:`cronlease.prometheus`):
what the database says of the tasks (abandoned runs, failure streaks) and the
replica's staging tallies."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cronlease._lease.outcomes import METRIC_OUTCOMES
from cronlease._status import DeclaredTask, read_status, streak_runs

if TYPE_CHECKING:
    from cronlease._scheduler import Scheduler

__all__ = [
    "ABANDONED_REFRESH_SECONDS",
    "METRIC_OUTCOMES",
    "AbandonedRuns",
    "ReplicaCounters",
]

logger = logging.getLogger("cronlease")

#: how long a read of the abandoned counts is served before a scrape reads again
ABANDONED_REFRESH_SECONDS = 60.0


class AbandonedRuns(Collector):
    """What the database says of the scheduler's tasks, as the status model reads it:
    ``<prefix>_abandoned_runs``, ``<prefix>_task_failing`` and
    ``<prefix>_consecutive_failures``; read at a scrape, at most once per ``refresh``."""

    def __init__(
        self,
        scheduler: Scheduler,
        prefix: str = "cronlease",
        refresh: float = ABANDONED_REFRESH_SECONDS,
    ) -> None:
        self.name = f"{prefix}_abandoned_runs"
        self._prefix = prefix
        self._scheduler = scheduler
        self._refresh = refresh
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._streaks: dict[str, tuple[int, bool]] = {}  # (consecutive failures, failing)
        self._read_at: float | None = None  # monotonic

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                self.name,
                "Runs of a task recorded abandoned in the database (the same on every replica).",
                labels=["task"],
            ),
            GaugeMetricFamily(
                f"{self._prefix}_task_failing",
                "1 while the task's last alert_after runs failed (the same on every replica).",
                labels=["task"],
            ),
            GaugeMetricFamily(
                f"{self._prefix}_consecutive_failures",
                "The task's latest runs in a row that did not succeed, as the database has them.",
                labels=["task"],
            ),
        )

    def describe(self) -> Iterator[Metric]:
        # registering asks for the names: answered without reading the database
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        abandoned, failing, streaks = self._families()
        for task, count in sorted(self.counts().items()):
            abandoned.add_metric([task], count)
        with self._lock:
            read = dict(self._streaks)
        for task, (streak, is_failing) in sorted(read.items()):
            failing.add_metric([task], 1 if is_failing else 0)
            streaks.add_metric([task], streak)
        yield from (abandoned, failing, streaks)

    def counts(self) -> dict[str, int]:
        """The counts by full task name, read again if the last read is ``refresh`` old."""
        with self._lock:  # concurrent scrapes share one read
            now = time.monotonic()
            fresh = self._read_at is not None and now - self._read_at < self._refresh
            # a scrape must not wait on a database this replica already knows is down
            if not fresh and self._scheduler.runner.outage.down_for is None:
                self._read_at = now
                self._read()
            return dict(self._counts)

    def _read(self) -> None:
        scheduler = self._scheduler
        tasks = [DeclaredTask.of(task) for task in scheduler.tasks.values()]
        if not tasks:
            self._counts, self._streaks = {}, {}
            return
        report = read_status(
            scheduler.store,
            tasks,
            namespace=scheduler.namespace,
            runs=streak_runs(task.alert_after for task in tasks),
            orphans=False,
            abandoned=True,
        )
        if report.database_error is not None:
            logger.debug("abandoned runs not counted: %s", report.database_error)
            return  # the last values stay: a gap would read as "no abandoned runs"
        self._counts = {t.name: t.abandoned for t in report.tasks if t.abandoned is not None}
        self._streaks = {t.name: (t.consecutive_failures, t.failing) for t in report.tasks}


class ReplicaCounters(Collector):
    """The replica's staging tallies (no ``task`` label), read from its stats at a scrape."""

    NAMES: ClassVar[dict[str, str]] = {
        "ticks_left_to_peers": "Ticks this replica left to the replicas ranked before it.",
        "ticks_delayed": "Ticks this replica tried after a delay (not first in their ranking).",
        "ticks_checked_taken": "Delayed ticks a read found taken before any lock.",
    }

    def __init__(self, scheduler: Scheduler, prefix: str = "cronlease") -> None:
        self._scheduler = scheduler
        self._prefix = prefix

    def collect(self) -> Iterator[Metric]:
        stats = self._scheduler.stats.snapshot()
        for key, help_text in self.NAMES.items():
            yield CounterMetricFamily(f"{self._prefix}_{key}", help_text, value=stats.get(key, 0))
