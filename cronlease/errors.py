"""Exceptions raised by cronlease.

Every exception cronlease raises on purpose derives from one root::

    CronleaseError
    ├── ConfigError          a task declaration or config file is invalid
    │   ├── ConfigFileError  in a config file; the one-line message names the file,
    │   │                    the TOML line, the task and the key
    │   ├── ScheduleError    a schedule row refused: its job, arguments, options or name
    │   │   └── UnknownJobError  a job no registry given and no live replica offers
    │   └── StaleScheduleError  a schedule changed since the version the writer read
    ├── StoreError           the database failed; the driver error is ``__cause__``
    │   ├── StatementError   it answered, with an error about the statement: not an outage
    │   │   └── RowRefused   it answered, refusing a value or a constraint of one row
    │   └── DatabaseFileChanged  the SQLite file was deleted or replaced under the replica
    ├── LeaseLostError       an attempt's fence or holder is no longer its lease row's:
    │                        the writes of its transaction must not commit
    ├── UnknownTaskError     a name that no declared task has
    │   └── UnknownScheduleError  a name that no schedule row has
    ├── SchedulerError       the scheduler was used in a state that does not allow it
    ├── CommandError         raised by a command task that could not start, exited
    │                        nonzero or was terminated; the run is recorded ``failed``
    ├── TaskTimeout          raised by a task (e.g. a command) that ran past its timeout;
    │                        the run is recorded ``timed_out``
    └── SendError            a tick's message was not confirmed by its broker (a sender
                             task, e.g. a Celery beat entry); the run is recorded ``failed``

Not getting a lease is not an error: :meth:`cronlease.LeaseStore.acquire`
returns a ``Refusal`` saying why.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "CommandError",
    "ConfigError",
    "ConfigFileError",
    "CronleaseError",
    "DatabaseFileChanged",
    "LeaseLostError",
    "RowRefused",
    "ScheduleError",
    "SchedulerError",
    "SendError",
    "StaleScheduleError",
    "StatementError",
    "StoreError",
    "TaskTimeout",
    "UnknownJobError",
    "UnknownScheduleError",
    "UnknownTaskError",
]


class CronleaseError(Exception):
    """A cronlease error."""

    def __init__(self, message: str | None = None) -> None:
        # The class docstring is the default message, as in procrastinate.
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(CronleaseError, ValueError):
    """A task declaration or configuration file is invalid."""


class ConfigFileError(ConfigError):
    """A config file is invalid; ``str()`` is one line naming the file, line, task (or
    job) and key."""

    def __init__(
        self,
        path: Path | str,
        message: str,
        *,
        task: str | None = None,
        key: str | None = None,
        line: int | None = None,
        job: str | None = None,
    ) -> None:
        self.path = str(path)
        self.task = task
        self.job = job
        self.key = key
        self.line = line
        self.detail = " ".join(message.split())  # one line, whatever the cause said
        where = self.path if line is None else f"{self.path}:{line}"
        subject = []
        if task is not None:
            subject.append(f"task {task!r}")
        if job is not None:
            subject.append(f"job {job!r}")
        if key is not None:
            subject.append(f"key {key!r}")
        prefix = f"{where}: " + (", ".join(subject) + ": " if subject else "")
        super().__init__(prefix + self.detail)


class ScheduleError(ConfigError):
    """A schedule cannot be written: its job, arguments, options or name break a rule a
    replica would refuse it for. Nothing was written."""


class UnknownJobError(ScheduleError):
    """A schedule names a job that no registry given and no live replica offers; the
    message lists the known ones."""


class StaleScheduleError(ConfigError):
    """A schedule changed since the version the writer read (``expected_version``):
    nothing was written. ``version`` and ``changed_by`` are the newer version's."""

    def __init__(self, message: str, *, version: int | None = None, changed_by: str = "") -> None:
        self.version = version
        self.changed_by = changed_by
        super().__init__(message)


class StoreError(CronleaseError):
    """The lease database could not be reached or refused a statement."""


class StatementError(StoreError):
    """The database answered, with an error about the statement (a missing table or
    column, a revoked privilege): it is up, so this is not an outage (docs/design.md §5.19)."""


class RowRefused(StatementError):
    """The database answered, and refused a value or a constraint of a row: not an
    outage. A batch refused so is retried item by item, so one bad row costs one task."""


class DatabaseFileChanged(StoreError):
    """The SQLite lease file was deleted or replaced under the replica, which takes no
    lease on a file that is no longer the one at its path (docs/design.md §5.17)."""


class LeaseLostError(CronleaseError):
    """This attempt no longer holds its task's lease: its writes must not commit."""


class UnknownTaskError(CronleaseError, KeyError):
    """No task with that name is declared."""

    def __str__(self) -> str:
        # KeyError.__str__ would wrap the message in quotes.
        return str(self.args[0]) if self.args else ""


class UnknownScheduleError(UnknownTaskError):
    """No schedule row has that name."""


class SchedulerError(CronleaseError):
    """The scheduler is not in a state that allows this call."""


class CommandError(CronleaseError):
    """A command task failed: it could not start, exited nonzero or was terminated."""


class TaskTimeout(CronleaseError):
    """The task ran past its timeout and was stopped."""


class SendError(CronleaseError):
    """A tick's message was not confirmed by its broker: the run is recorded ``failed``
    with the broker's error, and the sender says the outage once, not once per tick."""
