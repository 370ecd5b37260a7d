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
holding no lease, and are offered again as soon as a worker frees, until
their grace ends (then skipped as ``capacity``).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable

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
        timers: list[tuple[float, int, Tick]] = []
        order = itertools.count()
        # ticks no worker was free for, not sent to the database: (monotonic
        # deadline or None, tick), offered again as soon as a worker frees
        waiting: list[tuple[float | None, Tick]] = []
        workers = self._runner.workers
        outage = self._runner.outage
        while True:
            wakes = [timers[0][0]] if timers else []
            wakes += [deadline for deadline, _ in waiting if deadline is not None]
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
            ticks: list[Tick] = []
            for decided, group_ticks in fired:
                decided()
                ticks.extend(group_ticks)
            ticks, later = self._runner.stage(ticks)
            for due, tick in later:
                heapq.heappush(timers, (due, next(order), tick))
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                ticks.append(heapq.heappop(timers)[2])
            if waiting:
                expired = [
                    tick for deadline, tick in waiting if deadline is not None and deadline <= now
                ]
                if expired:
                    self._runner.skip_for_capacity(expired)
                    waiting = [(d, tick) for d, tick in waiting if d is None or d > now]
                if waiting and (workers.free > 0 or stop):
                    # oldest first: they go ahead of newer ticks of the same tasks
                    ticks = [tick for _, tick in waiting] + ticks
                    waiting = []
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
                    deadline = None if until is None else time.monotonic() + until - time.time()
                    waiting.append((deadline, tick))
            if fired:
                self._runner.pulse.beat()  # a pass APScheduler fired is decided
            ending = outage.ending
            if (
                ending is not None
                and (stop or began > ending[0])
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
