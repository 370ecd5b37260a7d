"""A replica acquires no more ticks than it has free workers (docs/design.md §4.3).

Real replica processes (tests/support/capacity_replica.py) whose tasks take
most of their period; every run is counted at the side-effect ledger and
every task notes how late it began. A 30 s version that prints figures is
``benchmarks/capacity.py``.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from sqlalchemy import select

from cronlease._lease.store import LeaseStore
from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.procs import Proc, wait_for


def _replica(url: str, prefix: str, count: int, every: str, seconds: float, workers: int) -> Proc:
    return Proc(
        "-m",
        "tests.support.capacity_replica",
        url,
        prefix,
        str(count),
        every,
        str(seconds),
        str(workers),
    )


def _ledger(url: str, prefix: str) -> dict[str, list[int]]:
    table = ledger.ledger
    with ledger._engine(url).connect() as conn:
        rows = conn.execute(
            select(table.c.task, table.c.slot).where(table.c.task.like(f"{prefix}-%"))
        ).all()
    slots: dict[str, list[int]] = defaultdict(list)
    for task, slot in rows:
        slots[str(task)].append(int(slot))
    return slots


def _stats(replica: Proc) -> dict[str, int]:
    line = replica.expect("stats", timeout=15)
    return {key: int(value) for key, value in (pair.split("=") for pair in line.split()[1:])}


def _outcomes(store: LeaseStore, names: list[str]) -> list[str]:
    return [run.outcome for runs in store.recent_runs(names, limit=50).values() for run in runs]


@pytest.mark.slow
@backend_independent(
    "a replica takes as many ticks as it has free workers: a count kept in Python",
    covered_by="contract/test_batch.py::test_a_batch_explains_each_refusal, "
    "contract/test_unstarted_runs.py::"
    "test_a_run_that_cannot_be_handed_to_a_worker_is_recorded_and_released",
)
def test_two_replicas_with_room_between_them_miss_no_slot(
    db_url: str, task_name: str, store: LeaseStore
) -> None:
    # 20 tasks every 2 s that take 1.2 s, 16 workers per replica: neither can run
    # them all, both together can. A replica that took all 20 left four waiting
    # for a worker, starting past their grace (1 s) and missing their next slots.
    # (The 1.5 s leaves too little room, on a loaded 2-core machine, for
    # recording a run before the next tick; benchmarks/capacity.py runs it.)
    ledger.setup(db_url)
    tasks, step = 20, 2000
    replicas = [_replica(db_url, task_name, tasks, "2s", 1.2, 16) for _ in range(2)]
    try:
        for replica in replicas:
            replica.expect("started", timeout=60)
        # from the second tick on: a replica's first contact with the database
        # (schema, start-up checks) makes its first tick late
        first = (int(time.time() * 1000) // step + 2) * step
        window = [first + i * step for i in range(3)]

        def past_window() -> bool:
            return any(max(s) > window[-1] for s in _ledger(db_url, task_name).values() if s)

        wait_for(past_window, 60, "a slot after the three watched ones")
    finally:
        codes = [replica.terminate() for replica in replicas]
    assert codes == [0, 0], [replica.stderr()[-3000:] for replica in replicas]
    stats = [_stats(replica) for replica in replicas]
    slots = _ledger(db_url, task_name)
    assert len(slots) == tasks
    for task, ran in slots.items():
        assert len(ran) == len(set(ran)), (task, sorted(ran))
        missing = sorted(set(window) - set(ran))
        assert not missing, (task, missing, stats)
    assert sum(s["started_late"] for s in stats) == 0, stats
    assert all(s["most_at_once"] <= 16 for s in stats), stats
    names = [f"{task_name}-{i:03d}" for i in range(tasks)]
    assert "lost" not in _outcomes(store, names)


@pytest.mark.slow
@backend_independent(
    "a tick with no free worker is skipped before any statement: a count kept in Python",
    covered_by="contract/test_unstarted_runs.py::"
    "test_a_run_that_cannot_be_handed_to_a_worker_is_recorded_and_released",
)
def test_a_lone_replica_short_of_workers_skips_ticks_as_capacity(
    db_url: str, task_name: str, store: LeaseStore
) -> None:
    # 10 tasks every second that take 0.6 s, 4 workers: the replica takes only
    # ticks it has a worker for; the others are skipped as `capacity`, never
    # held by a run waiting for a thread. Which tasks run rotates.
    ledger.setup(db_url)
    tasks, workers = 10, 4
    replica = _replica(db_url, task_name, tasks, "1s", 0.6, workers)
    try:
        replica.expect("started", timeout=60)
        wait_for(
            lambda: len(_ledger(db_url, task_name)) == tasks,
            60,
            "every task to have run at least once",
        )
    finally:
        code = replica.terminate()
    assert code == 0, replica.stderr()[-3000:]
    stats = _stats(replica)
    assert stats.get("ticks_skipped_capacity", 0) > 0, stats
    assert stats["started_late"] == 0, stats
    assert stats["most_at_once"] <= workers, stats
    for task, ran in _ledger(db_url, task_name).items():
        assert len(ran) == len(set(ran)), (task, sorted(ran))
    names = [f"{task_name}-{i:03d}" for i in range(tasks)]
    outcomes = _outcomes(store, names)
    assert outcomes and "lost" not in outcomes and "abandoned" not in outcomes, outcomes
