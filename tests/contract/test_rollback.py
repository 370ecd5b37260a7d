"""The database loses committed lease writes (asynchronous failover, point-in-time restore).

Simulated on every backend by putting a lease row back to an earlier state
with plain SQL: the fences it issued since are issued again. Fenced writes
match the attempt's holder nonce as well as the fence, so a stale holder
whose fence was reissued changes nothing; and a replica that saw a higher
slot and fence refuses what it saw, writes both back and says so once
(docs/design.md §3.8, §5).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import select, update

from cronlease._lease.model import AcquireRequest, Lease, LeaseInfo, Refusal
from cronlease._lease.schema import leases, runs
from cronlease._lease.store import LeaseStore
from tests.support.leases import won

LOST_WRITES = "the database lost committed lease writes"


def request(name: str, slot: int, holder: str, ttl: float = 30.0) -> AcquireRequest:
    return AcquireRequest(name=name, slot=slot, ttl=ttl, holder=holder)


def take(store: LeaseStore, name: str, slot: int, holder: str, ttl: float = 30.0) -> Lease:
    lease = won(store.acquire(request(name, slot, holder, ttl)))
    assert lease is not None, f"slot {slot} of {name!r} was not acquired"
    return lease


def row_of(store: LeaseStore, name: str) -> LeaseInfo:
    """The row as the database has it (plain SQL: a store would repair what it saw)."""
    with store.engine.connect() as conn:
        row = conn.execute(select(leases).where(leases.c.name == name)).one()
    return LeaseInfo(**{key: row._mapping[key] for key in LeaseInfo.__dataclass_fields__})


def restore(store: LeaseStore, earlier: LeaseInfo) -> None:
    """Put the lease row back as it was (what a failover to a lagging standby does),
    with the lease expired, as it is once the lost holder's TTL has passed."""
    with store.engine.begin() as conn:
        conn.execute(
            update(leases)
            .where(leases.c.name == earlier.name)
            .values(
                holder=earlier.holder,
                fence=earlier.fence,
                slot=earlier.slot,
                acquired_at=earlier.acquired_at,
                expires_at=earlier.expires_at,
            )
        )


@pytest.fixture
def base_slot(store: LeaseStore) -> int:
    return int(store.database_time() * 1000) - 60_000


@pytest.fixture
def replicas(db_url: str) -> Any:
    """Stores of distinct replicas (each remembers what it saw on its own)."""
    opened: list[LeaseStore] = []

    def open_one() -> LeaseStore:
        replica = LeaseStore.from_url(db_url)
        opened.append(replica)
        return replica

    yield open_one
    for replica in opened:
        replica.dispose()


def test_a_reissued_fence_does_not_let_the_stale_holder_write(
    store: LeaseStore, replicas: Any, task_name: str, base_slot: int
) -> None:
    """The issue's simulation: A (fence 2, slot S), then B (fence 2, slot S+1)."""
    a_replica, b_replica, c_replica = replicas(), replicas(), replicas()
    first = take(a_replica, task_name, base_slot, "replica-a")
    a_replica.finish(first, "succeeded")
    earlier = row_of(store, task_name)  # fence 1, slot S-1, expired

    a = take(a_replica, task_name, base_slot + 1, "replica-a", ttl=0.3)  # fence 2, slot S
    assert a.fence == 2
    restore(store, earlier)  # the database lost A's acquisition

    b = take(b_replica, task_name, base_slot + 2, "replica-b")  # fence 2 again, slot S+1
    assert b.fence == 2

    # A's stale writes are refused: they no longer match the holder of fence 2.
    assert a_replica.heartbeat(a) is False
    assert a_replica.release(a) is False
    a_replica.finish(a, "succeeded")
    row = row_of(store, task_name)
    assert (row.fence, row.holder) == (b.fence, b.holder)
    assert row.expires_at > store.database_time()
    # So B still holds its lease: C is refused the next slot while B runs.
    refused = c_replica.acquire(request(task_name, base_slot + 3, "replica-c"))
    assert isinstance(refused, Refusal) and refused.reason == "held", refused
    assert b_replica.heartbeat(b) is True
    b_replica.finish(b, "succeeded")
    history = {run.slot: run for run in store.history(task_name)}
    assert history[base_slot + 2].outcome == "succeeded"
    assert history[base_slot + 2].holder == b.holder


def test_a_replica_refuses_what_it_saw_and_writes_it_back(
    store: LeaseStore,
    replicas: Any,
    task_name: str,
    base_slot: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    live = replicas()
    first = take(live, task_name, base_slot, "live")
    live.finish(first, "succeeded")
    earlier = row_of(store, task_name)
    for slot in (base_slot + 1, base_slot + 2):
        live.finish(take(live, task_name, slot, "live"), "succeeded")
    seen = row_of(store, task_name)
    assert (seen.slot, seen.fence) == (base_slot + 2, 3)

    restore(store, earlier)
    caplog.set_level(logging.ERROR, logger="cronlease")
    # The slots it saw run are refused, although the database now says they are free.
    for slot in (base_slot + 1, base_slot + 2):
        refused = live.acquire(request(task_name, slot, "live"))
        assert isinstance(refused, Refusal) and refused.reason == "taken", (slot, refused)
    # ... and the database has them back, so no replica runs them again, not even a
    # replica started afterwards, that never saw them.
    repaired = row_of(store, task_name)
    assert repaired.slot >= seen.slot and repaired.fence >= seen.fence
    restarted = replicas()
    for slot in (base_slot + 1, base_slot + 2):
        refused = restarted.acquire(request(task_name, slot, "restarted"))
        assert isinstance(refused, Refusal) and refused.reason == "taken", (slot, refused)
    # The next slot runs once, with a fence never issued before.
    nxt = take(live, task_name, base_slot + 3, "live")
    assert nxt.fence > seen.fence
    live.finish(nxt, "succeeded")
    # Said once, loudly, however often the replica meets it.
    restore(store, earlier)
    assert not won(live.acquire(request(task_name, base_slot + 3, "live")))
    lines = [r for r in caplog.records if LOST_WRITES in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.ERROR
    assert task_name in lines[0].getMessage()


def test_a_win_with_a_reissued_fence_gets_a_fence_of_its_own(
    store: LeaseStore, replicas: Any, task_name: str, base_slot: int
) -> None:
    live = replicas()
    live.finish(take(live, task_name, base_slot, "live"), "succeeded")
    earlier = row_of(store, task_name)
    live.finish(take(live, task_name, base_slot + 1, "live"), "succeeded")  # fence 2
    restore(store, earlier)
    # The database would issue fence 2 again for the next slot: the replica saw it used.
    lease = take(live, task_name, base_slot + 2, "live")
    assert lease.fence > 2
    row = row_of(store, task_name)
    assert (row.fence, row.holder, row.slot) == (lease.fence, lease.holder, base_slot + 2)
    assert live.heartbeat(lease) is True
    live.finish(lease, "succeeded")
    run = {run.slot: run for run in store.history(task_name)}[base_slot + 2]
    assert (run.fence, run.outcome) == (lease.fence, "succeeded")


class _WriteBackFirst:
    """A store's statements, with another replica's step run just before the store's
    renumbering (``refence``): the interleaving SPIN found (docs/design.md §10.4)."""

    def __init__(self, inner: Any, before_refence: Any) -> None:
        self._inner = inner
        self._before_refence = before_refence

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def refence(self, conn: Any, lease: Lease, fence: int, slot: int) -> Any:
        self._before_refence()
        return self._inner.refence(conn, lease, fence, slot)


def test_a_write_back_between_win_and_renumbering_does_not_reuse_a_fence(
    store: LeaseStore, replicas: Any, task_name: str, base_slot: int
) -> None:
    """R0 runs slot S (fence 2); R1 runs slot S+1 (fence 3); the database loses both.
    R0 wins slot S+2 with fence 2 again and renumbers it — but just before, R1's
    acquisition of slot S+3 is refused (R0 holds the lease) on a row that went back,
    and R1 writes back fence 3 over R0's lease. R0 must still end with a fence it
    never handed out, and a lease it can renew."""
    first = take(replicas(), task_name, base_slot - 1, "prelim")  # fence 1
    store.finish(first, "succeeded")
    earlier = row_of(store, task_name)  # fence 1, slot S-1
    r0, r1 = replicas(), replicas()
    a = take(r0, task_name, base_slot, "r0")
    r0.finish(a, "succeeded")
    b = take(r1, task_name, base_slot + 1, "r1")
    r1.finish(b, "failed")
    assert (a.fence, b.fence) == (2, 3)
    restore(store, earlier)  # the failover: slot S and S+1, fences 2 and 3, are lost

    refused: list[Lease | Refusal] = []

    def r1_is_refused() -> None:
        if not refused:
            refused.append(r1.acquire(request(task_name, base_slot + 3, "r1")))

    r0.statements = _WriteBackFirst(r0.statements, r1_is_refused)  # type: ignore[assignment]
    lease = take(r0, task_name, base_slot + 2, "r0")
    assert refused and isinstance(refused[0], Refusal), refused
    assert lease.fence > a.fence, f"R0 handed out fence {lease.fence} twice (slot S had it)"
    row = row_of(store, task_name)
    assert (row.fence, row.holder) == (lease.fence, lease.holder)
    assert r0.heartbeat(lease) is True
    r0.finish(lease, "succeeded")
    run = {run.slot: run for run in store.history(task_name)}[base_slot + 2]
    assert (run.fence, run.holder, run.outcome) == (lease.fence, lease.holder, "succeeded")


def run_of(store: LeaseStore, name: str, slot: int) -> Any:
    return {run.slot: run for run in store.history(name)}[slot]


def test_a_holder_whose_row_went_back_writes_its_lease_back(
    store: LeaseStore, replicas: Any, task_name: str, base_slot: int
) -> None:
    """A runs; the database loses A's acquisition (a lower fence, another holder,
    expired) and a sweep marks A's run abandoned: A's renewal finds its row behind it
    and writes its lease back, its run row back to running; A still holds the lease."""
    a_replica, c_replica = replicas(), replicas()
    first = take(a_replica, task_name, base_slot, "replica-a")
    a_replica.finish(first, "succeeded")
    earlier = row_of(store, task_name)
    a = take(a_replica, task_name, base_slot + 1, "replica-a")
    restore(store, earlier)
    with store.engine.begin() as conn:  # what the sweep of a takeover does
        conn.execute(
            update(runs)
            .where(runs.c.name == task_name, runs.c.fence == a.fence)
            .values(outcome="abandoned")
        )
    assert a_replica.heartbeat(a) is True
    row = row_of(store, task_name)
    assert (row.fence, row.holder, row.slot) == (a.fence, a.holder, a.slot)
    assert row.expires_at > store.database_time() + 20
    assert run_of(store, task_name, a.slot).outcome == "running"
    refused = c_replica.acquire(request(task_name, base_slot + 2, "replica-c"))
    assert isinstance(refused, Refusal) and refused.reason == "held", refused
    a_replica.finish(a, "succeeded")
    assert run_of(store, task_name, a.slot).outcome == "succeeded"
    assert won(c_replica.acquire(request(task_name, base_slot + 2, "replica-c")))


@pytest.mark.parametrize("newer", ["same fence", "higher fence"])
def test_a_holder_never_writes_its_lease_back_over_a_newer_holder(
    store: LeaseStore, replicas: Any, task_name: str, base_slot: int, newer: str
) -> None:
    a_replica, c_replica = replicas(), replicas()
    first = take(a_replica, task_name, base_slot, "replica-a")
    a_replica.finish(first, "succeeded")
    earlier = row_of(store, task_name)
    a = take(a_replica, task_name, base_slot + 1, "replica-a", ttl=0.3)
    restore(store, earlier)
    # C never saw A's lease: it wins A's fence again (another nonce) after the loss
    c = take(c_replica, task_name, base_slot + 2, "replica-c")
    if newer == "higher fence":
        c_replica.finish(c, "succeeded")
        c = take(c_replica, task_name, base_slot + 3, "replica-c")
    assert c.fence >= a.fence
    assert a_replica.heartbeat(a) is False
    row = row_of(store, task_name)
    assert (row.fence, row.holder, row.slot) == (c.fence, c.holder, c.slot)


def test_a_win_revealing_lost_writes_under_a_lease_it_saw_held_is_given_back(
    store: LeaseStore, replicas: Any, task_name: str, base_slot: int
) -> None:
    """B saw A's lease held; the database loses A's acquisition; B's next win has A's
    fence: B gives the slot up (not run, recorded missed) and puts the fence back, so
    that A, still running, writes its lease back; the next slot runs normally."""
    a_replica, b_replica = replicas(), replicas()
    first = take(a_replica, task_name, base_slot, "replica-a")
    a_replica.finish(first, "succeeded")
    earlier = row_of(store, task_name)
    a = take(a_replica, task_name, base_slot + 1, "replica-a")
    seen = b_replica.acquire(request(task_name, base_slot + 2, "replica-b"))
    assert isinstance(seen, Refusal) and seen.reason == "held", seen
    restore(store, earlier)

    given_up = b_replica.acquire(request(task_name, base_slot + 2, "replica-b"))
    assert isinstance(given_up, Refusal) and given_up.reason == "held", given_up
    assert given_up.expires_in is not None and given_up.expires_in > 30
    row = row_of(store, task_name)
    assert row.fence == a.fence - 1 and row.slot == base_slot + 2
    assert row.expires_at < store.database_time()
    assert run_of(store, task_name, base_slot + 2).outcome == "missed"
    # the slot given up is not run, by B nor by a replica that never saw it
    again = b_replica.acquire(request(task_name, base_slot + 2, "replica-b"))
    assert isinstance(again, Refusal) and again.reason == "taken", again

    assert a_replica.heartbeat(a) is True
    row = row_of(store, task_name)
    assert (row.fence, row.holder, row.slot) == (a.fence, a.holder, base_slot + 2)
    a_replica.finish(a, "succeeded")
    nxt = take(b_replica, task_name, base_slot + 3, "replica-b")
    assert nxt.fence == a.fence + 1
    slots = [run.slot for run in store.history(task_name) if run.outcome == "succeeded"]
    assert sorted(slots) == [base_slot, base_slot + 1]


def test_a_re_assert_between_win_and_renumbering_is_not_run(
    store: LeaseStore, replicas: Any, task_name: str, base_slot: int
) -> None:
    """R0 runs slot S (fence f) and ends; R1 wins slot S+1 (fence f+1) and runs; the
    database loses both. R0 wins slot S+2 with fence f again and renumbers it — but
    just before, R1's renewal finds the row behind its lease and writes it back over
    R0's win (fence f < f+1). R0's lease is R1's now: R0 must not start it (it would
    run beside R1 with fence f, the fence of its own previous run), and its run row
    is recorded as not run (SPIN's counterexample, docs/design.md §10.4)."""
    first = take(replicas(), task_name, base_slot - 1, "prelim")
    store.finish(first, "succeeded")
    earlier = row_of(store, task_name)
    r0, r1 = replicas(), replicas()
    a = take(r0, task_name, base_slot, "r0")
    r0.finish(a, "succeeded")
    b = take(r1, task_name, base_slot + 1, "r1")
    assert b.fence == a.fence + 1
    restore(store, earlier)  # the failover: slots S and S+1, fences f and f+1, are lost

    renewed: list[list[bool]] = []

    def r1_renews() -> None:
        if not renewed:
            renewed.append(r1.heartbeat_many([b]))

    r0.statements = _WriteBackFirst(r0.statements, r1_renews)  # type: ignore[assignment]
    outcome = r0.acquire(request(task_name, base_slot + 2, "r0"))
    assert renewed == [[True]], renewed  # R1 wrote its lease back over R0's win
    row = row_of(store, task_name)
    assert (row.fence, row.holder) == (b.fence, b.holder)
    assert not won(outcome), f"R0 starts fence {outcome} beside R1's run (slot S had it)"
    assert isinstance(outcome, Refusal) and outcome.reason == "taken", outcome
    assert run_of(store, task_name, base_slot + 2).outcome == "missed"
    assert r1.heartbeat(b) is True
    r1.finish(b, "succeeded")
    assert run_of(store, task_name, base_slot + 1).outcome == "succeeded"
