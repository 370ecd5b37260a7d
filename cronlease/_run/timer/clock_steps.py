"""Wall-clock steps, as the timer sees them: wall-clock elapsed against monotonic elapsed.

APScheduler 3 computes how long to wait from wall-clock datetimes, then waits
that long on an ``Event`` (the monotonic clock). A wall clock stepped back an
hour (NTP, a VM restored, someone setting the date) left every job's next run
time an hour in the new clock's future: the replica slept for an hour. So the
timer wakes at least every :data:`WAKE_INTERVAL` seconds and, at each wake,
compares how far the wall clock moved with how far the monotonic clock did;
a difference beyond :data:`STEP_THRESHOLD` is a step, and the timer
re-anchors its jobs at the new wall-clock time (:mod:`cronlease._run.timer.fire`).

Both are one second. The wake: a step is noticed within a second, so the
replica fires again within about a second of it (well inside any grace), and
a wake with nothing due costs APScheduler one look at the head of its sorted
job list (microseconds, however many tasks). The threshold: between two wakes
a second apart, NTP slewing (at most 500 ppm) moves the wall clock by half a
millisecond, and a thread delayed by load moves both clocks alike; a second is
far above that noise and far below the 60 s future-slot tolerance.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["STEP_THRESHOLD", "WAKE_INTERVAL", "StepWatch"]

#: the longest the timer sleeps between two looks at the clocks, seconds
WAKE_INTERVAL = 1.0
#: how far the wall clock must move against the monotonic clock to be a step, seconds
STEP_THRESHOLD = 1.0


class StepWatch:
    """Called at each wake of one timer thread (not thread-safe: one caller)."""

    def __init__(
        self,
        threshold: float = STEP_THRESHOLD,
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not threshold > 0:
            raise ValueError(f"threshold must be positive, got {threshold!r}")
        self.threshold = threshold
        self._wall = wall
        self._monotonic = monotonic
        self._last: tuple[float, float] | None = None

    def step(self) -> float | None:
        """Seconds the wall clock stepped since the last call (> 0: forward), or None."""
        wall, monotonic = self._wall(), self._monotonic()
        last, self._last = self._last, (wall, monotonic)
        if last is None:
            return None
        stepped = (wall - last[0]) - (monotonic - last[1])
        return stepped if abs(stepped) > self.threshold else None
