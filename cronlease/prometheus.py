"""Prometheus metrics for a scheduler, built on its listeners.

Install the extra: ``pip install 'cronlease[prometheus]'``.

::

    from prometheus_client import start_http_server
    from cronlease.prometheus import instrument

    instrument(scheduler)          # registers on prometheus_client's default registry
    start_http_server(9100)        # or your framework's /metrics endpoint, as usual

Metrics (``task`` is the full task name, namespace included):

========================================== ========= =================================
``cronlease_runs_total``                   counter   runs by ``task`` and ``outcome``
                                                     (succeeded, failed, lost, ...)
``cronlease_ticks_skipped_total``          counter   ticks this replica did not run,
                                                     by ``task`` and ``reason`` (taken,
                                                     held, paused, error, misfire, ...)
``cronlease_run_duration_seconds``         histogram run durations by ``task``
``cronlease_runs_in_progress``             gauge     runs executing on this replica
``cronlease_last_success_timestamp_seconds`` gauge   when a run of ``task`` last
                                                     succeeded on this replica (epoch)
``cronlease_lease_errors_total``           counter   ticks skipped because the database
                                                     failed, by ``task``
``cronlease_leases_lost_total``            counter   runs that lost their lease
``cronlease_database_outages_total``       counter   outages seen by this replica
``cronlease_database_up``                  gauge     0 during an outage, else 1
``cronlease_clock_skew_seconds``           gauge     database clock minus this host's
``cronlease_clock_round_trip_seconds``     gauge     round trip of that measurement
``cronlease_later_attempts_total``         counter   runs of a slot's 2nd, 3rd, ...
                                                     attempt (a retry or a recovery),
                                                     by ``task`` and ``outcome``
``cronlease_abandoned_runs``               gauge     runs of ``task`` recorded
                                                     ``abandoned`` in the database
``cronlease_task_failing``                 gauge     1 while ``task`` is failing (its
                                                     last ``alert_after`` runs failed)
``cronlease_consecutive_failures``         gauge     runs of ``task`` in a row that did
                                                     not succeed (database, as status)
``cronlease_ticks_left_to_peers_total``    counter   ticks this replica left to the
                                                     replicas ranked before it
``cronlease_ticks_delayed_total``          counter   ticks it tried after a delay
``cronlease_ticks_checked_taken_total``    counter   delayed ticks found taken by a
                                                     read, before any lock
========================================== ========= =================================

Ticks left to peers are not skips: a replica outside a tick's rendezvous window
does not try it (docs/design.md §4.4), so no ``TickSkipped`` is emitted and
``ticks_skipped_total{reason="taken"}`` counts only the ticks this replica tried
and found taken — it fell when the fleet's staging came, though nothing ran
less. The three ``ticks_*`` counters above are the replica's own tallies, without
a ``task`` label (a series per task would cost every replica a label update
per task per tick on the path staging made cheap), read at a scrape.

Every replica counts what it saw: ``sum by (task, outcome) (cronlease_runs_total)``
over the fleet counts each run once, since a tick runs on one replica only.
Under gunicorn's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``) the gauges
aggregate sensibly: the last success is the maximum over workers, runs in
progress are summed over live workers.

The attempt is no label of ``cronlease_runs_total``: a task may retry up to
100 times and recover after any number of crashes, so it would multiply that
counter's series by as many attempt numbers, and change the series existing
queries name. ``cronlease_later_attempts_total`` has ``cronlease_runs_total``'s
labels and counts the runs it counts whose attempt is 2 or more: how often the
fleet retries or recovers, and how those attempts end.

``cronlease_abandoned_runs``, ``cronlease_task_failing`` and
``cronlease_consecutive_failures`` are the exception to "what this replica saw": a
run is marked ``abandoned`` by a database statement (the next acquirer's
sweep, the fleet's stuck watcher on whichever replica won it), which no
replica hears of as an event, so it is the database's count, read through the
status model as ``cronlease status`` and the page show it (a failure streak is
the same on every replica too: the runs of every replica count). Every replica
reports the same value: aggregate it with ``max by (task)``, not ``sum``. It
is read when scraped, at most once per ``abandoned_refresh`` seconds (default
60, the stuck watcher's own pace), never while this replica sees the database
down (the last values stay), and never at registration. Being a read, not a
value this process records, it is served by the registry ``instrument()``
registered it on, not through multiprocess mode's files.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.registry import REGISTRY, Collector

from cronlease._events import (
    ClockChecked,
    DatabaseRecovered,
    DatabaseUnavailable,
    Event,
    RunFinished,
    RunLost,
    RunStarted,
    TickSkipped,
)
from cronlease._metrics_read import (
    ABANDONED_REFRESH_SECONDS,
    METRIC_OUTCOMES,
    AbandonedRuns,
    ReplicaCounters,
)

if TYPE_CHECKING:
    from cronlease._scheduler import Scheduler

__all__ = [
    "ABANDONED_REFRESH_SECONDS",
    "DURATION_BUCKETS",
    "AbandonedRuns",
    "Metrics",
    "ReplicaCounters",
    "instrument",
]


# From a few milliseconds (a cache refresh) to an hour (a nightly report).
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)


class Metrics:
    """The metrics of one scheduler on one registry; :meth:`close` stops and unregisters them."""

    def __init__(
        self,
        scheduler: Scheduler,
        registry: CollectorRegistry,
        prefix: str = "cronlease",
        abandoned_refresh: float = ABANDONED_REFRESH_SECONDS,
    ) -> None:
        self.registry = registry
        self.runs = Counter(
            f"{prefix}_runs",
            "Runs of a task on this replica, by outcome.",
            ["task", "outcome"],
            registry=registry,
        )
        self.ticks_skipped = Counter(
            f"{prefix}_ticks_skipped",
            "Ticks this replica did not run, by reason (taken, held, paused, error, misfire, ...).",
            ["task", "reason"],
            registry=registry,
        )
        self.run_duration = Histogram(
            f"{prefix}_run_duration_seconds",
            "How long runs of a task took on this replica.",
            ["task"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.runs_in_progress = Gauge(
            f"{prefix}_runs_in_progress",
            "Runs executing on this replica now.",
            ["task"],
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.last_success = Gauge(
            f"{prefix}_last_success_timestamp_seconds",
            "When a run of the task last succeeded on this replica (Unix time).",
            ["task"],
            registry=registry,
            multiprocess_mode="max",
        )
        self.later_attempts = Counter(
            f"{prefix}_later_attempts",
            "Runs of a slot's second or later attempt (a retry or a recovery) on this replica.",
            ["task", "outcome"],
            registry=registry,
        )
        self.lease_errors = Counter(
            f"{prefix}_lease_errors",
            "Ticks skipped because the database failed while acquiring the lease.",
            ["task"],
            registry=registry,
        )
        self.leases_lost = Counter(
            f"{prefix}_leases_lost",
            "Runs that lost their lease (heartbeats failed for a whole TTL).",
            ["task"],
            registry=registry,
        )
        self.database_outages = Counter(
            f"{prefix}_database_outages",
            "Database outages seen by this replica.",
            registry=registry,
        )
        self.database_up = Gauge(
            f"{prefix}_database_up",
            "0 while this replica cannot reach the database, else 1.",
            registry=registry,
            multiprocess_mode="min",
        )
        self.clock_skew = Gauge(
            f"{prefix}_clock_skew_seconds",
            "The database clock minus this host's clock, at the last measurement.",
            registry=registry,
        )
        self.clock_round_trip = Gauge(
            f"{prefix}_clock_round_trip_seconds",
            "The round trip of the last clock measurement.",
            registry=registry,
        )
        self.abandoned = AbandonedRuns(scheduler, prefix, abandoned_refresh)
        registry.register(self.abandoned)
        self.replica_counters = ReplicaCounters(scheduler, prefix)
        registry.register(self.replica_counters)
        self._collectors: tuple[Collector, ...] = (
            self.abandoned,
            self.replica_counters,
            self.runs,
            self.later_attempts,
            self.ticks_skipped,
            self.run_duration,
            self.runs_in_progress,
            self.last_success,
            self.lease_errors,
            self.leases_lost,
            self.database_outages,
            self.database_up,
            self.clock_skew,
            self.clock_round_trip,
        )
        self.database_up.set(1)
        # Declared tasks show up at zero before their first run, so rate() and
        # absent-series alerts work from the start.
        for task in scheduler.tasks.values():
            self._declare(task.full_name)
            if task.retries or task.recover:
                for outcome in METRIC_OUTCOMES:
                    self.later_attempts.labels(task.full_name, outcome)
        self._unsubscribe: Callable[[], None] | None = scheduler.listen(self._on_event)

    def _declare(self, task: str) -> None:
        for outcome in METRIC_OUTCOMES:
            self.runs.labels(task, outcome)
        self.run_duration.labels(task)
        self.runs_in_progress.labels(task)
        self.lease_errors.labels(task)

    def _on_event(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.runs_in_progress.labels(event.task).inc()
        elif isinstance(event, RunFinished):
            self.runs_in_progress.labels(event.task).dec()
            self.runs.labels(event.task, event.outcome).inc()
            if event.attempt > 1:
                self.later_attempts.labels(event.task, event.outcome).inc()
            self.run_duration.labels(event.task).observe(event.duration)
            if event.outcome == "succeeded":
                self.last_success.labels(event.task).set(event.at)
        elif isinstance(event, TickSkipped):
            self.ticks_skipped.labels(event.task, event.reason).inc()
            if event.reason == "error":
                self.lease_errors.labels(event.task).inc()
        elif isinstance(event, RunLost):
            self.leases_lost.labels(event.task).inc()
        elif isinstance(event, DatabaseUnavailable):
            self.database_outages.inc()
            self.database_up.set(0)
        elif isinstance(event, DatabaseRecovered):
            self.database_up.set(1)
        elif isinstance(event, ClockChecked):
            self.clock_skew.set(event.skew)
            self.clock_round_trip.set(event.round_trip)

    def close(self) -> None:
        """Stop listening and remove the metrics from the registry."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
            for collector in self._collectors:
                self.registry.unregister(collector)


def instrument(
    scheduler: Scheduler,
    registry: CollectorRegistry | None = None,
    *,
    prefix: str = "cronlease",
    abandoned_refresh: float = ABANDONED_REFRESH_SECONDS,
) -> Metrics:
    """Register cronlease metrics for ``scheduler`` on ``registry`` (default: the global one).

    Call it once per scheduler and registry (a second call on the same
    registry raises prometheus_client's duplicate-metric ``ValueError``;
    :meth:`Metrics.close` first, or use another registry). Serve the registry
    the way you already do (``start_http_server``, ``make_asgi_app``,
    ``make_wsgi_app``, ...). ``abandoned_refresh``: seconds a read of the abandoned
    counts is served before a scrape reads the database again.
    """
    target = REGISTRY if registry is None else registry
    return Metrics(scheduler, target, prefix, abandoned_refresh)
