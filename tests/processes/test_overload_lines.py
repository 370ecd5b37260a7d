"""A replica that falls behind logs one line per kind and batch, not one per task.

Fifty tasks every second on one replica, stopped for 3 s (SIGSTOP, as a host
starved of CPU) and let go on 0.6 s into a second: the tick that fires then is
past every task's grace. Each task still counts its skip (``ticks_missed``, the per-task tally,
the events), but the log says so once, naming the first task and how many more
— not fifty WARNING lines at one instant. Whether lines are grouped is
decided in Python: on SQLite.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from cronlease import LeaseStore
from cronlease._lease.model import AcquireRequest
from tests.support.leases import ran_every_task, won
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow

TASKS = 50
LATE = "skipped: it started"


def test_the_wait_for_a_run_of_every_task_waits_for_each(tmp_path: Path, task_name: str) -> None:
    """The wait before the stop holds until every task has run: a replica stopped
    between its "started" line and its first tick fires that tick on time when let
    go, and the late ticks' warning never comes."""
    store = LeaseStore.from_url(f"sqlite:///{tmp_path / 'cronlease.db'}")
    names = [f"{task_name}-{index:03d}" for index in range(TASKS)]
    try:
        store.create_tables()  # as a replica's start does
        assert not ran_every_task(store, names)  # no run yet: the state right after "started"
        slot = int(store.database_time() * 1000) - 60_000

        def run(name: str) -> None:
            lease = won(store.acquire(AcquireRequest(name=name, slot=slot, ttl=30.0, holder="t")))
            assert lease is not None, name
            store.finish(lease, "succeeded")

        for name in names[:-1]:
            run(name)
        assert not ran_every_task(store, names)  # one task has not run yet
        run(names[-1])
        assert ran_every_task(store, names)
    finally:
        store.dispose()


def test_a_late_batch_of_fifty_ticks_is_one_warning(tmp_path: Path, task_name: str) -> None:
    url = f"sqlite:///{tmp_path / 'cronlease.db'}"
    names = [f"{task_name}-{index:03d}" for index in range(TASKS)]
    replica = Proc("-m", "tests.support.many_tasks_replica", url, task_name, str(TASKS))
    store = LeaseStore.from_url(url)
    try:
        replica.expect("started", 60)
        # every task has run: the replica is past its start, on time (stopped before its
        # first tick, it would fire that tick on time when let go, and warn of nothing)
        wait_for(lambda: ran_every_task(store, names), 30, "a run of every task")
        replica.popen.send_signal(signal.SIGSTOP)
        try:
            time.sleep(3)  # the stall itself: three ticks' time
            # Let it go on 0.6 s into a second: its timer fires the tick it missed last
            # (one, coalesced), 0.6 s late or more, past the default grace of half a
            # second; a replica slow to wake (a loaded host) has 0.4 s before the next
            # second's tick would be the one it fires, on time (it was 0.9 s: 0.1 s of
            # room, too little for a CI machine under load).
            time.sleep((0.6 - time.time() % 1) % 1)
        finally:
            replica.popen.send_signal(signal.SIGCONT)
        wait_for(
            lambda: LATE in replica.stderr(),
            30,
            lambda: f"the late ticks' warning; the replica's log:\n{replica.stderr()[-3000:]}",
        )
        runs_after = {name: runs[0].slot for name, runs in store.recent_runs(names, 1).items()}
        # on time again: every task ran a tick after the stall (the streaks ended)
        wait_for(
            lambda: all(
                runs[0].slot > runs_after[name]
                for name, runs in store.recent_runs(names, 1).items()
            ),
            30,
            "a run of every task after the stall",
        )
        assert replica.terminate(30) == 0
    finally:
        replica.kill()
        store.dispose()
    lines = [line for line in replica.stderr().splitlines() if LATE in line]
    assert len(lines) == 1, "\n".join(lines[:5])
    assert f"and {TASKS - 1} more task(s) alike" in lines[0], lines[0]
