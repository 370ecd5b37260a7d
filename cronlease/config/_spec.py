"""What a valid config file declares: :class:`Config` and its :class:`TaskSpec` s.

A spec turns into a task on a scheduler (:meth:`TaskSpec.add_to`): a command
becomes a :class:`~cronlease._shell_task.CommandTask` (which enforces its own
timeout); a call's timeout is the task's ``timeout=`` (an ``async def`` call is
cancelled, a plain one recorded ``timed_out``: :mod:`cronlease._run.workers.execution`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cronlease._lease.names import normal_form
from cronlease._lease.settings import PoolKeywords
from cronlease._options import TaskOptions, kept_options
from cronlease._shell_task import CommandTask
from cronlease._task import Task
from cronlease._timing.schedule import Schedule
from cronlease.errors import ConfigError

__all__ = ["Config", "JobSpec", "JobTarget", "TaskSpec", "TaskTarget"]


class TaskTarget(Protocol):
    """What a spec is declared on: a :class:`~cronlease.Scheduler` (the config sits beside
    the scheduler, not above it: it describes tasks, the scheduler runs them)."""

    @property
    def add_task(self) -> Callable[..., Task]: ...


class JobTarget(Protocol):
    """What a ``[jobs.NAME]`` table is registered on: a :class:`~cronlease.Scheduler`."""

    @property
    def register(self) -> Callable[..., None]: ...

    @property
    def register_command(self) -> Callable[..., None]: ...


@dataclass(frozen=True)
class JobSpec:
    """One ``[jobs.NAME]`` table, validated: a job schedule rows may run (a callable or a
    command, as a task's), never a schedule of its own (docs/design.md §5.37)."""

    name: str
    call: str | None = None
    func: Callable[..., Any] | None = field(default=None, repr=False, compare=False)
    command: str | tuple[str, ...] | None = None
    shell: bool = False
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    line: int | None = None

    def add_to(self, scheduler: JobTarget) -> None:
        """Offer this job on ``scheduler``."""
        if self.command is not None:
            scheduler.register_command(
                self.name, self.command, shell=self.shell, cwd=self.cwd, env=self.env
            )
            return
        if self.func is None:
            raise ConfigError(f"job {self.name!r}: its call {self.call!r} was not imported")
        scheduler.register(self.func, name=self.name)


@dataclass(frozen=True)
class TaskSpec(TaskOptions):
    """One ``[tasks.NAME]`` table, validated: what runs, and the options a task keeps
    (the fields of :class:`~cronlease._options.TaskOptions`, keyword-only). ``func`` is
    None until calls are imported."""

    name: str
    schedule: Schedule
    call: str | None = None
    func: Callable[..., Any] | None = field(default=None, repr=False, compare=False)
    command: str | tuple[str, ...] | None = None
    shell: bool = False
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    line: int | None = None
    #: a task whose body sends each tick as a message (a Celery beat entry): the body
    sender: Callable[..., Any] | None = field(default=None, repr=False, compare=False)
    #: what it sends, for people: ``proj.tasks.report via Celery app proj.celery:app``
    sends: str | None = None

    @property
    def kind(self) -> str:
        if self.sends is not None:
            return "send"
        return "call" if self.call is not None else "command"

    @property
    def target(self) -> str:
        """What the task runs, for people: the call path or the command line."""
        if self.call is not None:
            return self.call
        if isinstance(self.command, tuple):
            return shlex.join(self.command)
        return self.command or self.sends or ""

    def function(self) -> Callable[..., Any]:
        """What the scheduler calls: a :class:`CommandTask`, a sender's body, or the
        imported callable."""
        if self.sender is not None:
            return self.sender
        if self.command is not None:
            return CommandTask(
                self.name,
                self.command,
                shell=self.shell,
                cwd=self.cwd,
                env=self.env,
                timeout=self.timeout,
            )
        if self.func is None:
            raise ConfigError(f"task {self.name!r}: its call {self.call!r} was not imported")
        return self.func

    def add_to(self, scheduler: TaskTarget, *, catchup: str | None = None) -> Task:
        """Declare this task on ``scheduler`` (its namespace applies): the same options,
        by the same names, as the decorator's (:data:`cronlease._options.OPTIONS`)."""
        options = kept_options(self)
        if self.schedule.kind == "every":
            options.update(every=self.schedule.interval, anchor=self.schedule.anchor)
        else:
            options.update(cron=self.schedule.expression, timezone=self.schedule.timezone)
        if catchup is not None:
            options["catchup"] = catchup
        if self.command is not None:
            options["timeout"] = None  # the CommandTask enforces it (it kills the process)
        return scheduler.add_task(self.function(), name=self.name, **options)


@dataclass(frozen=True)
class Config:
    """A whole config file, validated."""

    path: Path
    database: str
    database_source: str  # "file", "environment" or "default"
    #: ``[database]``: the pool settings it gives (they win over the URL's parameters)
    pool: PoolKeywords = field(default_factory=PoolKeywords)
    #: ``[database] connect_args``: passed to the driver's ``connect()``
    connect_args: Mapping[str, Any] | None = None
    namespace: str | None = None
    holder: str | None = None
    history_keep: int | None = None  # runs kept per task (docs/design.md §5.12)
    #: ``[scheduler] shutdown_grace``: what a shutdown takes at most (None: the default)
    shutdown_grace: float | None = None
    #: ``[scheduler] schedule_poll``: seconds between two reads of the schedule rows
    #: (None: the default, 5 s)
    schedule_poll: float | None = None
    #: ``[scheduler] roles``: this replica's roles (``cronlease run --role`` wins)
    roles: tuple[str, ...] = ()
    tasks: Mapping[str, TaskSpec] = field(default_factory=dict)
    #: ``[jobs.NAME]``: what schedule rows may run
    jobs: Mapping[str, JobSpec] = field(default_factory=dict)
    #: ``[celery] app``: the Celery app whose ``beat_schedule`` runs here
    celery_app: str | None = None
    #: ``[celery]``'s task options, for every beat entry
    celery_options: Mapping[str, Any] = field(default_factory=dict)

    def full_name(self, name: str) -> str:
        name = normal_form(name)  # as stored: a name typed decomposed finds its task
        return f"{self.namespace}:{name}" if self.namespace else name
