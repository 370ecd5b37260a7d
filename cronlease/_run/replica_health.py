"""What ``Scheduler.health()`` reports, from a snapshot of the store and the replica's
own state (docs/design.md §5.18, §8): the database unreachable past the threshold
(with why no connection can be made, when none can), a task overdue, a stalled timer."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timezone

from cronlease._lease.database import connect_state
from cronlease._lease.store import LeaseStore
from cronlease._run.runner import TickRunner
from cronlease._status import DeclaredTask, Health, Scrubber, Snapshot, build_report
from cronlease._task import Task

__all__ = ["replica_health"]


def replica_health(
    snapshot: Snapshot,
    tasks: Collection[Task],
    *,
    store: LeaseStore,
    runner: TickRunner,
    namespace: str | None,
    since: datetime | None,
    threshold: float,
) -> Health:
    report = build_report(
        snapshot,
        [DeclaredTask.of(task) for task in tasks],
        database=store.url,
        now=datetime.now(timezone.utc),
        namespace=namespace,
        since=since,
        scrub=Scrubber.of(store),
    )
    down_for = runner.outage.down_for
    problems = runner.problems(tasks)
    connecting = connect_state(store.engine)
    if connecting is not None and down_for is not None and down_for > threshold:
        problems.append(connecting.describe())
    return report.health(database_down_for=down_for, database_threshold=threshold, replica=problems)
