"""The test order for xdist's workers (tests/support/xdist_order.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import xdist_order


def test_share_sizes_are_xdists_and_cover_every_test() -> None:
    assert xdist_order.share_sizes(10, 4) == [2, 2, 3, 3]
    assert xdist_order.share_sizes(3, 4) == [0, 1, 1, 1]
    assert sum(xdist_order.share_sizes(2083, 4)) == 2083


def test_each_share_holds_about_equal_work_longest_first() -> None:
    costs = [60.0, 50.0, 40.0, 30.0] + [5.0] * 20 + [0.1] * 76
    items = list(range(len(costs)))
    ordered = xdist_order.balanced(items, lambda i: costs[i], 4)
    assert sorted(ordered) == items
    sizes = xdist_order.share_sizes(len(items), 4)
    shares, start = [], 0
    for size in sizes:
        shares.append(ordered[start : start + size])
        start += size
    loads = [sum(costs[i] for i in share) for share in shares]
    # the four longest open four shares; the rest fill them up evenly
    assert sorted(costs[share[0]] for share in shares) == [30.0, 40.0, 50.0, 60.0]
    assert max(loads) - min(loads) <= 10.0, loads
    for share in shares:
        assert [costs[i] for i in share] == sorted((costs[i] for i in share), reverse=True)


def test_one_worker_is_longest_first_and_ties_keep_their_order() -> None:
    assert xdist_order.balanced(["a", "b", "c"], {"a": 1.0, "b": 2.0, "c": 1.0}.get, 1) == [
        "b",
        "a",
        "c",
    ]


def test_the_file_keeps_the_long_ones_and_a_bad_file_is_no_file(tmp_path: Path) -> None:
    path = tmp_path / "durations.json"
    xdist_order.save({"t::slow": 12.34, "t::quick": 0.01}, path)
    assert json.loads(path.read_text()) == {"t::slow": 12.3}
    assert xdist_order.load(path) == {"t::slow": 12.3}
    path.write_text("not json")
    assert xdist_order.load(path) == {}
    assert xdist_order.load(tmp_path / "missing.json") == {}
