"""Further attempts (retries, recoveries), the stuck watcher and fenced writes, on every
backend (docs/design.md §3.9, issue 13).

Slots come from the database clock, leases expire by a short TTL polled with a
deadline, never a guessed sleep.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, event, select
from sqlalchemy.engine import Engine

from cronlease._lease.database import create_store_engine, normalize_url
from cronlease._lease.fencing import verify_lease
from cronlease._lease.model import AcquireRequest, AttemptRequest, Lease, Refusal
from cronlease._lease.store import LeaseStore
from cronlease.errors import LeaseLostError, RowRefused, StoreError
from tests.support import ledger
from tests.support.leases import won
from tests.support.procs import Proc

HOLDER = "host:1:attempts"
SHORT_TTL = 0.3
WaitFor = Callable[..., Any]


@pytest.fixture
def slot(store: LeaseStore) -> int:
    return int(store.database_time() * 1000) - 60_000


def take(store: LeaseStore, name: str, slot: int, ttl: float = 30.0) -> Lease:
    lease = won(store.acquire(AcquireRequest(name=name, slot=slot, ttl=ttl, holder=HOLDER)))
    assert lease is not None
    return lease


def again(lease: Lease, attempt: int = 2, **options: Any) -> AttemptRequest:
    options.setdefault("ttl", 30.0)
    options.setdefault("holder", HOLDER)
    options.setdefault("recovering", False)
    return AttemptRequest(
        name=lease.name, slot=lease.slot, after_fence=lease.fence, attempt=attempt, **options
    )


def reacquire(store: LeaseStore, request: AttemptRequest) -> Lease | Refusal:
    (result,) = store.reacquire_many([request])
    return result


def expire(store: LeaseStore, name: str, wait_for: WaitFor) -> None:
    row = store.leases([name])[0]
    wait_for(lambda: store.database_time() > row.expires_at, timeout=5.0)


# --- reacquire_many -----------------------------------------------------------


def test_retry_after_a_failure_is_granted_with_the_next_fence(
    store: LeaseStore, task_name: str, slot: int
) -> None:
    first = take(store, task_name, slot)
    store.finish(first, "failed", "boom")
    second = reacquire(store, again(first, ttl=12.5))
    assert isinstance(second, Lease)
    assert (second.slot, second.fence, second.attempt, second.manual) == (slot, 2, 2, False)
    assert second.holder.startswith(HOLDER + "#") and second.holder != first.holder
    row = store.leases([task_name])[0]
    assert (row.fence, row.slot, row.holder) == (2, slot, second.holder)
    assert row.expires_at == pytest.approx(row.acquired_at + 12.5, abs=1e-3)
    history = store.history(task_name)
    assert [(r.attempt, r.fence, r.outcome, r.slot) for r in history] == [
        (2, 2, "running", slot),
        (1, 1, "failed", slot),
    ]
    assert history[0].started_at == pytest.approx(row.acquired_at, abs=1e-3)
    # the attempt's lease works as any other: renew, finish by fence and holder
    assert store.heartbeat(second)
    store.finish(second, "succeeded")
    assert store.history(task_name)[0].outcome == "succeeded"
    third = reacquire(store, again(second, attempt=3))
    assert isinstance(third, Lease) and third.fence == 3


def test_refused_held_while_the_lease_is_held(store: LeaseStore, task_name: str, slot: int) -> None:
    first = take(store, task_name, slot, ttl=30.0)
    refusal = reacquire(store, again(first))
    assert isinstance(refusal, Refusal) and refusal.reason == "held"
    assert refusal.expires_in is not None and 25 < refusal.expires_in <= 30
    assert [r.attempt for r in store.history(task_name)] == [1]


def test_refused_taken_after_a_newer_tick(store: LeaseStore, task_name: str, slot: int) -> None:
    first = take(store, task_name, slot)
    store.finish(first, "failed")
    newer = take(store, task_name, slot + 1000)
    store.finish(newer, "succeeded")
    assert reacquire(store, again(first)) == Refusal("taken")
    assert [(r.slot, r.attempt) for r in store.history(task_name)] == [(slot + 1000, 1), (slot, 1)]


def test_refused_taken_after_another_attempt_won(
    store: LeaseStore, task_name: str, slot: int
) -> None:
    first = take(store, task_name, slot)
    store.finish(first, "failed")
    winner = reacquire(store, again(first))
    assert isinstance(winner, Lease)
    store.finish(winner, "failed")
    # another replica that read the same candidate: the fence moved on
    assert reacquire(store, again(first)) == Refusal("taken")


def test_refused_taken_for_another_slot(store: LeaseStore, task_name: str, slot: int) -> None:
    first = take(store, task_name, slot)
    store.finish(first, "failed")
    request = AttemptRequest(
        name=task_name, slot=slot - 1000, after_fence=1, attempt=2, ttl=30.0, holder=HOLDER
    )
    assert reacquire(store, request) == Refusal("taken")


def test_refused_paused(store: LeaseStore, task_name: str, slot: int) -> None:
    first = take(store, task_name, slot)
    store.finish(first, "failed")
    store.pause(task_name)
    assert reacquire(store, again(first)) == Refusal("paused")
    store.resume(task_name)
    assert isinstance(reacquire(store, again(first)), Lease)


def test_recovery_marks_the_dead_attempt_abandoned_and_its_late_finish_lost(
    store: LeaseStore, task_name: str, slot: int, wait_for: WaitFor
) -> None:
    first = take(store, task_name, slot, ttl=SHORT_TTL)
    expire(store, task_name, wait_for)
    second = reacquire(store, again(first, recovering=True))
    assert isinstance(second, Lease)
    runs = {r.attempt: r for r in store.history(task_name)}
    assert runs[1].outcome == "abandoned" and runs[1].finished_at is not None
    assert runs[2].outcome == "running"
    store.finish(first, "succeeded")  # the dead attempt resumes: fenced
    runs = {r.attempt: r for r in store.history(task_name)}
    assert (runs[1].outcome, runs[2].outcome) == ("lost", "running")
    assert not store.heartbeat(first)


def test_batch_answers_each_request_its_own(
    store: LeaseStore, task_name: str, slot: int, wait_for: WaitFor
) -> None:
    names = [f"{task_name}-{i}" for i in range(3)]
    leases = [take(store, name, slot) for name in names]
    store.finish(leases[0], "failed")
    store.finish(leases[2], "timed_out")
    requests = [again(lease) for lease in leases]
    results = store.reacquire_many(requests[::-1])
    assert isinstance(results[0], Lease) and results[0].name == names[2]
    assert isinstance(results[1], Refusal) and results[1].reason == "held"
    assert isinstance(results[2], Lease) and results[2].name == names[0]
    with pytest.raises(ValueError):
        store.reacquire_many([requests[0], requests[0]])


def test_the_database_refuses_one_attempt_twice(
    store: LeaseStore, task_name: str, slot: int
) -> None:
    first = take(store, task_name, slot)
    store.finish(first, "failed")
    second = reacquire(store, again(first))
    assert isinstance(second, Lease)
    store.finish(second, "failed")
    # attempt 2 once more, through a compare-and-swap that matches: the unique key
    # refuses the run row, and the whole transaction (the new fence too) rolls back
    with pytest.raises(RowRefused):
        reacquire(store, again(second, attempt=2))
    assert store.leases([task_name])[0].fence == 2
    assert sorted(r.attempt for r in store.history(task_name)) == [1, 2]
    assert isinstance(reacquire(store, again(second, attempt=3)), Lease)


@pytest.mark.parametrize(
    "options",
    [
        {"attempt": 1},
        {"attempt": True},
        {"after_fence": 0},
        {"slot": -1},
        {"ttl": 0},
        {"holder": ""},
        {"name": ""},
    ],
)
def test_invalid_attempt_requests_are_refused(options: dict[str, Any]) -> None:
    values: dict[str, Any] = {
        "name": "t",
        "slot": 0,
        "after_fence": 1,
        "attempt": 2,
        "ttl": 1.0,
        "holder": "h",
    }
    with pytest.raises(ValueError):
        AttemptRequest(**{**values, **options})


# --- attempt_candidates -------------------------------------------------------


def test_candidates_are_the_latest_attempts_to_follow(
    store: LeaseStore, task_name: str, slot: int, wait_for: WaitFor
) -> None:
    failed, timed_out, ok, live, dead, paused, manual, none = (
        f"{task_name}-{n}"
        for n in ("failed", "timed-out", "ok", "live", "dead", "paused", "manual", "never")
    )
    first = take(store, failed, slot)
    store.finish(first, "failed")
    second = reacquire(store, again(first))
    assert isinstance(second, Lease)
    store.finish(second, "failed")
    store.finish(take(store, timed_out, slot), "timed_out")
    store.finish(take(store, ok, slot), "succeeded")
    take(store, live, slot)
    take(store, dead, slot, ttl=SHORT_TTL)
    store.finish(take(store, paused, slot), "failed")
    store.pause(paused)
    store.finish(take(store, manual, slot), "succeeded")
    by_hand = won(
        store.acquire(
            AcquireRequest(name=manual, slot=slot + 5, ttl=30.0, holder=HOLDER, manual=True)
        )
    )
    assert by_hand is not None
    store.finish(by_hand, "failed")
    expire(store, dead, wait_for)

    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "cronlease_runs" in statement:
            statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        names = [failed, timed_out, ok, live, dead, paused, manual, none]
        found = {c.name: c for c in store.attempt_candidates(names)}
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert len(statements) == 1
    assert sorted(found) == sorted([failed, timed_out, dead])
    assert (found[failed].attempt, found[failed].fence, found[failed].outcome) == (2, 2, "failed")
    assert found[failed].finished_at is not None and found[failed].slot == slot
    assert found[timed_out].outcome == "timed_out" and found[timed_out].attempt == 1
    assert found[dead].outcome == "running" and found[dead].finished_at is None
    assert found[dead].expires_at < found[dead].db_now
    assert not found[dead].manual
    # the watcher's abandoned runs are candidates for recovery too (its pass is
    # fleet-wide: on a suite's shared schema it may name other tests' dead runs)
    assert (dead, slot, 1) in store.abandon_expired()
    assert store.attempt_candidates([dead])[0].outcome == "abandoned"


# --- the stuck watcher --------------------------------------------------------


def test_watcher_marks_dead_runs_of_any_task_and_leaves_live_ones(
    store: LeaseStore, task_name: str, slot: int, wait_for: WaitFor
) -> None:
    paused, undeclared, live = (f"{task_name}-{n}" for n in ("paused", "undeclared", "live"))
    take(store, paused, slot, ttl=SHORT_TTL)
    store.pause(paused)
    take(store, undeclared, slot, ttl=SHORT_TTL)
    renewed = take(store, live, slot, ttl=SHORT_TTL)
    for name in (paused, undeclared):
        expire(store, name, wait_for)
    assert store.heartbeat(renewed)  # SHORT_TTL from now: alive
    marked = store.abandon_expired()
    mine = sorted(m for m in marked if m[0].startswith(task_name))
    assert mine == sorted([(paused, slot, 1), (undeclared, slot, 1)])
    for name in (paused, undeclared):
        (run,) = store.history(name)
        assert run.outcome == "abandoned" and run.finished_at is not None
        assert run.error == "its holder stopped renewing the lease"
    assert store.history(live)[0].outcome == "running"
    assert not [m for m in store.abandon_expired() if m[0].startswith(task_name)]
    counts = store.abandoned_counts([paused, undeclared, live])
    assert counts == {paused: 1, undeclared: 1}
    assert store.abandoned_counts()[paused] == 1
    assert store.abandoned_counts([]) == {}


def test_watcher_respects_its_limit(
    store: LeaseStore, task_name: str, slot: int, wait_for: WaitFor
) -> None:
    names = [f"{task_name}-{i}" for i in range(3)]
    for name in names:
        take(store, name, slot, ttl=SHORT_TTL)
    for name in names:
        expire(store, name, wait_for)
    first = store.abandon_expired(limit=2)
    assert len(first) == 2
    rest = store.abandon_expired(limit=1000)
    assert sorted(n for n, _, _ in first + rest if n.startswith(task_name)) == names
    with pytest.raises(ValueError):
        store.abandon_expired(limit=0)


# --- verify_lease -------------------------------------------------------------


@pytest.fixture
def user_engine(db_url: str) -> Iterator[Engine]:
    """An application's own engine: ordinary transactions, as a task would use."""
    engine = create_engine(normalize_url(db_url))
    yield engine
    engine.dispose()


@pytest.fixture
def effects(user_engine: Engine) -> Table:
    table = Table(
        f"cronlease_test_effects_{uuid.uuid4().hex[:8]}",
        MetaData(),
        Column("task", String(255), nullable=False),
        Column("fence", Integer, nullable=False),
    )
    table.create(user_engine)
    return table


def test_verify_passes_for_the_current_attempt_and_raises_after_another_took_it(
    store: LeaseStore,
    task_name: str,
    slot: int,
    user_engine: Engine,
    effects: Table,
    wait_for: WaitFor,
) -> None:
    first = take(store, task_name, slot, ttl=SHORT_TTL)
    with user_engine.begin() as conn:
        conn.execute(effects.insert().values(task=task_name, fence=first.fence))
        verify_lease(conn, name=task_name, fence=first.fence, holder=first.holder)
    expire(store, task_name, wait_for)
    second = reacquire(store, again(first, recovering=True))
    assert isinstance(second, Lease)
    # the stale attempt resumes and writes its effect: refused, rolled back
    with pytest.raises(LeaseLostError, match=task_name), user_engine.begin() as conn:
        conn.execute(effects.insert().values(task=task_name, fence=first.fence))
        verify_lease(conn, name=task_name, fence=first.fence, holder=first.holder)
    # same fence, another holder (a fence issued twice): refused too
    with pytest.raises(LeaseLostError), user_engine.begin() as conn:
        verify_lease(conn, name=task_name, fence=second.fence, holder=first.holder)
    with pytest.raises(LeaseLostError), user_engine.begin() as conn:
        verify_lease(conn, name=f"{task_name}-none", fence=1, holder=first.holder)
    with user_engine.begin() as conn:
        verify_lease(conn, name=task_name, fence=second.fence, holder=second.holder)
        conn.execute(effects.insert().values(task=task_name, fence=second.fence))
    with user_engine.connect() as conn:
        fences = conn.execute(select(effects.c.fence).order_by(effects.c.fence)).scalars().all()
    assert list(fences) == [first.fence, second.fence]


def _lock_wait_store(db_url: str, backend: str) -> LeaseStore:
    """A store whose statements give up waiting for a row lock within about a second."""
    engine = create_store_engine(db_url)

    @event.listens_for(engine, "connect")
    def _short_lock_wait(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if backend == "postgresql":
            cursor.execute("SET lock_timeout = '500ms'")
        else:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
        cursor.close()

    return LeaseStore(engine)


def test_verify_blocks_a_takeover_until_the_transaction_ends(
    backend: str,
    db_url: str,
    store: LeaseStore,
    task_name: str,
    slot: int,
    user_engine: Engine,
    effects: Table,
    wait_for: WaitFor,
) -> None:
    if backend == "sqlite":
        pytest.skip("SQLite's write transaction excludes every other writer already")
    first = take(store, task_name, slot, ttl=SHORT_TTL)
    expire(store, task_name, wait_for)
    other = _lock_wait_store(db_url, backend)
    try:
        with user_engine.begin() as conn:
            conn.execute(effects.insert().values(task=task_name, fence=first.fence))
            # expired, yet nobody took it: still ours, and now locked for share
            verify_lease(conn, name=task_name, fence=first.fence, holder=first.holder)
            with pytest.raises(StoreError, match=r"(?i)lock"):
                other.reacquire_many([again(first, recovering=True, holder="other")])
            with pytest.raises(StoreError, match=r"(?i)lock"):
                other.acquire(AcquireRequest(name=task_name, slot=slot + 1, ttl=30.0, holder="o"))
        # the effect committed while the lease was this attempt's; then the takeover wins
        taken = other.reacquire_many([again(first, recovering=True, holder="other")])[0]
        assert isinstance(taken, Lease)
    finally:
        other.dispose()
    with user_engine.connect() as conn:
        assert conn.execute(select(effects.c.fence)).scalars().all() == [first.fence]


def test_verify_never_ends_the_callers_transaction(
    store: LeaseStore, task_name: str, slot: int, user_engine: Engine, effects: Table
) -> None:
    lease = take(store, task_name, slot)
    with user_engine.connect() as conn:
        transaction = conn.begin()
        conn.execute(effects.insert().values(task=task_name, fence=lease.fence))
        verify_lease(conn, name=task_name, fence=lease.fence, holder=lease.holder)
        assert transaction.is_active and conn.in_transaction()
        with pytest.raises(LeaseLostError):
            verify_lease(conn, name=task_name, fence=lease.fence + 1, holder=lease.holder)
        assert transaction.is_active
        transaction.rollback()
    with user_engine.connect() as conn:
        assert conn.execute(select(effects.c.fence)).scalars().all() == []


def test_lost_writes_memory_follows_a_granted_attempt(
    store: LeaseStore, task_name: str, slot: int
) -> None:
    first = take(store, task_name, slot)
    store.finish(first, "failed")
    second = reacquire(store, again(first))
    assert isinstance(second, Lease)
    seen = store.lost_writes.seen.get(task_name)
    assert seen is not None and (seen.slot, seen.fence) == (slot, 2)
    # a replica that saw fence 2 does not grant a follower of fence 1 again,
    # whatever a database that lost the write would say
    assert reacquire(store, again(first)) == Refusal("taken")


# --- replicas racing ----------------------------------------------------------


def test_two_replica_processes_racing_for_one_attempt_one_wins(
    store: LeaseStore, db_url: str, task_name: str, slot: int
) -> None:
    """Two processes leave a start gate together for attempt 2 of each of 8 slots:
    exactly one wins each, counted at the ledger and by the run rows."""
    ledger.setup(db_url)
    racers = [
        Proc("-m", "tests.support.reacquire_worker", db_url, task_name, str(i)) for i in range(2)
    ]
    slots = [slot + 1000 * i for i in range(8)]
    answers: list[str] = []
    try:
        for racer in racers:
            racer.expect("ready", timeout=60)
        for this in slots:
            first = take(store, task_name, this)
            store.finish(first, "failed")
            start_at = time.time() + 0.3
            for racer in racers:
                racer.send(f"go {this} {first.fence} {start_at}")
            answers += [racer.expect("done", timeout=60) for racer in racers]
            for racer in racers:
                racer.expect("ready", timeout=60)
    finally:
        for racer in racers:
            racer.kill()
    assert sorted(answers) == sorted(["done won", "done taken"] * len(slots)), answers
    assert [entry for entry, _pid in ledger.entries(db_url, task_name)] == slots
    seconds = [(r.slot, r.outcome) for r in store.history(task_name, limit=100) if r.attempt == 2]
    assert sorted(seconds) == [(s, "succeeded") for s in slots]
