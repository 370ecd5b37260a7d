"""Run deadlines (a task's ``timeout``) on one thread of its own.

The thread sleeps until the earliest armed deadline and calls its callback;
a run that ends first disarms it. The callback runs on this thread, so it
must be short (for a sync task it writes one row: docs/design.md §4.7). The
thread is started when a deadline is armed and ends once none is left.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Armed", "Watchdog"]

logger = logging.getLogger("cronlease")


@dataclass(eq=False)
class Armed:
    """One armed deadline; :meth:`Watchdog.disarm` it when the run ends first."""

    due: float
    callback: Callable[[], None] = field(repr=False)
    cancelled: bool = False


class Watchdog:
    """Calls each armed callback at its deadline unless disarmed before; thread-safe."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Armed]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, callback: Callable[[], None]) -> Armed:
        armed = Armed(time.monotonic() + seconds, callback)
        with self._changed:
            heapq.heappush(self._heap, (armed.due, next(self._order), armed))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="cronlease-watchdog", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        return armed

    def disarm(self, armed: Armed) -> None:
        with self._changed:
            armed.cancelled = True

    def _loop(self) -> None:
        while True:
            with self._changed:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._thread = None  # the next arm() starts a new one
                    return
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                armed = heapq.heappop(self._heap)[2]
                armed.cancelled = True  # fired: a late disarm changes nothing
            try:
                armed.callback()
            except Exception:  # the thread must outlive any callback
                logger.exception("unexpected error handling a run's timeout")
