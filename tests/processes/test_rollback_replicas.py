"""The rollback simulation of issue 11, item 4, under real replica processes.

While a run of ``fast`` (1.5 s, every 1 s) is in progress, just after its
first renewal, its lease row is put back to an earlier state: one fence
lower, the slot before, expired — the row a database that lost the winner's
acquisition would show. The other
replica then wins the next slot with the running holder's fence. Before, the
running holder's renewals and release matched on the fence alone: it kept
renewing and then freed the new holder's lease, and another run started beside
that one. The ledger counts runs.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select, update
from sqlalchemy.pool import NullPool

from cronlease._lease.database import normalize_url
from cronlease._lease.schema import leases
from tests.support import ledger
from tests.support.procs import Proc, wait_for

LOST_WRITES = "the database lost committed lease writes"
TTL = 2.0  # fast's lease_ttl (tests/support/failover_replica.py)


@pytest.mark.slow
def test_a_lease_row_put_back_under_running_replicas(db_url: str, tmp_path: Path) -> None:
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger.setup(ledger_url)
    engine = create_engine(normalize_url(db_url), poolclass=NullPool)
    replicas = [Proc("-m", "tests.support.failover_replica", db_url, ledger_url) for _ in range(2)]
    try:
        for replica in replicas:
            replica.expect("started", timeout=60)
        wait_for(lambda: len(ledger.entries(ledger_url, "fast#end")) >= 1, 30, "a run")
        ended = len(ledger.entries(ledger_url, "fast#end"))
        started = len(ledger.entries(ledger_url, "fast"))
        wait_for(lambda: len(ledger.entries(ledger_url, "fast")) > started, 30, "the next run")

        def renewed_once() -> Any:
            with engine.connect() as conn:
                row = conn.execute(select(leases).where(leases.c.name == "fast")).one()
            # its first renewal (at TTL/3) is done: the next comes after the next tick
            return row if row.expires_at > row.acquired_at + TTL + 0.1 else None

        row = wait_for(renewed_once, 30, "the running holder's first renewal")
        lost_slot = int(row.slot)
        with engine.begin() as conn:
            conn.execute(
                update(leases)
                .where(leases.c.name == "fast")
                .values(
                    fence=row.fence - 1,
                    slot=row.slot - 1000,
                    holder="lost#0000000000000000",
                    expires_at=row.acquired_at - 0.001,
                )
            )
        wait_for(lambda: len(ledger.entries(ledger_url, "fast#end")) >= ended + 4, 30, "runs")
    finally:
        for replica in replicas:
            replica.stop()
        engine.dispose()
    stderr = "\n".join(replica.stderr() for replica in replicas)
    slots = [slot for slot, _ in ledger.entries(ledger_url, "fast")]
    assert max(Counter(slots).values()) == 1, f"a slot ran twice: {slots}\n{stderr}"
    overlaps = ledger.entries(ledger_url, "fast#overlap")
    starts = ledger.entries(ledger_url, "fast")
    # The database lost the running holder's lease: the next run starting beside it
    # is what losing the write means (README). Nothing else may overlap: the stale
    # holder can neither renew nor free the new holder's lease.
    beside_lost = min(slot for slot, _ in starts if slot > lost_slot)
    assert [slot for slot, _ in overlaps if slot != beside_lost] == [], (
        f"runs overlapped: {overlaps}, starts {starts}\n{stderr}"
    )
    for replica in replicas:
        assert replica.stderr().count(LOST_WRITES) <= 1, replica.stderr()
    # the stale holder learnt it had lost the lease, and was recorded so
    assert "lost its lease" in stderr, stderr
