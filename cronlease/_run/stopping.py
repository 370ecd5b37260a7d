"""One time bound for a whole shutdown, shared by every wait in it, and logged.

A shutdown waits for several things in turn — the acquirer and catch-up
threads, the runs in progress, the finisher's last write — and orchestrators
give the whole process one limit (Kubernetes: 30 s from SIGTERM to SIGKILL).
So there is one :class:`Deadline` per shutdown and each wait takes what is
left of it, never a fixed allowance of its own. A second signal *hurries* it:
every wait still to come, and the one in progress, ends at once.

Waits are made in slices (:data:`SLICE_SECONDS`) so a hurry set from a
signal handler — a plain flag: a handler must not take a lock the thread it
interrupted may hold — is noticed within a slice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SLICE_SECONDS", "Deadline", "ExitAfterStop", "seconds_text"]

logger = logging.getLogger("cronlease")

#: the longest a wait goes without looking at the hurry flag
SLICE_SECONDS = 0.1


def seconds_text(seconds: float) -> str:
    """A duration for a log line, three digits at most: ``0.16 ms``, ``66 ms``,
    ``3.52 s``, ``24.6 s``, ``20 s``, ``125 s``."""
    if seconds < 0.001:
        return f"{seconds * 1000:.2g} ms"
    if seconds < 0.9995:  # not "1000 ms"
        return f"{seconds * 1000:.0f} ms"
    if seconds < 1000:
        return f"{seconds:.3g} s"
    return f"{seconds:.0f} s"


@dataclass(frozen=True)
class ExitAfterStop:
    """The process exits as soon as the replica stopped (``cronlease run``): runs still
    going then die with it, so the stop itself records them ``interrupted``, terminates
    their commands and waits up to ``command_seconds`` for those to end, before it says
    the replica stopped. ``hurried``: a second signal (SIGKILL the commands at once)."""

    command_seconds: float
    hurried: Callable[[], bool] = lambda: False


class Deadline:
    """Until when a shutdown may wait; ``hurried`` (read often) ends every wait early."""

    def __init__(self, seconds: float, hurried: Callable[[], bool] = lambda: False) -> None:
        if seconds < 0:
            raise ValueError("a shutdown deadline cannot be negative")
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self._hurried = hurried

    @property
    def hurried(self) -> bool:
        return self._hurried()

    def remaining(self) -> float:
        """Seconds left (0 once hurried)."""
        if self._hurried():
            return 0.0
        return max(0.0, self.end - time.monotonic())

    def wait(self, done: Callable[[float], bool], what: str | Callable[[], str]) -> bool:
        """Wait until ``done(seconds)`` — which may block up to ``seconds`` — says True.

        Says what it waits for (INFO) if it has to wait at all, and why it
        stopped (WARNING) if it gave up. True if done. ``what`` may be a callable,
        asked each time it is said (what is left changes while it waits).
        """
        said = what if callable(what) else lambda: what
        if done(0.0):
            return True
        started = time.monotonic()
        limit = self.remaining()
        described = said()  # what the done line names: what was waited for
        # a wait over within its first slice is not worth two lines (DEBUG)
        announced = False
        while True:
            left = self.remaining()
            if left <= 0:
                break
            if done(min(left, SLICE_SECONDS)):
                took = seconds_text(time.monotonic() - started)
                level = logging.INFO if announced else logging.DEBUG
                logger.log(level, "shutdown: waited %s for %s", took, described)
                return True
            if not announced:
                described = said()
                logger.info("shutdown: waiting up to %s for %s", seconds_text(limit), described)
                announced = True
        waited = time.monotonic() - started
        if self._hurried():
            logger.warning(
                "shutdown: stopped waiting for %s after %s (asked again)",
                said(),
                seconds_text(waited),
            )
        elif abs(waited - self.seconds) < SLICE_SECONDS:
            logger.warning(
                "shutdown: gave up waiting for %s after %s, the shutdown's limit",
                said(),
                seconds_text(waited),
            )
        else:  # earlier waits of this shutdown took the rest
            logger.warning(
                "shutdown: gave up waiting for %s after %s (the shutdown's limit is %s)",
                said(),
                seconds_text(waited),
                seconds_text(self.seconds),
            )
        return False

    def join(self, thread: threading.Thread | None, what: str) -> bool:
        """Wait for ``thread`` to end (not for the calling thread itself)."""
        if thread is None or thread is threading.current_thread():
            return True

        def ended(seconds: float) -> bool:
            if seconds > 0:
                thread.join(seconds)
            return not thread.is_alive()

        return self.wait(ended, what)
