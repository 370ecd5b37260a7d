"""The tick path of one replica, composed: stage -> check -> admit -> take a worker ->
acquire -> register -> run -> record.

:class:`TickRunner` knows nothing of APScheduler, so tests and tools can drive
ticks directly. It owns one instance of each stage and passes values from
one to the next; each is entered once per tick, and none calls into another's
internals (docs/design.md §4):

- :mod:`~cronlease._run.acquisition.staging`: who tries a fired tick, and when
  (on arrival, from the acquirer; the view is
  :mod:`~cronlease._run.acquisition.membership`'s)
- :mod:`~cronlease._run.acquisition.slot_check`: a staged tick's slot cursor read
- :mod:`~cronlease._run.acquisition.admission`: shutdown, grace, local overlap -> requests
- :mod:`~cronlease._run.workers.pool`: no more requests than free worker slots
  (:mod:`~cronlease._run.acquisition.rationing` picks which when they are fewer)
- :mod:`~cronlease._run.acquisition.leases`: one store call, refusals, late pickups
- :mod:`~cronlease._run.workers.active`: winners registered, heartbeats started
- :mod:`~cronlease._run.workers.execution`: the task called, its outcome named
- :mod:`~cronlease._run.recording.recorder`: outcome recorded, lease released

Every skip any of them decides is reported through one
:class:`~cronlease._run.acquisition.skips.Skips`. Every way a run begins goes
through the same admission and acquisition (``_decide``): the scheduled ticks
of a pass (:meth:`acquire_ticks`, from the acquirer thread, winners dispatched
to workers and recorded together by the finisher; catch-up's and the attempt
poll's rounds alike, from their threads), and — as a batch of one, run and
recorded in the caller's thread — run-now (:meth:`run_now`) and
:meth:`run_tick` (tools and tests).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone

from cronlease._events import EventBus
from cronlease._lease.model import Lease, Outcome
from cronlease._lease.store import LeaseStore
from cronlease._run.acquisition.admission import Admission, Candidate
from cronlease._run.acquisition.leases import Acquisition
from cronlease._run.acquisition.membership import Membership
from cronlease._run.acquisition.rationing import Rationing
from cronlease._run.acquisition.skips import Skips, heard
from cronlease._run.acquisition.slot_check import SlotCheck
from cronlease._run.acquisition.staging import Staging
from cronlease._run.recording.recorder import Recorder
from cronlease._run.replica_log.log_streaks import one_line_per_kind
from cronlease._run.replica_log.outage import OutageLog
from cronlease._run.replica_log.pulse import Pulse
from cronlease._run.stopping import Deadline, ExitAfterStop
from cronlease._run.timer.ticks import Decision, Tick
from cronlease._run.workers.active import ActiveRun, ActiveRuns
from cronlease._run.workers.execution import Ended, Execution
from cronlease._run.workers.pool import WorkerPool
from cronlease._stats import Stats
from cronlease._task import Task
from cronlease._timing.schedule import slot_of, time_of_slot
from cronlease.errors import StoreError

__all__ = ["TickRunner"]

logger = logging.getLogger("cronlease")

Dispatch = Callable[[Callable[[], Outcome]], object]


class TickRunner:
    """Runs ticks of declared tasks on this replica."""

    def __init__(
        self,
        store: LeaseStore,
        holder: str,
        *,
        stats: Stats | None = None,
        loop_getter: Callable[[], asyncio.AbstractEventLoop | None] = lambda: None,
        on_schema_ready: Callable[[], None] = lambda: None,
        events: EventBus | None = None,
        max_workers: int = 16,
        roles: tuple[str, ...] = (),
    ) -> None:
        self.store = store
        self.holder = holder
        self.roles = roles
        self.stats = stats or Stats()
        self.events = events or EventBus()
        self.outage = OutageLog(self.stats, self.events)
        self.pulse = Pulse()  # beaten by the acquirer, read by health()
        #: skipped ticks, counted by reason and tallied per task (a forked child makes a
        #: new runner, so a fresh tally)
        self.skips = skips = Skips(self.stats, self.events, self.outage)
        self._admission = Admission(holder, self.stats, skips, roles)
        #: this replica's member row and view of the fleet; started and stopped with
        #: the firing (cronlease/_run/timer/fire.py)
        self.membership = Membership(store, holder, self.outage, roles, max_workers)
        self._staging = Staging(self.stats, self.membership, self.outage)
        self._slot_check = SlotCheck(store, self.stats, skips, self.outage, self.ensure_schema)
        self._acquisition = Acquisition(
            store, self.stats, skips, self.outage, self.ensure_schema, self.membership
        )
        self._active = ActiveRuns(store, self.stats, self.events, self.outage)
        self._execution = Execution(self._active, self.events, loop_getter, self._timed_out)
        self._recorder = Recorder(store, self._active, self.stats, self.events)
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        self._on_schema_ready = on_schema_ready
        self._stopped = threading.Event()
        # this replica's last manual slot per task (see _manual_instant)
        self._manual_slots: dict[str, int] = {}
        self._manual_lock = threading.Lock()
        #: the replica's workers: their slots, which ticks on the pool take (docs/design.md
        #: §4.3), and their threads; whoever dispatches work to the pool takes a slot first
        #: and it is given back when the run ends
        self.workers = WorkerPool(max_workers)
        self._rationing = Rationing()
        #: set when the process exits once the replica stopped (``cronlease run``): the
        #: stop then ends the runs still going itself (cronlease/_run/lifecycle.py)
        self.exit_after_stop: ExitAfterStop | None = None

    # --- schema -----------------------------------------------------------

    @property
    def schema_ready(self) -> bool:
        return self._schema_ready

    def ensure_schema(self) -> None:
        """Create the tables once per process, then run the ready hook; raises StoreError."""
        if self._schema_ready:
            return
        with self._schema_lock:
            if not self._schema_ready:
                self.store.create_tables()
                self._schema_ready = True
                try:
                    self._on_schema_ready()
                except StoreError as exc:
                    logger.debug("start-up check skipped: %s", exc)

    # --- the tick path ----------------------------------------------------

    def stage(self, ticks: Sequence[Tick]) -> tuple[list[Tick], list[tuple[float, Tick]]]:
        """Split fired ``ticks`` into those to acquire now and [(monotonic time, tick)] to
        acquire a little later; ticks left to other replicas are dropped (the
        rendezvous staging of :mod:`cronlease._run.acquisition.staging`)."""
        return self._staging.stage(ticks)

    def acquire_ticks(
        self,
        ticks: Sequence[Tick],
        dispatch: Dispatch | None = None,
        *,
        wait_for_capacity: bool = False,
    ) -> Decision:
        """Decide ticks that fell due together (each task at most once in ``ticks``).

        Admission, then one acquisition for the survivors; refusals are
        reported, late pickups come back in :attr:`Decision.retries`. Winners
        are registered as running (heartbeats started) before their run is
        handed out: to ``dispatch`` one by one as each is registered, so the
        first start while the rest are registered, or else in
        :attr:`Decision.runs`. Call each run once, on a worker thread; its
        outcome is recorded with the others of the batch. Never raises for a
        database error.

        Only as many ticks as :attr:`workers` has free slots are sent to the
        database; each run given out holds one until it ends. The rest are
        skipped (``capacity``), or with ``wait_for_capacity`` returned in
        :attr:`Decision.starved` for the caller to offer again when a slot
        frees (:meth:`WorkerPool.when_free`) or report with
        :meth:`skip_for_capacity`.
        """
        return self._decide(ticks, dispatch, inline=False, wait_for_capacity=wait_for_capacity)

    def run_tick(
        self, task: Task, fire_time: datetime, *, catch_up: bool = False
    ) -> Outcome | None:
        """Run one tick of ``task`` in the calling thread if this replica wins it.

        Returns the recorded outcome, or None when the tick was skipped here.
        A ``catch_up`` tick (missed while every replica was down) is exempt
        from the grace. Never raises for a database error or a failing task.
        """
        return self._run_inline(Tick(task, fire_time, "catch_up" if catch_up else "scheduled"))

    def run_now(self, task: Task) -> Outcome | None:
        """A manual run, in the calling thread: through the lease (never beside a
        scheduled run), the slot cursor untouched."""
        return self._run_inline(Tick(task, self._manual_instant(task), "manual"))

    def _manual_instant(self, task: Task) -> datetime:
        """Now, or a millisecond past this replica's last manual run of ``task``: a
        manual run's slot is its instant in milliseconds, and two runs asked for within
        one millisecond shared their run row's key (the database refused the second)."""
        now = datetime.now(timezone.utc)
        with self._manual_lock:
            slot = max(slot_of(now), self._manual_slots.get(task.full_name, -1) + 1)
            self._manual_slots[task.full_name] = slot
        return now if slot == slot_of(now) else time_of_slot(slot)

    def _run_inline(self, tick: Tick) -> Outcome | None:
        """A batch of one, run here; a late pickup waits here for the held lease."""
        decision = self._decide([tick], None, inline=True)
        while decision.retries:  # at most one; it may be picked up again within its grace
            ((due, retry),) = decision.retries
            # a shutdown meanwhile ends the wait, and admission skips the retry
            self._stopped.wait(max(0.0, due - time.monotonic()))
            decision = self._decide([retry], None, inline=True)
        return decision.runs[0]() if decision.runs else None

    def _decide(
        self,
        ticks: Sequence[Tick],
        dispatch: Dispatch | None,
        *,
        inline: bool,
        wait_for_capacity: bool = False,
    ) -> Decision:
        # a batch's per-task lines, one per kind (200 late ticks: one line, not 200)
        with one_line_per_kind():
            return self._decide_batch(ticks, dispatch, inline, wait_for_capacity)

    def _decide_batch(
        self,
        ticks: Sequence[Tick],
        dispatch: Dispatch | None,
        inline: bool,
        wait_for_capacity: bool,
    ) -> Decision:
        accepting = not self._stopped.is_set()
        if accepting:  # ticks tried after the rendezvous delay: a slot taken costs no lock
            ticks = self._slot_check.check(ticks)
        # A manual run here does not make a scheduled tick an overlap: the lease
        # decides, and the tick is picked up when the manual run ends (§4.4).
        candidates = self._admission.admit(
            ticks, accepting=accepting, running=self._active.names(include_manual=False)
        )
        if candidates and not inline:  # batching figures: ticks that fell due together
            counted = heard(candidate.tick.task for candidate in candidates)
            self.stats.add("acquire_batches", min(counted, 1))  # a built-in's: not counted
            self.stats.add("acquire_batch_ticks", counted)
        runs: list[Callable[[], Outcome]] = []
        hand_out = runs.append if dispatch is None else dispatch
        handed_out = 0

        def on_won(candidate: Candidate, lease: Lease) -> None:
            nonlocal handed_out
            task = candidate.tick.task
            follows = candidate.tick.follows
            run = self._active.begin(
                task, lease, recovering=follows is not None and follows.recovering
            )
            if self._too_late(candidate, run):
                return
            if inline:
                hand_out(functools.partial(self._execute, run, True))
                return
            self._recorder.expect()
            try:
                hand_out(functools.partial(self._execute_on_worker, run))
            except Exception as exc:  # e.g. "can't start new thread": the run never starts
                self._not_handed_out(run, exc)
                return
            handed_out += 1

        if inline:  # the caller's thread runs it: no worker slot
            return self._with_runs(self._acquisition.acquire(candidates, on_won), runs)
        decision = Decision()
        self._recorder.hold()
        try:
            pending = candidates
            ordered = False
            while pending:
                granted = self.workers.take(len(pending))
                if granted < len(pending) and not ordered:
                    pending, ordered = self._rationing.order(pending), True
                batch, pending = pending[:granted], pending[granted:]
                if not batch:
                    break
                # a round after the grace of some: not sent (a lease won only to be
                # released); their slots go to the next candidates
                sent = self._admission.expired(batch, time.time())
                if len(sent) < len(batch):
                    self.workers.give_back(len(batch) - len(sent))
                    batch = sent
                    if not batch:
                        continue
                before = handed_out
                try:
                    part = self._acquisition.acquire(batch, on_won)
                finally:  # the slots of ticks not won (or not started) are free again
                    self.workers.give_back(granted - (handed_out - before))
                self._rationing.served(batch)
                self.skips.served(candidate.tick.task.full_name for candidate in batch)
                decision.retries.extend(part.retries)
        finally:
            self._recorder.unhold()
        if pending:
            self._rationing.left_out(candidate.tick for candidate in pending)
            if wait_for_capacity:
                decision.starved = [(c.pickup_until, c.tick) for c in pending]
            else:
                self.skip_for_capacity([candidate.tick for candidate in pending])
        return self._with_runs(decision, runs)

    @staticmethod
    def _with_runs(decision: Decision, runs: list[Callable[[], Outcome]]) -> Decision:
        decision.runs = runs
        return decision

    def skip_for_capacity(self, ticks: Sequence[Tick]) -> None:
        """Report ticks skipped because no worker of this replica was free in time."""
        self.skips.for_capacity(ticks)

    def _too_late(self, candidate: Candidate, run: ActiveRun) -> bool:
        """A lease won past the tick's grace (the acquisition waited on a lock): not run.

        The lease is released at once and the run recorded ``missed``; the task
        is not called. The grace is checked at admission too, but a statement
        that waited on a busy database can answer long after (§4.4).
        """
        deadline = candidate.pickup_until
        if deadline is None:
            return False
        late = time.time() - deadline
        if late <= 0:
            return False
        self.skips.won_too_late(
            candidate.tick.task, candidate.tick.fire_time, candidate.request.slot, late
        )
        self._end_unstarted(
            run, "missed", f"not run: its lease was won {late:.3f} s past the tick's grace"
        )
        return True

    def _not_handed_out(self, run: ActiveRun, exc: Exception) -> None:
        logger.error(
            "%s: slot %s not run: it could not be handed to a worker: %r",
            run.task.full_name,
            run.lease.slot,
            exc,
        )
        # the finisher expects this run (expect() came first): record it through it
        self._end_unstarted(
            run,
            "failed",
            f"not run: it could not be handed to a worker: {exc!r}",
            self._recorder.later,
        )

    def _end_unstarted(
        self,
        run: ActiveRun,
        outcome: Outcome,
        error: str,
        ended: Callable[[Ended], None] | None = None,
    ) -> None:
        """Record a won run whose task will never be called, and release its lease."""
        self._active.stop_renewing(run)
        (ended or self._recorder.now)(Ended(run, outcome, error, 0.0))

    def _timed_out(self, run: ActiveRun) -> None:
        """A sync task ran past its timeout (watchdog thread): record it, let the lease go."""
        if self._active.give_up(run, "timed_out"):
            self._recorder.timed_out(run)

    def _execute(self, run: ActiveRun, inline: bool) -> Outcome:
        ended = self._recorder.now if inline else self._recorder.later
        return self._execution.execute(run, ended)

    def _execute_on_worker(self, run: ActiveRun) -> Outcome:
        try:
            return self._execute(run, False)
        finally:  # the worker is free for the next tick
            self.workers.give_back()

    # --- lifecycle --------------------------------------------------------

    def problems(self, tasks: Iterable[Task]) -> list[str]:
        """What this replica knows is wrong with itself, for health() (design §5.17, §5.18)."""
        return [*self.outage.problems(), *self.pulse.problems(tasks)]

    @property
    def running(self) -> list[str]:
        """Full names of the tasks running on this replica now, sorted."""
        return sorted(self._active.names())

    @property
    def accepting(self) -> bool:
        """False once :meth:`stop_accepting` was called: new ticks are skipped."""
        return not self._stopped.is_set()

    def stop_accepting(self) -> None:
        """Take no new leases from now on (ticks already queued are skipped)."""
        self._stopped.set()

    def start_accepting(self) -> None:
        self._stopped = threading.Event()

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until no run is in progress; False if some still are at the deadline."""
        return self._active.wait_idle(timeout)

    def wait_ended(self, names: set[str], timeout: float) -> bool:
        """Wait until none of the tasks ``names`` (full names) runs here; False at the timeout."""
        return self._active.wait_gone(names, timeout)

    def interrupt_running(self) -> list[ActiveRun]:
        """Record runs still executing as interrupted; keep their leases until they expire.
        Returns those runs."""
        runs = self._active.interrupt()
        self._recorder.interrupt(runs)
        return runs

    def close(self, deadline: Deadline | None = None) -> None:
        """Write what is queued (waiting for it within ``deadline``, default 10 s), stop
        the side thread; the heartbeat thread stops once no run is in progress."""
        deadline = deadline or Deadline(10.0)
        deadline.join(self._recorder.stop(), "the last outcomes to be written")
        self._acquisition.close()
        self._active.close()
