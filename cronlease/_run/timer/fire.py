"""The APScheduler glue: fired jobs become ticks, handed to the acquirer a pass at a time.

APScheduler 3 does not pass a job its scheduled run time; an executor's
``_do_submit_job(job, run_times)`` receives it, so the slot is the fire time
APScheduler computed, never the clock at execution. Backlogs are coalesced
by APScheduler (``coalesce=True``) into the latest fire time.

Tasks whose schedules are identical (same fingerprint: kind, expression,
time zone, anchor) share one APScheduler job, a *schedule group*: their
triggers would fire at the same instants anyway, and APScheduler's per-job
work (run-time computation, job-store update, submission event) then costs
once per distinct schedule per tick, not once per task. Everything that is
per task happens after the fire, on the tick path (docs/design.md §4).

APScheduler calls ``submit_job`` once per due job within one pass of
``_process_jobs``. :class:`BatchingScheduler` tells the executor when a pass
ends; the executor then hands every tick of that pass, as one batch, to the
:class:`~cronlease._run.acquisition.acquirer.Acquirer`. It also wakes at least every
second and watches for wall-clock steps (:mod:`cronlease._run.timer.clock_steps`):
APScheduler computes its waits from the wall clock, so after a step back it
would sleep until its jobs' old next run times. On a step it re-anchors its
jobs at the new wall-clock time, on its own thread, through APScheduler's
public job API (its ``_jobstores_lock`` is reentrant and taken by each call).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from apscheduler.executors.base import BaseExecutor
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_PAUSED
from apscheduler.triggers.interval import IntervalTrigger

from cronlease._roles import can_run
from cronlease._run.acquisition.acquirer import Acquirer, Fired
from cronlease._run.acquisition.membership import digest_text, task_key
from cronlease._run.runner import TickRunner
from cronlease._run.stopping import Deadline
from cronlease._run.timer.clock_steps import WAKE_INTERVAL, StepWatch
from cronlease._run.timer.ticks import Tick
from cronlease._task import Task

__all__ = ["BatchingScheduler", "Firing", "LeaseExecutor"]

logger = logging.getLogger("cronlease")


class LeaseExecutor(BaseExecutor):  # type: ignore[misc]
    """Turns fired jobs into ticks for the acquirer; runs the winners on worker threads.

    ``groups`` maps each APScheduler job id to the tasks it fires (a schedule
    group). It is read at every fire, so the scheduler may replace an entry
    (with a new tuple) while running to add a task.
    """

    def __init__(self, runner: TickRunner, groups: Mapping[str, Sequence[Task]]) -> None:
        super().__init__()
        self._groups = groups
        self._workers = runner.workers
        # this start's threads: close_pool closes these, whatever a later start opens
        self._close_threads = self._workers.open()
        self._acquirer = Acquirer(runner)
        self._watch_waits = runner.outage.watch
        # the ticks of the current _process_jobs pass, until flush() (scheduler thread)
        self._pending: Fired = []
        self._pending_lock = threading.Lock()
        #: set when the scheduler calls flush() after each pass (BatchingScheduler)
        self.flush_after_pass = False
        self._acquirer_thread: threading.Thread | None = None

    def start(self, scheduler: Any, alias: str) -> None:
        super().start(scheduler, alias)
        self.flush_after_pass = isinstance(scheduler, BatchingScheduler)
        self._acquirer.start()

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        members = self._groups.get(job.id)
        if not members:
            return
        fire_time = run_times[-1]
        ticks = [Tick(task, fire_time) for task in members]
        decided = functools.partial(self._run_job_success, job.id, [])
        with self._pending_lock:
            self._pending.append((decided, ticks))
        if not self.flush_after_pass:
            self.flush()

    def flush(self) -> None:
        """Send the ticks submitted since the last flush to the acquirer, as one batch."""
        with self._pending_lock:
            pending, self._pending = self._pending, []
        if pending:
            self._acquirer.put(pending)

    def after_pass(self) -> None:
        """After each pass of APScheduler's (at least every second): the pass's ticks to
        the acquirer, and a statement unanswered too long declared an outage (the
        acquirer may be the thread that waits)."""
        self.flush()
        self._watch_waits()

    def submit(self, work: Callable[[], object]) -> None:
        """Run a won tick's work on the worker pool: how catch-up
        (:mod:`cronlease._run.startup`) dispatches its winners, like the acquirer's."""
        self._workers.submit(work)

    def shutdown(self, wait: bool = True) -> None:
        """APScheduler's call when it shuts down: ask the acquirer to stop (joined by
        :meth:`stop`, within the shutdown's deadline)."""
        self._acquirer_thread = self._acquirer.stop()

    def join(self, deadline: Deadline) -> None:
        """Join the acquirer: its last batch's winners are then on the pool."""
        deadline.join(self._acquirer_thread, "the acquirer's last batch")

    def close_pool(self) -> None:
        self._close_threads()


def quiet_apscheduler() -> None:
    """APScheduler's INFO lines ("Adding job tentatively", "Job ... executed") are its
    internals, not the user's story: its logger goes to WARNING unless the application
    set a level on it (``logging.getLogger("apscheduler").setLevel(logging.INFO)``
    before start brings them back)."""
    apscheduler_logger = logging.getLogger("apscheduler")
    if apscheduler_logger.level == logging.NOTSET:
        apscheduler_logger.setLevel(logging.WARNING)


class BatchingScheduler(BackgroundScheduler):  # type: ignore[misc]
    """A BackgroundScheduler that tells its executors when a pass over due jobs has ended,
    wakes at least every :data:`WAKE_INTERVAL` seconds, and re-anchors its jobs when the
    wall clock steps.

    Everything here runs on APScheduler's own thread, inside its main loop.
    """

    #: jobs to run at once after a step (the clock check: measure the new skew now)
    run_after_step: tuple[str, ...] = ()
    #: told after each pass the earliest next run time (epoch seconds; None: no job) of
    #: the jobs of jobstore ``"default"`` (the tasks' schedules: upkeep jobs live in
    #: another), for the member row's renewal plan (docs/design.md §4.4)
    on_due: Callable[[float | None], None] | None = None

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._steps = StepWatch()

    def _process_jobs(self) -> float | None:
        if self.state == STATE_PAUSED:
            return None
        step = self._steps.step()
        if step is not None:
            self._reanchor(step)
        try:
            wait_seconds: float | None = super()._process_jobs()
        finally:
            for executor in list(self._executors.values()):
                if isinstance(executor, LeaseExecutor):
                    executor.after_pass()
        if self.on_due is not None:
            self.on_due(self.next_due())
        # None: no job at all (or paused), nothing to watch for until one is added
        return None if wait_seconds is None else min(wait_seconds, WAKE_INTERVAL)

    def next_due(self) -> float | None:
        """The earliest next run time of jobstore ``"default"``'s jobs, epoch seconds
        (None: none, or every one paused). Under APScheduler's jobstore lock: a job
        being moved is never read missing."""
        with self._jobstores_lock:
            store = self._jobstores.get("default")
            due = store.get_next_run_time() if store is not None else None
        return None if due is None else float(due.timestamp())

    def _reanchor(self, step: float) -> None:
        """Move the jobs to the new wall-clock time after a step of ``step`` seconds.

        Back: each job's next run time lies up to ``-step`` seconds in the new
        clock's future; it becomes the trigger's first fire time from now, so the
        replica fires at once (slots the fleet already ran are refused ``taken`` by
        the lease's slot cursor: which ones those are only the database knows).
        Forward: the jobs are due already; APScheduler coalesces each one's
        jumped-over fire times into the latest (``coalesce=True``), which the tick
        path admits only within its grace: one tick per task at most, never a burst.
        """
        now = datetime.now(self.timezone)
        moved = 0
        for job in self.get_jobs():
            due = job.next_run_time
            if due is None:  # a paused job stays paused
                continue
            fire = now if job.id in self.run_after_step else None
            if fire is None and step < 0:
                fire = job.trigger.get_next_fire_time(None, now)
            if fire is None or fire >= due:
                continue
            try:
                self.modify_job(job.id, next_run_time=fire)
            except JobLookupError:  # removed meanwhile
                continue
            moved += job.id not in self.run_after_step
        logger.warning(
            "this host's wall clock stepped %+.1f s (against the monotonic clock): %s; "
            "fix NTP here if this repeats",
            step,
            f"{moved} schedule(s) re-anchored at the new time (slots the fleet already "
            "ran are refused by the lease)"
            if step < 0
            else "the ticks stepped over are not run: each schedule fires once, at the "
            "latest of them, run only within its grace",
        )


def _never_called() -> None:  # APScheduler wants a callable per job; the executor runs the task
    raise AssertionError("cronlease tasks are run by LeaseExecutor")


class Firing:
    """APScheduler as cronlease runs it: one job per schedule group, leased through the
    :class:`LeaseExecutor`, plus replica-local upkeep jobs that are not leased."""

    def __init__(
        self,
        runner: TickRunner,
        upkeep: Sequence[tuple[str, Callable[[], None], float]] = (),
    ) -> None:
        # APScheduler job id -> the tasks it fires; entries are replaced, never mutated:
        # the executor reads them from another thread
        self._groups: dict[str, tuple[Task, ...]] = {}
        # the groups added before start(), as lists: a tuple copied per task made
        # 10,000 tasks of one schedule cost 50 million copies (issue 11, item 13)
        self._unstarted: dict[str, list[Task]] | None = {}
        self._executor = LeaseExecutor(runner, self._groups)
        self._runner = runner
        # the declared tasks' digest (XOR of task_key), for the member row's task_set
        self._task_set = 0
        # and how many they are (the cohort's active window, rendezvous.active_window)
        self._task_count = 0
        self._namespace: str | None = None
        quiet_apscheduler()
        self.apscheduler = BatchingScheduler(
            timezone=timezone.utc,
            # the tasks' schedules alone in "default": its earliest next run time is the
            # replica's next due instant (BatchingScheduler.next_due)
            jobstores={"default": MemoryJobStore(), "local": MemoryJobStore()},
            executors={
                "default": self._executor,
                # replica-local upkeep: every replica measures its own clock
                "local": ThreadPoolExecutor(1),
            },
            job_defaults={
                "coalesce": True,
                # overlap and lateness are decided per tick on the tick path
                "max_instances": 1_000_000,
                "misfire_grace_time": None,
            },
        )
        self.apscheduler.run_after_step = tuple(job_id for job_id, _, _ in upkeep)
        for job_id, call, seconds in upkeep:
            self.apscheduler.add_job(
                call,
                trigger=IntervalTrigger(seconds=seconds, timezone=timezone.utc),
                id=job_id,
                name=f"cronlease {job_id.removeprefix('cronlease-').replace('-', ' ')}",
                jobstore="local",
                executor="local",
                coalesce=True,
                max_instances=1,
                misfire_grace_time=None,
            )

    def add(self, task: Task) -> None:
        """Fire ``task`` from the job of its schedule, adding the job if new.

        Members of a group have identical triggers, so a task joining a running
        group fires at the instants its own job would have fired at. A disabled
        task is not fired by its schedule (``run_now`` still runs it).
        """
        if not task.enabled:
            return
        job_id = f"cronlease-schedule:{task.schedule.fingerprint}"
        self._task_set ^= task_key(task)
        self._task_count += 1
        self._namespace = self._namespace or task.namespace
        if not can_run(task.roles, self._runner.roles):
            # in the digest all the same: the fleet's replicas declare the same tasks,
            # each fires those its roles allow (rendezvous ranks only those that can)
            return
        if self._unstarted is not None:
            waiting = self._unstarted.setdefault(job_id, [])
            waiting.append(task)
            if len(waiting) > 1:
                return
        else:
            members = self._groups.get(job_id)
            self._groups[job_id] = (*members, task) if members else (task,)
            if members:
                return
        self.apscheduler.add_job(
            _never_called,
            trigger=task.schedule.trigger,
            id=job_id,
            name=f"{task.full_name} ({task.schedule})",  # APScheduler's own lines say this
            replace_existing=True,
        )

    def change(self, removed: Iterable[Task], added: Iterable[Task]) -> None:
        """Stop firing ``removed`` and fire ``added`` (schedule rows followed, docs/design.md
        §5.37), each schedule group rebuilt once: a group's tuple rebuilt per task made
        10,000 rows of one schedule cost 50 million copies, as adding did once.

        Ticks of a removed task already fired go on down the tick path; a run in progress
        is not touched: it holds the lease, whose row (and slot cursor) the task's
        replacement shares by name."""
        digest_before = self._task_set
        dropped: dict[str, set[int]] = {}
        joining: dict[str, list[Task]] = {}
        for task, into in [(t, None) for t in removed] + [(t, joining) for t in added]:
            if not task.enabled:
                continue
            self._task_set ^= task_key(task)  # in the digest even where it cannot run
            self._task_count += 1 if into is not None else -1
            if not can_run(task.roles, self._runner.roles):
                continue
            job_id = f"cronlease-schedule:{task.schedule.fingerprint}"
            if into is None:
                dropped.setdefault(job_id, set()).add(id(task))
            else:
                into.setdefault(job_id, []).append(task)
        for job_id in {*dropped, *joining}:
            gone = dropped.get(job_id, set())
            before = (
                self._unstarted.get(job_id, [])
                if self._unstarted is not None
                else self._groups.get(job_id, ())
            )
            members = [t for t in before if id(t) not in gone] + joining.get(job_id, [])
            if self._unstarted is not None:
                if members:
                    self._unstarted[job_id] = members
                else:
                    self._unstarted.pop(job_id, None)
            elif members:
                self._groups[job_id] = tuple(members)
            else:
                self._groups.pop(job_id, None)
            if members and not before:
                self.apscheduler.add_job(
                    _never_called,
                    trigger=members[0].schedule.trigger,
                    id=job_id,
                    name=f"{members[0].full_name} ({members[0].schedule})",
                    replace_existing=True,
                )
            elif before and not members:
                with contextlib.suppress(JobLookupError):
                    self.apscheduler.remove_job(job_id)
        if self._unstarted is None and self._task_set != digest_before:
            # the member row says which tasks this replica fires (its cohort): an idle
            # replica would say the old set until its next renewal, minutes away
            self._runner.membership.renew_soon()

    def start(self) -> None:
        if self._unstarted is not None:
            self._groups.update((job, tuple(tasks)) for job, tasks in self._unstarted.items())
            for job_id, tasks in self._unstarted.items():
                if len(tasks) > 1:  # one job fires every task of a schedule
                    name = f"{tasks[0].full_name} and {len(tasks) - 1} more ({tasks[0].schedule})"
                    self.apscheduler.modify_job(job_id, name=name)
            self._unstarted = None
        self._runner.membership.start(
            lambda: digest_text(self._task_set),
            self._namespace,
            renew_now=self._runner.schema_ready,  # else the database did not answer
            tasks=lambda: self._task_count,
        )
        # after each pass: the next due instant, for the member row's renewal plan
        self.apscheduler.on_due = self._runner.membership.due
        self.apscheduler.start()

    def submit(self, work: Callable[[], object]) -> None:
        """Run won work on the worker pool (see :meth:`LeaseExecutor.submit`)."""
        self._executor.submit(work)

    def shutdown(self, deadline: Deadline) -> None:
        """Stop firing at once; join the acquirer within ``deadline``. Runs in progress
        are the tick path's to wait for; :meth:`close_pool` once nothing dispatches.
        This replica's member row goes first, so the others take its ticks at once."""
        member = self._runner.membership.stop()
        self.apscheduler.shutdown(wait=False)
        self._executor.join(deadline)
        deadline.join(member, "this replica's member row to be deleted")

    def close_pool(self) -> None:
        """Let the worker threads end once idle (work submitted later gets a thread)."""
        self._executor.close_pool()
