"""What ``Scheduler.health()`` reports, from a snapshot of the store and the replica's
own state (docs/design.md §5.18, §8): the database unreachable past the threshold
(with why no connection can be made, when none can), a task failing or overdue, a
stalled timer."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timezone

from cronlease._lease.database import connect_state
from cronlease._lease.store import LeaseStore
from cronlease._run.runner import TickRunner
from cronlease._status import (
    DeclaredTask,
    Health,
    Scrubber,
    Snapshot,
    build_report,
    read_snapshot,
    streak_runs,
)
from cronlease._task import Task

__all__ = ["replica_health"]


def replica_health(
    snapshot: Snapshot | None,
    tasks: Collection[Task],
    *,
    store: LeaseStore,
    runner: TickRunner,
    namespace: str | None,
    since: datetime | None,
    threshold: float,
) -> Health:
    """``snapshot`` None: read one, of the tasks' lease rows and their latest
    ``alert_after + 1`` runs (enough to judge a failure streak)."""
    declared = [DeclaredTask.of(task) for task in tasks]
    if snapshot is None:
        runs = streak_runs(task.alert_after for task in declared)
        snapshot = read_snapshot(store, declared, runs=runs, orphans=False)
    report = build_report(
        snapshot,
        declared,
        database=store.url,
        now=datetime.now(timezone.utc),
        namespace=namespace,
        since=since,
        scrub=Scrubber.of(store),
        skipped=runner.skips.by_task(),
    )
    down_for = runner.outage.down_for
    problems = runner.problems(tasks)
    connecting = connect_state(store.engine)
    if connecting is not None and down_for is not None and down_for > threshold:
        problems.append(connecting.describe())
    return report.health(database_down_for=down_for, database_threshold=threshold, replica=problems)
