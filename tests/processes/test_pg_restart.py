"""A real PostgreSQL restart while three replicas run: nobody exits, no tick runs twice.

The server is a throw-away cluster of the test's own (tests/support/pgcluster.py):
restarting the shared test server would break every test running beside this
one (the suite runs on several processes).
"""

from __future__ import annotations

import pytest

from tests.support import ledger, pgcluster
from tests.support.ledger import assert_every_slot_once
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow


def test_postgres_restart_under_three_replicas(task_name: str) -> None:
    problem = pgcluster.problem()
    if problem:
        pytest.skip(problem)
    clusters = pgcluster.Clusters()
    try:
        port = pgcluster.free_port()
        data = clusters.primary(port)
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        ledger.setup(url)
        replicas = [Proc("-m", "tests.support.replica", url, task_name) for _ in range(3)]
        try:
            for replica in replicas:
                replica.expect("started")
            wait_for(lambda: len(ledger.entries(url, task_name)) >= 3, 30, "three runs before")
            clusters.restart(data)
            after = max(slot for slot, _ in ledger.entries(url, task_name))
            wait_for(
                lambda: sum(s > after for s, _ in ledger.entries(url, task_name)) >= 3,
                60,
                "three runs after the restart",
            )
            assert all(replica.popen.poll() is None for replica in replicas), "a replica exited"
        finally:
            codes = [replica.terminate() for replica in replicas]
        assert codes == [0, 0, 0], [replica.stderr()[-2000:] for replica in replicas]
        slots = [slot for slot, _ in ledger.entries(url, task_name)]
        assert len(slots) == len(set(slots)), "a tick ran twice"
        before_restart = [s for s in slots if s <= after]
        assert_every_slot_once(before_restart)
        stderr = "".join(replica.stderr() for replica in replicas)
        assert "Traceback" not in stderr
    finally:
        clusters.cleanup()
