"""The replica's clock check (docs/design.md §5.10): its skew against the database clock,
measured at first contact and every 5 minutes, emitted as ``ClockChecked``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from cronlease._events import ClockChecked, EventBus
from cronlease._lease.store import LeaseStore
from cronlease._task import Task
from cronlease._timing.clock import ClockCheck, SkewDetector
from cronlease.errors import StoreError

__all__ = ["ClockWatch"]

logger = logging.getLogger("cronlease")


class ClockWatch:
    """Measures, warns (through :class:`SkewDetector`) and emits; never raises StoreError."""

    def __init__(
        self, store: LeaseStore, events: EventBus, tasks: Callable[[], Collection[Task]]
    ) -> None:
        self._store = store
        self._events = events
        self._tasks = tasks
        self._skew: SkewDetector | None = None

    @property
    def last(self) -> ClockCheck | None:
        return self._skew.last if self._skew else None

    def reset(self) -> None:
        self._skew = None

    def check(self) -> None:
        tasks = self._tasks()
        if not tasks:
            return
        if self._skew is None:
            smallest = min(task.schedule.smallest_gap() for task in tasks)
            self._skew = SkewDetector(self._store, smallest)
        try:
            check = self._skew.check()
        except StoreError as exc:
            logger.debug("clock check skipped: %s", exc)
            return
        self._events.emit(ClockChecked(skew=check.skew, round_trip=check.round_trip))
