"""Acquisition: admitted ticks' leases in one store call, and what each refusal means.

Every tick path ends here in one call, :meth:`LeaseStore.acquire_many`, for
one tick or a thousand (docs/design.md §4.4); ``attempt`` ticks (a slot's
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

**Split acquisition**, for a fleet whose cost must not grow with its size: a
batch of LARGE_BATCH ticks or more of a replica with a view (its own
preferred ticks, or a lone replica's) is sent as two statements at once, on
two pooled connections, over disjoint name ranges (each statement locks its
rows in name order, so no two can deadlock), and the database works on both
halves in parallel. Who tries a tick at all, and when, was decided before:
:mod:`~cronlease._run.acquisition.staging` and
:mod:`~cronlease._run.acquisition.slot_check`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence

from cronlease._lease.model import AcquireRequest, AttemptRequest, Lease, Refusal
from cronlease._lease.store import LeaseStore
from cronlease._run.acquisition.admission import Candidate
from cronlease._run.acquisition.membership import Membership
from cronlease._run.acquisition.side_thread import SideThread
from cronlease._run.acquisition.skips import Skips, heard
from cronlease._run.replica_log.log_streaks import LogStreaks, say
from cronlease._run.replica_log.outage import OutageLog
from cronlease._run.timer.ticks import Decision, Tick
from cronlease._stats import Stats
from cronlease.errors import RowRefused, StoreError

__all__ = ["LARGE_BATCH", "LATE_PICKUP_MARGIN", "Acquisition"]

logger = logging.getLogger("cronlease")

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
            self._ensure_schema()  # not watched: an upgrade of a long history takes its time
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
            with self._outage.waiting(lambda: f"acquiring {ticks_named(candidates)}"):
                if isinstance(requests[0], AttemptRequest):
                    return self._store.reacquire_many(
                        [r for r in requests if isinstance(r, AttemptRequest)]
                    )
                return self._store.acquire_many(
                    [r for r in requests if isinstance(r, AcquireRequest)]
                )
        except StoreError as exc:
            return exc

    def _failed(self, candidates: Sequence[Candidate], error: StoreError) -> None:
        for tick, request, _ in candidates:
            self._skips.skipped(tick.task, request.slot, "error")
        ticks = heard(candidate.tick.task for candidate in candidates)
        self._outage.failed(ticks_named(candidates), error, ticks=ticks)

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
                if tick.kind == "retry" and not tick.task.builtin:
                    say(
                        logger,
                        logging.INFO,
                        tick.task.full_name,
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
            said = self._skips.skipped(tick.task, candidate.request.slot, reason, count=False)
            if tick.task.builtin:
                continue  # no count, no line
            refusals[reason] += 1
            if not said:
                continue  # a database outage's: said in its end line
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
            say(
                logger,
                logging.INFO,
                tick.task.full_name,
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
        say(
            logger,
            logging.ERROR,
            tick.task.full_name,
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
        if not tick.task.builtin:
            say(
                logger,
                logging.INFO,
                tick.task.full_name,
                "%s: tick %s: an earlier run's lease is still held; trying again when it "
                "expires in %.3f s",
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
