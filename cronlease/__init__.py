"""cronlease: periodic tasks on every replica, each tick run once, held by a database lease.

What an application writes against is here: :class:`Scheduler`, the
:class:`Task` it declares and the :class:`RunContext` a run receives,
:class:`Schedule`, the schedules kept in the database (:class:`Schedules`), the
events a listener receives, the errors, and the status
values the scheduler returns (:class:`Health`, :class:`ClockCheck`; the whole
model is :mod:`cronlease.status`). :class:`LeaseStore` is the database without
a scheduler (a status page's source); its rows and requests are
:mod:`cronlease.store`'s.
"""

from __future__ import annotations

import warnings

from cronlease._events import (
    ClockChecked,
    DatabaseRecovered,
    DatabaseUnavailable,
    Event,
    RunFinished,
    RunLost,
    RunStarted,
    TickSkipped,
)
from cronlease._lease.store import LeaseStore
from cronlease._scheduler import Scheduler
from cronlease._schedules.model import ScheduleChange, Schedules, StoredSchedule
from cronlease._status import Health
from cronlease._task import RunContext, Task
from cronlease._timing.clock import ClockCheck
from cronlease._timing.schedule import Schedule
from cronlease._version import __version__
from cronlease.errors import (
    CommandError,
    ConfigError,
    ConfigFileError,
    CronleaseError,
    DatabaseFileChanged,
    LeaseLostError,
    RowRefused,
    ScheduleError,
    SchedulerError,
    SendError,
    StaleScheduleError,
    StatementError,
    StoreError,
    TaskTimeout,
    UnknownJobError,
    UnknownScheduleError,
    UnknownTaskError,
)

__all__ = [
    "ClockCheck",
    "ClockChecked",
    "CommandError",
    "ConfigError",
    "ConfigFileError",
    "CronleaseError",
    "DatabaseFileChanged",
    "DatabaseRecovered",
    "DatabaseUnavailable",
    "Event",
    "Health",
    "LeaseLostError",
    "LeaseStore",
    "RowRefused",
    "RunContext",
    "RunFinished",
    "RunLost",
    "RunStarted",
    "Schedule",
    "ScheduleChange",
    "ScheduleError",
    "Scheduler",
    "SchedulerError",
    "Schedules",
    "SendError",
    "StaleScheduleError",
    "StatementError",
    "StoreError",
    "StoredSchedule",
    "Task",
    "TaskTimeout",
    "TickSkipped",
    "UnknownJobError",
    "UnknownScheduleError",
    "UnknownTaskError",
    "__version__",
]

#: old names, still found (with a DeprecationWarning): old name -> (its object, the new name)
_RENAMED = {"LeaseLost": (RunLost, "RunLost")}


def __getattr__(name: str) -> object:
    if name in _RENAMED:
        value, new = _RENAMED[name]
        warnings.warn(f"cronlease.{name} is now cronlease.{new}", DeprecationWarning, stacklevel=2)
        return value
    raise AttributeError(f"module 'cronlease' has no attribute {name!r}")
