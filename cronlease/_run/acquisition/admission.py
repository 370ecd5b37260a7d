"""Admission: the per-tick checks before any database work (docs/design.md §4).

In this order, for every tick however it began: shutdown, then grace (from the
tick's jittered start: :mod:`cronlease._timing.jitter`), then local overlap;
before all, a task whose roles this replica has none of is dropped (manual runs
excepted: asked for here). Grace comes before the acquisition so that a tick that waited
in a queue never takes a lease it is too late to use; overlap is checked
here so that a task still running on this replica costs no statement. What
survives becomes an :class:`AcquireRequest` — or, for an ``attempt`` tick
(the slot's second or later attempt), an :class:`AttemptRequest`, with no
grace (its deadline is the slot's next fire time) and its overlap skip not
reported as a skipped tick: the attempt poll offers it again.

A schedule's TTL, grace and tolerance are computed once per fire time, not
once per task: a fleet's common tick is hundreds of tasks of one schedule.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime, timezone
from typing import NamedTuple

from cronlease._lease.model import AcquireRequest, AttemptRequest
from cronlease._roles import can_run
from cronlease._run.acquisition.skips import Skips
from cronlease._run.replica_log.log_streaks import LogStreaks
from cronlease._run.timer.ticks import Tick, Timing
from cronlease._stats import Stats
from cronlease._task import Task
from cronlease._timing.schedule import MIN_TTL, slot_of

__all__ = ["Admission", "Candidate", "manual_ttl"]

logger = logging.getLogger("cronlease")


class Candidate(NamedTuple):
    """An admitted tick: its request, and until when (epoch seconds) a late pickup may
    still start it (None: no late pickup for this kind of tick); for an ``attempt``,
    when it must have started: the slot's next fire time."""

    tick: Tick
    request: AcquireRequest | AttemptRequest
    pickup_until: float | None


class Admission:
    """Decides which ticks go on to the database."""

    def __init__(
        self, holder: str, stats: Stats, skips: Skips, roles: tuple[str, ...] = ()
    ) -> None:
        self._holder = holder
        self._roles = roles
        self._stats = stats
        self._skips = skips
        self._streaks = LogStreaks(logger)  # misfire warnings: once per streak
        # overlap skips are the replica working as meant, but an 8 s task every 3 s
        # losing two ticks of three must be seen: one INFO line per streak
        self._skip_lines = LogStreaks(logger, level=logging.INFO)

    def admit(
        self, ticks: Sequence[Tick], *, accepting: bool, running: Collection[str]
    ) -> list[Candidate]:
        """The candidates among ``ticks`` (each task at most once); skips are reported.

        ``running`` is the set of task names in progress here when the batch began.
        """
        if not accepting:
            for tick in ticks:
                logger.debug(
                    "%s: tick %s skipped: the scheduler is shutting down",
                    tick.task.full_name,
                    tick.fire_time.isoformat(),
                )
                self._skips.skipped(tick.task, slot_of(tick.fire_time), "shutdown")
            return []
        now = datetime.now(timezone.utc)
        timings: dict[tuple[str, datetime], Timing] = {}
        candidates: list[Candidate] = []
        for tick in ticks:
            task, fire_time = tick.task, tick.fire_time
            if task.roles and tick.kind != "manual" and not can_run(task.roles, self._roles):
                # not this replica's to run (it fires none, but catch-up and the attempt
                # poll see every declared task): no skip, the replicas with the role run it
                continue
            if tick.kind == "manual":
                # The lease alone decides a manual run: no grace, no local overlap.
                candidates.append(Candidate(tick, self._manual_request(task, fire_time), None))
                continue
            key = (task.schedule.fingerprint, fire_time)
            timing = timings.get(key)
            if timing is None:
                timing = timings[key] = _timing(task, fire_time, now)
            grace = timing.grace if task.grace is None else task.grace
            # the grace counts from the jittered start: the offset is the tick's own wait
            start = task.jitter_for(fire_time) if task.jitter else 0.0
            lateness = timing.lateness - start
            if tick.kind == "scheduled" and lateness > grace:
                self._misfire(task, fire_time, timing.slot, lateness, grace)
                continue
            if tick.kind == "scheduled":
                self._streaks.ended(task.full_name, "misfire")
            ttl = timing.ttl if task.lease_ttl is None else task.lease_ttl
            follows = tick.follows
            if follows is not None:  # an attempt tick
                if task.full_name in running:
                    logger.debug(
                        "%s: attempt %d of slot %s not started: the task is running here",
                        task.full_name,
                        follows.attempt,
                        timing.slot,
                    )
                    continue
                attempt = AttemptRequest(
                    name=task.full_name,
                    slot=timing.slot,
                    after_fence=follows.after_fence,
                    attempt=follows.attempt,
                    ttl=ttl,
                    holder=self._holder,
                    recovering=follows.recovering,
                )
                candidates.append(Candidate(tick, attempt, follows.until))
                continue
            if task.full_name in running:
                if self._skips.skipped(task, timing.slot, "overlap"):
                    self._skip_lines.counted(task.full_name, "overlap", "still running")
                continue
            self._skip_lines.ended(task.full_name, "overlap")
            request = AcquireRequest(
                name=task.full_name,
                slot=timing.slot,
                ttl=ttl,
                holder=self._holder,
                tolerance=timing.tolerance,
                fingerprint=task.schedule.fingerprint,
            )
            # A retry keeps its tick's deadline: it may be picked up again (a lease
            # renewed meanwhile) and must still start within the grace.
            pickup_until = (
                fire_time.timestamp() + start + grace
                if tick.kind in ("scheduled", "retry")
                else None
            )
            candidates.append(Candidate(tick, request, pickup_until))
        return candidates

    def expired(self, candidates: Sequence[Candidate], now: float) -> list[Candidate]:
        """The ``candidates`` whose pickup deadline is still ahead at ``now`` (epoch); the
        others are reported missed as admission reports a late tick. For the rounds of one
        batch larger than the free workers (``TickRunner._decide``): a round sent after
        its ticks' grace would win leases only to release them unrun, a statement and a
        lock each (a storm with a grace too short did it for thousands of ticks)."""
        kept: list[Candidate] = []
        for candidate in candidates:
            until = candidate.pickup_until
            if until is None or now <= until:
                kept.append(candidate)
                continue
            tick = candidate.tick
            fire = tick.fire_time.timestamp()
            start = tick.task.jitter_for(tick.fire_time) if tick.task.jitter else 0.0
            slot = candidate.request.slot
            self._misfire(tick.task, tick.fire_time, slot, now - fire - start, until - fire - start)
        return kept

    def _misfire(
        self, task: Task, fire_time: datetime, slot: int, lateness: float, grace: float
    ) -> None:
        self._stats.add("ticks_missed", not task.builtin)
        if not self._skips.skipped(task, slot, "misfire"):
            # a built-in task's (the next pass does its work), or one that waited
            # behind a database outage (said with it)
            return
        self._streaks.warn(
            task.full_name,
            "misfire",
            "skipped past their grace",
            "%s: tick %s skipped: it started %.3f s late, past its grace of %.3g s",
            task.full_name,
            fire_time.isoformat(),
            lateness,
            grace,
        )

    def _manual_request(self, task: Task, asked_at: datetime) -> AcquireRequest:
        return AcquireRequest(
            name=task.full_name,
            slot=slot_of(asked_at),
            ttl=manual_ttl(task, asked_at),
            holder=self._holder,
            fingerprint=task.schedule.fingerprint,
            manual=True,
        )


def manual_ttl(task: Task, asked_at: datetime) -> float:
    """A manual run's TTL: the task's, but at most half the next tick's grace (>= 1 s).

    Its heartbeat renews it while it runs, and its end releases it. A scheduled
    tick that fires meanwhile is refused ``held`` and picked up when the lease
    frees (docs/design.md §4.4); the short TTL keeps the expiry that tick sees
    within its grace, so a manual run that ends in time never costs it.
    """
    ttl = task.ttl(asked_at)
    following = task.schedule.next_fire_time(asked_at)
    if following is None:
        return ttl
    return min(ttl, max(MIN_TTL, task.grace_for(following) / 2))


def _timing(task: Task, fire_time: datetime, now: datetime) -> Timing:
    schedule = task.schedule
    return Timing(
        slot=slot_of(fire_time),
        lateness=(now - fire_time).total_seconds(),
        ttl=schedule.ttl(fire_time),
        grace=schedule.grace(fire_time),
        tolerance=schedule.tolerance(fire_time),
    )
