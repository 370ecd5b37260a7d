"""Rendezvous staging: who tries a fired tick at once, after a delay, or not at all.

For a fleet whose cost must not grow with its size (docs/design.md §4.4):
with a view of the fleet (:mod:`cronlease._run.acquisition.membership`), a
scheduled tick is tried at once only by its preferred replica
(:mod:`cronlease._run.acquisition.rendezvous`); its backup tries it
BACKUP_DELAY later (at most a quarter of its grace), and the other members
only while the view is unsettled (after twice that delay), else not at all.
Without a view (none yet, the table unreadable), or alone in its cohort, a
replica tries every tick at once. A tick tried after a delay is marked
``checked``: when its timer comes, :mod:`~cronlease._run.acquisition.slot_check`
reads its slot cursor before anything else. Local: no statement is sent here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

from cronlease._run.acquisition.membership import Membership
from cronlease._run.acquisition.rendezvous import BACKUP, PREFERRED
from cronlease._run.acquisition.skips import heard
from cronlease._run.replica_log.outage import OutageLog
from cronlease._run.timer.ticks import Tick
from cronlease._stats import Stats
from cronlease._timing.schedule import slot_of

__all__ = ["BACKUP_DELAY", "Staging"]

#: how long after its fire time a tick's backup replica tries it (at most a quarter
#: of the tick's grace); the other members of an unsettled view, twice that
BACKUP_DELAY = 0.1


class Staging:
    """Stages fired ticks on the acquirer thread, from this replica's view of the fleet."""

    def __init__(self, stats: Stats, membership: Membership, outage: OutageLog) -> None:
        self._stats = stats
        self._membership = membership
        # a tick left to peers during an outage is one this replica did not run
        self._outage = outage

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
            elif not view.settled_at(start):
                later.append((start + wait + 2 * delay, tick._replace(checked=True)))
            else:
                if task.builtin:
                    continue  # not counted (docs/design.md §4.11)
                left += 1
                self._outage.absorbs(slot)
        self._stats.add("ticks_left_to_peers", left)
        self._stats.add("ticks_delayed", heard(tick.task for _, tick in later))
        return now, later
