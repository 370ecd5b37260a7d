"""Warnings that would repeat every tick, logged once per streak with a count.

A task whose ticks start past their grace (``misfire``), or a replica whose
clock runs ahead of the database's (``future``), meets the same condition on
every tick until it ends: a warning per tick per replica drowned the log (84
misfire lines against 2 outage lines). So, per task and reason:

- the **first** skip of a streak is one WARNING, the message the caller
  gives (task, tick, why) and that the next ones are counted;
- the next ones are **counted**, not logged; while the streak lasts, one
  WARNING every ``summary_every`` seconds says how many so far;
- the first tick of that task that is not skipped for that reason **ends**
  the streak: one WARNING with the count, if there was more than the first.

Skips that are the replica working as meant (``overlap``: the previous run is
still going; ``capacity``: every worker was busy) are :meth:`LogStreaks.counted`
instead, at the level the streaks were made with (INFO): no line on the first,
one when the streak ends — "NAME: skipped 2 of the last 3 ticks: still
running" — and the summary every ``summary_every`` while it lasts. A task of
8 s every 3 s so logs one line per run it could start, not three.

Only the log lines are per streak: the stats counters and ``TickSkipped``
events stay per tick (the callers keep them). Thread-safe: the acquirer
thread and inline runs (catch-up, run-now) report to the same streaks.

**One line per kind and batch.** Streaks are per task: 200 tasks that fall due
together on a CPU-starved replica each started a streak at the same instant,
200 WARNING lines, then 200 more as they ended — the rest of the log unreadable
and the logging itself costing the CPU the replica lacked. So a batch of ticks
(one pass of the tick path on one thread) is said inside
:func:`one_line_per_kind`: the per-task lines of that pass (these streaks, a
lease won too late, a takeover, a late pickup, an attempt starting, a row
refused) are held, and each kind is logged once, the first task's line with
the count and names of the others (:func:`say`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["NAMES_SHOWN", "SUMMARY_EVERY", "LogStreaks", "one_line_per_kind", "say"]

#: while a streak lasts, how often a line says how many ticks it has cost so far
SUMMARY_EVERY = 600.0
#: the other tasks a line of a batch names before "and N more"
NAMES_SHOWN = 5

# this thread's batch: (logger, level, message) -> [(task, args)], in first-said order
_held = threading.local()


@contextmanager
def one_line_per_kind() -> Iterator[None]:
    """Hold the lines :func:`say` is given on this thread inside; then log each kind (one
    message) once: the first task's line, and how many more tasks, which, said the same.
    Nested, the outermost batch says them."""
    if getattr(_held, "lines", None) is not None:
        yield
        return
    lines: dict[tuple[logging.Logger, int, str], list[tuple[str, tuple[object, ...]]]] = {}
    _held.lines = lines
    try:
        yield
    finally:
        _held.lines = None
        for (logger, level, message), said in lines.items():
            _, args = said[0]
            if len(said) == 1:
                logger.log(level, message, *args)
                continue
            others = [task for task, _ in said[1:]]
            names = ", ".join(others[:NAMES_SHOWN])
            if len(others) > NAMES_SHOWN:
                names += f" and {len(others) - NAMES_SHOWN} more"
            logger.log(
                level, message + " — and %d more task(s) alike: %s", *args, len(others), names
            )


def say(logger: logging.Logger, level: int, task: str, message: str, *args: object) -> None:
    """Log a line about ``task`` now, or with its kind at the end of this thread's batch."""
    lines = getattr(_held, "lines", None)
    if lines is None or not logger.isEnabledFor(level):
        logger.log(level, message, *args, stacklevel=2)  # the caller's line, not this one
        return
    lines.setdefault((logger, level, message), []).append((task, args))


@dataclass
class _Streak:
    what: str  # "skipped past their grace", for the count lines
    count: int
    started: float  # monotonic
    logged_count: int  # the count the last line reported
    logged_at: float  # monotonic
    quiet: bool = False  # counted(): no line at its start, one at its end


class LogStreaks:
    """The open streaks of one replica stage, by (task, reason)."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        summary_every: float = SUMMARY_EVERY,
        clock: Callable[[], float] = time.monotonic,
        level: int = logging.WARNING,
    ) -> None:
        if not summary_every > 0:
            raise ValueError(f"summary_every must be positive, got {summary_every!r}")
        self._logger = logger
        self._level = level
        self._summary_every = summary_every
        self._clock = clock
        self._open: dict[tuple[str, str], _Streak] = {}
        self._lock = threading.Lock()

    def warn(self, task: str, reason: str, what: str, message: str, *args: object) -> None:
        """One more tick of ``task`` skipped for ``reason``; logs ``message % args`` if it
        starts a streak. ``what`` says what happened to the ticks in the count lines."""
        if self._one_more(task, reason, what, quiet=False):
            say(
                self._logger,
                self._level,
                task,
                message + " (%s; the next ones are counted until one is not)",
                *args,
                reason,
            )

    def counted(self, task: str, reason: str, why: str) -> None:
        """One more tick of ``task`` skipped for ``reason``, said only when the streak ends
        (or every ``summary_every``): ``why`` ends that line ("still running")."""
        self._one_more(task, reason, why, quiet=True)

    def _one_more(self, task: str, reason: str, what: str, *, quiet: bool) -> bool:
        """Count a skip; True when it starts a streak (the caller says so, or not)."""
        now = self._clock()
        with self._lock:
            streak = self._open.get((task, reason))
            if streak is None:
                self._open[(task, reason)] = _Streak(what, 1, now, 0 if quiet else 1, now, quiet)
                return True
            streak.count += 1
            if now - streak.logged_at < self._summary_every:
                return False
            since = now - streak.started
            more = streak.count - streak.logged_count
            streak.logged_count, streak.logged_at = streak.count, now
        say(
            self._logger,
            self._level,
            task,
            "%s: %d more tick(s) %s (%s); %d in a row over %.0f s, and counting",
            task,
            more,
            what,
            reason,
            streak.count,
            since,
        )
        return False

    def ended(self, task: str, reason: str) -> None:
        """A tick of ``task`` was not skipped for ``reason``: its streak, if any, is over."""
        if not self._open:  # the common case, without the lock: nothing to end
            return
        with self._lock:
            streak = self._open.pop((task, reason), None)
        if streak is None:
            return
        if streak.quiet:
            say(
                self._logger,
                self._level,
                task,
                "%s: skipped %d of the last %d ticks: %s",
                task,
                streak.count,
                streak.count + 1,
                streak.what,
            )
            return
        if streak.count == 1:
            return  # the one warning said it all
        say(
            self._logger,
            self._level,
            task,
            "%s: %d tick(s) in a row %s (%s) over %.0f s; this one was not",
            task,
            streak.count,
            streak.what,
            reason,
            self._clock() - streak.started,
        )

    @property
    def open(self) -> int:
        """How many streaks are open (for tests)."""
        return len(self._open)
