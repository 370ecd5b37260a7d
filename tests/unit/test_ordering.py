"""The test run's order (tests/support/ordering.py): every test once, each xdist block as
long as xdist cuts it, each kind longest first and dealt between the other, and the blocks'
seconds balanced."""

from __future__ import annotations

import random

from tests.support.ordering import balanced, block_sizes, interleaved


def test_block_sizes_are_what_worksteal_hands_out() -> None:
    assert block_sizes(10, 4) == [2, 2, 3, 3]
    assert block_sizes(2359, 4) == [589, 590, 590, 590]
    assert block_sizes(3, 4) == [0, 1, 1, 1]


def test_every_test_once_blocks_cut_as_xdist_cuts_them_longest_first_and_balanced() -> None:
    rng = random.Random(7)
    seconds = [rng.choice([0.0, 0.0, 0.0, 0.6, 2.0, 10.0, 40.0]) for _ in range(400)]
    busy = [rng.random() < 0.4 for _ in range(400)]
    units = [([i], s, b) for i, (s, b) in enumerate(zip(seconds, busy, strict=True))]
    units.append(([400, 401, 402], 30.0, False))  # a module whose tests share a fixture
    seconds += [10.0, 10.0, 10.0]
    busy += [False] * 3

    order = balanced(units, 403, 4)

    assert sorted(order) == list(range(403))
    blocks, start = [], 0
    for size in block_sizes(403, 4):
        blocks.append(order[start : start + size])
        start += size
    for block in blocks:
        for kind in (True, False):
            costs = [seconds[i] for i in block if i < 400 and busy[i] == kind]
            assert costs == sorted(costs, reverse=True)  # the quick ones last, for thieves
    assert any({400, 401, 402} <= set(block) for block in blocks)  # on one worker
    totals = [sum(seconds[i] for i in block) for block in blocks]
    assert max(totals) - min(totals) <= 40.0  # within the longest single test


def test_busy_tests_are_dealt_between_waiting_ones_keeping_their_shares_even() -> None:
    waiting = [([i], s, False) for i, s in enumerate([40.0, 30.0, 20.0, 10.0, 10.0, 5.0, 5.0])]
    busy = [([10 + i], s, True) for i, s in enumerate([20.0, 10.0, 5.0, 3.0, 1.0, 1.0])]
    order = interleaved(waiting + busy)

    assert sorted(u[0][0] for u in order) == sorted(u[0][0] for u in waiting + busy)
    totals = {True: 40.0, False: 120.0}
    done = {True: 0.0, False: 0.0}
    for unit in order:
        done[unit[2]] += unit[1]
        # at every step the two kinds have run a like share of their seconds: never all
        # the busy ones at the end (nor at the start), a unit's share apart at most
        assert abs(done[True] / totals[True] - done[False] / totals[False]) <= 0.5
    assert order[0] == busy[0] and order[1] == waiting[0]  # each kind longest first


def test_a_block_of_one_kind_keeps_its_order() -> None:
    units = [([i], float(10 - i), False) for i in range(5)]
    assert interleaved(units) == units
    assert interleaved([]) == []
