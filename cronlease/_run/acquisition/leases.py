"""Acquisition: admitted ticks' leases in one store call, and what each refusal means.

Every tick path ends here in one call, :meth:`LeaseStore.acquire_many`, for
one tick or a thousand (docs/design.md §4); ``attempt`` ticks (a slot's
second or later attempt) in one call of their own,
:meth:`LeaseStore.reacquire_many`, a compare-and-swap on the fence of the
attempt each follows. Per result:

- a **lease** is a winner, handed to ``on_won`` as soon as its part of the
  batch has answered;
- a **late pickup**: a scheduled tick refused ``held`` because an older
  slot's lease is still unexpired is tried again when that lease expires,
  if that is within the tick's grace, so a holder that died mid-run costs the
  tick it interrupted, not the next one as well (and again if the lease was
  renewed meanwhile, so a manual run delays a tick but never costs it);
- any other **refusal** is a skipped tick, counted in bulk and reported to
  whoever listens: refusals are common (a backup finds most of its ticks
  taken, a fleet without a view races every tick). A refused attempt is
  only counted (``attempts_not_acquired``): it is no tick, and the attempt
  poll asks again while it should still happen.

Built for a fleet whose cost must not grow with its size (docs/design.md §4.4):

- **rendezvous staging** (:meth:`Acquisition.stage`): with a view of the
  fleet (:mod:`cronlease._run.acquisition.membership`), a scheduled tick is tried at once
  only by its preferred replica (:mod:`cronlease._run.acquisition.rendezvous`); its
  backup tries it BACKUP_DELAY later (at most a quarter of its grace), and
  the other members only while the view is unsettled (after twice that
  delay), else not at all. Without a view (none yet, the table unreadable),
  or alone in its cohort, a replica tries every tick at once;
- **read-only check** (:meth:`Acquisition.precheck`): a tick tried after the
  delay reads its lease row's slot cursor first, in one SELECT for the
  batch; one already taken is refused ``taken`` here, costing no row lock;
- **split acquisition**: a batch of LARGE_BATCH ticks or more of a replica
  with a view (its own preferred ticks, or a lone replica's) is sent as two
  statements at once, on two pooled connections, over disjoint name ranges
  (each statement locks its rows in name order, so no two can deadlock), and
  the database works on both halves in parallel.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

from cronlease._lease.model import AcquireRequest, AttemptRequest, Lease, Refusal
from cronlease._lease.store import LeaseStore
from cronlease._run.acquisition.admission import Candidate, Skips
from cronlease._run.acquisition.membership import Membership
from cronlease._run.acquisition.rendezvous import BACKUP, PREFERRED
from cronlease._run.acquisition.side_thread import SideThread
from cronlease._run.replica_log.log_streaks import LogStreaks
from cronlease._run.replica_log.outage import OutageLog
from cronlease._run.timer.ticks import Decision, Tick
from cronlease._stats import Stats
from cronlease._timing.schedule import slot_of
from cronlease.errors import RowRefused, StoreError

__all__ = ["BACKUP_DELAY", "LARGE_BATCH", "LATE_PICKUP_MARGIN", "Acquisition"]

logger = logging.getLogger("cronlease")

#: how long after its fire time a tick's backup replica tries it (at most a quarter
#: of the tick's grace); the other members of an unsettled view, twice that
BACKUP_DELAY = 0.1
#: a batch of this many ticks or more is sent as two statements (split acquisition)
LARGE_BATCH = 128
#: a late pickup is tried this long after the held lease's expiry, so that the
#: database's strict "expired" comparison has certainly passed
LATE_PICKUP_MARGIN = 0.002

Results = list[Lease | Refusal] | StoreError


class Acquisition:
    """Takes the leases of admitted ticks; one per replica, driven by its acquirer thread
    (and by callers of the inline path)."""

    def __init__(
        self,
        store: LeaseStore,
        stats: Stats,
        skips: Skips,
        outage: OutageLog,
        ensure_schema: Callable[[], None],
        membership: Membership,
    ) -> None:
        self._store = store
        self._membership = membership
        self._stats = stats
        self._skips = skips
        self._outage = outage
        self._ensure_schema = ensure_schema
        self._streaks = LogStreaks(logger)  # "slot is ahead" warnings: once per streak
        # the second connection of a batch acquired in two halves
        self._side = SideThread()

    def close(self) -> None:
        self._side.close()

    def stage(self, ticks: Sequence[Tick]) -> tuple[list[Tick], list[tuple[float, Tick]]]:
        """Split fired ticks into those to acquire now and [(monotonic time, tick)] to
        acquire then; ticks left to the replicas ranked before this one are dropped
        (counted ``ticks_left_to_peers``). The staging rule (module docstring); only
        ``scheduled`` ticks are staged. A jittered tick waits for its offset here, on
        the acquirer's timers (no thread of its own), before any rendezvous delay."""
        view = self._membership.view()
        alone = view is None or view.size == 1
        if alone and not any(tick.task.jitter for tick in ticks):
            return list(ticks), []
        now: list[Tick] = []
        later: list[tuple[float, Tick]] = []
        timings: dict[tuple[str, datetime], tuple[int, float]] = {}
        start, wall = time.monotonic(), time.time()
        left = 0
        for tick in ticks:
            task = tick.task
            if tick.kind != "scheduled" or tick.checked:
                now.append(tick)
                continue
            wait = 0.0
            if task.jitter:
                jittered = tick.fire_time.timestamp() + task.jitter_for(tick.fire_time)
                wait = max(0.0, jittered - wall)
            if view is None or view.size == 1:
                if wait:
                    later.append((start + wait, tick))
                else:
                    now.append(tick)
                continue
            key = (task.schedule.fingerprint, tick.fire_time)
            timing = timings.get(key)
            if timing is None:
                grace = task.grace_for(tick.fire_time)
                timing = timings[key] = (slot_of(tick.fire_time), min(BACKUP_DELAY, grace / 4))
            slot, delay = timing
            ranking = view.ranking_for(task.roles) if task.roles else view.ranking
            place = ranking.place(task.full_name, slot)
            if place == PREFERRED:
                if wait:
                    later.append((start + wait, tick))
                else:
                    now.append(tick)
            elif place == BACKUP:
                later.append((start + wait + delay, tick._replace(checked=True)))
            elif not view.settled:
                later.append((start + wait + 2 * delay, tick._replace(checked=True)))
            else:
                left += 1
        if left:
            self._stats.add("ticks_left_to_peers", left)
        if later:
            self._stats.add("ticks_delayed", len(later))
        return now, later

    def precheck(self, ticks: Sequence[Tick]) -> list[Tick]:
        """The ticks still to admit and acquire: a ``checked`` tick whose slot its lease
        row's cursor has reached is refused ``taken`` here, from one read-only SELECT
        for the batch (no row lock, no write). Before admission, so that a backup whose
        check comes past the grace does not report a tick that ran elsewhere as
        missed. A database error skips the checked ticks (``error``)."""
        checked = [tick for tick in ticks if tick.checked]
        if not checked:
            return list(ticks)
        slots: dict[datetime, int] = {}
        for tick in checked:
            if tick.fire_time not in slots:
                slots[tick.fire_time] = slot_of(tick.fire_time)
        try:
            self._ensure_schema()
            cursors = self._store.fleet.slot_cursors([tick.task.full_name for tick in checked])
        except StoreError as exc:
            for tick in checked:
                self._skips.skipped(tick.task, slots[tick.fire_time], "error")
            shown = ", ".join(tick.task.full_name for tick in checked[:5])
            more = f" and {len(checked) - 5} more" if len(checked) > 5 else ""
            what = f"checking {len(checked)} ticks ({shown}{more})"
            self._outage.failed(what, exc, ticks=len(checked))
            return [tick for tick in ticks if not tick.checked]
        self._outage.succeeded()
        remaining: list[Tick] = []
        taken = 0
        for tick in ticks:
            cursor = cursors.get(tick.task.full_name) if tick.checked else None
            if cursor is None or cursor < slots[tick.fire_time]:
                remaining.append(tick)
                continue
            taken += 1
            self._skips.skipped(tick.task, slots[tick.fire_time], "taken", count=False)
        if taken:
            self._stats.add("ticks_not_acquired", taken)
            self._stats.add("ticks_checked_taken", taken)
            self._skips.count("taken", taken)
        return remaining

    def acquire(
        self, candidates: Sequence[Candidate], on_won: Callable[[Candidate, Lease], None]
    ) -> Decision:
        """Acquire the candidates' leases; winners go to ``on_won`` as their part answers.

        Returns the late pickups to try (``Decision.retries``). Never raises for
        a database error: every candidate is then skipped as ``error``.
        """
        decision = Decision()
        if not candidates:
            return decision
        try:
            self._ensure_schema()
        except StoreError as exc:
            self._failed(candidates, exc)
            return decision
        refusals: Counter[str] = Counter()

        def part(chunk: Sequence[Candidate], results: Results) -> None:
            self._decide(chunk, results, decision, on_won, refusals)

        attempts = [candidate for candidate in candidates if candidate.tick.kind == "attempt"]
        if attempts:
            candidates = [candidate for candidate in candidates if candidate.tick.kind != "attempt"]
            part(attempts, self._send(attempts))

        # Split only the batch of a replica with a view of the fleet: its own
        # preferred ticks. Without one every replica sends every tick, and two
        # statements each would only contend more.
        if len(candidates) >= LARGE_BATCH and self._membership.view() is not None:
            ordered = sorted(candidates, key=lambda candidate: candidate.request.name)
            low, high = ordered[: len(ordered) // 2], ordered[len(ordered) // 2 :]
            pending = self._side.submit(functools.partial(self._send, low))
            part(high, self._send(high))
            part(low, pending.result())
        elif candidates:
            part(candidates, self._send(candidates))
        if refusals:
            self._stats.add("ticks_not_acquired", sum(refusals.values()))
            for reason, count in refusals.items():
                self._skips.count(reason, count)
        return decision

    def _send(self, candidates: Sequence[Candidate]) -> Results:
        """One statement for ``candidates``: all attempts, or all first acquisitions."""
        try:
            requests = [candidate.request for candidate in candidates]
            if isinstance(requests[0], AttemptRequest):
                return self._store.reacquire_many(
                    [r for r in requests if isinstance(r, AttemptRequest)]
                )
            return self._store.acquire_many([r for r in requests if isinstance(r, AcquireRequest)])
        except StoreError as exc:
            return exc

    def _failed(self, candidates: Sequence[Candidate], error: StoreError) -> None:
        for tick, request, _ in candidates:
            self._skips.skipped(tick.task, request.slot, "error")
        self._outage.failed(ticks_named(candidates), error, ticks=len(candidates))

    def _decide(
        self,
        candidates: Sequence[Candidate],
        results: Results,
        decision: Decision,
        on_won: Callable[[Candidate, Lease], None],
        refusals: Counter[str],
    ) -> None:
        """Act on one part's results: winners to ``on_won``, refusals counted in ``refusals``."""
        if isinstance(results, RowRefused):
            # The database answered, refusing one row: not an outage. Each tick
            # alone, so that one bad row costs one task (docs/design.md §5.16).
            self._outage.succeeded()
            if len(candidates) == 1:
                self._row_refused(candidates[0], results)
                return
            for candidate in candidates:
                self._decide([candidate], self._send([candidate]), decision, on_won, refusals)
            return
        if isinstance(results, StoreError):
            self._failed(candidates, results)
            return
        self._outage.succeeded()
        debug = logger.isEnabledFor(logging.DEBUG)
        for candidate, result in zip(candidates, results, strict=True):
            tick = candidate.tick
            if tick.follows is not None:
                self._attempt_decided(candidate, result, on_won)
                continue
            if not isinstance(result, Refusal) or result.reason != "future":
                self._streaks.ended(tick.task.full_name, "future")
            if isinstance(result, Lease):
                if tick.kind == "retry":
                    logger.info(
                        "%s: tick %s: taken over once the previous holder's lease expired",
                        tick.task.full_name,
                        tick.fire_time.isoformat(),
                    )
                on_won(candidate, result)
                continue
            reason = result.reason
            retry = self._late_pickup(candidate, result)
            if retry is not None:
                decision.retries.append(retry)
                continue
            refusals[reason] += 1
            self._skips.skipped(tick.task, candidate.request.slot, reason, count=False)
            if reason == "future":
                self._streaks.warn(
                    tick.task.full_name,
                    "future",
                    "refused as ahead of the database clock",
                    "%s: tick %s refused: its slot is more than %g s (the tolerance) ahead "
                    "of the database clock, so this host's clock is fast; the rest of the "
                    "fleet runs it on time. Fix NTP here",
                    tick.task.full_name,
                    tick.fire_time.isoformat(),
                    round(_tolerance(candidate), 3),
                )
            elif debug:
                logger.debug(
                    "%s: tick %s: not acquired (%s)",
                    tick.task.full_name,
                    tick.fire_time.isoformat(),
                    reason,
                )

    def _attempt_decided(
        self,
        candidate: Candidate,
        result: Lease | Refusal,
        on_won: Callable[[Candidate, Lease], None],
    ) -> None:
        tick, follows = candidate.tick, candidate.tick.follows
        assert follows is not None
        if isinstance(result, Lease):
            self._stats.add("attempts_started")
            logger.info(
                "%s: slot %s: attempt %d starts (%s)",
                tick.task.full_name,
                candidate.request.slot,
                follows.attempt,
                "its previous holder died" if follows.recovering else "retrying a failed run",
            )
            on_won(candidate, result)
            return
        # another replica won it, or the slot moved on: the poll decides again next pass
        self._stats.add("attempts_not_acquired")
        logger.debug(
            "%s: slot %s: attempt %d not acquired (%s)",
            tick.task.full_name,
            candidate.request.slot,
            follows.attempt,
            result.reason,
        )

    def _row_refused(self, candidate: Candidate, error: RowRefused) -> None:
        tick = candidate.tick
        self._skips.skipped(tick.task, candidate.request.slot, "error")
        logger.error(
            "%s: tick %s skipped: the database refused its row: %s",
            tick.task.full_name,
            tick.fire_time.isoformat(),
            error,
        )

    def _late_pickup(self, candidate: Candidate, refusal: Refusal) -> tuple[float, Tick] | None:
        """The retry of a tick refused ``held`` whose lease expires within its grace."""
        if refusal.reason != "held" or refusal.expires_in is None or candidate.pickup_until is None:
            return None
        wait = refusal.expires_in + LATE_PICKUP_MARGIN
        if time.time() + wait > candidate.pickup_until:
            return None
        tick = candidate.tick
        logger.info(
            "%s: tick %s: an earlier run's lease is still held; trying again when it expires "
            "in %.3f s",
            tick.task.full_name,
            tick.fire_time.isoformat(),
            wait,
        )
        self._stats.add("late_pickups")
        return time.monotonic() + wait, Tick(tick.task, tick.fire_time, "retry")


def _tolerance(candidate: Candidate) -> float:
    request = candidate.request
    return request.tolerance if isinstance(request, AcquireRequest) else 0.0


def ticks_named(candidates: Sequence[Candidate], shown: int = 5) -> str:
    """The ticks of a failed batch, for one log line: the first few by task name."""
    first = candidates[0].tick
    if len(candidates) == 1:
        return f"{first.task.full_name}: tick {first.fire_time.isoformat()}"
    names = ", ".join(candidate.tick.task.full_name for candidate in candidates[:shown])
    more = f" and {len(candidates) - shown} more" if len(candidates) > shown else ""
    return f"{len(candidates)} ticks ({names}{more})"
