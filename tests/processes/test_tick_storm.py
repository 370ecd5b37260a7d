"""A storm: thousands of tasks due at one instant, over replica processes.

Every task is ``every="1h"`` anchored at one instant a few seconds ahead, so all
fall due together; each run appends to its replica's own ledger file. The fleet
runs each tick exactly once (counted at the ledgers), and a storm the workers
cannot start within the grace is said in a few lines that name how many ticks
they cover, never a line per tick. No timing is asserted: how fast a storm
starts is benchmarks/tick_storm.py's.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.backends import backend_independent
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow

#: seconds from "go" to the instant: time to declare the tasks and start
LEAD = 8
ALIKE = re.compile(r"and (\d+) more task\(s\) alike")


def _replicas(
    db_url: str, prefix: str, tmp_path: Path, count: int, tasks: int, **options: str
) -> tuple[list[Proc], list[Path], int]:
    """``count`` replicas of ``tasks`` tasks, started; the ledgers, and the instant (ms)."""
    grace, workers, pause = options.get("grace", "60"), options.get("workers", "16"), "0"
    pause = options.get("pause", pause)
    ledgers = [tmp_path / f"ledger-{n}.txt" for n in range(count)]
    procs = [
        Proc(
            "-m",
            "tests.support.tick_storm_replica",
            db_url,
            prefix,
            str(tasks),
            grace,
            str(ledger),
            workers,
            pause,
        )
        for ledger in ledgers
    ]
    for proc in procs:
        proc.expect("ready", 60)
    instant = int(time.time()) + LEAD
    for proc in procs:
        proc.send(f"go {instant}")
    for proc in procs:
        proc.expect("started", 60)
    if time.time() > instant - 0.5:
        pytest.fail(f"the replicas started {time.time() - instant:+.1f} s from the instant")
    return procs, ledgers, instant * 1000


def _ledger(ledgers: list[Path]) -> Counter[tuple[str, int]]:
    runs: Counter[tuple[str, int]] = Counter()
    for ledger in ledgers:
        if ledger.exists():
            for line in ledger.read_text().splitlines():
                name, slot = line.split()
                runs[(name, int(slot))] += 1
    return runs


def _named(line: str) -> int:
    """How many tasks a line says this of: its own, and "and N more task(s) alike"."""
    alike = ALIKE.search(line)
    return 1 + int(alike[1]) if alike else 1


def _stop(procs: list[Proc]) -> list[dict[str, int]]:
    """SIGTERM each; their counters (the ``stats`` line said after the shutdown)."""
    for proc in procs:
        assert proc.terminate(60) == 0, proc.stderr()[-3000:]
    return [json.loads(proc.expect("stats", 10).split(" ", 1)[1]) for proc in procs]


@backend_independent(
    "which replica runs a tick, and when, is decided in Python; the lease rule that "
    "makes it once is every backend's",
    covered_by="contract/test_batch.py::test_overlapping_batches_in_any_order_never_deadlock",
)
def test_a_storm_of_3000_ticks_over_three_replicas_runs_each_once(
    db_url: str, task_name: str, tmp_path: Path
) -> None:
    tasks = 3000
    procs, ledgers, slot = _replicas(db_url, task_name, tmp_path, 3, tasks)
    try:
        wait_for(
            lambda: sum(_ledger(ledgers).values()) >= tasks,
            120,
            lambda: f"a run of every task: {sum(_ledger(ledgers).values())} of {tasks}",
            interval=0.5,
        )
        _stop(procs)
    finally:
        for proc in procs:
            proc.kill()
    runs = _ledger(ledgers)  # after the shutdown: a late duplicate would be here
    assert {s for _, s in runs} == {slot}
    assert len(runs) == tasks, f"{tasks - len(runs)} task(s) never ran"
    twice = [key for key, count in runs.items() if count > 1]
    assert not twice, f"{len(twice)} tick(s) ran more than once: {twice[:5]}"
    # the fleet shared the storm: every replica ran some of it
    per_replica = [len(ledger.read_text().splitlines()) for ledger in ledgers]
    assert all(per_replica), per_replica


@backend_independent(
    "how skipped ticks are said is decided in Python",
    covered_by="contract/test_batch.py::test_overlapping_batches_in_any_order_never_deadlock",
)
def test_a_storm_past_its_grace_is_said_in_lines_that_name_the_count(
    db_url: str, task_name: str, tmp_path: Path
) -> None:
    """2,000 ticks, a grace of 1 s, two workers and 5 ms a run: most are skipped. Each
    tick is run, or counted missed (its grace ended before a worker took it, or its
    lease was won too late) or skipped for capacity; the WARNING lines of the missed
    name exactly as many ticks as were counted missed, in a few lines, not one a tick;
    and the ticks past their grace are not acquired (a lease won, then released)."""
    tasks = 2000
    procs, ledgers, instant = _replicas(
        db_url, task_name, tmp_path, 1, tasks, grace="1", workers="2", pause="0.005"
    )
    (replica,) = procs
    try:
        # past the instant and its grace, and the ledger no longer grows: the storm is over
        wait_for(lambda: time.time() > instant / 1000 + 2, LEAD + 10, "the grace's end")
        counts = [-1]

        def still() -> bool:
            now = sum(_ledger(ledgers).values())
            same, counts[0] = now == counts[0], now
            return same

        wait_for(still, 60, "the ledger to stop growing", interval=0.5)
        (stats,) = _stop(procs)
    finally:
        replica.kill()
    runs = _ledger(ledgers)
    assert max(runs.values(), default=1) == 1
    missed = stats.get("ticks_missed", 0)
    capacity = stats.get("ticks_skipped_capacity", 0) + stats.get("ticks_skipped_shutdown", 0)
    assert len(runs) + missed + capacity == tasks, (len(runs), missed, stats)
    assert missed + capacity > tasks // 2, (len(runs), missed, capacity)
    lines = [
        line
        for line in replica.stderr().splitlines()
        if "skipped: it started" in line or "its lease was won" in line
    ]
    named = sum(_named(line) for line in lines)
    assert named == missed, "\n".join(line[:300] for line in lines)
    # a round of leases is not sent past its ticks' grace: only the one in flight at
    # its end (two workers: two leases) can be won too late, and released unrun
    won_late = sum(_named(line) for line in lines if "its lease was won" in line)
    assert won_late <= 2, [line[:300] for line in lines if "its lease was won" in line]
    warnings = [line for line in replica.stderr().splitlines() if line.startswith("WARNING")]
    assert len(warnings) <= max(10, (missed + capacity) // 50), "\n".join(warnings[:20])
