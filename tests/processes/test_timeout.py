"""A sync task past its ``timeout``: recorded ``timed_out``, its lease left to expire.

A Python thread cannot be stopped, so the timeout does what it can: one
warning naming the task, the run recorded ``timed_out``, its lease no longer
renewed — never released while the call still runs — so another replica can
run the task once the lease expired. Real processes, the ledger, every backend.
"""

from __future__ import annotations

import pytest

from cronlease import LeaseStore
from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow


@backend_independent(
    "the timeout, its warning and the renewals it stops are the runner's, in Python",
    covered_by="contract/test_contract.py::test_later_slot_is_granted_after_expiry_and_not_before, "
    "contract/test_contract.py::test_finish_without_release_keeps_the_lease",
)
def test_a_hung_sync_task_is_timed_out_and_its_lease_expires(db_url: str, task_name: str) -> None:
    ledger.setup(db_url)
    hung = Proc("-m", "tests.support.hung_replica", db_url, task_name)
    other = None
    try:
        hung.expect("started", 60)
        (hung_slot,) = wait_for(
            lambda: [slot for slot, _ in ledger.entries(db_url, task_name)], 30, "the hung run"
        )
        other = Proc("-m", "tests.support.replica", db_url, task_name)
        other.expect("started", 60)
        pid = other.popen.pid
        wait_for(
            lambda: sum(p == pid for _, p in ledger.entries(db_url, task_name)) >= 2,
            30,
            "the other replica to run the task",
        )
    finally:
        if other is not None:
            other.terminate()
        assert hung.terminate(30) == 0, hung.stderr()
    entries = ledger.entries(db_url, task_name)
    # the hung replica never started the task again while its call went on
    assert [slot for slot, p in entries if p == hung.popen.pid] == [hung_slot]
    # its lease was not released at the timeout (1 s): it expired a TTL (1 s) later
    taken_over = [slot for slot, p in entries if p == other.popen.pid]
    assert min(taken_over) >= hung_slot + 2000, (hung_slot, taken_over)
    store = LeaseStore.from_url(db_url)
    try:
        (run,) = [run for run in store.history(task_name, limit=100) if run.slot == hung_slot]
    finally:
        store.dispose()
    assert run.outcome == "timed_out" and run.finished_at is not None, run
    warnings = [line for line in hung.stderr().splitlines() if "past its timeout" in line]
    assert len(warnings) == 1 and task_name in warnings[0], warnings
