"""Database outages as the replica sees them: one warning when one starts, one when it ends.

A database fault costs the ticks it touches ("not acquired", docs/design.md §1)
and is logged once per outage, not once per tick; ``down_since`` feeds
:meth:`Scheduler.health`.
"""

from __future__ import annotations

import logging
import threading
import time

from cronlease._events import DatabaseRecovered, DatabaseUnavailable, EventBus
from cronlease._stats import Stats
from cronlease.errors import StoreError

__all__ = ["OutageLog"]

logger = logging.getLogger("cronlease")


class OutageLog:
    """Counts failed lease statements and reports each outage once, start and end."""

    def __init__(self, stats: Stats, events: EventBus) -> None:
        self._stats = stats
        self._events = events
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._skipped = 0

    @property
    def down_since(self) -> float | None:
        """Monotonic time the current outage began; None while the database answers."""
        return self._down_since

    def failed(self, what: str, error: StoreError) -> None:
        self._stats.add("lease_errors")
        with self._lock:
            self._skipped += 1
            if self._down_since is not None:
                logger.debug("%s skipped: %s", what, error)
                return
            self._down_since = time.monotonic()
        logger.warning(
            "database unavailable, %s skipped (and later ticks until it answers): %s", what, error
        )
        self._events.emit(DatabaseUnavailable(error=str(error)))

    def succeeded(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is None:
                return
            outage, skipped = time.monotonic() - self._down_since, self._skipped
            self._down_since, self._skipped = None, 0
        logger.warning(
            "database available again after %.1f s; %d tick(s) were skipped", outage, skipped
        )
        self._events.emit(DatabaseRecovered(outage=outage, skipped_ticks=skipped))
