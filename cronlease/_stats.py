"""Counters a replica keeps about its ticks, for logs, tests and metrics."""

from __future__ import annotations

import threading
from collections import Counter

__all__ = ["Stats"]


class Stats:
    """Thread-safe named counters (``ticks_missed``, ``lease_errors``, ``runs_failed``, ...)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def after_fork(self) -> None:
        """In a forked child: a fresh lock (a parent thread may have held this one)."""
        self._lock = threading.Lock()

    def add(self, name: str, amount: int = 1) -> None:
        if not amount:  # nothing to count (every tick of a batch was a built-in task's)
            return
        with self._lock:
            self._counts[name] += amount

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def __getitem__(self, name: str) -> int:
        with self._lock:
            return self._counts[name]
