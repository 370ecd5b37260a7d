"""The test run's order (tests/support/ordering.py): every test once, each xdist block as
long as xdist cuts it, longest first, and the blocks' seconds balanced."""

from __future__ import annotations

import random

from tests.support.ordering import balanced, block_sizes


def test_block_sizes_are_what_worksteal_hands_out() -> None:
    assert block_sizes(10, 4) == [2, 2, 3, 3]
    assert block_sizes(2359, 4) == [589, 590, 590, 590]
    assert block_sizes(3, 4) == [0, 1, 1, 1]


def test_every_test_once_blocks_cut_as_xdist_cuts_them_longest_first_and_balanced() -> None:
    rng = random.Random(7)
    seconds = [rng.choice([0.0, 0.0, 0.0, 0.6, 2.0, 10.0, 40.0]) for _ in range(400)]
    units = [([i], s) for i, s in enumerate(seconds)]
    units.append(([400, 401, 402], 30.0))  # a module whose tests share a fixture
    seconds += [10.0, 10.0, 10.0]

    order = balanced(units, 403, 4)

    assert sorted(order) == list(range(403))
    blocks, start = [], 0
    for size in block_sizes(403, 4):
        blocks.append(order[start : start + size])
        start += size
    for block in blocks:
        costs = [seconds[i] for i in block if i < 400]
        assert costs == sorted(costs, reverse=True)  # the quick ones last, for thieves
    assert any({400, 401, 402} <= set(block) for block in blocks)  # on one worker
    totals = [sum(seconds[i] for i in block) for block in blocks]
    assert max(totals) - min(totals) <= 40.0  # within the longest single test
