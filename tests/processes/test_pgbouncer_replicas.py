"""Replica processes through real PgBouncers, transaction and session pooling at once.

Two fleets of three replicas (tests/support/batch_replica.py), one through each
bouncer of tests/support/pgbouncer.py, on the same database, each with its own
tasks: a batch of 50 tasks every second and one lone task every second half a
second after them (a batch of one). They run together for 15 s (765 slots per mode);
then every slot of every task is at the side-effect ledger exactly once, and no
replica logged a warning or an error. The ledger is written on the server directly,
so it counts cronlease's runs, not the ledger's own way through a bouncer.

Why 15 s (it was a minute, then 30 s): what breaks through a pooler breaks on the
first transactions. State left on a server connection is met by the next
transaction (the transaction pool's 4 connections are handed out in turn); a
statement psycopg prepares after 5 executions fails within 5 s (main, preparing
so, missed 703 of the transaction fleet's 3,060 slot-runs in a minute). Nothing
here runs on a slower clock: tests/support/pgbouncer.py sets no server lifetime or
idle timeout; the replicas renew membership every 2 s and rank ticks once their
views settle, 6 s after the last join, so the window holds both the unsettled
start and settled ranking. A starved client is not left to the bouncer's 30 s
query_wait_timeout either: the acquirer shares the pool (slots go missing), and a
stop waits for the member row's deletion through it (a warning if it gives up).
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict

import pytest
from sqlalchemy import func, select

from tests.support import databases, ledger, pgbouncer
from tests.support.batch_replica import read_stats
from tests.support.procs import Proc, terminate_all, wait_for

REPLICAS = 3
TASKS = 50
SECONDS = 15
# a log line of a replica at WARNING or above, or a traceback
TROUBLE = re.compile(r"^\S+ \S+ \d+ (WARNING|ERROR|CRITICAL) |^Traceback", re.MULTILINE)


@pytest.mark.slow
def test_three_replicas_per_pool_mode_run_every_slot_once(
    pgbouncers: dict[str, pgbouncer.Bouncer], task_name: str
) -> None:
    direct = databases.postgres_database()
    ledger.setup(direct)
    env = {"CRONLEASE_TEST_LONE": "1", "CRONLEASE_TEST_LEDGER": direct}
    env["CRONLEASE_TEST_LEDGER_POOL"] = "4"  # 6 replicas on one server with a 100-connection cap
    fleets = {
        mode: [
            Proc(
                "-m",
                "tests.support.batch_replica",
                pgbouncers[mode].url(),
                f"{task_name}-{mode}",
                str(TASKS),
                env=env,
            )
            for _ in range(REPLICAS)
        ]
        for mode in pgbouncer.MODES
    }
    replicas = [proc for fleet in fleets.values() for proc in fleet]
    try:
        for replica in replicas:
            replica.expect("started", timeout=60)
        # the first whole second with every replica up, and SECONDS seconds on
        first = (int(time.time()) + 1) * 1000
        last = first + (SECONDS - 1) * 1000

        def every_task_reached_the_last_slot() -> bool:
            latest = _latest_slots(direct, task_name)
            return len(latest) == 2 * (TASKS + 1) and min(latest.values()) >= last

        wait_for(every_task_reached_the_last_slot, SECONDS + 30, f"{SECONDS} s of slots")
    finally:
        codes = terminate_all(replicas)
    logs = {proc.popen.pid: proc.stderr() for proc in replicas}
    assert codes == [0] * len(replicas), {pid: log[-2000:] for pid, log in logs.items()}
    trouble = {
        pid: [line for line in log.splitlines() if TROUBLE.match(line)] for pid, log in logs.items()
    }
    assert not any(trouble.values()), {pid: lines for pid, lines in trouble.items() if lines}
    rows = [(t, s) for t, s, _ in ledger.rows_like(direct, f"{task_name}-")]
    for mode in pgbouncer.MODES:
        by_task: dict[str, list[int]] = defaultdict(list)
        for task, slot in rows:
            if task.startswith(f"{task_name}-{mode}-"):
                by_task[task].append(slot)
        assert len(by_task) == TASKS + 1, (mode, sorted(by_task))
        for task, slots in by_task.items():
            counts = Counter(slots)
            twice = sorted(slot for slot, n in counts.items() if n > 1)
            assert not twice, f"{mode}: {task} ran slots more than once: {twice}"
            offset = 500 if task.endswith("-lone") else 0
            expected = set(range(first + offset, last + 1, 1000))
            missing = sorted(expected - set(slots))
            assert not missing, f"{mode}: {task} never ran slots {missing}"
            # and nothing between its first and last run is missing either
            assert set(range(min(slots), max(slots) + 1, 1000)) <= set(slots), (mode, task)
    # the batch travelled as batches, the lone task alone: each replica sends the
    # ticks it is preferred for (a third of them, rendezvous: design §4.4) at once
    for fleet in fleets.values():
        stats = [read_stats(replica) for replica in fleet]
        batches = sum(stat["acquire_batches"] for stat in stats)
        ticks = sum(stat["acquire_batch_ticks"] for stat in stats)
        assert batches > 0 and ticks / batches >= TASKS / REPLICAS / 2, stats


def _latest_slots(url: str, prefix: str) -> dict[str, int]:
    table = ledger.ledger
    with ledger._engine(url).connect() as conn:
        rows = conn.execute(
            select(table.c.task, func.max(table.c.slot))
            .where(table.c.task.like(f"{prefix}-%"))
            .group_by(table.c.task)
        ).all()
    return {str(task): int(slot) for task, slot in rows}
