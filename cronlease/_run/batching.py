"""Ticks that fell due together, decided as a batch: defer, admit, acquire, hand out.

:class:`BatchDecider` is the batched path of :class:`~cronlease._run.runner.TickRunner`
(``acquire_ticks`` and ``defer`` there). Per tick it applies exactly the
rules of a single tick — shutdown, grace, local overlap, then the lease — but
it is built for the common fleet case: hundreds of tasks due at one instant
on every replica, one replica winning them. So:

- admission computes a schedule's TTL, grace and tolerance once per fire
  time, not once per task, and checks overlap against one snapshot;
- **deferral**: in a large batch (LARGE_BATCH ticks or more fired
  together), a task whose previous tick another replica won is tried
  DEFER_SECONDS later (at most a quarter of its grace). The likely winner's
  statement then meets no competing statements for the same rows and runs
  alone, and ours finds the slot taken without waiting on a row lock. If the
  winner is gone, the tick runs here that much later, still within its grace.
  Small batches race as they fire: their contention costs little, and which
  replica wins stays a fair race;
- **split acquisition**: a large batch of a replica that won every task it
  tried last (or that never lost one) is sent as two statements at once, on
  two pooled connections, over disjoint name ranges (each statement locks
  its rows in name order, so no two batches can deadlock); the database
  works on both halves in parallel. Where two replicas share the tasks, each
  sends one statement, and deferred (likely lost) ticks cost one statement;
- each winner is registered and handed to the worker pool as soon as its
  half's result arrives; refusals are counted in bulk and reported as events
  or log lines only when someone listens.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from cronlease._events import TickSkipped
from cronlease._lease.model import AcquireRequest, Lease, Refusal
from cronlease._run.ticks import Batch, SideThread, Tick, Timing
from cronlease._task import Task
from cronlease._timing.schedule import slot_of
from cronlease.errors import StoreError

if TYPE_CHECKING:
    from cronlease._run.runner import TickRunner

__all__ = ["DEFER_SECONDS", "LARGE_BATCH", "BatchDecider", "warn_future"]

logger = logging.getLogger("cronlease")

#: how long a replica waits before trying a tick of a task whose previous tick
#: another replica won (at most a quarter of the tick's grace)
DEFER_SECONDS = 0.1
#: ticks fired together from which a batch is deferred when likely lost, and sent
#: as two statements when likely won
LARGE_BATCH = 128

Candidates = list[tuple[Tick, AcquireRequest]]


def warn_future(task: Task, fire_time: datetime) -> None:
    logger.warning(
        "%s: tick %s refused: the slot is ahead of the database clock; is this host's clock fast?",
        task.full_name,
        fire_time.isoformat(),
    )


class BatchDecider:
    """The batched tick path of one :class:`TickRunner` (driven by its acquirer thread)."""

    def __init__(self, runner: TickRunner) -> None:
        self.runner = runner
        # tasks whose latest scheduled tick another replica won (see defer())
        self.won_elsewhere: set[str] = set()
        # the second connection of a batch acquired in two halves
        self._side = SideThread()

    def close(self) -> None:
        self._side.close()

    def defer(self, ticks: Sequence[Tick]) -> tuple[list[Tick], list[tuple[float, Tick]]]:
        """Split ``ticks`` into those to acquire now and those to acquire a little later.

        Returns (ticks to acquire now, [(monotonic time, tick) to acquire then]):
        in a batch of LARGE_BATCH ticks or more, the ticks of tasks whose
        previous tick another replica won wait DEFER_SECONDS, at most a
        quarter of their grace.
        """
        if not self.won_elsewhere or len(ticks) < LARGE_BATCH:
            return list(ticks), []
        now: list[Tick] = []
        later: list[tuple[float, Tick]] = []
        delays: dict[tuple[str, datetime], float] = {}
        start = time.monotonic()
        for tick in ticks:
            task = tick.task
            if tick.retry_until is not None or task.full_name not in self.won_elsewhere:
                now.append(tick)
                continue
            key = (task.schedule_key, tick.fire_time)
            delay = delays.get(key)
            if delay is None:
                delay = delays[key] = min(DEFER_SECONDS, task.grace_for(tick.fire_time) / 4)
            later.append((start + delay, tick))
        return now, later

    def acquire(
        self,
        ticks: Sequence[Tick],
        dispatch: Callable[[Callable[[], str]], object] | None,
    ) -> Batch:
        """:meth:`TickRunner.acquire_ticks`."""
        runner = self.runner
        batch = Batch()
        if not runner.accepting:
            for tick in ticks:
                runner._skipped(tick.task, slot_of(tick.fire_time), "shutdown")
            return batch
        candidates: Candidates = []
        now = datetime.now(timezone.utc)
        timings: dict[tuple[str, datetime], Timing] = {}
        running = runner._running_names()
        for tick in ticks:
            request = runner._admit(
                tick.task,
                tick.fire_time,
                now,
                exempt=tick.retry_until is not None,
                timings=timings,
                running=running,
            )
            if request is not None:
                candidates.append((tick, request))
        if not candidates:
            return batch
        runner.stats.add("acquire_batches")
        runner.stats.add("acquire_batch_ticks", len(candidates))
        try:
            runner.ensure_schema()
        except StoreError as exc:
            self._failed(candidates, exc)
            return batch
        decide = _Decider(self, batch, dispatch, timings)
        finisher = runner._finisher
        finisher.hold()
        try:
            # Split only a replica that won every task it tried last: where two
            # replicas share the tasks, their statements already run in parallel.
            if len(candidates) < LARGE_BATCH or self.won_elsewhere:
                self._decide_part(decide, candidates, self._try_acquire_many(candidates))
            else:
                candidates.sort(key=lambda pair: pair[1].name)
                low, high = candidates[: len(candidates) // 2], candidates[len(candidates) // 2 :]
                pending = self._side.submit(functools.partial(self._try_acquire_many, low))
                self._decide_part(decide, high, self._try_acquire_many(high))
                self._decide_part(decide, low, pending.result())
        finally:
            finisher.release()
        decide.count_refusals()
        return batch

    def _try_acquire_many(self, candidates: Candidates) -> list[Lease | Refusal] | StoreError:
        try:
            return self.runner.store.try_acquire_many([request for _, request in candidates])
        except StoreError as exc:
            return exc

    def _failed(self, candidates: Candidates, exc: StoreError) -> None:
        runner = self.runner
        for tick, request in candidates:
            runner._skipped(tick.task, request.slot, "error")
            runner.health.failed(f"{tick.task.full_name}: tick {tick.fire_time.isoformat()}", exc)

    def _decide_part(
        self,
        decide: _Decider,
        candidates: Candidates,
        results: list[Lease | Refusal] | StoreError,
    ) -> None:
        if isinstance(results, StoreError):
            self._failed(candidates, results)
            return
        self.runner.health.succeeded()
        for (tick, request), result in zip(candidates, results, strict=True):
            if isinstance(result, Lease):
                decide.won(tick.task, result)
            else:
                decide.refused(tick, request, result)


class _Decider:
    """Acts on the acquisition results of one batch, part by part, as each arrives.

    A winner is registered as running (heartbeat started, overlap gate set)
    and then handed out; a refusal is counted, and reported only to whoever
    listens: refusals are the common case, every replica but one, every tick.
    """

    def __init__(
        self,
        batches: BatchDecider,
        batch: Batch,
        dispatch: Callable[[Callable[[], str]], object] | None,
        timings: dict[tuple[str, datetime], Timing],
    ) -> None:
        self.batches = batches
        self.runner = runner = batches.runner
        self.batch = batch
        self.dispatch = dispatch
        self.timings = timings
        self.refusals: Counter[str] = Counter()
        self.report = runner.events.wants(TickSkipped)
        self.debug = logger.isEnabledFor(logging.DEBUG)

    def won(self, task: Task, lease: Lease) -> None:
        self.batches.won_elsewhere.discard(task.full_name)
        run = self.runner._start_grouped(task, lease)
        if self.dispatch is None:
            self.batch.runs.append(run)
        else:
            self.dispatch(run)

    def refused(self, tick: Tick, request: AcquireRequest, refusal: Refusal) -> None:
        runner, task, reason = self.runner, tick.task, refusal.reason
        if reason in ("taken", "contended"):
            self.batches.won_elsewhere.add(task.full_name)
        if reason == "held" and tick.retry_until is None and refusal.expires_in is not None:
            wait = refusal.expires_in + 0.002
            grace = self.timings[(task.schedule_key, tick.fire_time)].grace
            pickup_until = tick.fire_time.timestamp() + (
                grace if task.grace is None else task.grace
            )
            if time.time() + wait <= pickup_until:
                logger.info(
                    "%s: tick %s: an earlier run's lease is still held; trying again when "
                    "it expires in %.3f s",
                    task.full_name,
                    tick.fire_time.isoformat(),
                    wait,
                )
                runner.stats.add("late_pickups")
                retry = Tick(task, tick.fire_time, retry_until=pickup_until)
                self.batch.retries.append((time.monotonic() + wait, retry))
                return
        self.refusals[reason] += 1
        if self.report:
            runner.events.emit(TickSkipped(task=task.full_name, slot=request.slot, reason=reason))
        if reason == "future":
            warn_future(task, tick.fire_time)
        elif self.debug:
            logger.debug(
                "%s: tick %s: not acquired (%s)", task.full_name, tick.fire_time.isoformat(), reason
            )

    def count_refusals(self) -> None:
        if self.refusals:
            stats = self.runner.stats
            stats.add("ticks_not_acquired", sum(self.refusals.values()))
            for reason, count in self.refusals.items():
                stats.add(f"ticks_skipped_{reason}", count)
