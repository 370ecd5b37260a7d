"""Batched acquisition across real replica processes with many tasks each.

Each replica (tests/support/batch_replica.py) runs ``TASKS`` tasks every
second; every run is counted at the side-effect ledger. The in-process
batch tests are in tests/contract/test_batch.py.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict

import pytest

from tests.support import ledger
from tests.support.batch_replica import read_stats, read_unrun
from tests.support.procs import Proc, wait_for

REPLICAS = 3
TASKS = 50


@pytest.mark.slow
def test_replica_processes_with_many_tasks_run_every_slot_once(db_url: str, task_name: str) -> None:
    ledger.setup(db_url)
    replicas = [
        Proc("-m", "tests.support.batch_replica", db_url, task_name, str(TASKS))
        for _ in range(REPLICAS)
    ]
    try:
        for replica in replicas:
            replica.expect("started")
        start_ms = (int(time.time()) + 1) * 1000

        def slots_with_all_up() -> int:
            rows = ledger.rows_like(db_url, f"{task_name}-")
            return len({slot for _, slot, _ in rows if slot >= start_ms})

        wait_for(lambda: slots_with_all_up() >= 4, 30, "four slots with every replica up")
    finally:
        codes = [replica.terminate() for replica in replicas]
    assert codes == [0] * REPLICAS, [replica.stderr()[-2000:] for replica in replicas]
    stats = [read_stats(replica) for replica in replicas]
    unrun = [read_unrun(replica) for replica in replicas]
    rows = [(t, s) for t, s, _ in ledger.rows_like(db_url, f"{task_name}-")]
    by_task: dict[str, list[int]] = defaultdict(list)
    for task, slot in rows:
        by_task[task].append(slot)
    assert len(by_task) == TASKS
    for task, slots in by_task.items():
        counts = Counter(slots)
        assert max(counts.values()) == 1, (task, [s for s, n in counts.items() if n > 1])
        expected = set(range(min(slots), max(slots) + 1000, 1000))
        for slot in sorted(expected - set(slots)):
            # On a loaded machine a tick may start past its grace or find every
            # worker busy: skipped, and said so. A slot no replica ran must have been
            # skipped by one for a reason of its own, not only found another's (a
            # lease won and never run, or a tick nobody tried, is what this looks
            # for); a replica left to its peers does not try it (design §4.4).
            why = [seen.get((task, slot)) for seen in unrun]
            assert set(why) - {None, "taken", "contended"}, (task, slot, why)
    # every task ran in the slots all replicas were up for, spread over the replicas
    assert all(sum(s >= start_ms for s in slots) >= 3 for slots in by_task.values())
    # and the replicas acquired them in batches, not one statement per task: each its
    # share of a tick (rendezvous, docs/design.md §4.4), about TASKS / REPLICAS
    for stat in stats:
        assert stat["acquire_batches"] > 0
        assert stat["acquire_batch_ticks"] / stat["acquire_batches"] >= TASKS / REPLICAS / 2, stat
    # each tick was sent to acquire_many by about one replica, not by all three
    assert sum(stat["acquire_batch_ticks"] for stat in stats) <= 1.5 * len(rows) + 2 * TASKS
