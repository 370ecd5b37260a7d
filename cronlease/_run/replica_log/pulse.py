"""The replica's pulse: when its tick path last decided a pass of fired ticks.

Nothing else tells that this replica's timer works: with the rest of the
fleet running every tick, no task is overdue even if APScheduler's thread died
here or the acquirer hangs (in a statement, in a listener). The acquirer beats
once per pass it decided, and at its start; a pass only comes when
APScheduler fired. So the first fire time after the last beat, of any task,
must have been decided by its grace plus :data:`PULSE_SLACK`: past that,
:meth:`Scheduler.health` reports the replica stalled (docs/design.md §5.18).

How long ago the beat was is measured on the monotonic clock: a wall clock
stepped back an hour after the last beat made that tick look an hour away,
and the replica whose timer then slept looked healthy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone

from cronlease._task import Task

__all__ = ["PULSE_SLACK", "Pulse"]

#: how long past a tick's grace the replica may take to decide it before it is
#: reported stalled: a false alarm restarts a healthy replica, so not less
PULSE_SLACK = 5.0


class Pulse:
    """The wall-clock time of the last pass the acquirer decided."""

    def __init__(
        self,
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._wall = wall
        self._monotonic = monotonic
        # (epoch seconds, monotonic seconds) of the last beat; one tuple, written by one
        # thread, so a reader never sees the two from different beats
        self._beat: tuple[float, float] | None = None

    @property
    def last(self) -> float | None:
        beat = self._beat
        return None if beat is None else beat[0]

    def beat(self) -> None:
        self._beat = (self._wall(), self._monotonic())

    def stop(self) -> None:
        """The acquirer stopped: a replica that is not running is not stalled."""
        self._beat = None

    def problems(self, tasks: Iterable[Task]) -> list[str]:
        stall = self.stall(tasks)
        return [] if stall is None else [stall]

    def stall(self, tasks: Iterable[Task], now: datetime | None = None) -> str | None:
        """The problem if a tick that fell due after the last beat is still undecided
        past its grace plus the slack; None if not (or never started).

        ``now`` defaults to the wall clock as the last beat's would read now had it
        not stepped since: its time plus the monotonic time elapsed."""
        beat = self._beat
        if beat is None:
            return None
        last = beat[0]
        if now is None:
            now = datetime.fromtimestamp(last + self._monotonic() - beat[1], tz=timezone.utc)
        since = datetime.fromtimestamp(last, tz=timezone.utc)
        worst: tuple[float, datetime] | None = None
        seen: set[tuple[str, float | None]] = set()
        for task in tasks:
            key = (task.schedule.fingerprint, task.grace)
            if key in seen:  # tasks of one schedule fire together
                continue
            seen.add(key)
            due = task.schedule.next_fire_time(since)
            if due is None:
                continue
            late = (now - due).total_seconds()
            if late > task.grace_for(due) + PULSE_SLACK and (worst is None or late > worst[0]):
                worst = (late, due)
        if worst is None:
            return None
        return (
            f"this replica decided no tick for {now.timestamp() - last:.0f} s (the tick due "
            f"at {worst[1].isoformat()} is {worst[0]:.0f} s late): its timer or acquirer is stuck"
        )
