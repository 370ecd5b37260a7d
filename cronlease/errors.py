"""Exceptions raised by cronlease.

Every exception cronlease raises on purpose derives from one root::

    CronleaseError
    ├── ConfigError          a task declaration or config file is invalid
    ├── StoreError           the database failed; the driver error is ``__cause__``
    ├── UnknownTaskError     a name that no declared task has
    ├── SchedulerError       the scheduler was used in a state that does not allow it
    └── TaskTimeout          raised by a task (e.g. a command) that ran past its timeout;
                             the run is recorded ``timed_out``

Not getting a lease is not an error: :meth:`cronlease._lease.store.LeaseStore.acquire`
returns ``None`` for it.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CronleaseError",
    "SchedulerError",
    "StoreError",
    "TaskTimeout",
    "UnknownTaskError",
]


class CronleaseError(Exception):
    """A cronlease error."""

    def __init__(self, message: str | None = None) -> None:
        # The class docstring is the default message, as in procrastinate.
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(CronleaseError, ValueError):
    """A task declaration or configuration file is invalid."""


class StoreError(CronleaseError):
    """The lease database could not be reached or refused a statement."""


class UnknownTaskError(CronleaseError, KeyError):
    """No task with that name is declared."""

    def __str__(self) -> str:
        # KeyError.__str__ would wrap the message in quotes.
        return str(self.args[0]) if self.args else ""


class SchedulerError(CronleaseError):
    """The scheduler is not in a state that allows this call."""


class TaskTimeout(CronleaseError):
    """The task ran past its timeout and was stopped."""
