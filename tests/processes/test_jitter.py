"""Jitter across real replicas: the slot and exactly-once unchanged, the start offset
the same function of (task, slot) on every replica (docs/design.md, "Jitter")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cronlease._timing.jitter import offset
from tests.support import ledger
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow

SLOTS = 3


def test_two_replicas_start_each_slot_once_at_its_shared_offset(
    tmp_path: Path, task_name: str
) -> None:
    url = f"sqlite:///{tmp_path / 'cronlease.db'}"
    ledger.setup(url)
    replicas = [
        Proc("-m", "tests.support.jitter_replica", url, task_name, "5s", "2s") for _ in range(2)
    ]
    try:
        for replica in replicas:
            replica.expect("started")
        wait_for(lambda: len(ledger.entries(url, task_name)) >= SLOTS, 40, f"{SLOTS} runs")
    finally:
        codes = [replica.terminate() for replica in replicas]
    stderr = "\n".join(replica.stderr()[-2000:] for replica in replicas)
    assert codes == [0, 0], stderr
    runs = ledger.entries(url, task_name)
    slots = [slot for slot, _ in runs]
    twice = {slot: n for slot, n in Counter(slots).items() if n > 1}
    assert not twice, f"slots run twice: {twice}\n{stderr}"
    assert all(slot % 5000 == 0 for slot in slots), slots  # the slot is the un-jittered one
    starts = {
        int(name.rsplit("#", 1)[1]): (started, pid)
        for name, started, pid in ledger.rows_like(url, f"{task_name}#")
    }
    for slot, pid in runs:
        started, started_on = starts[slot]
        assert started_on == pid
        # never before its jittered start, and within the grace (half the gap) after it
        late = (started - slot) / 1000 - offset(task_name, slot, 2.0, 5.0)
        assert -0.001 <= late <= 2.5, (slot, started, late, stderr)
