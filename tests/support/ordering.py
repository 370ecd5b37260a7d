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


def block_sizes(count: int, workers: int) -> list[int]:
    """The counts xdist's worksteal gives each worker at the start (its ``check_schedule``)."""
    sizes, left = [], count
    for i in range(workers):
        size = left // (workers - i)
        sizes.append(size)
        left -= size
    return sizes


def balanced(units: Sequence[tuple[list[int], float]], count: int, workers: int) -> list[int]:
    """Indexes in the order to run them: ``units`` (indexes run on one worker, their
    seconds), longest first, each to the block with the fewest seconds and room for it."""
    sizes = block_sizes(count, workers)
    blocks: list[list[int]] = [[] for _ in range(workers)]
    seconds = [0.0] * workers
    for indexes, cost in sorted(units, key=lambda unit: -unit[1]):  # stable: ties as collected
        fits = [b for b in range(workers) if len(blocks[b]) + len(indexes) <= sizes[b]]
        # none fits (a large unit dealt late): the emptiest, one block a little long
        block = (
            min(fits, key=lambda b: seconds[b])
            if fits
            else max(range(workers), key=lambda b: sizes[b] - len(blocks[b]))
        )
        blocks[block].extend(indexes)
        seconds[block] += cost
    return [index for block in blocks for index in block]


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
    units: dict[str, tuple[list[int], float]] = {}
    for index, item in enumerate(items):
        module = item.nodeid.split("::")[0]
        new = module not in known_modules and item.get_closest_marker("slow") is not None
        cost = known.get(item.nodeid, UNKNOWN_SLOW if new else 0.0)
        key = module if _module_scoped(item) else item.nodeid
        indexes, total = units.get(key, ([], 0.0))
        units[key] = ([*indexes, index], total + cost)
    items[:] = [items[i] for i in balanced(list(units.values()), len(items), workers)]
