"""A large fleet's cost stays flat (docs/design.md §4.4): the active window each
instant is ranked over, grown for the cohort's workers and named in the member row;
the renewal pace of a large cohort; how long a change leaves a view unsettled; the
idle approach's last read. The view as ``Membership`` builds it from member rows
(no database statement but the renewal at the end, on SQLite).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from cronlease._lease.membership import Member, Members
from cronlease._lease.schema import members
from cronlease._lease.store import LeaseStore
from cronlease._run.acquisition import rendezvous
from cronlease._run.acquisition.membership import (
    APPROACH_SECONDS,
    LAST_READ_SECONDS,
    PAST_PROMISE,
    RENEW_SECONDS,
    Membership,
    cohort_text,
    renew_pace,
    renewal_wait,
)
from cronlease._run.acquisition.rendezvous import (
    ACTIVE_PER_TICK,
    LEGACY_WINDOW,
    OTHER,
    Ranking,
    active_window,
)
from cronlease._run.runner import TickRunner

DB_NOW = 1_796_000_000.0


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[TickRunner]:
    store = LeaseStore.from_url(f"sqlite:///{tmp_path / 'window.db'}")
    tick_runner = TickRunner(store, "replica-000")
    yield tick_runner
    tick_runner.close()
    store.dispose()


def _row(holder: str, task_set: str, promised_in: float = RENEW_SECONDS) -> Member:
    return Member(holder, "", task_set, DB_NOW - 100, DB_NOW, DB_NOW + promised_in + PAST_PROMISE)


def test_the_window_is_eight_members_grown_until_their_workers_suffice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert ACTIVE_PER_TICK == 8
    assert active_window(200, 200) == 8  # the benchmark's fleet: 25 preferred each
    assert active_window(64, 16) == 8  # 8 preferred and 8 backup ticks: 16 workers
    assert active_window(65, 16) == 9
    assert active_window(1000, 16) == 125
    assert active_window(0, 16) == 8
    monkeypatch.setattr(rendezvous, "ACTIVE_PER_TICK", 1)
    assert active_window(4, 2) == 4  # (the process test's fleet)
    monkeypatch.setattr(rendezvous, "ACTIVE_PER_TICK", 0)
    assert active_window(1000, 1) == 0  # no window: every member


def test_a_large_cohort_renews_eight_times_a_second_in_all() -> None:
    assert renew_pace(1) == renew_pace(16) == RENEW_SECONDS
    assert renew_pace(17) == pytest.approx(17 / 8)
    assert renew_pace(64) == 8.0
    for size in (8, 16, 32, 64, 256):
        assert size / renew_pace(size) <= 8.0


def test_the_approach_after_an_idle_stretch_reads_the_fleet_just_before_the_instant() -> None:
    now = DB_NOW
    due = now + APPROACH_SECONDS  # the approach begins now
    # at the normal pace, as before: every 2 s from the approach on
    assert renewal_wait(now, due, RENEW_SECONDS, after_idle=True) == RENEW_SECONDS
    # at a slower pace, the first renewal of the approach promises the last read
    last = APPROACH_SECONDS - LAST_READ_SECONDS
    assert renewal_wait(now, due, 8.0, after_idle=True) == last
    assert renewal_wait(now + 0.5, due, 8.0, after_idle=True) == last - 0.5
    # which is at the pace from then on (not idle before it)
    assert renewal_wait(now + last, due, 8.0, after_idle=False) == 8.0
    assert renewal_wait(now + last, due, 8.0, after_idle=True) == 8.0  # nothing left before
    # a busy replica (ticks every second or few) keeps its pace
    assert renewal_wait(now, now + 3, 8.0) == 8.0
    # before the approach: its start, whatever the pace
    assert renewal_wait(now, now + 50, 8.0) == 50 - APPROACH_SECONDS
    # a member that died while idle promised the approach's start, and is overdue (a
    # renewal late) before the last read
    assert APPROACH_SECONDS - RENEW_SECONDS >= LAST_READ_SECONDS


def test_members_that_name_another_window_rank_apart(runner: TickRunner) -> None:
    membership = Membership(runner.store, "replica-000", runner.outage)
    digest = "0123456789abcdef"
    rows = Members(
        (
            _row("replica-000", cohort_text(digest, 8)),
            _row("replica-001", cohort_text(digest, 8)),
            _row("replica-002", cohort_text(digest, 9)),  # fewer workers: another window
            _row("replica-003", digest),  # an earlier build's row: 16 per instant
        ),
        DB_NOW,
    )
    view = membership._read(rows, cohort_text(digest, 8))
    assert view.cohort == ("replica-000", "replica-001")
    assert view.ranking.window == 8
    legacy = membership._read(rows, cohort_text(digest, LEGACY_WINDOW))
    assert legacy.cohort == ("replica-000", "replica-003")  # the same window, as named
    assert legacy.ranking.window == LEGACY_WINDOW


def test_a_large_cohort_ranks_each_instant_over_its_window_and_settles_after_pace_and_4_s(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    membership = Membership(runner.store, "replica-000", runner.outage)
    mine = cohort_text("0123456789abcdef", 8)
    holders = [f"replica-{i:03d}" for i in range(64)]
    rows = Members(tuple(_row(h, mine, promised_in=8.0) for h in holders), DB_NOW)
    view = membership._read(rows, mine)
    assert view.pace == 8.0 and view.size == 64
    # each instant: 8 members of 64 touch it
    slots = [1_796_000_000_000 + 1000 * i for i in range(64)]
    active = sum(view.ranking.active_others(slot) is not None for slot in slots)
    assert active == pytest.approx(64 * 8 / 64, abs=2)
    others = [Ranking(h, holders, 8) for h in holders]
    for slot in slots[:4]:
        touching = {r.me for r in others if r.active_others(slot) is not None}
        assert len(touching) == 8
        assert all(r.place("task", slot) == OTHER for r in others if r.me not in touching)
    # new to this replica: unsettled until every member has read it (a pace) and 4 s
    hold = 8.0 + PAST_PROMISE
    assert not view.settled and view.settles_at == 1000.0 + hold
    assert not view.settled_at(1000.0 + hold - 0.1)
    assert view.settled_at(1000.0 + hold)  # the view read then settles between reads
    membership._view = view
    clock[0] += hold
    assert membership._read(rows, mine).settled
    # a view is fresh for its pace and the row's life past it
    membership._view = view
    assert membership.view() is view
    clock[0] = view.read_at + hold + 0.1
    assert membership.view() is None
    # a member that missed its promise by a normal period: unsettled, until it renews
    late = Members((*rows.members[:-1], _row(holders[-1], mine, -RENEW_SECONDS - 0.1)), DB_NOW)
    overdue = membership._read(late, mine)
    assert not overdue.settled and not overdue.settled_at(clock[0] + 100)


def test_a_renewal_names_the_window_and_promises_the_pace(
    runner: TickRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rendezvous, "ACTIVE_PER_TICK", 2)
    membership = Membership(runner.store, "replica-000", runner.outage, max_workers=4)
    membership._task_set = lambda: "0123456789abcdef"
    membership._tasks = lambda: 10  # 2 x 10 / 4 workers: 5 members per instant
    membership._pace = 7.0  # a large cohort's, from the previous read
    runner.store.create_tables()
    view = membership.renew()
    assert view is not None and view.cohort == ("replica-000",) and view.pace == RENEW_SECONDS
    engine = sa.create_engine(runner.store.url)
    try:
        with engine.connect() as conn:
            task_set, renewed, expires = conn.execute(
                sa.select(members.c.task_set, members.c.renewed_at, members.c.expires_at)
            ).one()
    finally:
        engine.dispose()
    assert task_set == "0123456789abcdef/5"
    assert expires - renewed == pytest.approx(7.0 + PAST_PROMISE, abs=0.01)
