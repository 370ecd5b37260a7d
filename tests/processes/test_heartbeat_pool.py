"""Renewals never wait for the application's pool (issue 11, item 2).

Two replicas adopt an application engine of five connections; every run holds
all five for four TTLs. Before, renewals shared that pool: the run lost its
lease and the other replica started the task while it still ran. The ledger
counts real runs in real processes.
"""

from __future__ import annotations

import pytest

from tests.support import ledger
from tests.support.backends import backend_independent
from tests.support.procs import Proc, wait_for


@pytest.mark.slow
@backend_independent(
    "renewals take the store's own engine, never the application's pool: a choice in Python",
    covered_by="contract/test_pool.py::test_the_renewal_connection_closes_once_no_run_renews, "
    "contract/test_heartbeat.py::test_heartbeats_keep_a_long_run_exclusive",
)
def test_a_busy_application_pool_does_not_starve_renewals(db_url: str, task_name: str) -> None:
    ledger.setup(db_url)
    replicas = [Proc("-m", "tests.support.pool_replica", db_url, task_name) for _ in range(2)]
    try:
        for replica in replicas:
            replica.expect("started", timeout=60)
        # Two runs end to end (each 5 s, four of them with the pool held).
        wait_for(lambda: len(ledger.entries(db_url, f"{task_name}#end")) >= 2, 60, "two runs")
    finally:
        for replica in replicas:
            replica.stop()
    overlaps = ledger.entries(db_url, f"{task_name}#overlap")
    stderr = "\n".join(replica.stderr() for replica in replicas)
    assert not overlaps, f"a run started while another still ran: {overlaps}\n{stderr}"
    slots = [slot for slot, _ in ledger.entries(db_url, task_name)]
    assert len(slots) == len(set(slots)), slots
    assert "lost its lease" not in stderr, stderr
