"""What ``Scheduler.health()`` reports (docs/design.md §5.18, §8): the database
unreachable past the threshold (with why no connection can be made, when none
can), a task failing or overdue, a stalled timer.

From a snapshot of the store and what the replica says of itself, handed in as
values by the scheduler: the status model sits beside the engine and imports
none of it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime, timezone

from cronlease._lease.database import connect_state
from cronlease._lease.store import LeaseStore
from cronlease._status.build import Snapshot, build_report, read_snapshot
from cronlease._status.model import Health
from cronlease._status.rules import DeclaredTask, Scrubber, streak_runs
from cronlease._task import Task

__all__ = ["health_snapshot", "replica_health"]


def health_snapshot(store: LeaseStore, tasks: Collection[Task]) -> Snapshot:
    """The rows health() judges: the tasks' lease rows and their latest ``alert_after + 1``
    runs (enough to judge a failure streak). Read before the replica's own state is taken,
    so a read that waits on an unreachable database does not age what the replica says."""
    declared = [DeclaredTask.of(task) for task in tasks]
    runs = streak_runs(task.alert_after for task in declared)
    return read_snapshot(store, declared, runs=runs, orphans=False)


def replica_health(
    snapshot: Snapshot,
    tasks: Collection[Task],
    *,
    store: LeaseStore,
    namespace: str | None,
    since: datetime | None,
    threshold: float,
    skipped: Mapping[str, Mapping[str, int]],
    down_for: float | None,
    problems: list[str],
) -> Health:
    """``snapshot``: the rows to judge (:func:`health_snapshot`). ``skipped``: the
    replica's skipped ticks by task and reason; ``down_for``: how long its database
    has not answered; ``problems``: what it knows is wrong with itself."""
    declared = [DeclaredTask.of(task) for task in tasks]
    # the replica's own tasks (the rows it runs among them): a row it does not run, invalid
    # or not offered, is the fleet's status (the page's overview, status --check), not a
    # reason to fail this replica's probe
    report = build_report(
        replace(snapshot, schedules=None),
        declared,
        database=store.url,
        now=datetime.now(timezone.utc),
        namespace=namespace,
        since=since,
        scrub=Scrubber.of(store),
        skipped=skipped,
    )
    connecting = connect_state(store.engine)
    if connecting is not None and down_for is not None and down_for > threshold:
        problems.append(connecting.describe())
    return report.health(database_down_for=down_for, database_threshold=threshold, replica=problems)
