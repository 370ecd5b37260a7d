"""Shutdown while the process lives on: a run past the limit keeps its lease until it ends.

Real replica processes, counted at the ledger, on every backend.
"""

from __future__ import annotations

import pytest

from cronlease._lease.store import LeaseStore
from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow


@backend_independent(
    "shutdown's limit and the heartbeat thread renewing past it are the runner's threads",
    covered_by="contract/test_heartbeat.py::test_heartbeats_keep_a_long_run_exclusive, "
    "contract/test_start_stop.py::"
    "test_start_then_shutdown_during_catch_up_leaves_no_lease_held_and_no_run_running",
)
@pytest.mark.parametrize("how", ["shutdown", "shutdown-nowait"])
def test_a_run_past_the_shutdown_limit_keeps_its_lease_and_records_its_real_outcome(
    db_url: str, task_name: str, how: str
) -> None:
    """A 6 s run, shutdown(timeout=1) (or wait=False), the process staying alive: no
    other replica starts the task until the run ends, and the run is ``succeeded``."""
    ledger.setup(db_url)
    lingering = Proc("-m", "tests.support.lingering_replica", db_url, task_name, "6")
    other = None
    try:
        slot = int(lingering.expect("running ", timeout=60).split()[1])
        other = Proc("-m", "tests.support.replica", db_url, task_name)
        other.expect("started", timeout=60)
        lingering.send(how)
        lingering.expect("returned", timeout=30)
        lingering.expect("ended", timeout=30)
        # the other replica takes the task over once the run ended
        wait_for(
            lambda: any(pid == other.popen.pid for _, pid in ledger.entries(db_url, task_name)),
            30,
            "the other replica to run the task",
        )
    finally:
        if other is not None:
            other.terminate()
        lingering.stop()
    # A tick of the other replica that fired while the 6 s run went on (slot < S + 6 s)
    # could only have started beside it: after it ended, its grace was long over.
    assert other is not None
    taken_over = [s for s, pid in ledger.entries(db_url, task_name) if pid == other.popen.pid]
    assert taken_over, "the other replica never ran the task"
    assert min(taken_over) >= slot + 6000, (slot, taken_over)
    store = LeaseStore.from_url(db_url)
    try:
        runs = store.history(task_name, limit=100)
    finally:
        store.dispose()
    (first,) = [run for run in runs if run.slot == slot]
    assert first.outcome == "succeeded", first
