"""The finisher thread: outcomes of runs from one batch recorded together.

Runs dispatched from a batch of ticks end at about the same moment; the
finisher collects them and hands them, as one list, to a record callback
(one ``finish_many`` statement). It waits up to FINISH_LINGER_SECONDS for
runs of the batch still going, so a tick of many short tasks costs about one
finishing statement. A release is delayed by at most that; no start ever is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["FINISH_LINGER_SECONDS", "Finisher"]

logger = logging.getLogger("cronlease")

#: how long the finisher waits for other runs of a batch to end before it writes
FINISH_LINGER_SECONDS = 0.02

T = TypeVar("T")


class Finisher(Generic[T]):
    """Collects ended runs and records them in groups, on a thread started on first use."""

    def __init__(self, record: Callable[[list[T]], None]) -> None:
        self._record = record
        self._changed = threading.Condition()
        self._queue: list[T] = []
        self._running = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def started(self) -> None:
        """Count a dispatched run as going: the finisher waits for it before writing."""
        with self._changed:
            self._running += 1

    def hold(self) -> None:
        """Count a batch still handing out runs as going, until :meth:`release`.

        Its first runs can end before the last are handed out; without the
        hold they would be written alone (a transaction more per tick).
        """
        self.started()

    def release(self) -> None:
        with self._changed:
            self._running -= 1
            if self._running == 0 and self._queue:
                self._changed.notify_all()

    def ended(self, item: T) -> None:
        """A counted run ended: record ``item`` with the others that end about now."""
        with self._changed:
            self._running -= 1
            self._queue.append(item)
            # The thread waits for a first entry, then for the last run of the
            # batch to end: wake it for those, not for each of a thousand runs.
            if len(self._queue) == 1 or self._running == 0:
                self._changed.notify_all()
            if self._thread is None or not self._thread.is_alive():
                self._closed = False
                self._thread = threading.Thread(
                    target=self._loop, name="cronlease-finisher", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._changed:
                while not self._queue and not self._closed:
                    self._changed.wait()
                if not self._queue:
                    return
                deadline = time.monotonic() + FINISH_LINGER_SECONDS
                while self._running > 0 and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(remaining)
                batch, self._queue = self._queue, []
            try:
                self._record(batch)
            except Exception:  # the thread must outlive any batch it records
                logger.exception("unexpected error recording %d finished run(s)", len(batch))

    def stop(self) -> threading.Thread | None:
        """Write what is queued, then stop the thread (started again if runs end later);
        returns the thread, to be joined within the shutdown's deadline."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            return self._thread

    def close(self, timeout: float = 10.0) -> None:
        """:meth:`stop`, then wait up to ``timeout`` for the last write."""
        thread = self.stop()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)
