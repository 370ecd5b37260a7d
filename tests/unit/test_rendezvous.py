"""Rendezvous hashing of ticks over members (_run/acquisition/rendezvous.py, design §4.4)."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from cronlease._run.acquisition.rendezvous import (
    BACKUP,
    OTHER,
    PREFERRED,
    Ranking,
    member_key,
    rendezvous_order,
    tick_key,
)

TASKS = [f"app:task-{i:03d}" for i in range(200)]
SLOTS = [1_764_547_200_000 + 1000 * i for i in range(60)]


def test_keys_are_stable_across_processes_and_versions() -> None:
    """Every replica must compute the same order: no per-process hash seed, no change of
    hash between versions without a reason (replicas of two versions would disagree)."""
    assert member_key("replica-a") == 6167996864633516376
    assert tick_key("billing:report", 1764547200000) == 1851577071271478808
    assert rendezvous_order(["a", "b", "c"], "task", 1000) == ["c", "b", "a"]


@pytest.mark.parametrize("size", [2, 3, 8, 32])
def test_every_view_agrees_on_one_preferred_and_one_backup(size: int) -> None:
    members = [f"host-{i}:{1000 + i}:abc{i:03d}" for i in range(size)]
    rankings = [Ranking(me, members, active=0) for me in members]
    for name in TASKS[:50]:
        for slot in SLOTS[:10]:
            places = Counter(ranking.place(name, slot) for ranking in rankings)
            assert places[PREFERRED] == 1 and places[BACKUP] == 1
            assert places[OTHER] == size - 2
            order = rendezvous_order(members, name, slot)
            assert Ranking(order[0], members, active=0).place(name, slot) == PREFERRED
            assert Ranking(order[1], members, active=0).place(name, slot) == BACKUP


@pytest.mark.parametrize("size", [3, 8, 64])
def test_ticks_spread_evenly(size: int) -> None:
    """200 tasks x 30 ticks: every member is preferred, and backup, for its share within
    four standard deviations of a fair coin (about 1/size per tick)."""
    members = [f"replica-{i}" for i in range(size)]
    preferred: Counter[str] = Counter()
    backup: Counter[str] = Counter()
    for name in TASKS:
        for slot in SLOTS[:30]:
            first, second = rendezvous_order(members, name, slot)[:2]
            preferred[first] += 1
            backup[second] += 1
    fair = len(TASKS) * 30 / size
    spread = 4 * math.sqrt(fair * (1 - 1 / size))
    for counts in (preferred, backup):
        off = {me: counts[me] - fair for me in members if abs(counts[me] - fair) > spread}
        assert not off, (fair, spread, off)


def test_a_task_moves_between_members_from_tick_to_tick() -> None:
    members = [f"replica-{i}" for i in range(4)]
    owners = {rendezvous_order(members, TASKS[0], slot)[0] for slot in SLOTS}
    assert owners == set(members)


def test_a_joining_member_takes_only_ticks_it_now_prefers() -> None:
    before = [f"replica-{i}" for i in range(5)]
    after = [*before, "newcomer"]
    moved = 0
    for name in TASKS:
        for slot in SLOTS[:20]:
            old, new = rendezvous_order(before, name, slot), rendezvous_order(after, name, slot)
            if old[0] != new[0]:
                assert new[0] == "newcomer"
                moved += 1
            # the others keep their relative order
            assert [m for m in new if m != "newcomer"] == old
    total = len(TASKS) * 20
    assert 0.1 * total <= moved <= 0.25 * total  # about 1/6 of the ticks


def test_a_leaving_member_hands_its_ticks_to_its_backups() -> None:
    members = [f"replica-{i}" for i in range(5)]
    rest = members[1:]
    for name in TASKS[:100]:
        for slot in SLOTS[:10]:
            old = rendezvous_order(members, name, slot)
            new = rendezvous_order(rest, name, slot)
            assert new == [m for m in old if m != members[0]]


def test_a_lone_member_is_always_preferred() -> None:
    ranking = Ranking("me", ["me"])
    assert ranking.size == 1
    assert {ranking.place(name, SLOTS[0]) for name in TASKS} == {PREFERRED}
    # duplicates of this replica's own id do not count as others
    assert Ranking("me", ["me", "me"]).size == 1


def test_a_capped_ranking_lets_only_that_many_members_touch_an_instant() -> None:
    """ACTIVE_PER_TICK: each instant picks its members first; ticks rank over those, so
    a fleet of 64 has at most 16 replicas per instant, and each is active in a
    quarter of the instants, give or take one, whatever the schedule's step."""
    members = [f"replica-{i}" for i in range(64)]
    rankings = {me: Ranking(me, members, active=16) for me in members}
    active_in: Counter[str] = Counter()
    for slot in SLOTS:
        touching = set()
        for name in TASKS[:40]:
            places = {me: ranking.place(name, slot) for me, ranking in rankings.items()}
            assert sorted(places.values()).count(PREFERRED) == 1
            assert sorted(places.values()).count(BACKUP) == 1
            touching |= {me for me, place in places.items() if place != OTHER}
        assert len(touching) <= 16
        for me, ranking in rankings.items():
            active_in[me] += ranking.active_others(slot) is not None
    assert sum(active_in.values()) == 16 * len(SLOTS)
    assert all(abs(active_in[me] - 15) <= 2 for me in members), active_in  # 60 x 16 / 64
    for step in (10_000, 60_000, 3_600_000):  # every 10 s, every minute, hourly
        ranking = rankings[members[0]]
        slots = [SLOTS[0] + step * i for i in range(128)]
        active = sum(ranking.active_others(slot) is not None for slot in slots)
        assert abs(active - 32) <= 3, (step, active)
    # below the cap, the ranking is the plain one
    small = [f"replica-{i}" for i in range(8)]
    for me in small:
        plain, capped = Ranking(me, small), Ranking(me, small, active=16)
        assert all(plain.place(n, SLOTS[0]) == capped.place(n, SLOTS[0]) for n in TASKS[:50])
