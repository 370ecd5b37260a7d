"""cronlease: periodic tasks on every replica, each tick run once, held by a database lease."""

from __future__ import annotations

from cronlease._events import (
    ClockChecked,
    DatabaseRecovered,
    DatabaseUnavailable,
    Event,
    LeaseLost,
    RunFinished,
    RunStarted,
    TickSkipped,
)
from cronlease._lease.model import (
    AcquireRequest,
    AttemptCandidate,
    AttemptRequest,
    Finish,
    Lease,
    LeaseInfo,
    Refusal,
    RunRecord,
)
from cronlease._lease.store import LeaseStore
from cronlease._scheduler import Scheduler
from cronlease._task import RunContext, Task
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
    SchedulerError,
    StatementError,
    StoreError,
    TaskTimeout,
    UnknownTaskError,
)

__all__ = [
    "AcquireRequest",
    "AttemptCandidate",
    "AttemptRequest",
    "ClockChecked",
    "CommandError",
    "ConfigError",
    "ConfigFileError",
    "CronleaseError",
    "DatabaseFileChanged",
    "DatabaseRecovered",
    "DatabaseUnavailable",
    "Event",
    "Finish",
    "Lease",
    "LeaseInfo",
    "LeaseLost",
    "LeaseLostError",
    "LeaseStore",
    "Refusal",
    "RowRefused",
    "RunContext",
    "RunFinished",
    "RunRecord",
    "RunStarted",
    "Schedule",
    "Scheduler",
    "SchedulerError",
    "StatementError",
    "StoreError",
    "Task",
    "TaskTimeout",
    "TickSkipped",
    "UnknownTaskError",
    "__version__",
]
