"""The Scheduler: declare tasks, start a replica, stop it cleanly."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import threading
import weakref
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from types import FrameType, MappingProxyType
from typing import Any, TypeVar, overload

from sqlalchemy.engine import Engine

from cronlease._events import ClockChecked, Event, EventBus
from cronlease._lease.database import adopt_engine, create_store_engine
from cronlease._lease.model import Outcome, check_task_name
from cronlease._lease.names import normal_form
from cronlease._lease.store import LeaseStore
from cronlease._run.fire import Firing
from cronlease._run.housekeeping import housekeeping_task
from cronlease._run.runner import TickRunner
from cronlease._run.startup import report_schedule_conflicts, start_catch_up
from cronlease._stats import Stats
from cronlease._status import DeclaredTask, Health, read_status
from cronlease._task import Task
from cronlease._timing.clock import ClockCheck, SkewDetector
from cronlease.errors import ConfigError, SchedulerError, StoreError, UnknownTaskError

__all__ = ["Scheduler", "default_holder"]

F = TypeVar("F", bound=Callable[..., Any])
E = TypeVar("E", bound=Event)
CLOCK_CHECK_SECONDS = 300
logger = logging.getLogger("cronlease")


def default_holder() -> str:
    """``hostname:pid:<6 random hex>``: unique per replica, readable in ``status``."""
    return f"{socket.gethostname()[:180]}:{os.getpid()}:{secrets.token_hex(3)}"


class Scheduler:
    """One replica's scheduler. Every replica declares the same tasks on the same database.

    ``url`` defaults to ``sqlite:///cronlease.db``; a bare ``postgresql://`` URL
    uses psycopg 3. Pass ``engine=`` to reuse an engine's settings instead.
    ``namespace`` prefixes every task name, for several applications on one
    database. ``shutdown_timeout`` bounds how long :meth:`shutdown` waits for
    running tasks; ``history_retention`` (age) and ``history_keep`` (runs per task)
    bound the run history.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: Engine | None = None,
        namespace: str | None = None,
        holder: str | None = None,
        max_workers: int = 16,
        shutdown_timeout: float = 30.0,
        history_retention: object = "30d",
        history_keep: int | None = None,
    ) -> None:
        if url is not None and engine is not None:
            raise ConfigError("give a database URL or an engine, not both")
        if namespace is not None:
            namespace = check_task_name(namespace)  # its stored form (NFC)
        if max_workers < 1:
            raise ConfigError("max_workers must be at least 1")
        self.namespace = namespace
        self.holder = holder or default_holder()
        self.shutdown_timeout = shutdown_timeout
        self.stats = Stats()
        self.events = EventBus()
        self.store = LeaseStore(
            adopt_engine(engine) if engine is not None else create_store_engine(url)
        )
        self._tasks: dict[str, Task] = {}
        self._by_name: dict[str, Task] = {}
        self._max_workers = max_workers
        self._loop: asyncio.AbstractEventLoop | None = None
        self.runner = self._make_runner()
        self._firing: Firing | None = None
        self._skew: SkewDetector | None = None
        self._started_at: datetime | None = None
        self._caught_up = False
        self._stop_requested = threading.Event()
        self._lock = threading.RLock()
        housekeeping = housekeeping_task(
            self.store, lambda: sorted(self._tasks), history_retention, history_keep, namespace
        )
        if housekeeping is not None:
            self._tasks[housekeeping.full_name] = housekeeping

        self._default_holder = holder is None
        _SCHEDULERS.add(self)

    def _make_runner(self) -> TickRunner:
        return TickRunner(
            self.store,
            self.holder,
            stats=self.stats,
            loop_getter=lambda: self._loop,
            on_schema_ready=self._on_database_ready,
            events=self.events,
            max_workers=self._max_workers,
        )

    def _reset_after_fork(self) -> None:
        """In a forked child: never reuse the parent's connections, locks or dead threads.

        A scheduler that was running in the parent (e.g. started under gunicorn
        ``--preload``) is started again in the child, as a replica of its own.
        """
        self.store.engine.dispose(close=False)
        was_running = self._firing is not None
        self._firing = None
        self._loop = None
        self._skew = None
        self._lock = threading.RLock()
        self._stop_requested = threading.Event()
        # Kept across the fork (listeners stay subscribed), but a parent thread
        # may have held their locks at the instant of fork.
        self.stats.after_fork()
        self.events.after_fork()
        if self._default_holder:
            self.holder = default_holder()
        self.runner = self._make_runner()
        if was_running:
            logger.info("restarting the cronlease scheduler in forked process %s", os.getpid())
            threading.Thread(target=self.start, name="cronlease-restart", daemon=True).start()

    # --- declaring --------------------------------------------------------

    @overload
    def task(self, func: F, /) -> F: ...

    @overload
    def task(
        self,
        func: None = None,
        /,
        *,
        every: object = None,
        cron: str | None = None,
        name: str | None = None,
        timezone: str | None = None,
        anchor: datetime | None = None,
        lease_ttl: object = None,
        grace: object = None,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Callable[[F], F]: ...

    def task(self, func: Any = None, /, **options: Any) -> Any:
        """Declare a periodic task: ``@scheduler.task(every="30s")`` or ``cron="0 3 * * *"``.

        The function may take a :class:`RunContext` as its first parameter and
        may be ``async def``. Raises :class:`ConfigError` for an invalid
        declaration or a duplicate name. Returns the function unchanged.
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
        task = Task.declare(func, namespace=self.namespace, **options)
        with self._lock:
            if task.name in self._by_name:
                raise ConfigError(f"task {task.name!r} is declared twice")
            if task.full_name in self._tasks:
                raise ConfigError(f"task name {task.name!r} is reserved by cronlease")
            self._by_name[task.name] = task
            self._tasks[task.full_name] = task
            if self._firing is not None:
                self._firing.add(task)
        return task

    @property
    def tasks(self) -> Mapping[str, Task]:
        """Declared tasks by name (without namespace)."""
        return MappingProxyType(self._by_name)

    def get_task(self, name: str) -> Task:
        try:
            return self._by_name[normal_form(name)]
        except KeyError:
            raise UnknownTaskError(f"no task named {name!r} is declared") from None

    # --- lifecycle --------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._firing is not None

    def start(self) -> None:
        """Start firing in the background and return at once.

        A database that is down now does not raise: ticks are skipped with one
        warning until it answers. Started from inside a running event loop,
        ``async def`` tasks run on that loop.
        """
        with self._lock:
            if self._firing is not None:
                raise SchedulerError("the scheduler is already running")
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                self._loop = None
            self._stop_requested.clear()
            self.runner.start_accepting()
            self._started_at = datetime.now(timezone.utc)
            self._caught_up = False
            try:
                self.runner.ensure_schema()
            except StoreError as exc:
                self.runner.outage.failed("startup", exc)
            firing = Firing(
                self.runner,
                self._max_workers,
                upkeep=[("cronlease-clock-check", self._check_clock, CLOCK_CHECK_SECONDS)],
            )
            for task in self._tasks.values():
                firing.add(task)
            self._firing = firing
            firing.start()
            if self.runner.schema_ready:
                self._start_catch_up()
            logger.info(
                "cronlease replica %s started with %d task(s) on %s",
                self.holder,
                len(self._by_name),
                self.store.url,
            )

    @property
    def running_tasks(self) -> list[str]:
        """Full names of the tasks this replica is running right now."""
        return self.runner.running

    @property
    def clock_skew(self) -> ClockCheck | None:
        """The latest measurement of this host's clock against the database's."""
        return self._skew.last if self._skew else None

    def _check_clock(self) -> None:
        if not self._tasks:
            return
        if self._skew is None:
            smallest = min(task.schedule.smallest_gap() for task in self._tasks.values())
            self._skew = SkewDetector(self.store, smallest)
        try:
            check = self._skew.check()
        except StoreError as exc:
            logger.debug("clock check skipped: %s", exc)
            return
        self.events.emit(ClockChecked(skew=check.skew, round_trip=check.round_trip))

    def _on_database_ready(self) -> None:
        """First contact with the database: check the clock, compare schedules, catch up."""
        self._check_clock()
        report_schedule_conflicts(self.store.leases(sorted(self._tasks)), self._tasks, self.stats)
        if self._firing is not None:  # first contact came from a running replica's tick
            self._start_catch_up()

    def _start_catch_up(self) -> None:
        """Once per start: run the ticks missed while every replica was down, per policy."""
        with self._lock:
            if self._caught_up:
                return
            self._caught_up = True
        start_catch_up(self.runner, self.store, self._tasks, self.stats)

    def shutdown(self, wait: bool = True, timeout: float | None = None) -> None:
        """Stop firing; with ``wait``, wait for running tasks (bounded) and release their leases.

        A task still running at the time limit is recorded ``interrupted`` and
        its lease is left to expire: a lease is never released while its task
        executes.
        """
        self._stop_requested.set()
        with self._lock:
            firing, self._firing = self._firing, None
        if firing is None:
            return
        self.runner.stop_accepting()
        firing.shutdown()
        limit = self.shutdown_timeout if timeout is None else timeout
        if not wait or not self.runner.wait_idle(limit):
            self.runner.interrupt_running()
        self.runner.close()
        logger.info("cronlease replica %s stopped", self.holder)

    def run_forever(self) -> None:
        """Start; block until SIGINT, SIGTERM or :meth:`shutdown` from elsewhere; then stop."""
        previous: dict[signal.Signals, Any] = {}

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            logger.info("received %s, shutting down", signal.Signals(signum).name)
            self._stop_requested.set()

        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, on_signal)
        try:
            self.start()
            while not self._stop_requested.wait(1.0):
                pass
        finally:
            self.shutdown(wait=True)
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown(wait=True)

    # --- observing --------------------------------------------------------

    def listen(self, listener: Callable[[E], object], *types: type[E]) -> Callable[[], None]:
        """Call ``listener`` with each event of ``types`` (all if none); returns unsubscribe.

        Events: RunStarted, RunFinished, TickSkipped, LeaseLost, DatabaseUnavailable,
        DatabaseRecovered, ClockChecked (see :mod:`cronlease._events`).
        """
        return self.events.listen(listener, *types)

    def health(self, *, database_threshold: float = 60.0) -> Health:
        """Problems a probe should fail on: the database unreachable for longer than
        ``database_threshold`` seconds, a task overdue, this replica stalled (design §5.17-18)."""
        report = read_status(
            self.store,
            [DeclaredTask.of(task) for task in self._tasks.values()],
            namespace=self.namespace,
            runs=0,
            orphans=False,
            since=self._started_at,
        )
        return report.health(
            database_down_for=self.runner.outage.down_for,
            database_threshold=database_threshold,
            replica=self.runner.problems(self._tasks.values()),
        )

    # --- fleet-wide controls ---------------------------------------------

    def pause(self, name: str) -> None:
        """Pause a task on every replica (a database flag); raises StoreError if unreachable."""
        task = self.get_task(name)
        self.runner.ensure_schema()
        self.store.pause(task.full_name)

    def resume(self, name: str) -> None:
        task = self.get_task(name)
        self.runner.ensure_schema()
        self.store.resume(task.full_name)

    def run_now(self, name: str) -> Outcome | None:
        """Run a task once now, in this thread, through its lease (manual run).

        Returns the outcome, or None when the lease is held (a run is in
        progress somewhere) or the task is paused. Never consumes a scheduled tick.
        """
        return self.runner.run_now(self.get_task(name))

    def next_fire_times(self, name: str, count: int = 3) -> list[datetime]:
        return self.get_task(name).schedule.upcoming(datetime.now(timezone.utc), count)


_SCHEDULERS: weakref.WeakSet[Scheduler] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for scheduler in list(_SCHEDULERS):
        scheduler._reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
