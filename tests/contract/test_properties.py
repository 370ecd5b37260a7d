"""Property tests: the lease state machine against a model.

The lease machine runs on a real database; "time passing" is the one thing
simulated, by moving a lease's ``expires_at`` into the past with SQL. The
schedule parsing properties are in tests/unit/test_schedule_properties.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from sqlalchemy import update

from cronlease import LeaseStore
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.schema import leases
from tests.conftest import url_for
from tests.support.leases import won

HOLDERS = ("a", "b", "c")


class LeaseMachine(RuleBasedStateMachine):
    """Any interleaving of acquire / heartbeat / release / expire / pause across holders."""

    store: LeaseStore
    granted = Bundle("granted")

    def __init__(self) -> None:
        super().__init__()
        self.name = f"prop-{uuid.uuid4().hex[:10]}"
        self.slots_granted: set[int] = set()
        self.cursor = -1
        self.fence = 0
        self.current: Lease | None = None  # the lease the model believes unexpired
        self.paused = False

    @rule(target=granted, holder=st.sampled_from(HOLDERS), slot=st.integers(1, 40))
    def acquire(self, holder: str, slot: int) -> Lease | None:
        lease = won(
            self.store.acquire(
                AcquireRequest(name=self.name, slot=slot * 1000, ttl=60, holder=holder, tolerance=0)
            )
        )
        may_win = self.current is None and not self.paused and slot * 1000 > self.cursor
        if lease is None:
            assert not may_win, f"refused although free: slot {slot}, cursor {self.cursor}"
            return None
        assert may_win, f"granted slot {slot} while held/paused/old"
        assert lease.slot not in self.slots_granted, "a slot was granted twice"
        assert lease.fence == self.fence + 1, "the fence did not grow by one"
        self.slots_granted.add(lease.slot)
        self.cursor, self.fence, self.current = lease.slot, lease.fence, lease
        return lease

    @rule(lease=granted)
    def heartbeat(self, lease: Lease | None) -> None:
        if lease is None:
            return
        renewed = self.store.heartbeat(lease)
        assert renewed == (lease.fence == self.fence), "a stale fence renewed, or a live one failed"
        if renewed:
            self.current = lease

    @rule(lease=granted, outcome=st.sampled_from(["succeeded", "failed"]))
    def finish(self, lease: Lease | None, outcome: str) -> None:
        if lease is None:
            return
        self.store.finish(lease, outcome)
        if lease.fence == self.fence:
            self.current = None  # released: free at once
        # a stale fence must change nothing: checked by the invariant below

    @precondition(lambda self: self.current is not None)
    @rule()
    def expire(self) -> None:
        with self.store.engine.begin() as conn:
            conn.execute(update(leases).where(leases.c.name == self.name).values(expires_at=0.0))
        self.current = None

    @rule(paused=st.booleans())
    def pause(self, paused: bool) -> None:
        (self.store.pause if paused else self.store.resume)(self.name)
        self.paused = paused

    @invariant()
    def database_agrees(self) -> None:
        rows = self.store.leases([self.name])
        if not rows:
            assert self.fence == 0 and not self.paused
            return
        (row,) = rows
        assert row.fence == self.fence
        assert row.slot == self.cursor
        assert row.paused == self.paused
        if self.current is not None:
            assert row.holder == self.current.holder
            assert row.expires_at > self.store.database_time(), "a held lease was freed"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mysql"])
def test_lease_state_machine(backend: str, tmp_path: Path) -> None:
    store = LeaseStore.from_url(url_for(backend, tmp_path))
    store.create_tables()
    LeaseMachine.store = store
    examples = 60 if backend == "sqlite" else 25
    run = LeaseMachine.TestCase
    run.settings = settings(
        max_examples=examples,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    try:
        run().runTest()
    finally:
        store.dispose()
