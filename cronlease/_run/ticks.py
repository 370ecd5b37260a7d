"""Values and helpers of the batched tick path: ticks, batches, per-schedule timing.

Kept apart from :mod:`cronlease._run.runner`, which decides and runs ticks with them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

from cronlease._task import Task

__all__ = ["Batch", "SideThread", "Tick", "Timing"]

T = TypeVar("T")


class Tick(NamedTuple):
    """One fired tick of a task, as APScheduler computed its fire time.

    ``retry_until`` marks a late-pickup retry (epoch seconds): it is not
    grace-checked again and is not retried a second time. (A named tuple:
    one is made per task per tick.)
    """

    task: Task
    fire_time: datetime
    retry_until: float | None = None


class Timing(NamedTuple):
    """What a fire time means for every task of one schedule: computed once per batch."""

    slot: int
    lateness: float
    ttl: float
    grace: float
    tolerance: float


@dataclass
class Batch:
    """What :meth:`TickRunner.acquire_ticks` decided for ticks that fell due together."""

    #: the winners' runs, to call on worker threads (each returns the outcome)
    runs: list[Callable[[], str]] = field(default_factory=list)
    #: late pickups: (monotonic time to retry at, the retry tick)
    retries: list[tuple[float, Tick]] = field(default_factory=list)


class Pending(Generic[T]):
    """The result of a call running on a :class:`SideThread`."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    def _set(self, value: T | None, error: BaseException | None) -> None:
        self._value, self._error = value, error
        self._done.set()

    def result(self) -> T:
        """Wait for the call; return its value or raise its exception."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


class SideThread:
    """One daemon thread that runs a call while the caller makes another.

    The batched path acquires a large batch as two statements at once, on two
    pooled connections, so the database works on both halves in parallel. A
    daemon thread, started on first use, never keeps a process alive.
    """

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Pending[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, call: Callable[[], T]) -> Pending[T]:
        pending: Pending[T] = Pending()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="cronlease-acquirer-side", daemon=True
                )
                self._thread.start()
        self._calls.put((call, pending))
        return pending

    def _loop(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            call, pending = item
            try:
                pending._set(call(), None)
            except BaseException as exc:  # handed to the caller, who decides
                pending._set(None, exc)

    def close(self) -> None:
        with self._lock:
            if self._thread is not None:
                self._calls.put(None)
                self._thread = None
