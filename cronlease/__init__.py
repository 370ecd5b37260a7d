"""cronlease: periodic tasks on every replica, each tick run once, held by a database lease."""

from __future__ import annotations

from cronlease.errors import (
    ConfigError,
    CronleaseError,
    SchedulerError,
    StoreError,
    TaskTimeout,
    UnknownTaskError,
)
from cronlease.events import (
    ClockChecked,
    DatabaseRecovered,
    DatabaseUnavailable,
    Event,
    LeaseLost,
    RunFinished,
    RunStarted,
    TickSkipped,
)
from cronlease.model import Lease, LeaseInfo, RunRecord
from cronlease.schedule import Schedule
from cronlease.scheduler import Scheduler
from cronlease.store import LeaseStore
from cronlease.task import RunContext, Task

__version__ = "0.1.0"

__all__ = [
    "ClockChecked",
    "ConfigError",
    "CronleaseError",
    "DatabaseRecovered",
    "DatabaseUnavailable",
    "Event",
    "Lease",
    "LeaseInfo",
    "LeaseLost",
    "LeaseStore",
    "RunContext",
    "RunFinished",
    "RunRecord",
    "RunStarted",
    "Schedule",
    "Scheduler",
    "SchedulerError",
    "StoreError",
    "Task",
    "TaskTimeout",
    "TickSkipped",
    "UnknownTaskError",
    "__version__",
]
