"""The rollback simulation of issue 11, item 4, under real replica processes.

While a run of ``fast`` (1.5 s, every 1 s) is in progress, just after its
first renewal, its lease row is put back to an earlier state: one fence
lower, the slot before, expired — the row a database that lost the winner's
acquisition would show. The other replica's acquisition of the next slot then
wins with the running holder's fence. Stale writes match the holder nonce, so
no slot runs twice; and the holder is alive: its renewal finds its row behind
and writes its lease back, while the other replica, which saw the row go back,
gives the slot up rather than start beside a lease it saw held. The ledger
counts runs and times them: none overlaps, none is told ``ctx.lost``.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
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
REASSERTED = "wrote its lease back"
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
        started = len(ledger.entries(ledger_url, "fast"))
        wait_for(lambda: len(ledger.entries(ledger_url, "fast")) > started, 30, "the next run")

        def renewed_once(after_slot: int) -> Any:
            with engine.connect() as conn:
                row = conn.execute(select(leases).where(leases.c.name == "fast")).one()
            # a run's first renewal (at TTL/3) done, its second (at 2 TTL/3, before the
            # 1.5 s run ends) still to come: the one that must find the row gone back
            renewals = round((row.expires_at - row.acquired_at - TTL) * 3 / TTL)
            return row if row.slot > after_slot and renewals == 1 else None

        lost_slot = 0
        for _ in range(5):
            row = wait_for(
                lambda after=lost_slot: renewed_once(after), 30, "a running holder's first renewal"
            )
            lost_slot = int(row.slot)
            with engine.begin() as conn:
                # only as the test read it: on a loaded host the holder may have renewed
                # again (or finished) since, and then no renewal would be left to see it
                went_back = conn.execute(
                    update(leases)
                    .where(
                        (leases.c.name == "fast")
                        & (leases.c.fence == row.fence)
                        & (leases.c.expires_at == row.expires_at)
                    )
                    .values(
                        fence=row.fence - 1,
                        slot=row.slot - 1000,
                        holder="lost#0000000000000000",
                        expires_at=row.acquired_at - 0.001,
                    )
                ).rowcount
            if went_back:
                break
        else:
            raise AssertionError("five runs went by before the test could put a row back")
        # A run beside the holder's would be a later slot's, begun before the holder's
        # run ended (it writes an #overlap entry as it begins): once the run of the slot
        # that went back and a later slot's run have ended, any such run has begun.
        wait_for(
            lambda: (
                lost_slot in (ends := {s for s, _ in ledger.entries(ledger_url, "fast#end")})
                and max(ends) > lost_slot
            ),
            30,
            "the run of the slot that went back, and a later one",
        )
    finally:
        stop_all(replicas)
        engine.dispose()
    stderr = "\n".join(replica.stderr() for replica in replicas)
    slots = [slot for slot, _ in ledger.entries(ledger_url, "fast")]
    assert max(Counter(slots).values()) == 1, f"a slot ran twice: {slots}\n{stderr}"
    runs = run_windows(ledger_url, "fast")
    assert lost_slot in {slot for slot, _, _, _ in runs}, (lost_slot, runs)
    # The running holder's renewal found its row behind and wrote its lease back: the
    # database lost a write, not the lease. The other replica, whose acquisition saw
    # the row go back, treats the lease as held until the expiry it had seen (+ one
    # TTL): nothing overlaps, the lost slot's run included.
    overlaps = [
        (earlier[0], later[0], earlier[3] - later[2])
        for index, later in enumerate(runs)
        for earlier in runs[:index]
        if later[2] < earlier[3]
    ]
    assert overlaps == [], (
        f"runs overlapped (slot, next slot, ms): {overlaps}; slot {lost_slot} went back, "
        f"runs {runs}\n{stderr}"
    )
    assert ledger.entries(ledger_url, "fast#overlap") == []
    told = [slot for slot, _ in ledger.entries(ledger_url, "fast#lost")]
    assert told == [], f"runs told ctx.lost: {told} (slot {lost_slot} went back)\n{stderr}"
    assert "lost its lease" not in stderr, stderr
    for replica in replicas:
        assert replica.stderr().count(LOST_WRITES) <= 1, replica.stderr()
    # the holder noticed, and said so once
    assert REASSERTED in stderr, stderr


def stop_all(replicas: list[Proc]) -> None:
    """``stop`` to every replica, then wait for each: their shutdowns overlap."""
    for replica in replicas:
        if replica.popen.poll() is None:
            with contextlib.suppress(OSError):
                replica.send("stop")
    deadline = time.monotonic() + 30
    for replica in replicas:
        try:
            replica.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            replica.kill()


def run_windows(ledger_url: str, task: str) -> list[tuple[int, int, int, int]]:
    """(slot, pid, began ms, ended ms) of each run that ended, by start: a replica runs
    one at a time, so its starts, beginnings and ends pair in order."""
    windows = []
    for pid in {pid for _, pid in ledger.entries(ledger_url, task)}:
        mine = [slot for slot, p in ledger.entries(ledger_url, task) if p == pid]
        began = [ms for ms, p in ledger.entries(ledger_url, f"{task}#began_ms") if p == pid]
        ended = [ms for ms, p in ledger.entries(ledger_url, f"{task}#ended_ms") if p == pid]
        windows += [(*run, pid) for run in zip(mine, began, ended, strict=False)]
    return sorted(((slot, pid, b, e) for slot, b, e, pid in windows), key=lambda w: w[2])
