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

__all__ = ["SLICE_SECONDS", "Deadline"]

logger = logging.getLogger("cronlease")

#: the longest a wait goes without looking at the hurry flag
SLICE_SECONDS = 0.1


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

    def wait(self, done: Callable[[float], bool], what: str) -> bool:
        """Wait until ``done(seconds)`` — which may block up to ``seconds`` — says True.

        Says what it waits for (INFO) if it has to wait at all, and why it
        stopped (WARNING) if it gave up. True if done.
        """
        if done(0.0):
            return True
        started = time.monotonic()
        left = self.remaining()
        if left > 0:
            logger.info("shutdown: waiting up to %.3g s for %s", left, what)
        while True:
            left = self.remaining()
            if left <= 0:
                break
            if done(min(left, SLICE_SECONDS)):
                logger.info("shutdown: %s done after %.3g s", what, time.monotonic() - started)
                return True
        waited = time.monotonic() - started
        if self._hurried():
            logger.warning(
                "shutdown: stopped waiting for %s after %.3g s (asked again)", what, waited
            )
        else:
            logger.warning(
                "shutdown: gave up waiting for %s after %.3g s (the limit is %.3g s)",
                what,
                waited,
                self.seconds,
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
