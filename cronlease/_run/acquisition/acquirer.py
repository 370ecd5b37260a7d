"""The acquirer thread: fired ticks in, batches decided, winners out to the workers.

One thread with one role (docs/design.md §4). It receives the ticks of each
APScheduler pass on its inbox queue (:mod:`cronlease._run.timer.fire`), adds the
ticks whose timer is due — ticks staged for later (rendezvous: this replica
is not the tick's preferred one) and late pickups — and asks the
:class:`TickRunner` to decide them, in batches that name each task at most
once, oldest first. Winners go straight to the worker threads (:attr:`TickRunner.workers`) as each
is registered, so losers never queue behind winners for a worker thread;
late pickups go back on its timer heap. Ticks no worker was free for (the
runner sends no more than the workers have free slots) wait here,
holding no lease, earliest deadline first, and are offered again as soon as a
worker frees — as many as the free workers can take, not all — until their
grace ends (then skipped as ``capacity``).
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import logging
import math
import queue
import threading
import time
from collections.abc import Callable

from cronlease._run.replica_log.log_streaks import one_line_per_kind
from cronlease._run.runner import TickRunner
from cronlease._run.timer.ticks import Tick

__all__ = ["Acquirer"]

logger = logging.getLogger("cronlease")
#: what the inbox carries: the ticks of one pass, each with the callback that
#: tells APScheduler its job's instance is decided (None: stop)
Fired = list[tuple[Callable[[], None], list[Tick]]]


class Acquirer:
    """Owns the acquirer thread, its inbox and its timers."""

    def __init__(self, runner: TickRunner) -> None:
        self._runner = runner
        self._inbox: queue.SimpleQueue[Fired | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._runner.pulse.beat()
        # an outage's end line waits for the pass that decides the ticks queued behind it
        self._runner.outage.defer_end(self._wake)
        self._thread = threading.Thread(target=self._loop, name="cronlease-acquirer", daemon=True)
        self._thread.start()

    def put(self, fired: Fired) -> None:
        self._inbox.put(fired)

    def stop(self) -> threading.Thread | None:
        """Stop after what is queued (stop accepting first: queued ticks are skipped fast);
        returns the thread, for the shutdown to join within its deadline."""
        self._inbox.put(None)
        self._runner.pulse.stop()
        return self._thread

    def _wake(self) -> None:
        self._inbox.put([])

    def _loop(self) -> None:
        # the per-task lines of the passes that stage one storm's slices, said once its
        # last slice is staged: a line per kind for the storm, not one per slice
        with contextlib.ExitStack() as storm:
            self._passes(storm)

    def _passes(self, storm: contextlib.ExitStack) -> None:
        holding = False
        timers: list[tuple[float, int, Tick]] = []
        order = itertools.count()
        # ticks no worker was free for, not sent to the database: a heap of (monotonic
        # deadline, order, tick), the earliest deadline first (inf: none); offered
        # again, a few at a time, as soon as a worker frees
        waiting: list[tuple[float, int, Tick]] = []
        # fired ticks not staged yet: a pass stages at most STAGE_SLICE of them, so the
        # first of a storm's runs start before the last of its ticks are ranked
        unstaged: collections.deque[Tick] = collections.deque()
        workers = self._runner.workers
        outage = self._runner.outage
        while True:
            wakes = [timers[0][0]] if timers else []
            if waiting and waiting[0][0] != math.inf:
                wakes.append(waiting[0][0])
            if unstaged:
                wakes.append(0.0)
            timeout = None if not wakes else max(0.0, min(wakes) - time.monotonic())
            try:
                first = self._inbox.get(timeout=timeout)
            except queue.Empty:
                first = []
            began = time.monotonic()  # what was queued before is in this pass
            stop = first is None
            fired = [] if first is None else list(first)
            while not stop:  # everything else already waiting goes in the same batch
                try:
                    more = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                fired.extend(more)
            # Overlap and lateness are the tick path's: APScheduler's instance is
            # released as soon as the tick is handed over, not when its run ends.
            for decided, group_ticks in fired:
                decided()
                unstaged.extend(group_ticks)
            if len(unstaged) > STAGE_SLICE and not holding:
                storm.enter_context(one_line_per_kind())
                holding = True
            size = len(unstaged) if stop else min(len(unstaged), STAGE_SLICE)
            ticks, later = self._runner.stage([unstaged.popleft() for _ in range(size)])
            for due, tick in later:
                heapq.heappush(timers, (due, next(order), tick))
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                ticks.append(heapq.heappop(timers)[2])
            if waiting:
                expired = []
                while waiting and waiting[0][0] <= now:
                    expired.append(heapq.heappop(waiting)[2])
                if expired:
                    self._runner.skip_for_capacity(expired)
                free = workers.free
                if waiting and (free > 0 or stop):
                    # the earliest deadlines first, only as many as the free workers can
                    # take (and a margin for those the slot check or admission drops):
                    # offering every waiting tick for each freed worker made a storm of
                    # 100,000 ticks quadratic (docs/design.md §4.2); they go ahead of
                    # newer ticks of the same tasks
                    count = len(waiting) if stop else reoffer_size(free)
                    offered = [heapq.heappop(waiting)[2] for _ in range(min(count, len(waiting)))]
                    ticks = offered + ticks
            for batch in distinct_tasks(ticks):
                try:
                    decision = self._runner.acquire_ticks(
                        batch, dispatch=workers.submit, wait_for_capacity=not stop
                    )
                except Exception:  # the acquirer must survive anything
                    logger.exception("unexpected error acquiring a batch of ticks")
                    continue
                for due_at, retry in decision.retries:
                    heapq.heappush(timers, (due_at, next(order), retry))
                for until, tick in decision.starved:
                    deadline = math.inf if until is None else time.monotonic() + until - time.time()
                    heapq.heappush(waiting, (deadline, next(order), tick))
            if holding and not unstaged:
                storm.close()  # the storm's lines, one per kind
                holding = False
            if fired:
                self._runner.pulse.beat()  # a pass APScheduler fired is decided
            ending = outage.ending
            if (
                ending is not None
                and (stop or began > ending[0])
                and not unstaged
                and not _fired_by(timers, ending[1])
            ):
                # every tick fired before the outage ended is decided: its count is true
                outage.say_end()
            if stop:
                outage.defer_end(None)
                outage.say_end()
                return
            if waiting:
                workers.when_free(self._wake)


#: fired ticks staged per pass (ranked by rendezvous: ~6 µs a tick): a storm of 100,000
#: ticks on each of 8 replicas sharing 2 cores took seconds to rank before its first run
STAGE_SLICE = 2048
#: waiting ticks offered again per free worker, and at least this many (a backup's ticks
#: are mostly refused ``taken`` by the slot check: a few dozen per statement, not one)
REOFFER_PER_FREE = 4
REOFFER_AT_LEAST = 64


def reoffer_size(free: int) -> int:
    """How many waiting ticks to offer again when ``free`` workers are free: the work of
    a pass stays proportional to what it can start, not to what waits."""
    return max(REOFFER_PER_FREE * free, REOFFER_AT_LEAST)


def _fired_by(timers: list[tuple[float, int, Tick]], wall: float) -> bool:
    """Whether a scheduled tick fired at or before ``wall`` (epoch) waits on the timers
    (a backup's check, 0.1 s after it was staged)."""
    return any(t.kind == "scheduled" and t.fire_time.timestamp() <= wall for _, _, t in timers)


def distinct_tasks(ticks: list[Tick]) -> list[list[Tick]]:
    """Split ``ticks`` into batches that name each task at most once, oldest first."""
    names = {tick.task.full_name for tick in ticks}
    if len(names) == len(ticks):  # the usual case: one tick per task
        return [ticks] if ticks else []
    batches: list[list[Tick]] = []
    seen: list[set[str]] = []
    for tick in ticks:
        name = tick.task.full_name
        for names, batch in zip(seen, batches, strict=True):
            if name not in names:
                names.add(name)
                batch.append(tick)
                break
        else:
            seen.append({name})
            batches.append([tick])
    return batches
