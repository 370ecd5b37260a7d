"""One daemon thread that runs a call while the caller makes another.

Acquisition sends a large batch as two statements at once, on two pooled
connections, so the database works on both halves in parallel. Unlike
``concurrent.futures.ThreadPoolExecutor``'s workers, which the interpreter
joins at exit, a daemon thread never keeps a process alive; the result comes
back as a standard :class:`concurrent.futures.Future`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["SideThread"]

T = TypeVar("T")


class SideThread:
    """Runs submitted calls one at a time on a daemon thread started on first use."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, call: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="cronlease-acquirer-side", daemon=True
                )
                self._thread.start()
        self._calls.put((call, future))
        return future

    def _loop(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            call, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to the caller, who decides
                future.set_exception(exc)

    def close(self) -> None:
        with self._lock:
            if self._thread is not None:
                self._calls.put(None)
                self._thread = None
