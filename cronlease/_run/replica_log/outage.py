"""Database faults as the replica sees them: each reported once when it starts and once
when it ends, never once per tick.

A database fault costs the ticks it touches ("not acquired", docs/design.md §1).
Three kinds, told apart because each asks something else of the operator:

- **no answer** (an outage: connection refused or broken, timeouts; a plain
  :class:`StoreError`): one WARNING "database unavailable", DatabaseUnavailable,
  and ``down_for`` feeds :meth:`Scheduler.health`, which tolerates a short one;
- **an answer that is an error** (:class:`StatementError`: a missing column, a
  revoked privilege, §5.19): the database is up and will refuse the statement
  until the schema or the grants change: one ERROR naming the statement and
  the tasks, no outage, and a health problem at once;
- **the SQLite file deleted or replaced** (:class:`DatabaseFileChanged`, §5.17):
  one ERROR, DatabaseUnavailable, and a health problem until the path names the
  replica's file again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cronlease._events import DatabaseRecovered, DatabaseUnavailable, EventBus
from cronlease._stats import Stats
from cronlease.errors import DatabaseFileChanged, StatementError, StoreError

__all__ = ["REMIND_SECONDS", "OutageLog"]

#: while the database stays unavailable, one more WARNING this often: a replica that
#: never connected (a full server) must not fall silent after its first line
REMIND_SECONDS = 600.0

logger = logging.getLogger("cronlease")


class OutageLog:
    """Counts failed lease statements and reports each fault once, start and end."""

    def __init__(
        self, stats: Stats, events: EventBus, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._stats = stats
        self._events = events
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._reminded_at = 0.0
        self._skipped = 0
        self._refused_since: float | None = None
        self._refusal = ""
        self._refused = 0
        self._file_changed: str | None = None

    @property
    def down_since(self) -> float | None:
        """Monotonic time the current outage began; None while the database answers."""
        return self._down_since

    @property
    def down_for(self) -> float | None:
        """How long the current outage has lasted; None while the database answers."""
        down_since = self._down_since
        return None if down_since is None else self._clock() - down_since

    @property
    def file_changed(self) -> str | None:
        """Why no lease is taken: the SQLite file is no longer the one at its path."""
        return self._file_changed

    def problems(self) -> list[str]:
        """What health() must report that a status read cannot tell."""
        problems = [] if self._file_changed is None else [self._file_changed]
        refused_since = self._refused_since
        if refused_since is not None:
            problems.append(
                f"the database refuses this replica's statements (for "
                f"{time.monotonic() - refused_since:.0f} s): {self._refusal}"
            )
        return problems

    def failed(self, what: str, error: StoreError, *, ticks: int = 1) -> None:
        """``ticks`` ticks (``what``, for the log) were skipped because of ``error``."""
        self._stats.add("lease_errors", ticks)
        if isinstance(error, DatabaseFileChanged):
            self._lost_file(what, error)
        elif isinstance(error, StatementError):
            self._answered(what, error, ticks)
        else:
            self._no_answer(what, error, ticks)

    def _no_answer(self, what: str, error: StoreError, ticks: int) -> None:
        with self._lock:
            self._skipped += ticks
            now = self._clock()
            if self._down_since is not None:
                if now - self._reminded_at < REMIND_SECONDS:
                    logger.debug("%s skipped: %s", what, error)
                    return
                self._reminded_at = now
                down_for, skipped = now - self._down_since, self._skipped
            else:
                self._down_since = self._reminded_at = now
                down_for = None
        if down_for is not None:
            logger.warning(
                "database still unavailable after %.0f s; %d tick(s) skipped so far: %s",
                down_for,
                skipped,
                error,
            )
            return
        logger.warning(
            "database unavailable, %s skipped (and later ticks until it answers): %s", what, error
        )
        self._events.emit(DatabaseUnavailable(error=str(error)))

    def _answered(self, what: str, error: StatementError, ticks: int) -> None:
        with self._lock:
            self._refused += ticks
            self._refusal = str(error)
            if self._refused_since is not None:
                logger.debug("%s skipped: %s", what, error)
                return
            self._refused_since = time.monotonic()
        logger.error(
            "the database answered with an error (not an outage; it will refuse the statement "
            "until its schema or grants change), %s skipped and later ticks until it accepts "
            "it: %s",
            what,
            error,
        )

    def _lost_file(self, what: str, error: DatabaseFileChanged) -> None:
        with self._lock:
            first, self._file_changed = self._file_changed is None, str(error)
        if not first:
            logger.debug("%s skipped: %s", what, error)
            return
        logger.error("%s; %s skipped, and every later tick", error, what)
        self._events.emit(DatabaseUnavailable(error=str(error)))

    def succeeded(self) -> None:
        """A lease statement worked: every fault that was reported has ended."""
        if self._file_changed is not None:
            with self._lock:
                self._file_changed = None
            logger.warning("the SQLite lease file is the one this replica opened again")
        if self._refused_since is not None:
            with self._lock:
                refused_since, refused = self._refused_since, self._refused
                self._refused_since, self._refused = None, 0
            if refused_since is not None:
                logger.warning(
                    "the database accepts the statements again after %.1f s; "
                    "%d tick(s) were skipped",
                    time.monotonic() - refused_since,
                    refused,
                )
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is None:
                return
            outage, skipped = self._clock() - self._down_since, self._skipped
            self._down_since, self._skipped = None, 0
        logger.warning(
            "database available again after %.1f s; %d tick(s) were skipped", outage, skipped
        )
        self._events.emit(DatabaseRecovered(outage=outage, skipped_ticks=skipped))
