"""Fleet membership and the read-only slot check, on every backend (docs/design.md §4.4).

The store side (``LeaseStore.fleet``): member rows renewed, read back in the
same round trip, expired and deleted; the slot check reads cursors without
taking a row lock. The tick side, in process with real stores: a tick tried
after the rendezvous delay whose slot was taken costs no acquisition, and one
whose preferred replica never came is still acquired. Other tests share this
run's schema, so every check here looks only at its own holders and tasks.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.pool import NullPool

from cronlease import Scheduler
from cronlease._events import TickSkipped
from cronlease._lease.database import normalize_url
from cronlease._lease.membership import MemberBeat
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.schema import members
from cronlease._lease.store import LeaseStore
from cronlease._run.timer.ticks import Tick
from cronlease._task import Task
from cronlease.errors import ConfigError


@pytest.fixture
def prefix() -> str:
    return f"member-{uuid.uuid4().hex[:8]}"


def _ours(store: LeaseStore, prefix: str) -> dict[str, object]:
    return {m.holder: m for m in store.fleet.members().members if m.holder.startswith(prefix)}


@pytest.mark.parametrize("form", ["single", "batch"])
def test_a_renewal_inserts_renews_and_reads_every_live_member(
    store: LeaseStore, prefix: str, form: str
) -> None:
    a, b, c = f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"
    first = store.fleet.renew([MemberBeat(a, "d1", 30.0, namespace="billing")])
    (row,) = [m for m in first.members if m.holder.startswith(prefix)]
    assert (row.holder, row.namespace, row.task_set) == (a, "billing", "d1")
    assert row.started_at == row.renewed_at <= first.db_now < row.expires_at
    assert row.expires_at == pytest.approx(row.renewed_at + 30.0)
    beats = [MemberBeat(b, "d2", 30.0)]
    if form == "batch":
        beats.append(MemberBeat(c, "d2", 30.0))
    second = store.fleet.renew(beats)
    seen = {m.holder: m for m in second.members if m.holder.startswith(prefix)}
    assert set(seen) == {a, b} | ({c} if form == "batch" else set())
    assert seen[a] == row  # another member's row, as it was
    # renewing again keeps started_at and moves the rest
    third = store.fleet.renew([MemberBeat(a, "d3", 10.0)])
    again = next(m for m in third.members if m.holder == a)
    assert again.started_at == row.started_at
    assert again.renewed_at >= row.renewed_at and again.task_set == "d3"
    assert again.expires_at == pytest.approx(again.renewed_at + 10.0)
    assert set(_ours(store, prefix)) == set(seen)
    store.fleet.leave(list(seen))


def test_an_expired_member_is_not_read_and_the_next_renewal_deletes_it(
    store: LeaseStore, prefix: str
) -> None:
    gone, live = f"{prefix}-gone", f"{prefix}-live"
    store.fleet.renew([MemberBeat(gone, "d1", 0.05)])
    store.fleet.renew([MemberBeat(live, "d1", 30.0)])
    deadline = time.monotonic() + 10
    while gone in _ours(store, prefix):  # until the database clock passes its expiry
        assert time.monotonic() < deadline, "the short-lived row never expired"
        time.sleep(0.02)
    read = store.fleet.renew([MemberBeat(live, "d1", 30.0)])
    assert gone not in {m.holder for m in read.members}
    engine = create_engine(normalize_url(store.engine.url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            left = conn.execute(
                select(func.count()).select_from(members).where(members.c.holder == gone)
            ).scalar_one()
    finally:
        engine.dispose()
    assert left == 0
    store.fleet.leave([live])


def test_leaving_deletes_only_the_named_members(store: LeaseStore, prefix: str) -> None:
    holders = [f"{prefix}-{i}" for i in range(3)]
    store.fleet.renew([MemberBeat(h, "d1", 30.0) for h in holders])
    store.fleet.leave(holders[:2])
    assert set(_ours(store, prefix)) == {holders[2]}
    store.fleet.leave([holders[2]])
    assert _ours(store, prefix) == {}


def test_bad_renewals_are_refused(store: LeaseStore, prefix: str) -> None:
    with pytest.raises(ValueError, match="each holder once"):
        store.fleet.renew([MemberBeat(prefix, "d1", 5.0), MemberBeat(prefix, "d1", 5.0)])
    with pytest.raises(ValueError):
        store.fleet.renew([])
    for bad in ({"ttl": 0.0}, {"ttl": float("nan")}, {"holder": ""}, {"task_set": ""}):
        with pytest.raises(ConfigError):
            MemberBeat(**{"holder": prefix, "task_set": "d1", "ttl": 5.0, **bad})  # type: ignore[arg-type]


def test_the_slot_check_reads_each_cursor(store: LeaseStore, task_name: str) -> None:
    slot = int(store.database_time() * 1000) // 1000 * 1000
    names = [f"{task_name}-{i}" for i in range(3)]
    won = []
    for offset, name in enumerate(names[:2]):
        request = AcquireRequest(name=name, slot=slot - offset * 1000, ttl=5, holder="h")
        lease = store.acquire(request)
        assert isinstance(lease, Lease)
        won.append(lease)
    assert store.fleet.slot_cursors(names) == {names[0]: slot, names[1]: slot - 1000}
    assert store.fleet.slot_cursors([]) == {}
    for lease in won:  # no run left running for the stuck watcher of other tests
        store.finish(lease, "succeeded")
    assert store.fleet.slot_cursors(names) == {names[0]: slot, names[1]: slot - 1000}


LOCK_ROW = {
    "postgresql": "SELECT name FROM cronlease_leases WHERE name = :name FOR UPDATE",
    "mysql": "SELECT name FROM cronlease_leases WHERE name = :name FOR UPDATE",
    "sqlite": "UPDATE cronlease_leases SET fingerprint = fingerprint WHERE name = :name",
}


def test_the_slot_check_takes_no_row_lock(store: LeaseStore, task_name: str, backend: str) -> None:
    """A row locked by another transaction (a winner's upsert in flight) does not delay
    the check: it reads the committed cursor instead of waiting for the lock."""
    slot = int(store.database_time() * 1000) // 1000 * 1000
    lease = store.acquire(AcquireRequest(name=task_name, slot=slot, ttl=5, holder="h"))
    assert isinstance(lease, Lease)
    store.finish(lease, "succeeded")
    engine = create_engine(normalize_url(store.engine.url), poolclass=NullPool)
    answer: list[dict[str, int]] = []
    try:
        with engine.connect() as conn:
            if backend == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.begin()
            conn.execute(text(LOCK_ROW[backend]), {"name": task_name})
            check = threading.Thread(
                target=lambda: answer.append(store.fleet.slot_cursors([task_name])), daemon=True
            )
            check.start()
            check.join(timeout=5)  # a check waiting for the lock would still be waiting
            locked_meanwhile = check.is_alive()
            conn.rollback()
            check.join(timeout=30)
    finally:
        engine.dispose()
    assert not locked_meanwhile, "the slot check waited for a row lock"
    assert answer == [{task_name: slot}]


# --- the tick path, in process -------------------------------------------------------


Pair = tuple[list[Scheduler], list[list[Task]], datetime]


@pytest.fixture
def pair(db_url: str, task_name: str) -> Iterator[Pair]:
    """Two replicas declaring the same 10 tasks every 10 s from now (the fire time),
    schema ready, not firing."""
    anchor = datetime.now(timezone.utc).replace(microsecond=0)
    schedulers: list[Scheduler] = []
    declared: list[list[Task]] = []
    for _ in range(2):
        scheduler = Scheduler(db_url, history_retention=None, max_workers=20)
        declared.append(
            [
                scheduler.add_task(
                    lambda: None, every="10s", name=f"{task_name}-{i}", anchor=anchor
                )
                for i in range(10)
            ]
        )
        scheduler.runner.ensure_schema()
        schedulers.append(scheduler)
    yield schedulers, declared, anchor
    for scheduler in schedulers:
        scheduler.runner.close()
        scheduler.store.dispose()


def test_a_checked_tick_whose_slot_was_taken_costs_no_acquisition(pair: Pair) -> None:
    (winner, other), (winner_tasks, tasks), fire_time = pair
    won = winner.runner.acquire_ticks([Tick(t, fire_time) for t in winner_tasks])
    assert len(won.runs) == 10
    for run in won.runs:
        assert run() == "succeeded"
    skips: list[TickSkipped] = []
    other.listen(skips.append, TickSkipped)
    late = other.runner.acquire_ticks([Tick(t, fire_time, checked=True) for t in tasks])
    assert late.runs == [] and late.retries == []
    assert other.stats["ticks_checked_taken"] == 10
    assert other.stats["ticks_skipped_taken"] == 10
    assert other.stats["acquire_batches"] == 0  # nothing left to send to acquire_many
    assert sorted(s.reason for s in skips) == ["taken"] * 10


def test_a_checked_tick_still_free_is_acquired(pair: Pair) -> None:
    """Its preferred replica never tried (it died): the backup runs it, the delay late."""
    (_, other), (_, tasks), fire_time = pair
    taken = other.runner.acquire_ticks([Tick(t, fire_time, checked=True) for t in tasks])
    assert len(taken.runs) == 10
    for run in taken.runs:
        assert run() == "succeeded"
    assert other.stats["ticks_checked_taken"] == 0
