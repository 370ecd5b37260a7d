"""The order pytest-xdist hands tests out in: longest first, balanced over the workers.

``--dist worksteal`` (pyproject.toml) splits the collection into one contiguous
block per worker, equal in count, and a worker that runs dry takes the far end of
the queue that is longest in count, not in seconds. So the collection's order
decides how long a run takes: with the slow tests in one stretch, two workers got
the process tests and two the quick ones, and the run ended with one worker on
minute-long tests while the others had nothing left to take.

Here each test gets its expected seconds (``tests/durations.json``, written from a
JUnit report by ``benchmarks/suite_times.py REPORT --write tests/durations.json``).
A test the file does not name took less than half a second, unless its module is
not in it at all: then it counts :data:`UNKNOWN_SLOW` seconds if marked slow. The
tests of a module with a module-scoped fixture (a Galera cluster, a PgBouncer
store) stay together, so no two workers pay for its setup. Longest first, each
test (or module) goes to the block with the fewest seconds that has room, each
block sized as xdist will cut it: every worker starts on its longest tests and
ends on quick ones, which are what a worker that runs dry takes. A stale file
costs balance, never a test: every collected test runs.

Within a block, the tests that work in the worker itself (contract, unit, docs:
statements, the model checker) are dealt between those that mostly wait for real
ticks (``tests/processes``), each kind longest first, the block's share of each kept
even as it runs. Four workers share two cores: with every waiting test first, the
run ended on four workers of busy tests at once, each at half speed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
#: seconds assumed for a slow test of a module the durations file does not know yet
UNKNOWN_SLOW = 5.0
#: where the tests that mostly wait (on replica processes and real ticks) live
WAITING = "tests/processes/"


def block_sizes(count: int, workers: int) -> list[int]:
    """The counts xdist's worksteal gives each worker at the start (its ``check_schedule``)."""
    sizes, left = [], count
    for i in range(workers):
        size = left // (workers - i)
        sizes.append(size)
        left -= size
    return sizes


#: a unit: the indexes of tests run on one worker, their seconds, and whether they keep
#: the worker busy (rather than wait on processes of their own)
Unit = tuple[list[int], float, bool]


def balanced(units: Sequence[Unit], count: int, workers: int) -> list[int]:
    """Indexes in the order to run them: ``units`` longest first, each to the block with
    the fewest seconds and room for it; in each block, busy and waiting units dealt
    between each other (:func:`interleaved`)."""
    sizes = block_sizes(count, workers)
    blocks: list[list[Unit]] = [[] for _ in range(workers)]
    counts = [0] * workers
    seconds = [0.0] * workers
    for unit in sorted(units, key=lambda unit: -unit[1]):  # stable: ties as collected
        size = len(unit[0])
        fits = [b for b in range(workers) if counts[b] + size <= sizes[b]]
        # none fits (a large unit dealt late): the emptiest, one block a little long
        block = (
            min(fits, key=lambda b: seconds[b])
            if fits
            else max(range(workers), key=lambda b: sizes[b] - counts[b])
        )
        blocks[block].append(unit)
        counts[block] += size
        seconds[block] += unit[1]
    return [index for block in blocks for unit in interleaved(block) for index in unit[0]]


def interleaved(units: Sequence[Unit]) -> list[Unit]:
    """``units`` (longest first) with the busy ones dealt between the waiting ones: next,
    the kind that has run the smaller share of its seconds so far (a kind whose units
    all take no time counts by number)."""
    kinds = [[u for u in units if u[2]], [u for u in units if not u[2]]]
    totals = [sum(u[1] for u in kind) for kind in kinds]
    done = [0.0, 0.0]
    taken = [0, 0]
    out: list[Unit] = []

    def share(k: int) -> float:
        if taken[k] == len(kinds[k]):
            return 2.0  # none left
        if totals[k] > 0:
            return done[k] / totals[k]
        return taken[k] / len(kinds[k])

    while len(out) < len(units):
        k = min((0, 1), key=share)
        unit = kinds[k][taken[k]]
        out.append(unit)
        taken[k] += 1
        done[k] += unit[1]
    return out


def _module_scoped(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    definitions = getattr(info, "name2fixturedefs", {})
    return any(d.scope == "module" for defs in definitions.values() for d in defs)


def order(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place for this run's xdist workers (none: left as collected).
    Every worker computes the same order from the same collection, as xdist requires."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 2:
        return
    known: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    known_modules = {nodeid.split("::")[0] for nodeid in known}
    units: dict[str, Unit] = {}
    for index, item in enumerate(items):
        module = item.nodeid.split("::")[0]
        new = module not in known_modules and item.get_closest_marker("slow") is not None
        cost = known.get(item.nodeid, UNKNOWN_SLOW if new else 0.0)
        key = module if _module_scoped(item) else item.nodeid
        busy = not module.startswith(WAITING)
        indexes, total, _ = units.get(key, ([], 0.0, busy))
        units[key] = ([*indexes, index], total + cost, busy)
    items[:] = [items[i] for i in balanced(list(units.values()), len(items), workers)]
