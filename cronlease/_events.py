"""Events a replica emits, and the listeners that observe them.

Subscribe with :meth:`cronlease.Scheduler.listen`::

    def report(event: RunFinished) -> None:
        if event.outcome == "failed":
            sentry_sdk.capture_message(f"{event.task} failed: {event.error}")

    scheduler.listen(report, RunFinished)

Listeners run synchronously on the thread that emits (a worker, the
heartbeat thread, ...): keep them quick. An exception in a listener is
logged and never disturbs the scheduler.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from cronlease._lease.model import Outcome

__all__ = [
    "ClockChecked",
    "DatabaseRecovered",
    "DatabaseUnavailable",
    "Event",
    "EventBus",
    "RunFinished",
    "RunLost",
    "RunStarted",
    "SkipReason",
    "TickSkipped",
]

logger = logging.getLogger("cronlease")

SkipReason = Literal[
    "held",  # another replica holds the lease (an older slot still running)
    "taken",  # another replica took (or already ran) this slot
    "contended",  # another replica won the race for it
    "paused",  # the task is paused fleet-wide
    "future",  # the slot is ahead of the database clock (this host's clock is fast)
    "error",  # the database failed
    "misfire",  # the tick started later than its grace
    "overlap",  # this replica's previous run of the task is still going
    "shutdown",  # the scheduler is stopping
    "capacity",  # every worker of this replica was busy until the tick's grace ran out
]


@dataclass(frozen=True)
class Event:
    """Base of all events; ``at`` is this host's wall clock when it was emitted."""

    at: float = field(default_factory=time.time, kw_only=True)


@dataclass(frozen=True)
class RunStarted(Event):
    """A run began on this replica: a tick's, a retry's or recovery's (``attempt``), or a
    manual one (``manual``). ``slot`` is the tick's instant in ms since the epoch."""

    task: str
    slot: int
    fence: int
    manual: bool
    #: 1 for the tick's own run, 2, 3, ... for its retries and recoveries
    attempt: int = 1
    #: this attempt follows one whose replica died mid-run
    recovering: bool = False


@dataclass(frozen=True)
class RunFinished(Event):
    """A run ended on this replica with its recorded ``outcome`` (``succeeded``, ``failed``,
    ``lost``, ``timed_out``, ...), its ``duration`` in seconds and, unless it succeeded,
    its ``error`` text."""

    task: str
    slot: int
    fence: int
    manual: bool
    outcome: Outcome
    duration: float
    error: str | None
    attempt: int = 1


@dataclass(frozen=True)
class TickSkipped(Event):
    """A tick was not run on this replica; ``reason`` says why (``taken`` and
    ``contended`` are normal: another replica has it)."""

    task: str
    slot: int
    reason: SkipReason


@dataclass(frozen=True)
class RunLost(Event):
    """A run's lease ran out under it (a renewal found the row taken): recorded ``lost``.

    Named for the run, as :class:`RunStarted` and :class:`RunFinished` are: the
    exception a run's own code meets is :class:`~cronlease.errors.LeaseLostError`.
    """

    task: str
    slot: int
    fence: int


@dataclass(frozen=True)
class DatabaseUnavailable(Event):
    """This replica cannot use the database: emitted once when an outage starts, or when
    its SQLite file was deleted or replaced under it."""

    error: str


@dataclass(frozen=True)
class DatabaseRecovered(Event):
    """The database answers again: the ``outage`` lasted that many seconds and cost
    ``skipped_ticks`` ticks on this replica."""

    outage: float
    skipped_ticks: int


@dataclass(frozen=True)
class ClockChecked(Event):
    """This host's clock was measured against the database's: ``skew`` is the database
    clock minus this host's, ``round_trip`` the measurement's round trip, in seconds."""

    skew: float  # database clock minus this host's clock, seconds
    round_trip: float


E = TypeVar("E", bound=Event)


class EventBus:
    """Delivers events to the listeners subscribed to their type (or a base of it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # replaced, never mutated: emit() and wants() read it without the lock
        self._listeners: tuple[tuple[Callable[[Event], object], tuple[type[Event], ...]], ...] = ()
        # the full names of cronlease's own tasks (replaced, never mutated): no listener
        # hears of them (docs/design.md §4.11)
        self._silenced: frozenset[str] = frozenset()

    def listen(self, listener: Callable[[E], object], *types: type[E]) -> Callable[[], None]:
        """Call ``listener`` for each event of ``types`` (all if none); returns unsubscribe."""
        # The listener only ever receives events of the types it asked for.
        entry: tuple[Callable[[Event], object], tuple[type[Event], ...]] = (
            listener,  # type: ignore[assignment]
            types or (Event,),
        )
        with self._lock:
            self._listeners = (*self._listeners, entry)

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._listeners:
                    listeners = list(self._listeners)
                    listeners.remove(entry)
                    self._listeners = tuple(listeners)

        return unsubscribe

    def after_fork(self) -> None:
        """In a forked child: a fresh lock (a parent thread may have held this one)."""
        self._lock = threading.Lock()

    def silence(self, task: str) -> None:
        """Deliver no event of the task ``task`` (a full name): a built-in task's."""
        with self._lock:
            self._silenced = self._silenced | {task}

    def wants(self, kind: type[Event]) -> bool:
        """Whether some listener would receive an event of ``kind``.

        Hot paths ask first, so a tick of many tasks builds no event objects
        that nobody receives.
        """
        return any(issubclass(kind, types) for _, types in self._listeners)

    def emit(self, event: Event) -> None:
        # the one place built-in tasks are kept from listeners: every event about a task
        # (TickSkipped, RunStarted, RunFinished, RunLost) has its full name in ``task``
        if self._silenced and getattr(event, "task", None) in self._silenced:
            return
        listeners = [fn for fn, types in self._listeners if isinstance(event, types)]
        for listener in listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("a cronlease listener failed on %s", type(event).__name__)
