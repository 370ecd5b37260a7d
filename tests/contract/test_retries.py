"""Retries on every backend: attempts 2, 3, ... of a slot after a failed one (issue 13).

A real scheduler on a real database; every attempt the task makes is counted
at the attempts ledger (tests/support/attempt_ledger.py), not from the
scheduler's own account. Backoff is asserted as a lower bound only.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from cronlease import (
    LeaseLostError,
    RunContext,
    RunFinished,
    RunStarted,
    Scheduler,
)
from cronlease._lease.database import normalize_url
from cronlease._run.housekeeping.attempt_poll import ATTEMPTS_PER_PASS, AttemptPoll
from cronlease._run.housekeeping.watcher import STUCK_WATCHER_TASK
from cronlease._run.recording.attempts import backoff
from cronlease._task import Liveness
from cronlease._timing.schedule import slot_of
from cronlease.store import AcquireRequest, Lease, RunRecord
from tests.support import attempt_ledger
from tests.support.attempt_ledger import Entry
from tests.support.procs import wait_for

DELAY = 0.2


@contextmanager
def running(scheduler: Scheduler) -> Iterator[Scheduler]:
    try:
        with scheduler:
            yield scheduler
    finally:
        scheduler.store.dispose()


def by_slot(entries: list[Entry]) -> dict[int, list[Entry]]:
    slots: dict[int, list[Entry]] = {}
    for entry in entries:
        slots.setdefault(entry.slot, []).append(entry)
    return slots


def recorded(scheduler: Scheduler, name: str, slot: int) -> list[RunRecord]:
    """The finished attempts of ``slot``, by attempt."""
    runs = [r for r in scheduler.store.history(name, 50) if r.slot == slot]
    return sorted((r for r in runs if r.outcome != "running"), key=lambda r: r.attempt)


def declare_failing(
    scheduler: Scheduler,
    db_url: str,
    name: str,
    *,
    fail_until: int,
    every: str = "5s",
    **options: object,
) -> None:
    """A task failing its attempts up to ``fail_until``; its schedule anchored a second
    from now, so its first tick comes then, not up to a period later."""
    anchor = datetime.fromtimestamp(int(time.time()) + 1, timezone.utc)
    options.setdefault("anchor", anchor)

    @scheduler.task(every=every, name=name, **options)  # type: ignore[call-overload]
    def flaky(ctx: RunContext) -> None:
        attempt_ledger.append(db_url, name, ctx)
        if ctx.attempt <= fail_until:
            raise RuntimeError(f"attempt {ctx.attempt} fails")


@pytest.mark.slow
def test_failing_twice_then_succeeding_runs_attempts_one_to_three(
    db_url: str, task_name: str
) -> None:
    attempt_ledger.setup(db_url)
    scheduler = Scheduler(db_url)
    events: list[RunStarted | RunFinished] = []
    scheduler.listen(events.append, RunStarted, RunFinished)
    declare_failing(scheduler, db_url, task_name, fail_until=2, retries=2, retry_delay=DELAY)
    with running(scheduler):
        done = wait_for(
            lambda: [
                a
                for a in by_slot(attempt_ledger.entries(db_url, task_name)).values()
                if len(a) >= 3
            ],
            30,
            "a slot with three attempts",
        )
        first = done[0]
        slot = first[0].slot
        history = wait_for(
            lambda: len(done := recorded(scheduler, task_name, slot)) >= 3 and done,
            10,
            "three recorded attempts",
        )
    assert [e.attempt for e in first] == [1, 2, 3]
    assert not any(e.recovering for e in first)
    assert len({e.key for e in first}) == 1  # one idempotency key for the slot
    for previous, following in itertools.pairwise(first):
        assert following.at - previous.at >= backoff(DELAY, previous.attempt)
    assert [r.attempt for r in history] == [1, 2, 3]
    assert [r.outcome for r in history] == ["failed", "failed", "succeeded"]
    fences = [r.fence for r in history]
    assert fences == sorted(fences) and len(set(fences)) == 3
    # by task as well: the stuck watcher runs every minute, so a slot on the minute is
    # its slot too (its attempt 1 once made the starts read [1, 1, 2])
    ours = [e for e in events if e.task == task_name and e.slot == slot]
    started = [e for e in ours if isinstance(e, RunStarted)]
    finished = [e for e in ours if isinstance(e, RunFinished)]
    assert [e.attempt for e in started[:3]] == [e.attempt for e in finished[:3]] == [1, 2, 3]
    assert [e.outcome for e in finished[:3]] == ["failed", "failed", "succeeded"]
    # no more attempts of a slot that succeeded
    assert [e.attempt for e in by_slot(attempt_ledger.entries(db_url, task_name))[slot]] == [
        1,
        2,
        3,
    ]


@pytest.mark.slow
def test_with_one_retry_a_slot_ends_failed_after_two_attempts(db_url: str, task_name: str) -> None:
    attempt_ledger.setup(db_url)
    scheduler = Scheduler(db_url)
    # every 3 s: the retry (0.2 s of backoff, a poll of 0.5 s) is due long before the next
    # tick, and the test waits for that next tick
    declare_failing(
        scheduler, db_url, task_name, fail_until=99, retries=1, retry_delay=DELAY, every="3s"
    )
    with running(scheduler):
        # the slot after the one retried has begun: nothing more comes for the first
        slots = wait_for(
            lambda: (
                (s := by_slot(attempt_ledger.entries(db_url, task_name)))
                and len(s) >= 2
                and len(next(iter(s.values()))) >= 2
                and s
            ),
            30,
            "two attempts of a slot, then the next slot",
        )
        first_slot = min(slots)
        records = recorded(scheduler, task_name, first_slot)
    assert [e.attempt for e in slots[first_slot]] == [1, 2]
    assert [(r.attempt, r.outcome) for r in records] == [(1, "failed"), (2, "failed")]


@pytest.mark.slow
def test_a_retry_that_would_reach_the_next_fire_time_is_not_started(
    db_url: str, task_name: str
) -> None:
    attempt_ledger.setup(db_url)
    scheduler = Scheduler(db_url)
    # every 2 s; the retry would be due 3 s after the failure: past the next tick (the
    # test waits three periods: it was 5 s and 6 s, 15 s per backend in CI)
    declare_failing(
        scheduler, db_url, task_name, fail_until=99, retries=3, retry_delay="3s", every="2s"
    )
    with running(scheduler):
        slots = wait_for(
            lambda: len(s := by_slot(attempt_ledger.entries(db_url, task_name))) >= 3 and s,
            30,
            "three slots",
        )
    assert all(e.attempt == 1 for entries in slots.values() for e in entries)
    assert all(len(entries) == 1 for entries in slots.values())


def test_without_retries_or_recovery_there_is_no_poll_but_the_watcher_is_there(
    db_url: str, task_name: str
) -> None:
    scheduler = Scheduler(db_url)
    assert any(STUCK_WATCHER_TASK in name for name in scheduler._tasks)  # whatever tasks ask
    ran: list[int] = []
    scheduler.add_task(lambda ctx: ran.append(ctx.attempt), every="1s", name=task_name)
    with running(scheduler):
        wait_for(lambda: ran, 20, "a run")
        poll = scheduler._attempts
        assert poll is not None and poll.thread is None  # never started, never queried
        # declared while running: the poll starts
        scheduler.add_task(lambda: None, every="1h", name=f"{task_name}-r", retries=1)
        assert poll.thread is not None and poll.thread.is_alive()
    assert ran[0] == 1
    assert poll.thread is not None and not poll.thread.is_alive()  # joined by the shutdown


def test_the_key_differs_between_namespaces_and_slots(db_url: str, task_name: str) -> None:
    keys: list[tuple[str, int, str]] = []  # (namespace, slot, key)
    fire = datetime.now(timezone.utc)
    for namespace in ("one", "two"):
        scheduler = Scheduler(db_url, namespace=namespace)

        def note(ctx: RunContext, namespace: str = namespace) -> None:
            keys.append((namespace, ctx.slot, ctx.key))

        task = scheduler.add_task(note, every="1h", name=task_name)
        for tick in (fire, fire + timedelta(milliseconds=5)):
            assert scheduler.runner.run_tick(task, tick, catch_up=True) == "succeeded"
        assert scheduler.run_now(task_name) == "succeeded"
        scheduler.store.dispose()
    assert len(keys) == 6 and len({key for _, _, key in keys}) == 6
    for namespace, slot, key in keys:
        assert key.startswith(f"{namespace}:{task_name}@") and key.endswith(str(slot))
    assert {slot for _, slot, _ in keys} >= {slot_of(fire), slot_of(fire) + 5}


def test_the_stuck_watcher_marks_a_paused_tasks_dead_run_abandoned(
    db_url: str, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler = Scheduler(db_url)  # no task asks for attempts: the watcher is there all the same
    scheduler.add_task(lambda: None, every="1h", name=f"{task_name}-r")
    watcher = scheduler._tasks[STUCK_WATCHER_TASK]
    store = scheduler.store
    try:
        scheduler.runner.ensure_schema()
        # a replica that died mid-run: its run row 'running', its lease left to expire
        slot = slot_of(datetime.now(timezone.utc) - timedelta(seconds=1))  # not ahead of the db
        dead = AcquireRequest(name=task_name, slot=slot, ttl=0.2, holder="dead:1")
        lease = store.acquire(dead)
        assert isinstance(lease, Lease)
        store.pause(task_name)
        wait_for(lambda: store.database_time() > store.leases([task_name])[0].expires_at, 10)
        assert store.history(task_name, 1)[0].outcome == "running"
        with caplog.at_level(logging.INFO, logger="cronlease"):
            assert scheduler.runner.run_tick(watcher, datetime.now(timezone.utc)) == "succeeded"
        assert store.history(task_name, 1)[0].outcome == "abandoned"
        # one line for the pass (the watcher is fleet-wide: on a server database shared
        # by the suite it may also mark other tests' dead runs, named or counted)
        lines = [r.getMessage() for r in caplog.records if "stuck watcher" in r.getMessage()]
        assert len(lines) == 1 and "marked abandoned" in lines[0]
        # the next pass does not mark it again
        caplog.clear()
        later = datetime.now(timezone.utc) + timedelta(minutes=1)
        with caplog.at_level(logging.INFO, logger="cronlease"):
            scheduler.runner.run_tick(watcher, later, catch_up=True)
        assert not any(task_name in r.getMessage() for r in caplog.records)
        if db_url.startswith("sqlite"):  # a database of its own: nothing else to mark
            assert not any("stuck watcher" in r.getMessage() for r in caplog.records)
        assert store.leases([task_name])[0].fence == lease.fence  # the task was not acquired
    finally:
        store.dispose()


def test_recoveries_are_budgeted_per_pass_and_by_free_workers(db_url: str, task_name: str) -> None:
    """20 dead runs, 16 workers: a pass starts at most 8; none past the free workers."""
    scheduler = Scheduler(db_url, max_workers=16)
    names = [f"{task_name}-{n:02d}" for n in range(20)]
    ran: list[tuple[str, int, bool]] = []

    def note(ctx: RunContext) -> None:
        ran.append((ctx.name, ctx.attempt, ctx.recovering))

    for name in names:
        # a day: the slot's next fire time is not within the test
        scheduler.add_task(note, every="1d", name=name, recover=True)
    store = scheduler.store
    handed: list[Callable[[], object]] = []
    poll = AttemptPoll(scheduler.runner, scheduler._attempt_tasks, handed.append)
    try:
        scheduler.runner.ensure_schema()
        slot = slot_of(datetime.now(timezone.utc) - timedelta(seconds=1))
        for name in names:  # every replica died mid-run
            assert store.acquire(AcquireRequest(name=name, slot=slot, ttl=0.2, holder="dead:1"))
        wait_for(lambda: all(store.database_time() > row.expires_at for row in store.leases(names)))
        passes = []
        for _ in range(3):
            before = len(handed)
            poll.poll()
            passes.append(len(handed) - before)
        assert passes == [ATTEMPTS_PER_PASS, ATTEMPTS_PER_PASS, 0]  # 16 workers taken
        for run in handed:
            run()  # each frees its worker
        poll.poll()
        assert len(handed) == 20
        for run in handed[16:]:
            run()
        poll.poll()
        assert len(handed) == 20  # every slot recovered once
    finally:
        scheduler.runner.close()
        store.dispose()
    assert sorted(ran) == [(name, 2, True) for name in names]


def test_ctx_verify_passes_in_the_holders_transaction_and_fails_once_the_lease_moved(
    db_url: str, task_name: str
) -> None:
    scheduler = Scheduler(db_url, namespace="ns")
    attempt_ledger.setup(db_url)
    engine = create_engine(normalize_url(db_url), poolclass=NullPool)
    outcomes: list[str] = []

    def fenced(ctx: RunContext) -> None:
        with engine.begin() as connection:
            connection.execute(
                attempt_ledger.attempts.insert().values(
                    task=task_name,
                    slot=ctx.slot,
                    attempt=ctx.attempt,
                    recovering=False,
                    ctx_key=ctx.key,
                    pid=0,
                    at=0.0,
                )
            )
            ctx.verify(connection)
        outcomes.append("verified")
        # the same check for a fence this attempt does not hold: refused, nothing commits
        stale = RunContext(
            name=ctx.name,
            slot=ctx.slot,
            fence=ctx.fence - 1,
            scheduled_for=ctx.scheduled_for,
            manual=False,
            liveness=Liveness(60.0, 0.0),
            full_name=f"ns:{task_name}",
            holder="someone-else",
        )
        try:
            with engine.begin() as connection:
                connection.execute(
                    attempt_ledger.attempts.insert().values(
                        task=task_name,
                        slot=-1,
                        attempt=1,
                        recovering=False,
                        ctx_key="stale",
                        pid=0,
                        at=0.0,
                    )
                )
                stale.verify(connection)
        except LeaseLostError:
            outcomes.append("refused")

    task = scheduler.add_task(fenced, every="1h", name=task_name)
    try:
        fire = datetime.now(timezone.utc) - timedelta(seconds=1)
        assert scheduler.runner.run_tick(task, fire, catch_up=True) == "succeeded"
    finally:
        scheduler.store.dispose()
        engine.dispose()
    assert outcomes == ["verified", "refused"]
    assert [e.slot for e in attempt_ledger.entries(db_url, task_name)] == [slot_of(fire)]
