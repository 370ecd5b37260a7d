"""The Scheduler: declare tasks, start a replica, stop it cleanly."""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import secrets
import socket
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, TypeVar

from sqlalchemy.engine import Engine

from cronlease._declare import TaskDeclarations
from cronlease._events import Event, EventBus
from cronlease._lease.database import scheduler_engine
from cronlease._lease.model import Outcome, check_task_name
from cronlease._lease.settings import PoolKeywords
from cronlease._lease.store import LeaseStore
from cronlease._roles import replica_roles
from cronlease._run.housekeeping.attempt_poll import AttemptPoll
from cronlease._run.housekeeping.clock_watch import ClockWatch
from cronlease._run.housekeeping.pruning import housekeeping_task
from cronlease._run.housekeeping.schedule_poll import DEFAULT_POLL_SECONDS, SchedulePoll
from cronlease._run.housekeeping.watcher import watcher_task
from cronlease._run.lifecycle import interrupt_at_exit, stop_replica
from cronlease._run.runner import TickRunner
from cronlease._run.signals import stop_signals
from cronlease._run.startup import CatchUp, report_schedule_conflicts
from cronlease._run.stopping import Deadline
from cronlease._run.timer.fire import Firing
from cronlease._schedules.jobs import Jobs
from cronlease._schedules.model import Schedules
from cronlease._stats import Stats
from cronlease._status import Health, Snapshot
from cronlease._status.replica import health_snapshot, replica_health
from cronlease._task import Task
from cronlease._timing.clock import ClockCheck
from cronlease.errors import ConfigError, SchedulerError, StoreError

__all__ = ["Scheduler", "default_holder"]

E = TypeVar("E", bound=Event)
CLOCK_CHECK_SECONDS = 300
#: what shutdown takes at most, all waits included: under the 30 s orchestrators give
DEFAULT_SHUTDOWN_GRACE = 25.0
logger = logging.getLogger("cronlease")


def default_holder() -> str:
    """``hostname:pid:<6 random hex>``: unique per replica, readable in ``status``."""
    return f"{socket.gethostname()[:180]}:{os.getpid()}:{secrets.token_hex(3)}"


class Scheduler(TaskDeclarations):
    """One replica's scheduler. Every replica declares the same tasks on the same database.

    ``url`` defaults to ``sqlite:///cronlease.db``; a bare ``postgresql://`` URL
    uses psycopg 3. Pass ``engine=`` to reuse an engine's settings instead.
    ``namespace`` prefixes every task name, for several applications on one
    database. ``shutdown_grace`` (default 25 s, under the 30 s orchestrators
    give) bounds how long :meth:`shutdown` takes in all; ``shutdown_timeout`` is
    its deprecated name. ``history_retention`` (age) and ``history_keep`` (runs
    per task) bound the run history. ``restart_after_fork=True`` makes a forked
    child of a process where this scheduler runs start it again, as a replica of
    its own (gunicorn ``--preload`` with a scheduler started at import); by
    default a child only drops the inherited connections and schedules nothing.
    ``roles``: this replica runs a task with roles only if it has one of them (docs: Task
    options, "Roles"). ``schedule_poll``: how often (seconds, default 5) the replica
    looks for changed schedule rows (:attr:`schedules`): one small statement per poll
    when nothing changed.

    The pool (§8; not with ``engine=``): ``pool_size`` connections kept (1),
    ``max_overflow`` more for bursts (2), ``pool_timeout`` s a checkout waits (10),
    ``pool_idle_timeout`` s before an unused one closes (60); ``connect_args`` go to
    the driver. Each wins over the same parameter in the URL's query.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: Engine | None = None,
        namespace: str | None = None,
        holder: str | None = None,
        max_workers: int = 16,
        shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
        shutdown_timeout: float | None = None,
        history_retention: object = "30d",
        history_keep: int | None = None,
        restart_after_fork: bool = False,
        pool_size: int | None = None,
        max_overflow: int | None = None,
        pool_timeout: float | None = None,
        pool_idle_timeout: float | None = None,
        connect_args: dict[str, Any] | None = None,
        roles: Iterable[str] = (),
        schedule_poll: float = DEFAULT_POLL_SECONDS,
    ) -> None:
        if url is not None and engine is not None:
            raise ConfigError("give a database URL or an engine, not both")
        if namespace is not None:
            namespace = check_task_name(namespace)  # its stored form (NFC)
        if max_workers < 1:
            raise ConfigError("max_workers must be at least 1")
        if shutdown_timeout is not None:
            warnings.warn(
                "Scheduler(shutdown_timeout=) is deprecated: use shutdown_grace=",
                DeprecationWarning,
                stacklevel=2,
            )
            shutdown_grace = shutdown_timeout
        if not (isinstance(schedule_poll, (int, float)) and 0.05 <= schedule_poll <= 3600):
            raise ConfigError("schedule_poll must be a number of seconds from 0.05 to 3600")
        if not shutdown_grace >= 0:
            raise ConfigError("shutdown_grace must be a number of seconds, 0 or more")
        self.namespace = namespace
        self.roles = replica_roles(roles)
        self.holder = holder or default_holder()
        self.shutdown_grace = float(shutdown_grace)
        self.restart_after_fork = restart_after_fork
        self.stats = Stats()
        self._events = EventBus()
        pool = PoolKeywords(pool_size, max_overflow, pool_timeout, pool_idle_timeout)
        self.store = LeaseStore(scheduler_engine(url, engine, pool, connect_args))
        self._tasks: dict[str, Task] = {}
        self._by_name: dict[str, Task] = {}
        self._jobs = Jobs()
        self.schedule_poll = float(schedule_poll)
        # the tasks made from schedule rows, by full name: replaced whole, never mutated
        # (read without the lock by other threads)
        self._dynamic: dict[str, Task] = {}
        self._poll: SchedulePoll | None = None
        self._schedules: Schedules | None = None
        self._max_workers = max_workers
        self._loop: asyncio.AbstractEventLoop | None = None
        self.runner = self._make_runner()
        self._firing: Firing | None = None
        self._clock = ClockWatch(self.store, self._events, self._tasks.values)
        self._started_at: datetime | None = None
        self._caught_up = False
        #: the catch-ups of this start: at first contact, and of rows first read after it
        self._catch_ups: list[CatchUp] = []
        #: whether the schedule rows were read since start (those read before the catch-up
        #: are in it; rows first read after it get a catch-up of their own)
        self._rows_read = False
        self._attempts: AttemptPoll | None = None
        self._stop_requested = threading.Event()
        # set by a second signal (on the signals thread); ends every shutdown wait
        self._hurry = False
        self._lock = threading.RLock()
        housekeeping = housekeeping_task(
            self.store,
            lambda: sorted([*self._tasks, *self._dynamic]),
            history_retention,
            history_keep,
            namespace,
        )
        if housekeeping is not None:
            self._add_builtin(housekeeping)
        # whatever the tasks ask: a dead run of any task, paused or removed ones included,
        # must not stay "running" (docs/design.md §4.11)
        self._add_builtin(watcher_task(self.store, namespace))

        self._default_holder = holder is None
        _SCHEDULERS.add(self)

    def _make_runner(self) -> TickRunner:
        return TickRunner(
            self.store,
            self.holder,
            stats=self.stats,
            loop_getter=lambda: self._loop,
            on_schema_ready=self._on_database_ready,
            events=self._events,
            max_workers=self._max_workers,
            roles=self.roles,
        )

    def _on_declared(self, task: Task) -> None:
        if self._firing is not None:
            self._firing.add(task)
        if self._attempts is not None:
            self._attempts.start()

    @property
    def shutdown_timeout(self) -> float:
        """Deprecated name of :attr:`shutdown_grace`."""
        return self.shutdown_grace

    def _reset_after_fork(self) -> None:
        """In a forked child: never reuse the parent's connections, locks or dead threads.

        A scheduler that was running in the parent is started again in the
        child only with ``restart_after_fork``: a fork made for other work (a
        ``multiprocessing`` pool) must not turn into a replica that runs ticks.
        """
        self.store.engine.dispose(close=False)
        was_running = self._firing is not None
        self._firing = self._attempts = self._loop = None
        self._catch_ups = []
        self._clock.reset()
        self._lock = threading.RLock()
        self._stop_requested = threading.Event()
        # Kept across the fork (listeners stay subscribed), but a parent thread
        # may have held their locks at the instant of fork.
        self.stats.after_fork()
        self._events.after_fork()
        if self._default_holder:
            self.holder = default_holder()
        self.runner = self._make_runner()
        if was_running and self.restart_after_fork:
            logger.info("restarting the cronlease scheduler in forked process %s", os.getpid())
            threading.Thread(target=self.start, name="cronlease-restart", daemon=True).start()
        elif was_running:
            logger.debug(
                "forked process %s does not run the scheduler (restart_after_fork=False)",
                os.getpid(),
            )

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
            self._hurry = False
            self.runner.start_accepting()
            self._started_at = datetime.now(timezone.utc)
            self._caught_up = False
            try:
                self.runner.ensure_schema()
            except StoreError as exc:
                self.runner.outage.failed("startup", exc)
            firing = Firing(
                self.runner,
                upkeep=[("cronlease-clock-check", self._clock.check, CLOCK_CHECK_SECONDS)],
            )
            for task in self._tasks.values():
                firing.add(task)
            self._firing = firing
            self._dynamic = {}
            # a replica that offers no job runs no row: it reads none (no statement, no
            # thread), so replicas without jobs cost what they did before rows existed
            self._poll = (
                SchedulePoll(
                    self.store,
                    self.namespace,
                    self.holder,
                    self._jobs,
                    lambda: list(self._by_name),
                    self._apply_schedules,
                    self.runner.outage,
                    self.schedule_poll,
                    ready=self.runner.ensure_schema,
                )
                if len(self._jobs)
                else None
            )
            # the rows first, before firing starts: the replica starts with its schedules
            # (and their digest), and catch-up covers them (docs/design.md §5.37)
            loaded = self.runner.schema_ready and self._poll_now()
            self._rows_read = loaded
            firing.start()
            self._attempts = AttemptPoll(self.runner, self._attempt_tasks, firing.submit)
            self._attempts.start()
            if self._poll is not None:
                self._poll.start(first_after=self._poll.interval if loaded else 0.0)
            if self.runner.schema_ready:
                self._start_catch_up()
            logger.info(
                "cronlease replica %s started with %d task(s)%s on %s",
                self.holder,
                len(self._by_name),
                f" and {len(self._dynamic)} schedule row(s)" if self._dynamic else "",
                self.store.url,
            )

    def _poll_now(self) -> bool:
        """One poll of the schedule rows now; False when the database did not answer."""
        if self._poll is None:
            return True
        try:
            self._poll.poll()
        except StoreError as exc:
            logger.debug("schedule rows not read at start: %s", exc)
            return False
        return True

    def _apply_schedules(self, removed: Mapping[str, Task], added: Mapping[str, Task]) -> None:
        """The poll thread's change of the tasks made from schedule rows (§5.37)."""
        with self._lock:
            if self._firing is not None:
                self._firing.change(removed.values(), added.values())
            dynamic = {name: t for name, t in self._dynamic.items() if name not in removed}
            dynamic.update(added)
            self._dynamic = dynamic
            if self._attempts is not None and any(t.wants_attempts for t in added.values()):
                self._attempts.start()
            first_read, self._rows_read = not self._rows_read, True
            if first_read and added and self._caught_up and self._firing is not None:
                # read only now (the database was down at start), after the catch-up of
                # first contact began without them: theirs is the same, for them alone
                self._start_one_catch_up(added)

    @property
    def schedules(self) -> Schedules:
        """The schedules kept in this scheduler's database and namespace, checked against
        its jobs and code tasks (:class:`cronlease.Schedules`)."""
        if self._schedules is None:
            self._schedules = Schedules(
                store=self.store,
                namespace=self.namespace,
                jobs=self._jobs,
                code_tasks=lambda: list(self._by_name),
            )
        return self._schedules

    @property
    def running_tasks(self) -> list[str]:
        """Full names of the tasks this replica is running right now."""
        return self.runner.running

    @property
    def skipped_ticks(self) -> dict[str, dict[str, int]]:
        """Ticks skipped here since start, by full name and reason (``TaskStatus.skipped``)."""
        return self.runner.skips.by_task()

    @property
    def clock_skew(self) -> ClockCheck | None:
        """The latest measurement of this host's clock against the database's."""
        return self._clock.last

    def _on_database_ready(self) -> None:
        """First contact with the database: check the clock, compare schedules, catch up."""
        self._clock.check()
        report_schedule_conflicts(self.store.leases(sorted(self._tasks)), self._tasks, self.stats)
        if self._firing is not None:  # first contact came from a running replica's tick
            self._start_catch_up()

    def _start_catch_up(self) -> None:
        """Once per start: run the ticks missed while every replica was down, per policy."""
        with self._lock:
            if self._caught_up or self._firing is None:
                return
            self._caught_up = True
            self._start_one_catch_up({**self._tasks, **self._dynamic})  # rows read by now

    def _start_one_catch_up(self, tasks: Mapping[str, Task]) -> None:
        assert self._firing is not None
        catch_up = CatchUp(self.runner, self.store, tasks, self.stats, self._firing.submit)
        self._catch_ups.append(catch_up)
        catch_up.start()

    def shutdown(self, wait: bool = True, timeout: float | None = None) -> None:
        """Stop firing; with ``wait``, wait for running tasks, all within ``timeout``
        (default :attr:`shutdown_grace`).

        A run still going at the limit (or at once with ``wait=False``) is not
        interrupted: it keeps renewing its lease until its task returns, then is
        recorded with its real outcome and releases the lease. If the process
        exits first, it is recorded ``interrupted`` and its lease expires by
        itself: a lease is never released while its task executes.
        """
        self._stop_requested.set()
        with self._lock:
            firing, self._firing = self._firing, None
            catch_ups, self._catch_ups = self._catch_ups, []
            attempts, self._attempts = self._attempts, None
            poll, self._poll = self._poll, None
        if firing is None:
            return
        poll_thread = poll.stop() if poll is not None else None
        limit = self.shutdown_grace if timeout is None else timeout
        deadline = Deadline(max(0.0, limit) if wait else 0.0, hurried=lambda: self._hurry)
        stop_replica(self.runner, firing, catch_ups, deadline, wait=wait, attempts=attempts)
        deadline.join(poll_thread, "the schedule poll to withdraw this replica's jobs")
        logger.info("cronlease replica %s stopped", self.holder)

    @property
    def hurried(self) -> bool:
        """Whether :meth:`hurry` was called since the last start."""
        return self._hurry

    def hurry(self) -> None:
        """End every wait of a shutdown in progress now (a second signal)."""
        self._hurry = True

    def run_forever(self) -> None:
        """Start; block until SIGINT, SIGTERM or :meth:`shutdown` from elsewhere; then stop
        (within :attr:`shutdown_grace`; a second signal stops its waiting at once)."""
        signalled = threading.Event()

        def stop() -> None:
            signalled.set()  # start() clears the stop request: a signal before it stays
            self._stop_requested.set()

        with stop_signals(stop, self.hurry):
            try:
                self.start()
                while not signalled.is_set() and not self._stop_requested.wait(1.0):
                    pass
            finally:
                self.shutdown(wait=True)

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown(wait=True)

    # --- observing --------------------------------------------------------

    def listen(self, listener: Callable[[E], object], *types: type[E]) -> Callable[[], None]:
        """Call ``listener`` with each event of ``types`` (all if none); returns unsubscribe.

        Events: RunStarted, RunFinished, TickSkipped, RunLost, DatabaseUnavailable, ...
        """
        return self._events.listen(listener, *types)

    def health(
        self, *, database_threshold: float = 60.0, snapshot: Snapshot | None = None
    ) -> Health:
        """Problems a probe should fail on: the database unreachable for longer than
        ``database_threshold`` seconds (and why no connection can be made), a task
        overdue or failing, this replica stalled (design §5.17-18, §8). Three statements
        on its pool, unless given the ``snapshot`` read for something else (the page)."""
        # cronlease's own tasks are not the user's to alert on: a stuck watcher overdue
        # after a fleet-wide restart is no reason to fail a probe (design §4.11)
        # the rows' tasks too: their alert_after and grace are a code task's (§5.37)
        declared = [*self._tasks.values(), *self._dynamic.values()]
        tasks = [task for task in declared if not task.builtin]
        if snapshot is None:
            # the read first: the replica's state below is then as of its answer
            snapshot = health_snapshot(self.store, tasks)
        return replica_health(
            snapshot,
            tasks,
            store=self.store,
            namespace=self.namespace,
            since=self._started_at,
            threshold=database_threshold,
            skipped=self.runner.skips.by_task(),
            down_for=self.runner.outage.down_for,
            problems=self.runner.problems(tasks),
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


def _at_exit() -> None:
    """Runs still going as the interpreter exits die with its daemon threads: say so."""
    for scheduler in list(_SCHEDULERS):
        try:
            interrupt_at_exit(scheduler.runner)
        except Exception:  # exiting anyway: report, never mask the exit
            logger.exception("recording the runs interrupted at exit failed")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
