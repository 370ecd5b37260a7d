"""The LeaseStore contract, run unchanged on every backend (SQLite, PostgreSQL, MySQL/MariaDB).

Like ShedLock's AbstractLockProviderIntegrationTest: one suite, parametrized
over the ``store`` fixture, so every backend proves the same docs/design.md §3/§5
rules against a real database. Lease times are database-clock epoch seconds;
slots are milliseconds and only compared with each other, so the tests derive
their slots from the database clock (a slot ahead of it would be refused).

Waiting for a lease to expire polls with a deadline (``wait_for``); no test
sleeps for a guessed duration.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from cronlease._lease.model import (
    AcquireRequest,
    Lease,
    LeaseInfo,
    Refusal,
    RunRecord,
    storable_error,
)
from cronlease._lease.schema import MAX_ERROR_LENGTH, MAX_NAME_LENGTH
from cronlease._lease.store import LeaseStore
from cronlease.errors import ConfigError
from tests.support.contract_store import FORMS, ContractStore
from tests.support.leases import won

HOLDER = "host:1234:abcdef"
SHORT_TTL = 0.3  # seconds: long enough to see "not yet", short enough to keep the suite fast

WaitFor = Callable[..., Any]


def request(name: str, slot: int, **options: Any) -> AcquireRequest:
    options.setdefault("ttl", 30.0)
    options.setdefault("holder", HOLDER)
    return AcquireRequest(name=name, slot=slot, **options)


def lease_row(store: LeaseStore, name: str) -> LeaseInfo:
    rows = store.leases([name])
    assert [row.name for row in rows] == [name]
    return rows[0]


def runs_by_slot(store: LeaseStore, name: str) -> dict[tuple[int, bool], RunRecord]:
    return {(run.slot, run.manual): run for run in store.history(name, limit=100)}


@pytest.fixture(params=FORMS)
def store(store: LeaseStore, request: pytest.FixtureRequest) -> ContractStore:
    """Every contract test through the single forms and through the batch forms."""
    return ContractStore(store, request.param)


@pytest.fixture
def base_slot(store: LeaseStore) -> int:
    """A slot a minute behind the database clock: it and its successors are never 'future'."""
    return int(store.database_time() * 1000) - 60_000


def take(store: LeaseStore, name: str, slot: int, **options: Any) -> Lease:
    lease = won(store.acquire(request(name, slot, **options)))
    assert lease is not None, f"slot {slot} of {name!r} was not acquired"
    return lease


def wait_until_expired(store: LeaseStore, name: str, wait_for: WaitFor) -> LeaseInfo:
    """Poll the database clock until the task's lease has expired; return the row."""
    row = lease_row(store, name)
    wait_for(lambda: store.database_time() > row.expires_at, timeout=5.0)
    return row


# --- acquisition ------------------------------------------------------------


def test_first_acquire_returns_fence_1_and_the_lease(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    before = store.database_time()
    lease = take(store, task_name, base_slot, ttl=12.5, fingerprint="every 5m from 0")

    assert lease.name == task_name
    assert lease.slot == base_slot
    assert lease.fence == 1
    assert lease.ttl == 12.5
    assert lease.manual is False
    # The store appends a per-attempt nonce to the holder id.
    assert lease.holder.startswith(HOLDER + "#")
    assert len(lease.holder) > len(HOLDER) + 1

    row = lease_row(store, task_name)
    assert row.holder == lease.holder
    assert row.fence == 1
    assert row.slot == base_slot
    assert row.paused is False
    assert row.fingerprint == "every 5m from 0"
    after = store.database_time()
    assert before - 0.01 <= row.acquired_at <= after + 0.01
    assert row.expires_at == pytest.approx(row.acquired_at + 12.5, abs=1e-3)


def test_each_attempt_gets_a_fresh_nonce(store: LeaseStore, task_name: str, base_slot: int) -> None:
    first = take(store, task_name, base_slot)
    store.finish(first, "succeeded")
    second = take(store, task_name, base_slot + 1)
    assert first.holder != second.holder
    assert second.fence == 2


def test_same_slot_is_refused_while_held(store: LeaseStore, task_name: str, base_slot: int) -> None:
    take(store, task_name, base_slot)
    assert won(store.acquire(request(task_name, base_slot))) is None
    assert won(store.acquire(request(task_name, base_slot, holder="other:1:ffffff"))) is None
    assert lease_row(store, task_name).fence == 1


def test_later_slot_is_refused_while_unexpired(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    lease = take(store, task_name, base_slot)
    assert won(store.acquire(request(task_name, base_slot + 1))) is None
    assert won(store.acquire(request(task_name, base_slot + 50_000))) is None
    row = lease_row(store, task_name)
    assert (row.fence, row.slot, row.holder) == (1, base_slot, lease.holder)


def test_later_slot_is_granted_after_release(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    first = take(store, task_name, base_slot)
    store.finish(first, "succeeded", release=True)
    # Immediately: the release puts expires_at in the past, so no wait is needed.
    second = take(store, task_name, base_slot + 1)
    assert second.fence == 2
    row = lease_row(store, task_name)
    assert (row.fence, row.slot, row.holder) == (2, base_slot + 1, second.holder)


def test_release_alone_frees_the_lease(store: LeaseStore, task_name: str, base_slot: int) -> None:
    first = take(store, task_name, base_slot)
    assert store.release(first) is True
    assert lease_row(store, task_name).expires_at < store.database_time()
    assert take(store, task_name, base_slot + 1).fence == 2
    # release() does not touch history: the first run stayed 'running' until
    # the next acquisition marked it abandoned.
    assert runs_by_slot(store, task_name)[(base_slot, False)].outcome == "abandoned"


def test_finish_without_release_keeps_the_lease(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    lease = take(store, task_name, base_slot)
    expires_before = lease_row(store, task_name).expires_at
    store.finish(lease, "interrupted", release=False)
    assert won(store.acquire(request(task_name, base_slot + 1))) is None
    assert lease_row(store, task_name).expires_at == pytest.approx(expires_before)
    assert runs_by_slot(store, task_name)[(base_slot, False)].outcome == "interrupted"


def test_later_slot_is_granted_after_expiry_and_not_before(
    store: LeaseStore, task_name: str, base_slot: int, wait_for: WaitFor
) -> None:
    started = time.monotonic()
    take(store, task_name, base_slot, ttl=SHORT_TTL)
    first = lease_row(store, task_name)
    answers: list[tuple[float, bool]] = []  # (seconds since started when answered, won)

    def attempt() -> Lease | None:
        lease = won(store.acquire(request(task_name, base_slot + 1)))
        answers.append((time.monotonic() - started, lease is not None))
        return lease

    second = wait_for(attempt, timeout=5.0)
    elapsed = time.monotonic() - started

    # An attempt answered within the TTL of the start was sent before the lease expired:
    # refused. (On a loaded machine the first answer can come later than that; the
    # database clock's check below holds whenever it comes.)
    early = [won_it for answered, won_it in answers if answered < SHORT_TTL]
    assert not any(early), f"granted before its TTL elapsed: {answers}"
    assert second.fence == 2
    # Granted no earlier than the first lease's expiry, on the database clock ...
    row = lease_row(store, task_name)
    assert row.acquired_at >= first.expires_at
    # ... and, on this process's clock, not before (most of) the TTL had passed.
    assert elapsed >= SHORT_TTL - 0.05
    assert elapsed < SHORT_TTL + 3.0


def test_older_slot_is_refused(store: LeaseStore, task_name: str, base_slot: int) -> None:
    newer = take(store, task_name, base_slot + 10)
    store.finish(newer, "succeeded")
    assert won(store.acquire(request(task_name, base_slot + 5))) is None
    assert won(store.acquire(request(task_name, base_slot))) is None
    row = lease_row(store, task_name)
    assert (row.fence, row.slot) == (1, base_slot + 10)


def test_equal_slot_after_release_is_refused(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    lease = take(store, task_name, base_slot)
    store.finish(lease, "succeeded")
    assert won(store.acquire(request(task_name, base_slot))) is None
    assert won(store.acquire(request(task_name, base_slot, holder="other:2:000000"))) is None
    history = store.history(task_name)
    assert [(run.slot, run.outcome) for run in history] == [(base_slot, "succeeded")]


def test_equal_slot_after_expiry_is_refused(
    store: LeaseStore, task_name: str, base_slot: int, wait_for: WaitFor
) -> None:
    take(store, task_name, base_slot, ttl=SHORT_TTL)
    wait_until_expired(store, task_name, wait_for)
    # A slot can be acquired once, ever: even when its lease has lapsed.
    assert won(store.acquire(request(task_name, base_slot))) is None
    # The lease itself is free: the next slot is granted at once.
    assert take(store, task_name, base_slot + 1).fence == 2


def test_fence_grows_by_one_per_acquisition(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    fences = []
    for offset in range(4):
        lease = take(store, task_name, base_slot + offset * 1000)
        fences.append(lease.fence)
        assert won(store.acquire(request(task_name, base_slot + offset * 1000 + 1))) is None
        store.finish(lease, "succeeded")
    manual = take(store, task_name, base_slot + 9000, manual=True)
    fences.append(manual.fence)
    assert fences == [1, 2, 3, 4, 5]


def refusal(store: LeaseStore, name: str, slot: int, **options: Any) -> Refusal:
    result = store.acquire(request(name, slot, **options))
    assert isinstance(result, Refusal), f"slot {slot} of {name!r} was acquired"
    return result


def test_try_acquire_says_why_it_was_refused(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    now_ms = int(store.database_time() * 1000)
    assert refusal(store, task_name, now_ms + 60_000, tolerance=1.0).reason == "future"

    lease = won(store.acquire(request(task_name, base_slot, ttl=30.0)))
    assert isinstance(lease, Lease) and lease.fence == 1
    held = refusal(store, task_name, base_slot + 1)
    assert held.reason == "held"
    assert held.expires_in is not None and 25.0 < held.expires_in <= 30.0
    assert refusal(store, task_name, base_slot + 1, manual=True).reason == "held"
    assert refusal(store, task_name, base_slot).reason == "taken"

    store.finish(lease, "succeeded")
    assert refusal(store, task_name, base_slot).reason == "taken"
    assert refusal(store, task_name, base_slot - 1).reason == "taken"
    assert refusal(store, task_name, now_ms + 60_000, tolerance=1.0).reason == "future"

    store.pause(task_name)
    assert refusal(store, task_name, base_slot + 1).reason == "paused"
    assert refusal(store, task_name, base_slot + 1, manual=True).reason == "paused"
    store.resume(task_name)
    assert isinstance(won(store.acquire(request(task_name, base_slot + 1))), Lease)


# --- pause ------------------------------------------------------------------


def test_paused_task_is_refused_and_resume_grants(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    lease = take(store, task_name, base_slot)
    store.finish(lease, "succeeded")
    store.pause(task_name)
    store.pause(task_name)  # idempotent
    row = lease_row(store, task_name)
    assert row.paused is True
    # Pausing keeps the slot cursor and the fence.
    assert (row.fence, row.slot) == (1, base_slot)

    assert won(store.acquire(request(task_name, base_slot + 1))) is None
    assert won(store.acquire(request(task_name, base_slot + 2, manual=True))) is None

    store.resume(task_name)
    assert lease_row(store, task_name).paused is False
    assert take(store, task_name, base_slot + 1).fence == 2


def test_pausing_a_held_task_lets_the_run_finish(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    lease = take(store, task_name, base_slot)
    store.pause(task_name)
    assert store.heartbeat(lease) is True
    store.finish(lease, "succeeded")
    assert runs_by_slot(store, task_name)[(base_slot, False)].outcome == "succeeded"
    assert won(store.acquire(request(task_name, base_slot + 1))) is None
    store.resume(task_name)
    assert take(store, task_name, base_slot + 1).fence == 2


def test_pause_of_a_task_that_never_ran(store: LeaseStore, task_name: str, base_slot: int) -> None:
    assert store.leases([task_name]) == []
    store.pause(task_name)
    row = lease_row(store, task_name)
    assert row.paused is True
    assert row.fence == 0

    assert won(store.acquire(request(task_name, base_slot))) is None
    assert won(store.acquire(request(task_name, base_slot, manual=True))) is None
    assert store.history(task_name) == []

    store.resume(task_name)
    lease = take(store, task_name, base_slot)
    assert lease.fence == 1
    assert lease_row(store, task_name).slot == base_slot


def test_resume_of_an_unknown_task_is_harmless(store: LeaseStore, task_name: str) -> None:
    store.resume(task_name)
    assert store.leases([task_name]) == []


def test_pause_and_resume_check_the_name(store: LeaseStore) -> None:
    with pytest.raises(ConfigError):
        store.pause("")
    with pytest.raises(ConfigError):
        store.resume("trailing ")


# --- fencing and heartbeats -------------------------------------------------


def test_stale_fence_cannot_heartbeat_release_or_finish(
    store: LeaseStore, task_name: str, base_slot: int, wait_for: WaitFor
) -> None:
    stale = take(store, task_name, base_slot, ttl=SHORT_TTL)
    current = wait_for(lambda: won(store.acquire(request(task_name, base_slot + 1))), timeout=5.0)
    assert current.fence == stale.fence + 1
    held = lease_row(store, task_name)

    assert store.heartbeat(stale) is False
    assert store.release(stale) is False
    store.finish(stale, "succeeded", "late", release=True)

    row = lease_row(store, task_name)
    assert (row.fence, row.holder, row.slot) == (current.fence, current.holder, base_slot + 1)
    assert row.expires_at == pytest.approx(held.expires_at, abs=1e-6)
    assert row.expires_at > store.database_time()
    # The new holder still holds: the next slot is refused.
    assert won(store.acquire(request(task_name, base_slot + 2))) is None

    runs = runs_by_slot(store, task_name)
    newer = runs[(base_slot + 1, False)]
    assert (newer.outcome, newer.fence, newer.finished_at, newer.error) == (
        "running",
        current.fence,
        None,
        None,
    )
    # The stale run's own row records that it had lost the lease.
    assert runs[(base_slot, False)].outcome == "lost"


def test_heartbeat_extends_expiry(
    store: LeaseStore, task_name: str, base_slot: int, wait_for: WaitFor
) -> None:
    lease = take(store, task_name, base_slot, ttl=20.0)
    first = lease_row(store, task_name)
    wait_for(lambda: store.database_time() > first.acquired_at + 0.05, timeout=5.0)

    before = store.database_time()
    assert store.heartbeat(lease) is True
    after = store.database_time()

    row = lease_row(store, task_name)
    assert row.expires_at > first.expires_at + 0.04
    assert before + 20.0 - 0.01 <= row.expires_at <= after + 20.0 + 0.01
    # A heartbeat neither changes the fence nor the holder.
    assert (row.fence, row.holder, row.acquired_at) == (1, lease.holder, first.acquired_at)


def test_heartbeats_keep_a_lease_past_its_ttl(
    store: LeaseStore, task_name: str, base_slot: int, wait_for: WaitFor
) -> None:
    lease = take(store, task_name, base_slot, ttl=1.0)
    deadline = lease_row(store, task_name).acquired_at + 1.4

    def renew_and_check() -> bool:
        # Renewed every 0.1 s (ttl/10), the lease stays ours past its original TTL.
        assert store.heartbeat(lease) is True
        assert won(store.acquire(request(task_name, base_slot + 1))) is None
        return store.database_time() >= deadline

    wait_for(renew_and_check, timeout=10.0, interval=0.1)
    row = lease_row(store, task_name)
    assert (row.fence, row.holder) == (1, lease.holder)


# --- future slots -------------------------------------------------------------


def test_future_slot_is_refused(store: LeaseStore, task_name: str, base_slot: int) -> None:
    lease = take(store, task_name, base_slot)
    store.finish(lease, "succeeded")
    now_ms = int(store.database_time() * 1000)

    assert won(store.acquire(request(task_name, now_ms + 60_000, tolerance=30.0))) is None
    assert won(store.acquire(request(task_name, now_ms + 5_000, tolerance=0.0))) is None
    row = lease_row(store, task_name)
    assert (row.fence, row.slot) == (1, base_slot), "a refused future slot moved the cursor"

    # Within the tolerance, a slot slightly ahead of the database clock is fine.
    ahead = take(store, task_name, now_ms + 2_000, tolerance=30.0)
    assert ahead.fence == 2


def test_future_slot_is_refused_on_a_new_task(store: LeaseStore, task_name: str) -> None:
    now_ms = int(store.database_time() * 1000)
    assert won(store.acquire(request(task_name, now_ms + 60_000, tolerance=30.0))) is None
    # No row was created, so nothing blocks the present slot.
    assert store.leases([task_name]) == []
    assert store.history(task_name) == []
    assert take(store, task_name, now_ms - 1_000).fence == 1


# --- manual runs --------------------------------------------------------------


def test_manual_acquire_ignores_the_slot_gate_and_keeps_the_cursor(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    scheduled = take(store, task_name, base_slot + 100)
    store.finish(scheduled, "succeeded")

    # An older slot than the cursor: a scheduled request would be refused.
    manual = take(store, task_name, base_slot + 50, manual=True, fingerprint="fp")
    assert manual.manual is True
    assert manual.fence == 2
    row = lease_row(store, task_name)
    assert row.slot == base_slot + 100, "a manual run moved the slot cursor"
    assert row.holder == manual.holder

    # While the manual run holds the lease, scheduled ticks are refused.
    assert won(store.acquire(request(task_name, base_slot + 101))) is None
    store.finish(manual, "succeeded")

    # The cursor is unchanged: the next scheduled slot is still acquirable.
    nxt = take(store, task_name, base_slot + 101)
    assert nxt.fence == 3
    runs = runs_by_slot(store, task_name)
    assert runs[(base_slot + 50, True)].manual is True
    assert runs[(base_slot + 50, True)].outcome == "succeeded"
    assert runs[(base_slot + 50, True)].fence == 2
    assert runs[(base_slot + 100, False)].manual is False


def test_manual_acquire_is_refused_while_held(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    scheduled = take(store, task_name, base_slot)
    assert won(store.acquire(request(task_name, base_slot + 1, manual=True))) is None
    store.finish(scheduled, "succeeded")
    assert take(store, task_name, base_slot + 1, manual=True).fence == 2


def test_manual_run_of_a_new_task_does_not_consume_a_tick(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    manual = take(store, task_name, base_slot, manual=True)
    assert manual.fence == 1
    store.finish(manual, "succeeded")
    # The same slot number, scheduled, still runs: a run-now never suppresses a tick.
    scheduled = take(store, task_name, base_slot)
    assert scheduled.fence == 2
    runs = runs_by_slot(store, task_name)
    assert set(runs) == {(base_slot, True), (base_slot, False)}


# --- history ----------------------------------------------------------------


def test_history_row_is_running_on_acquire(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    lease = take(store, task_name, base_slot)
    [run] = store.history(task_name)
    row = lease_row(store, task_name)
    assert run.name == task_name
    assert run.slot == base_slot
    assert run.manual is False
    assert run.fence == lease.fence
    assert run.holder == lease.holder
    assert run.outcome == "running"
    assert run.finished_at is None
    assert run.error is None
    assert run.duration is None
    assert run.scheduled_for == pytest.approx(base_slot / 1000, abs=1e-3)
    assert run.started_at == pytest.approx(row.acquired_at, abs=1e-3)


def test_history_after_finish(store: LeaseStore, task_name: str, base_slot: int) -> None:
    first = take(store, task_name, base_slot)
    store.finish(first, "failed", "ValueError: boom")
    second = take(store, task_name, base_slot + 1)
    store.finish(second, "succeeded")

    newest, oldest = store.history(task_name)
    assert (newest.slot, newest.outcome, newest.error) == (base_slot + 1, "succeeded", None)
    assert (oldest.slot, oldest.outcome, oldest.error) == (base_slot, "failed", "ValueError: boom")
    for run in (newest, oldest):
        assert run.finished_at is not None
        assert run.finished_at >= run.started_at
        assert run.duration is not None and run.duration >= 0
    assert store.history(task_name, limit=1) == [newest]


def test_recent_runs_of_many_tasks_in_one_read(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    names = [f"{task_name}-{i}" for i in range(3)]
    for offset in range(3):
        for name in names[:2]:
            store.finish(take(store, name, base_slot + offset), "succeeded")
    recent = store.recent_runs([*names, f"{task_name}-never"], limit=2)
    assert sorted(recent) == names[:2]  # tasks without runs are absent
    for name in names[:2]:
        assert recent[name] == store.history(name, limit=2)
        assert [run.slot for run in recent[name]] == [base_slot + 2, base_slot + 1]
    assert store.recent_runs(names[:1])[names[0]] == store.history(names[0], limit=1)
    assert store.recent_runs([]) == {}


@pytest.mark.parametrize("outcome", ["succeeded", "failed", "timed_out", "interrupted"])
def test_finish_records_each_outcome(
    store: LeaseStore, task_name: str, base_slot: int, outcome: str
) -> None:
    lease = take(store, task_name, base_slot)
    store.finish(lease, outcome)
    assert store.history(task_name)[0].outcome == outcome


def test_finish_is_recorded_once(store: LeaseStore, task_name: str, base_slot: int) -> None:
    lease = take(store, task_name, base_slot)
    store.finish(lease, "failed", "first")
    first = store.history(task_name)[0]
    # A second finish of the same run changes nothing: only a running row is updated.
    store.finish(lease, "succeeded", "second")
    assert store.history(task_name)[0] == first


def test_error_text_is_bounded(store: LeaseStore, task_name: str, base_slot: int) -> None:
    text = "Traceback (most recent call last):\n" + "x" * 5000 + "\nRuntimeError: the end"
    lease = take(store, task_name, base_slot)
    store.finish(lease, "failed", text)
    [run] = store.history(task_name)
    assert run.error is not None
    assert len(run.error) == MAX_ERROR_LENGTH
    assert run.error == storable_error(text)
    # The end of a traceback is the useful part: it is kept.
    assert run.error.endswith("RuntimeError: the end")
    assert run.error.startswith("...")


def test_unicode_error_text_is_kept(store: LeaseStore, task_name: str, base_slot: int) -> None:
    text = "ошибка: 'quoted' \"double\" \\ 失败 💥"
    lease = take(store, task_name, base_slot)
    store.finish(lease, "failed", text)
    assert store.history(task_name)[0].error == text


def test_storable_error() -> None:
    assert storable_error(None) is None
    assert storable_error("") == ""
    exact = "e" * MAX_ERROR_LENGTH
    assert storable_error(exact) == exact
    longer = "a" + exact
    cut = storable_error(longer)
    assert cut is not None and len(cut) == MAX_ERROR_LENGTH
    assert cut == "..." + exact[3:]


def test_expired_running_run_is_abandoned_and_its_late_finish_is_lost(
    store: LeaseStore, task_name: str, base_slot: int, wait_for: WaitFor
) -> None:
    done = take(store, task_name, base_slot)
    store.finish(done, "succeeded")
    crashed = take(store, task_name, base_slot + 1, ttl=SHORT_TTL)
    assert runs_by_slot(store, task_name)[(base_slot + 1, False)].outcome == "running"

    survivor = wait_for(lambda: won(store.acquire(request(task_name, base_slot + 2))), timeout=5.0)

    runs = runs_by_slot(store, task_name)
    abandoned = runs[(base_slot + 1, False)]
    assert abandoned.outcome == "abandoned"
    assert abandoned.error  # says why
    assert runs[(base_slot + 2, False)].outcome == "running"
    # A finished run is never marked abandoned.
    assert runs[(base_slot, False)].outcome == "succeeded"

    # The crashed holder was only slow: its late finish records 'lost', not 'succeeded'.
    store.finish(crashed, "succeeded")
    runs = runs_by_slot(store, task_name)
    assert runs[(base_slot + 1, False)].outcome == "lost"
    assert runs[(base_slot + 1, False)].finished_at is not None
    current = runs[(base_slot + 2, False)]
    assert (current.outcome, current.fence) == ("running", survivor.fence)
    # ... and it did not free the survivor's lease.
    assert won(store.acquire(request(task_name, base_slot + 3))) is None


def test_slot_runs_once_in_history(store: LeaseStore, task_name: str, base_slot: int) -> None:
    for _ in range(3):
        lease = won(store.acquire(request(task_name, base_slot)))
        if lease is not None:
            store.finish(lease, "succeeded")
    history = store.history(task_name)
    assert [(run.slot, run.fence) for run in history] == [(base_slot, 1)]


# --- names --------------------------------------------------------------------

ODD_SUFFIXES = [
    "it's",
    'say "hi"',
    "back\\slash",
    "semi;colon -- DROP TABLE cronlease_leases",
    "percent %s %(name)s {0} :name",
    "ünïcödé-ß",
    "報告-夜間",
    "rocket-🚀-task",
    "Report",
    "report",
    "REPORT",
    "inner space ok",
]


def test_odd_names_are_stored_verbatim(store: LeaseStore, task_name: str, base_slot: int) -> None:
    # A unique prefix keeps runs on a shared server apart.
    names = [f"{task_name}-{suffix}" for suffix in ODD_SUFFIXES]
    names += [
        task_name + "x" * (200 - len(task_name)),
        task_name + "é" * (200 - len(task_name)),
        task_name + "🚀" * (200 - len(task_name)),
        task_name + "n" * (MAX_NAME_LENGTH - len(task_name)),
    ]
    assert len(set(names)) == len(names)
    assert [len(name) for name in names[-4:]] == [200, 200, 200, MAX_NAME_LENGTH]

    leases = []
    for name in names:
        lease = take(store, name, base_slot)
        # A fresh row per name: no two names collapsed into one.
        assert lease.fence == 1, name
        assert lease.name == name
        # renewals bind their values on the client on PostgreSQL (a SET LOCAL travels with them)
        assert store.heartbeat(lease), name
        leases.append(lease)
    assert store.heartbeat_many(leases) == [True] * len(leases)
    for lease in leases:
        store.finish(lease, "succeeded", f"error of {lease.name}")

    rows = store.leases(names)
    assert sorted(row.name for row in rows) == sorted(names)
    by_name = {row.name: row for row in rows}
    for name in names:
        assert by_name[name].name == name
        assert by_name[name].slot == base_slot
        [run] = store.history(name)
        assert run.name == name
        assert run.error == f"error of {name}"
        assert store.leases([name]) == [by_name[name]]


def test_names_differing_only_in_case_are_distinct_tasks(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    lower, upper = task_name + "-job", task_name.upper() + "-JOB"
    held = take(store, lower, base_slot)
    # Were they one row, this would be refused (the lease is held).
    other = take(store, upper, base_slot)
    assert held.fence == other.fence == 1
    assert [row.name for row in store.leases([lower, upper])] == sorted([lower, upper])
    store.pause(upper)
    assert lease_row(store, lower).paused is False


def test_leases_reads_selected_rows_sorted(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    names = [task_name + suffix for suffix in ("-c", "-a", "-b")]
    for name in names:
        take(store, name, base_slot)
    assert [row.name for row in store.leases(names)] == sorted(names)
    assert [row.name for row in store.leases(names[:1])] == names[:1]
    assert store.leases([]) == []
    everything = [row.name for row in store.leases()]
    assert set(names) <= set(everything)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "n" * (MAX_NAME_LENGTH + 1),
        "trailing ",
        " leading",
        "tab\tinside",
        "new\nline",
        "nul\x00byte",
        "bell\x07",
        "del\x7f",
        None,
        42,
    ],
)
def test_invalid_names_are_rejected_at_construction(name: object) -> None:
    with pytest.raises(ConfigError):
        AcquireRequest(name=name, slot=1, ttl=1.0, holder=HOLDER)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options",
    [
        {"ttl": 0},
        {"ttl": -1.0},
        {"ttl": math.nan},
        {"ttl": math.inf},
        {"ttl": 86_400.5},
        {"slot": -1},
        {"slot": True},
        {"slot": 1.5},
        {"slot": "5"},
        {"tolerance": -0.5},
        {"tolerance": math.nan},
        {"holder": ""},
        {"holder": "h" * 300},
    ],
    ids=lambda options: "-".join(f"{k}={v!r}" for k, v in options.items()),
)
def test_invalid_requests_are_rejected(options: dict[str, Any]) -> None:
    values: dict[str, Any] = {"name": "job", "slot": 1, "ttl": 1.0, "holder": HOLDER}
    values.update(options)
    with pytest.raises(ConfigError):
        AcquireRequest(**values)


def test_valid_request_edges_are_accepted() -> None:
    AcquireRequest(name="n" * MAX_NAME_LENGTH, slot=0, ttl=86_400.0, holder=HOLDER)
    AcquireRequest(name="j", slot=1, ttl=0.001, holder="h", tolerance=0.0)


# --- the clock ----------------------------------------------------------------


def test_database_time_is_close_to_local_time(store: LeaseStore) -> None:
    before = time.time()
    db_now = store.database_time()
    after = time.time()
    assert isinstance(db_now, float)
    assert before - 2.0 <= db_now <= after + 2.0


def test_database_time_advances(store: LeaseStore, wait_for: WaitFor) -> None:
    first = store.database_time()
    wait_for(lambda: store.database_time() > first, timeout=2.0)


def test_times_keep_sub_second_precision(store: LeaseStore, task_name: str, base_slot: int) -> None:
    acquired = []
    for offset in range(6):
        lease = take(store, task_name, base_slot + offset, ttl=1.25)
        row = lease_row(store, task_name)
        acquired.append(row.acquired_at)
        assert row.expires_at - row.acquired_at == pytest.approx(1.25, abs=1e-3)
        store.finish(lease, "succeeded")
    assert any(value != math.floor(value) for value in acquired), acquired
    # Distinct millisecond-or-better readings: not a 1 s clock.
    assert len({round(value, 3) for value in acquired}) >= 2
    history = store.history(task_name, limit=10)
    assert any(run.finished_at != math.floor(run.finished_at or 0) for run in history)
    # scheduled_for keeps the slot's milliseconds.
    assert {round(run.scheduled_for * 1000) for run in history} == {
        base_slot + offset for offset in range(6)
    }


# --- independence ---------------------------------------------------------------


def test_two_tasks_do_not_interfere(store: LeaseStore, task_name: str, base_slot: int) -> None:
    a, b = task_name + "-a", task_name + "-b"
    lease_a = take(store, a, base_slot)
    lease_b = take(store, b, base_slot)
    assert lease_a.fence == lease_b.fence == 1

    store.finish(lease_a, "succeeded")
    # Releasing a does not free b.
    assert won(store.acquire(request(b, base_slot + 1))) is None
    store.pause(a)
    assert lease_row(store, b).paused is False
    store.finish(lease_b, "failed", "b failed")
    assert take(store, b, base_slot + 1).fence == 2
    assert won(store.acquire(request(a, base_slot + 1))) is None

    assert [run.outcome for run in store.history(a)] == ["succeeded"]
    assert [run.outcome for run in store.history(b)] == ["running", "failed"]


# --- a multi-thread race (the multi-process proof lives elsewhere) ----------------


def test_one_winner_per_round_among_threads(
    store: LeaseStore, task_name: str, base_slot: int
) -> None:
    threads_count, rounds = 8, 50
    gate = threading.Barrier(threads_count, timeout=30)
    wins: list[list[int]] = [[] for _ in range(rounds)]
    errors: list[BaseException] = []
    lock = threading.Lock()

    def contender(index: int) -> None:
        try:
            for round_number in range(rounds):
                gate.wait()  # everyone starts the round together
                lease = won(
                    store.acquire(
                        request(
                            task_name, base_slot + round_number, holder=f"thread:{index}:000000"
                        )
                    )
                )
                if lease is not None:
                    with lock:
                        wins[round_number].append(lease.fence)
                    store.finish(lease, "succeeded")
                gate.wait()  # the round's winner has released before the next round
        except BaseException as exc:
            errors.append(exc)
            gate.abort()

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors
    assert [len(winners) for winners in wins] == [1] * rounds
    assert [winners[0] for winners in wins] == list(range(1, rounds + 1))
    history = store.history(task_name, limit=rounds + 10)
    assert len(history) == rounds
    assert {run.outcome for run in history} == {"succeeded"}
