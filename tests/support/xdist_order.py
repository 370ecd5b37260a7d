"""The order tests are handed to pytest-xdist's workers in: longest first, balanced.

``--dist worksteal`` (pyproject.toml) hands the collection out in contiguous
shares, one per worker (the first ``n // workers`` tests to the first, and so
on), and a worker that runs dry later takes the far half of the longest queue.
The run ends when the last long test ends, so the order decides the wall time:
with the process tests merely first, one worker's share held most of the
minute-long ones back to back while the others stole quick tests.

Here each test is given its duration from the last recorded run
(``tests/durations.json``; a test not in it is guessed by its ``slow`` marker),
the tests are dealt longest first to the share with the least work that still
has room (the shares keep xdist's sizes), and each share is ordered longest
first, so a thief takes the quick end. Every worker computes the same order from
the same file, as xdist requires.

``CRONLEASE_TEST_DURATIONS=PATH pytest -n 4`` records a run's durations to PATH
(each test's setup, call and teardown), to refresh the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

__all__ = ["DURATIONS_FILE", "GUESS_FAST", "GUESS_SLOW", "balanced", "load", "save", "share_sizes"]

T = TypeVar("T")

DURATIONS_FILE = Path(__file__).resolve().parent.parent / "durations.json"
#: the guesses for a test the file does not know: the median of each kind when measured
GUESS_SLOW = 5.0
GUESS_FAST = 0.05
#: tests quicker than this are not written to the file (they are the guess's kind)
KEEP_ABOVE = 0.5


def share_sizes(count: int, workers: int) -> list[int]:
    """How many tests xdist's worksteal hands each worker at the start (its own loop)."""
    sizes = []
    remaining = count
    for i in range(workers):
        size = remaining // (workers - i)
        sizes.append(size)
        remaining -= size
    return sizes


def balanced(items: Sequence[T], cost: Callable[[T], float], workers: int) -> list[T]:
    """``items`` reordered: ``workers`` shares of xdist's sizes, each holding about as
    much work as the others, each longest first."""
    if workers <= 1:
        return sorted(items, key=cost, reverse=True)  # stable: equal costs keep their order
    sizes = share_sizes(len(items), workers)
    shares: list[list[T]] = [[] for _ in sizes]
    loads = [0.0] * workers
    for item in sorted(items, key=cost, reverse=True):
        open_shares = [i for i in range(workers) if len(shares[i]) < sizes[i]]
        i = min(open_shares, key=lambda i: (loads[i], i))
        shares[i].append(item)
        loads[i] += cost(item)
    return [item for share in shares for item in share]


def load(path: Path = DURATIONS_FILE) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def save(durations: Mapping[str, float], path: Path) -> None:
    kept = {k: round(v, 1) for k, v in sorted(durations.items()) if v >= KEEP_ABOVE}
    path.write_text(json.dumps(kept, indent=0, sort_keys=True) + "\n", encoding="utf-8")
