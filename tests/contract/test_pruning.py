"""History pruning in bounded batches, by age and by count, on every backend (design §5.12).

The batch bound is counted at the database: every DELETE the store sends is
seen by a SQLAlchemy cursor event, with the rows it deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, select

from cronlease import LeaseStore, Scheduler
from cronlease._lease.schema import runs
from cronlease._run.housekeeping.pruning import HOUSEKEEPING_TASK, Budget, prune_history
from cronlease.errors import ConfigError


@pytest.fixture
def deletes(store: LeaseStore) -> Iterator[list[int]]:
    """The row count of every DELETE statement the store runs, in order."""
    seen: list[int] = []

    def after(_conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            seen.append(cursor.rowcount)

    event.listen(store.engine, "after_cursor_execute", after)
    yield seen
    event.remove(store.engine, "after_cursor_execute", after)


def add_runs(store: LeaseStore, name: str, ages: list[float], outcome: str = "succeeded") -> None:
    """Run rows of ``name`` that started ``ages`` seconds ago (database clock)."""
    now = store.database_time()
    start = max((row[0] for row in slots(store, name)), default=0) + 1
    rows = [
        {
            "name": name,
            "slot": start + index,
            "manual": False,
            "fence": start + index,
            "holder": "test#0",
            "scheduled_for": now - age,
            "started_at": now - age,
            "finished_at": None if outcome == "running" else now - age + 0.5,
            "outcome": outcome,
        }
        for index, age in enumerate(ages)
    ]
    with store.engine.begin() as conn:
        conn.execute(runs.insert(), rows)


def slots(store: LeaseStore, name: str) -> list[tuple[int, str]]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(runs.c.slot, runs.c.outcome).where(runs.c.name == name).order_by(runs.c.slot)
        ).all()
    return [(int(slot), str(outcome)) for slot, outcome in rows]


def test_pruning_by_age_goes_in_bounded_batches_over_passes(
    store: LeaseStore, task_name: str, deletes: list[int]
) -> None:
    other = f"{task_name}-other-app"
    add_runs(store, task_name, [3600.0] * 45)
    add_runs(store, task_name, [3600.0] * 2, outcome="running")
    add_runs(store, task_name, [1.0] * 5)
    add_runs(store, other, [3600.0] * 4)
    budget = Budget(batch=10, rows=25)

    first = prune_history(store, [task_name], 600.0, None, budget)
    assert (first.old, first.complete) == (30, False)  # stopped once past 25 rows
    assert deletes == [10, 10, 10]
    second = prune_history(store, [task_name], 600.0, None, budget)
    assert (second.old, second.complete) == (15, True)
    assert deletes[3:] == [10, 5]

    left = slots(store, task_name)
    assert [outcome for _, outcome in left].count("running") == 2  # never pruned
    assert len(left) == 7  # the two running and the five young ones
    assert len(slots(store, other)) == 4  # not this scheduler's task


def test_pruning_by_count_keeps_the_newest_runs_of_each_task(
    store: LeaseStore, task_name: str, deletes: list[int]
) -> None:
    second_task = f"{task_name}-b"
    add_runs(store, task_name, [1000.0 - i for i in range(20)])
    add_runs(store, task_name, [500.0], outcome="running")  # an old run still going
    add_runs(store, task_name, [100.0 - i for i in range(10)])
    add_runs(store, second_task, [50.0 - i for i in range(3)])
    newest = [slot for slot, _ in slots(store, task_name)][-10:]

    pruned = prune_history(store, [task_name, second_task], None, 10, Budget(batch=7))
    assert (pruned.beyond, pruned.complete) == (20, True)
    assert deletes == [7, 7, 6]  # the second task has fewer than 10: nothing to delete
    left = slots(store, task_name)
    assert [slot for slot, outcome in left if outcome != "running"] == newest
    assert [outcome for _, outcome in left].count("running") == 1
    assert len(slots(store, second_task)) == 3
    assert prune_history(store, [task_name], None, 10).removed == 0


def test_the_housekeeping_task_prunes_by_count(
    db_url: str, store: LeaseStore, task_name: str
) -> None:
    scheduler = Scheduler(db_url, namespace=task_name, history_retention=None, history_keep=3)
    scheduler.add_task(lambda: None, every="1h", name="hourly")
    name = f"{task_name}:hourly"
    add_runs(store, name, [10.0 - i for i in range(8)])
    housekeeping = scheduler._tasks[f"{task_name}:{HOUSEKEEPING_TASK}"]
    housekeeping.func()
    assert len(slots(store, name)) == 3
    scheduler.store.dispose()


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10", True])
def test_history_keep_must_be_a_whole_number_of_runs(bad: object, tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="history_keep"):
        Scheduler(f"sqlite:///{tmp_path / 'x.db'}", history_keep=bad)  # type: ignore[arg-type]


def test_no_housekeeping_without_a_bound(tmp_path: Any) -> None:
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'x.db'}", history_retention=None)
    assert not any(HOUSEKEEPING_TASK in name for name in scheduler._tasks)
