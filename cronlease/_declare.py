"""Declaring tasks on a scheduler: the decorator, :meth:`add_task` and the lookups.

A mixin of :class:`~cronlease._scheduler.Scheduler`, apart so that the
scheduler's module is about running a replica. A task declared while the
scheduler runs is handed to it (:meth:`TaskDeclarations._on_declared`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeVar, overload

from cronlease._events import EventBus, RunFinished, RunStarted
from cronlease._lease.names import normal_form
from cronlease._lease.store import LeaseStore
from cronlease._run.pings import Pinger
from cronlease._schedules.jobs import Job, Jobs
from cronlease._task import Task
from cronlease.errors import ConfigError, UnknownTaskError

__all__ = ["TaskDeclarations"]

F = TypeVar("F", bound=Callable[..., Any])


class TaskDeclarations:
    """The declared tasks of one scheduler (by full name and by name); thread-safe."""

    namespace: str | None
    store: LeaseStore
    _tasks: dict[str, Task]
    _by_name: dict[str, Task]
    _lock: threading.RLock
    _events: EventBus
    #: what schedule rows may run (docs/design.md §5.37)
    _jobs: Jobs
    #: the tasks made from schedule rows, by full name (replaced whole by the poll)
    _dynamic: dict[str, Task]
    #: made by the first task with a ping_url: a scheduler without one has no listener
    _pinger: Pinger | None = None

    def _on_declared(self, task: Task) -> None:
        """Called under the lock for each task declared; the running scheduler fires it."""

    @overload
    def task(self, func: F, /) -> F: ...

    @overload
    def task(
        self,
        func: None = None,
        /,
        *,
        name: str | None = None,
        every: object = None,
        cron: str | None = None,
        timezone: str | None = None,
        anchor: datetime | None = None,
        lease_ttl: object = None,
        grace: object = None,
        timeout: object = None,
        enabled: bool = True,
        catchup: str = "latest",
        catchup_limit: int = 10,
        retries: int = 0,
        retry_delay: object = "10s",
        recover: bool = False,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] = {},
        alert_after: int = 1,
        ping_url: str | None = None,
        jitter: object = 0,
        roles: Sequence[str] = (),
    ) -> Callable[[F], F]: ...

    def task(self, func: Any = None, /, **options: Any) -> Any:
        """Declare a periodic task: ``@scheduler.task(every="30s")`` or ``cron="0 3 * * *"``.

        The options are the keys of a ``[tasks.NAME]`` table in ``cronlease.toml``,
        checked by the same code (:mod:`cronlease._options`). The function receives
        the :class:`RunContext` in a parameter annotated ``: RunContext`` or named
        ``ctx``, never by position alone; ``args``/``kwargs`` must fit its signature.
        It may be ``async def``. ``enabled=False`` declares it without firing it.
        ``timeout=`` bounds a run: an ``async def`` task is
        cancelled; a plain function cannot be stopped, so its run is recorded
        ``timed_out`` and its lease left to expire (docs: Task options, "Timeouts").
        ``retries=N`` runs a failed scheduled slot again, up to N times, after
        ``retry_delay`` (default 10 s) doubled per attempt; ``recover=True`` runs a
        slot whose replica died mid-run again on a survivor (docs: "Retries and
        crash recovery"). ``alert_after=N``: health() and ``status --check`` report the
        task failing once N runs in a row failed (default 1; docs: Alerting).
        ``ping_url=`` pings a Healthchecks-style URL as each run starts and ends
        (docs: Alerting).
        ``jitter="30s"`` starts each scheduled tick up to that long after its slot, by an
        offset every replica derives alike from the task and slot (docs: Task options, "Jitter").
        ``roles=["reports"]`` runs it only on replicas with one of those roles
        (``Scheduler(roles=...)``; docs: Task options, "Roles").
        Raises :class:`ConfigError` for an invalid declaration or a duplicate
        name. Returns the function unchanged.
        """
        if func is not None:
            if not options:
                raise ConfigError(
                    f"task {getattr(func, '__name__', func)!r}: give every= or cron=, "
                    "e.g. @scheduler.task(every='30s')"
                )
            self.add_task(func, **options)
            return func

        def decorate(function: F) -> F:
            self.add_task(function, **options)
            return function

        return decorate

    def add_task(self, func: Callable[..., Any], **options: Any) -> Task:
        """Declare ``func`` as a task (same options as :meth:`task`) and return it."""
        if "namespace" in options:  # the scheduler's, for all its tasks
            raise ConfigError(
                f"task {options.get('name') or getattr(func, '__name__', func)!r}, "
                "key 'namespace': give it to Scheduler(namespace=), not to a task"
            )
        task = Task.declare(func, namespace=self.namespace, **options)
        with self._lock:
            if task.name in self._by_name:
                raise ConfigError(f"task {task.name!r} is declared twice")
            if task.full_name in self._tasks:
                raise ConfigError(f"task name {task.name!r} is reserved by cronlease")
            self._by_name[task.name] = task
            self._tasks[task.full_name] = task
            self._on_declared(task)
            if task.ping_url is not None and self._pinger is None:
                self._pinger = Pinger(self._ping_url_of)
                self._events.listen(self._pinger.on_event, RunStarted, RunFinished)
        return task

    @overload
    def job(self, func: F, /) -> F: ...

    @overload
    def job(self, func: None = None, /, *, name: str | None = None) -> Callable[[F], F]: ...

    def job(self, func: Any = None, /, *, name: str | None = None) -> Any:
        """Offer a function as a job that schedule rows may run: ``@scheduler.job()`` or
        ``@scheduler.job(name="export")`` (default name: the function's). A row names
        the job and gives its arguments, checked against this signature; the row never
        holds code. Returns the function unchanged."""
        if func is not None:
            self.register(func, name=name)
            return func

        def decorate(function: F) -> F:
            self.register(function, name=name)
            return function

        return decorate

    def register(self, func: Callable[..., Any], name: str | None = None) -> None:
        """Offer ``func`` as the job ``name`` (default: its ``__name__``); ConfigError for
        a name registered twice."""
        self._jobs.register(func, name)

    def register_command(
        self,
        name: str,
        command: str | Sequence[str],
        *,
        shell: bool = False,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Offer a command as the job ``name`` (a ``[jobs.NAME]`` table's ``command``):
        a schedule row that runs it gives no arguments; a run's timeout kills it."""
        line = command if isinstance(command, str) else tuple(command)
        self._jobs.add(Job(name, command=line, shell=shell, cwd=cwd, env=dict(env or {})))

    @property
    def jobs(self) -> Mapping[str, Callable[..., Any]]:
        """The jobs registered here, by name: what schedule rows may run."""
        return self._jobs

    def _ping_url_of(self, full_name: str) -> str | None:
        # a plain dict read: the listener runs on workers, without the declarations' lock
        task = self._tasks.get(full_name)
        return task.ping_url if task is not None else None

    def _add_builtin(self, task: Task) -> None:
        """Declare one of cronlease's own tasks (before start): run like any, but its
        events reach no listener (docs/design.md §4.11)."""
        assert task.builtin, task
        self._tasks[task.full_name] = task
        self._events.silence(task.full_name)

    def _attempt_tasks(self) -> list[Task]:
        """The declared tasks that want retries or recovery."""
        with self._lock:
            tasks = [*self._tasks.values(), *self._dynamic.values()]
            return [task for task in tasks if task.wants_attempts]

    @property
    def tasks(self) -> Mapping[str, Task]:
        """Declared tasks by name (without namespace)."""
        return MappingProxyType(self._by_name)

    def get_task(self, name: str) -> Task:
        """The task ``name``: declared in code, or made from a schedule row running here."""
        name = normal_form(name)
        task = self._by_name.get(name)
        if task is None:
            full = f"{self.namespace}:{name}" if self.namespace else name
            task = self._dynamic.get(full)
        if task is None:
            raise UnknownTaskError(f"no task named {name!r} is declared")
        return task
