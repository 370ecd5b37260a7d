"""Database outages as the replica sees them: one warning when one starts, one when it ends.

A database fault costs the ticks it touches ("not acquired", docs/design.md §1)
and is logged once per outage, not once per tick; ``down_since`` feeds
:meth:`Scheduler.health`. A SQLite file deleted or replaced under the replica
(docs/design.md §5.17) is no outage that passes: one ERROR, and ``file_changed``
says so to health() until the path names the replica's file again.
"""

from __future__ import annotations

import logging
import threading
import time

from cronlease._events import DatabaseRecovered, DatabaseUnavailable, EventBus
from cronlease._stats import Stats
from cronlease.errors import DatabaseFileChanged, StoreError

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
        self._file_changed: str | None = None

    @property
    def down_since(self) -> float | None:
        """Monotonic time the current outage began; None while the database answers."""
        return self._down_since

    @property
    def file_changed(self) -> str | None:
        """Why no lease is taken: the SQLite file is no longer the one at its path."""
        return self._file_changed

    @property
    def down_for(self) -> float | None:
        """How long the current outage has lasted; None while the database answers."""
        down_since = self._down_since
        return None if down_since is None else time.monotonic() - down_since

    def problems(self) -> list[str]:
        """What health() must report that a status read cannot tell."""
        changed = self._file_changed
        return [] if changed is None else [changed]

    def failed(self, what: str, error: StoreError) -> None:
        self._stats.add("lease_errors")
        if isinstance(error, DatabaseFileChanged):
            self._lost_file(what, error)
            return
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

    def _lost_file(self, what: str, error: DatabaseFileChanged) -> None:
        with self._lock:
            first, self._file_changed = self._file_changed is None, str(error)
        if not first:
            logger.debug("%s skipped: %s", what, error)
            return
        logger.error("%s; %s skipped, and every later tick", error, what)
        self._events.emit(DatabaseUnavailable(error=str(error)))

    def succeeded(self) -> None:
        if self._file_changed is not None:
            with self._lock:
                self._file_changed = None
            logger.warning("the SQLite lease file is the one this replica opened again")
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
