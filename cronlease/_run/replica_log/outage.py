"""Database faults as the replica sees them: each reported once when it starts and once
when it ends, never once per tick.

A database fault costs the ticks it touches ("not acquired", docs/design.md §1).
Three kinds, told apart because each asks something else of the operator:

- **no answer** (an outage: connection refused or broken, timeouts; a plain
  :class:`StoreError`; or a statement of the tick path left without any answer for
  :data:`STALL_SECONDS`, the network dropping its packets): one WARNING "database
  unavailable", DatabaseUnavailable, and ``down_for`` feeds :meth:`Scheduler.health`,
  which tolerates a short one;
- **an answer that is an error** (:class:`StatementError`: a missing column, a
  revoked privilege, §5.19): the database is up and will refuse the statement
  until the schema or the grants change: one ERROR naming the statement and
  the tasks, no outage, and a health problem at once;
- **the SQLite file deleted or replaced** (:class:`DatabaseFileChanged`, §5.17):
  one ERROR, DatabaseUnavailable, and a health problem until the path names the
  replica's file again.

**An outage is one line at its start and one at its end**, and the end line counts
every tick of this replica's tasks that came due during it and that it did not run,
whichever stage dropped it: a failed acquisition (``failed``), and every other skip
(:meth:`OutageLog.absorbs`: a misfire of a tick that waited behind an unanswered
statement, a tick left to peers, a capacity skip) decided while the outage lasts,
or after it for a tick fired before its end. Such skips are said in the end line,
not on their own. A wait with no answer (:meth:`OutageLog.waiting`, around each
statement of the tick path, the membership and lease renewals) starts the outage
at the wait's start once it has lasted :data:`STALL_SECONDS` (:meth:`OutageLog.watch`,
called by APScheduler's thread every second, or when the wait ends). While a replica's
acquirer runs (:meth:`OutageLog.defer_end`), the end line waits for its next pass,
which decides the ticks queued behind the outage (:meth:`OutageLog.say_end`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cronlease._events import DatabaseRecovered, DatabaseUnavailable, EventBus
from cronlease._stats import Stats
from cronlease.errors import DatabaseFileChanged, StatementError, StoreError

__all__ = ["REMIND_SECONDS", "STALL_SECONDS", "OutageLog"]

#: while the database stays unavailable, one more WARNING this often: a replica that
#: never connected (a full server) must not fall silent after its first line
REMIND_SECONDS = 600.0
#: a statement left this long without an answer is an outage, though no error came back
#: (a network that drops packets: TCP retransmits until tcp_user_timeout). As long as a
#: connection may take to open (CONNECT_TIMEOUT: a connect unanswered that long is an
#: outage already), several times the round trips of a slow but working database (250 ms
#: each way: ~1 s a statement), and within the 6 s a member row lives: the replica says
#: so before the fleet stops counting on it (docs/design.md §4.4, outage rule)
STALL_SECONDS = 5.0


@dataclass(eq=False)
class _Wait:
    """A statement sent and not answered yet."""

    since: float  # monotonic
    what: str | Callable[[], str]
    declared: bool = False  # it started (or joined) an outage


@dataclass(frozen=True)
class _Ended:
    """An outage that ended (the database answered), its line not said yet."""

    since: float  # monotonic
    at: float  # monotonic
    wall: float  # epoch seconds: a tick fired at or before this belongs to it


logger = logging.getLogger("cronlease")


class OutageLog:
    """Counts failed lease statements and reports each fault once, start and end."""

    def __init__(
        self,
        stats: Stats,
        events: EventBus,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        self._clock = clock
        self._wall = wall
        self._stall = stall_seconds
        self._waits: dict[int, _Wait] = {}
        self._ended: _Ended | None = None
        self._last_end = float("-inf")  # monotonic: when the last outage ended
        # set while an acquirer runs: it says the end line once it decided the backlog
        self._wake: Callable[[], None] | None = None
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
        if self._ended is not None:
            self.say_end()  # the previous outage's end, before this one's start
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

    # --- waits with no answer -----------------------------------------------

    @contextmanager
    def waiting(self, what: str | Callable[[], str]) -> Iterator[None]:
        """Around one statement (``what`` it does, for the line; a callable is called only
        if it is said): past :data:`STALL_SECONDS` without an answer, it is an outage from
        the moment it was sent."""
        wait = _Wait(self._clock(), what)
        key = id(wait)
        with self._lock:
            self._waits[key] = wait
        try:
            yield
        except BaseException:
            with self._lock:
                del self._waits[key]
            raise  # an error came back: the caller reports it, with its message
        with self._lock:
            del self._waits[key]
        # an answer that came past the threshold, before the watch saw the wait: an
        # outage all the same (the end follows at once)
        if not wait.declared and self._clock() - wait.since >= self._stall:
            self._stalled(wait)

    def watch(self) -> None:
        """Declare the outage of a wait past :data:`STALL_SECONDS` (called every second)."""
        if not self._waits:
            return
        now = self._clock()
        with self._lock:
            stalled = [
                w for w in self._waits.values() if not w.declared and now - w.since >= self._stall
            ]
        if stalled:
            self._stalled(min(stalled, key=lambda wait: wait.since))

    def _stalled(self, wait: _Wait) -> None:
        """``wait`` has had no answer for too long: the outage starts when it was sent."""
        with self._lock:
            now = self._clock()
            for other in self._waits.values():
                if now - other.since >= self._stall:
                    other.declared = True  # one outage, one line, however many waited
            wait.declared = True
            if self._down_since is not None or wait.since <= self._last_end:
                # down already (its statements fail), or it was sent during the outage
                # that just ended (a connection that died in it): the same outage
                return
        if self._ended is not None:
            self.say_end()
        with self._lock:
            if self._down_since is not None:
                return
            self._down_since = self._reminded_at = wait.since
        waited = now - wait.since
        what = wait.what() if callable(wait.what) else wait.what
        logger.warning(
            "database unavailable: no answer for %.0f s to %s (its ticks are skipped until it "
            "answers)",
            waited,
            what,
        )
        self._events.emit(DatabaseUnavailable(error=f"no answer for {waited:.0f} s to {what}"))

    def absorbs(self, slot: int) -> bool:
        """A tick (its ``slot``) was not run for another reason than a failed statement:
        True when it is the outage's — decided while it lasts, or fired before its end
        (it waited behind it) while its end line is not said yet: counted there, and
        said there, not on its own."""
        if self._down_since is None and self._ended is None:  # the common case, no lock
            return False
        with self._lock:
            ended = self._ended
            if self._down_since is None and (ended is None or slot / 1000 > ended.wall):
                return False
            self._skipped += 1
        return True

    # --- the end --------------------------------------------------------------

    def defer_end(self, wake: Callable[[], None] | None) -> None:
        """While set, an outage's end line waits for :meth:`say_end`, and ``wake`` is
        called when an outage ends (the acquirer: it decides what queued behind it)."""
        self._wake = wake

    @property
    def ending(self) -> tuple[float, float] | None:
        """(monotonic, epoch) time an outage ended whose line is not said yet."""
        ended = self._ended
        return None if ended is None else (ended.at, ended.wall)

    def say_end(self) -> None:
        """Say the end line of the outage that ended, if not said yet."""
        with self._lock:
            ended, skipped = self._ended, self._skipped
            if ended is None:
                return
            self._ended, self._skipped = None, 0
        outage = ended.at - ended.since
        logger.warning(
            "database available again after %.1f s; %d tick(s) were skipped", outage, skipped
        )
        self._events.emit(DatabaseRecovered(outage=outage, skipped_ticks=skipped))

    def answered(self) -> None:
        """A statement was answered (a renewal, a membership read): an outage is over
        unless a wait of this replica still has no answer past the threshold."""
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is None:
                return
            now = self._clock()
            if any(now - wait.since >= self._stall for wait in self._waits.values()):
                return  # part of this replica still waits on the database
            self._ended = _Ended(self._down_since, now, self._wall())
            self._down_since, self._last_end = None, now
            wake = self._wake
        if wake is None:
            self.say_end()
        else:
            wake()

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
        self.answered()
