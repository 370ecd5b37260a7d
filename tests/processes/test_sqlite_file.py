"""A SQLite lease file deleted or replaced under running replicas (docs/design.md §5.17).

The replicas that opened the old file must notice that the path no longer
names it, say so, and take no lease from then on; a replica started
afterwards on the new file then cannot run a slot they ran. The ledger lives in
a file of its own, so deleting the lease file does not delete the evidence.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from tests.support import ledger
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow

CHANGED = "deleted or replaced"


def remove_lease_file(path: Path) -> None:
    """What an operator's ``rm cronlease.db*`` does: the file, its WAL and its index."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def replace_lease_file(path: Path) -> None:
    """Move another SQLite database into place (its WAL and index go with the old file)."""
    other = path.with_name("other.db")
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE unrelated (x INTEGER)")
    conn.close()
    remove_lease_file(path)
    os.replace(other, path)


@pytest.mark.parametrize("change", ["deleted", "replaced"])
def test_running_replicas_stop_taking_leases_on_a_file_no_longer_at_the_path(
    tmp_path: Path, task_name: str, change: str
) -> None:
    leases = tmp_path / "leases.db"
    url = f"sqlite:///{leases}"
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger.setup(ledger_url)
    env = {"CRONLEASE_TEST_LEDGER": ledger_url}
    old = [Proc("-m", "tests.support.replica", url, task_name, "1s", env=env) for _ in range(2)]
    new: Proc | None = None
    try:
        for proc in old:
            proc.expect("started")
        wait_for(lambda: len(ledger.entries(ledger_url, task_name)) >= 2, 30, "runs on the file")
        (remove_lease_file if change == "deleted" else replace_lease_file)(leases)
        new = Proc("-m", "tests.support.replica", url, task_name, "1s", env=env)
        new.expect("started")
        new_pid = new.popen.pid
        wait_for(
            lambda: sum(pid == new_pid for _, pid in ledger.entries(ledger_url, task_name)) >= 3,
            30,
            "three runs of the replica started on the new file",
        )
    finally:
        for proc in [*old, *([new] if new else [])]:
            proc.terminate()
    entries = ledger.entries(ledger_url, task_name)
    twice = {slot: n for slot, n in Counter(slot for slot, _ in entries).items() if n > 1}
    assert not twice, f"slots run twice: {twice}"
    old_pids = {proc.popen.pid for proc in old}
    # The old replicas stopped before the new one began: no run of theirs comes after.
    assert max(slot for slot, pid in entries if pid in old_pids) < min(
        slot for slot, pid in entries if pid == new_pid
    )
    for proc in old:
        errors = [line for line in proc.stderr().splitlines() if CHANGED in line]
        assert len(errors) == 1, errors  # said once, not once per tick
