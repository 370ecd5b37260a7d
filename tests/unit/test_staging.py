"""The staged policy: who tries a fired tick at once, after a delay, or not at all.

``Staging.stage`` from a replica's view of the fleet (docs/design.md §4.4),
and the view itself as ``Membership`` builds it from the member rows it read.
No database statement is sent here: staging is local.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cronlease._lease.membership import Member, Members
from cronlease._lease.store import LeaseStore
from cronlease._run.acquisition.membership import (
    APPROACH_SECONDS,
    EXPIRE_SECONDS,
    MAX_IDLE_SECONDS,
    OVERDUE_SECONDS,
    PAST_PROMISE,
    RENEW_SECONDS,
    FleetView,
    Membership,
    renewal_wait,
    task_set_digest,
)
from cronlease._run.acquisition.rendezvous import BACKUP, OTHER, PREFERRED, Ranking
from cronlease._run.acquisition.staging import BACKUP_DELAY
from cronlease._run.runner import TickRunner
from cronlease._run.timer.ticks import Tick
from cronlease._task import Task
from cronlease._timing.schedule import slot_of

MEMBERS = ("replica-a", "replica-b", "replica-c", "replica-d")
FIRE = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[TickRunner]:
    store = LeaseStore.from_url(f"sqlite:///{tmp_path / 'staging.db'}")
    tick_runner = TickRunner(store, MEMBERS[0])
    yield tick_runner
    tick_runner.close()
    store.dispose()


def _tasks(count: int, grace: float | None = None) -> list[Task]:
    return [
        Task.declare(lambda: None, name=f"task-{i:03d}", every="1s", grace=grace)
        for i in range(count)
    ]


def _view(settled: bool, members: tuple[str, ...] = MEMBERS) -> FleetView:
    return FleetView(Ranking(MEMBERS[0], members), settled, members, time.monotonic())


def _use(runner: TickRunner, view: FleetView | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.membership, "view", lambda: view)


@pytest.mark.parametrize("settled", [True, False])
def test_the_preferred_replica_goes_at_once_its_backup_later_the_rest_by_the_view(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch, settled: bool
) -> None:
    _use(runner, _view(settled), monkeypatch)
    ranking = Ranking(MEMBERS[0], MEMBERS)
    ticks = [Tick(task, FIRE) for task in _tasks(200)]
    places = {t.task.full_name: ranking.place(t.task.full_name, slot_of(FIRE)) for t in ticks}
    started = time.monotonic()
    now, later = runner.stage(ticks)
    assert {t.task.full_name for t in now} == {n for n, p in places.items() if p == PREFERRED}
    assert all(not t.checked for t in now)
    delayed = {t.task.full_name: due - started for due, t in later}
    assert all(t.checked and t.kind == "scheduled" for _, t in later)
    backups = {n for n, p in places.items() if p == BACKUP}
    others = {n for n, p in places.items() if p == OTHER}
    assert backups and others  # 200 ticks over 4 members: all three places occur
    # the backup after BACKUP_DELAY (a quarter of the 0.5 s grace is more)
    assert all(0 < delayed[n] <= BACKUP_DELAY + 0.05 for n in backups)
    if settled:  # the other members leave it to the first two
        assert set(delayed) == backups
        assert runner.stats["ticks_left_to_peers"] == len(others)
    else:  # every member checks, the others after twice the delay
        assert set(delayed) == backups | others
        assert all(BACKUP_DELAY < delayed[n] <= 2 * BACKUP_DELAY + 0.05 for n in others)
        assert runner.stats["ticks_left_to_peers"] == 0


def test_the_delay_is_at_most_a_quarter_of_the_grace(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(runner, _view(False), monkeypatch)
    _, later = runner.stage([Tick(task, FIRE) for task in _tasks(50, grace=0.2)])
    # due = the stage's own start + its delay, and that start was at most now: a bound
    # with no guess of how long stage() took (a fixed 20 ms failed on a loaded machine)
    staged = time.monotonic()
    assert later
    ranking = Ranking(MEMBERS[0], MEMBERS)
    for due, tick in later:
        place = ranking.place(tick.task.full_name, slot_of(FIRE))
        assert due - staged <= (0.05 if place == BACKUP else 0.1)


@pytest.mark.parametrize("view", ["none", "alone"])
def test_without_a_view_or_alone_every_tick_is_tried_at_once(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch, view: str
) -> None:
    _use(runner, None if view == "none" else _view(True, (MEMBERS[0],)), monkeypatch)
    ticks = [Tick(task, FIRE) for task in _tasks(200)]
    assert runner.stage(ticks) == (ticks, [])


def test_only_scheduled_ticks_are_staged(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catch-up, late pickups, attempts' ticks and manual runs bypass the hashing."""
    _use(runner, _view(True), monkeypatch)
    ticks = [
        Tick(task, FIRE, kind)  # type: ignore[arg-type]
        for task in _tasks(40)
        for kind in ("catch_up", "retry", "manual")
    ]
    assert runner.stage(ticks) == (ticks, [])
    # a tick already staged once is not staged again
    checked = [Tick(task, FIRE, checked=True) for task in _tasks(40)]
    assert runner.stage(checked) == (checked, [])


def _member(holder: str, task_set: str, renewed_ago: float, db_now: float) -> Member:
    return Member(
        holder=holder,
        namespace="",
        task_set=task_set,
        started_at=db_now - 100,
        renewed_at=db_now - renewed_ago,
        expires_at=db_now - renewed_ago + EXPIRE_SECONDS,
    )


def test_the_view_is_the_cohort_of_the_same_tasks_and_settles(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = task_set_digest(_tasks(3))
    assert mine == task_set_digest(reversed(_tasks(3))) != task_set_digest(_tasks(4))
    membership = Membership(runner.store, "replica-a", runner.outage)
    db_now = 1_796_000_000.0
    rows = Members(
        (
            _member("replica-a", mine, 0.0, db_now),
            _member("replica-b", mine, 1.0, db_now),
            _member("replica-x", "0123456789abcdef", 0.0, db_now),  # other tasks
        ),
        db_now,
    )
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    first = membership._read(rows, mine)
    assert first.cohort == ("replica-a", "replica-b") and first.size == 2
    assert not first.settled  # the cohort is new to this replica
    clock[0] += EXPIRE_SECONDS
    assert membership._read(rows, mine).settled
    # a member that stopped renewing unsettles it
    overdue = Members(
        (rows.members[0], _member("replica-b", mine, OVERDUE_SECONDS + 0.5, db_now)), db_now
    )
    assert not membership._read(overdue, mine).settled
    # so does a change of members, for EXPIRE_SECONDS
    joined = Members((*rows.members, _member("replica-c", mine, 0.0, db_now)), db_now)
    assert not membership._read(joined, mine).settled
    clock[0] += EXPIRE_SECONDS
    assert membership._read(joined, mine).settled
    # a view read too long ago is no view
    membership._view = membership._read(joined, mine)
    assert membership.view() is not None
    clock[0] += EXPIRE_SECONDS + 0.1
    assert membership.view() is None


def test_an_idle_member_is_judged_by_the_renewal_it_promised(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = task_set_digest(_tasks(3))
    membership = Membership(runner.store, "replica-a", runner.outage)
    db_now = 1_796_000_000.0
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])

    def idle(renewed_ago: float, promised_in: float) -> Members:
        b = Member("replica-b", "", mine, db_now - 100, db_now - renewed_ago,
                   db_now + promised_in + PAST_PROMISE)  # fmt: skip
        return Members((_member("replica-a", mine, 0.0, db_now), b), db_now)

    membership._read(idle(30.0, 20.0), mine)
    clock[0] += EXPIRE_SECONDS
    # renewed 30 s ago, its next renewal promised in 20 s: settled
    assert membership._read(idle(30.0, 20.0), mine).settled
    # its promise fell due a moment ago: not yet overdue (a renewal may be late)
    assert membership._read(idle(50.0, -RENEW_SECONDS + 0.1), mine).settled
    # missed by a whole period: it may have died
    assert not membership._read(idle(50.0, -RENEW_SECONDS - 0.1), mine).settled


def test_an_idle_replica_plans_its_renewal_just_before_its_next_due_instant() -> None:
    now = 1_796_000_000.0
    assert renewal_wait(now, None) == RENEW_SECONDS  # not known: the normal pace
    assert renewal_wait(now, now + 0.5) == RENEW_SECONDS  # ticks every second
    assert renewal_wait(now, now - 3) == RENEW_SECONDS  # late already
    assert renewal_wait(now, now + APPROACH_SECONDS + RENEW_SECONDS) == RENEW_SECONDS
    assert renewal_wait(now, now + APPROACH_SECONDS) == RENEW_SECONDS  # the approach
    # just before the approach: its start, never a promise past it
    assert renewal_wait(now, now + APPROACH_SECONDS + 0.5) == 0.5
    assert renewal_wait(now, now + 50) == 50 - APPROACH_SECONDS
    assert renewal_wait(now, now + 3600) == MAX_IDLE_SECONDS
    # the row lives PAST_PROMISE past the promise: at the normal pace, as it always did
    assert RENEW_SECONDS + PAST_PROMISE == EXPIRE_SECONDS
    assert PAST_PROMISE - RENEW_SECONDS == EXPIRE_SECONDS - OVERDUE_SECONDS


def test_a_sooner_due_instant_brings_the_renewal_forward_never_back(
    runner: TickRunner,
) -> None:
    membership = Membership(runner.store, "replica-a", runner.outage)
    membership._next_at = time.monotonic() + 40
    membership.due(time.time() + 100)  # later: the promise stands
    assert membership._next_at == pytest.approx(time.monotonic() + 40, abs=0.5)
    assert not membership._wake.is_set()
    membership.due(time.time() + 20)  # a task added: sooner, and the thread woken
    assert membership._next_at == pytest.approx(time.monotonic() + 20 - APPROACH_SECONDS, abs=0.5)
    assert membership._wake.is_set()


def test_a_replica_not_yet_in_the_rows_still_ranks_itself(runner: TickRunner) -> None:
    membership = Membership(runner.store, "replica-a", runner.outage)
    view = membership._read(Members((), 1_796_000_000.0), "ab")
    assert view.cohort == ("replica-a",) and view.size == 1


def test_a_task_with_roles_is_ranked_among_the_members_that_have_one(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # replica-a alone has the role: every tick of the task is its own, tried at once,
    # though over all four members most would be left to the role-less others
    roles = {m: frozenset({"reports"} if m == MEMBERS[0] else ()) for m in MEMBERS}
    view = FleetView(Ranking(MEMBERS[0], MEMBERS), True, MEMBERS, time.monotonic(), roles)
    _use(runner, view, monkeypatch)
    ticks = [
        Tick(Task.declare(lambda: None, name=f"r-{i:03d}", every="1s", roles=["reports"]), FIRE)
        for i in range(50)
    ]
    now, later = runner.stage(ticks)
    assert len(now) == 50 and not later


@pytest.mark.parametrize("alone", [True, False])
def test_a_jittered_tick_waits_for_its_offset_then_its_place_on_the_timers(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch, alone: bool
) -> None:
    _use(runner, None if alone else _view(True), monkeypatch)
    fire = datetime.fromtimestamp(time.time() // 60 * 60 + 60, timezone.utc)  # ahead
    tasks = [
        Task.declare(lambda: None, name=f"jittered-{i}", every="1m", jitter="20s")
        for i in range(40)
    ]
    ranking = Ranking(MEMBERS[0], MEMBERS)
    started, wall = time.monotonic(), time.time()
    now, later = runner.stage([Tick(task, fire) for task in tasks])
    assert not now  # every one waits for its offset, the preferred replica's too
    delays = {PREFERRED: 0.0, BACKUP: BACKUP_DELAY}
    staged = {tick.task.full_name: (due, tick) for due, tick in later}
    for task in tasks:
        place = PREFERRED if alone else ranking.place(task.full_name, slot_of(fire))
        if place == OTHER:  # a settled view leaves it to the first two
            assert task.full_name not in staged
            continue
        due, tick = staged[task.full_name]
        expected = fire.timestamp() + task.jitter_for(fire) - wall + delays[place]
        assert abs((due - started) - expected) < 0.05
        assert tick.checked == (place == BACKUP)
