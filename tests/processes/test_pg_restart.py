"""A real PostgreSQL restart while three replicas run: nobody exits, no tick runs twice."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import url_for
from tests.support import ledger
from tests.support.ledger import assert_every_slot_once
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow


def restart_postgres() -> None:
    version = os.path.basename(sorted(glob.glob("/etc/postgresql/*"))[-1])
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart", "-m", "fast"],
        check=True,
        timeout=120,
    )


@pytest.mark.skipif(
    shutil.which("pg_ctlcluster") is None or not glob.glob("/etc/postgresql/*"),
    reason="no local PostgreSQL cluster this test may restart (pg_ctlcluster)",
)
def test_postgres_restart_under_three_replicas(tmp_path: Path, task_name: str) -> None:
    url = url_for("postgresql", tmp_path)
    if "127.0.0.1" not in url and "localhost" not in url:
        pytest.skip(f"{url} is not the local server this test can restart")
    ledger.setup(url)
    replicas = [Proc("-m", "tests.support.replica", url, task_name) for _ in range(3)]
    try:
        for replica in replicas:
            replica.expect("started")
        wait_for(lambda: len(ledger.entries(url, task_name)) >= 3, 30, "three runs before")
        restart_postgres()
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
