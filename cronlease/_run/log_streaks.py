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

Only the log lines are per streak: the stats counters and ``TickSkipped``
events stay per tick (the callers keep them). Thread-safe: the acquirer
thread and inline runs (catch-up, run-now) report to the same streaks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SUMMARY_EVERY", "LogStreaks"]

#: while a streak lasts, how often a line says how many ticks it has cost so far
SUMMARY_EVERY = 600.0


@dataclass
class _Streak:
    what: str  # "skipped past their grace", for the count lines
    count: int
    started: float  # monotonic
    logged_count: int  # the count the last line reported
    logged_at: float  # monotonic


class LogStreaks:
    """The open streaks of one replica stage, by (task, reason)."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        summary_every: float = SUMMARY_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not summary_every > 0:
            raise ValueError(f"summary_every must be positive, got {summary_every!r}")
        self._logger = logger
        self._summary_every = summary_every
        self._clock = clock
        self._open: dict[tuple[str, str], _Streak] = {}
        self._lock = threading.Lock()

    def warn(self, task: str, reason: str, what: str, message: str, *args: object) -> None:
        """One more tick of ``task`` skipped for ``reason``; logs ``message % args`` if it
        starts a streak. ``what`` says what happened to the ticks in the count lines."""
        now = self._clock()
        with self._lock:
            streak = self._open.get((task, reason))
            if streak is None:
                self._open[(task, reason)] = _Streak(what, 1, now, 1, now)
            else:
                streak.count += 1
                if now - streak.logged_at < self._summary_every:
                    return
                since = now - streak.started
                more = streak.count - streak.logged_count
                streak.logged_count, streak.logged_at = streak.count, now
        if streak is None:
            self._logger.warning(
                message + " (%s; the next ones are counted until one is not)", *args, reason
            )
            return
        self._logger.warning(
            "%s: %d more tick(s) %s (%s); %d in a row over %.0f s, and counting",
            task,
            more,
            what,
            reason,
            streak.count,
            since,
        )

    def ended(self, task: str, reason: str) -> None:
        """A tick of ``task`` was not skipped for ``reason``: its streak, if any, is over."""
        if not self._open:  # the common case, without the lock: nothing to end
            return
        with self._lock:
            streak = self._open.pop((task, reason), None)
        if streak is None or streak.count == 1:
            return  # the one warning said it all
        self._logger.warning(
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
