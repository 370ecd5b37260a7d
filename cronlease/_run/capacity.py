"""A replica's worker slots, and which ticks get them when there are fewer than ticks.

A replica takes no more ticks than it has free workers (db-scheduler's rule;
docs/design.md §4.3): a lease won for a run that waits for a thread is a tick
no other replica can run, started late or not at all. :class:`Capacity`
counts slots — the replica's ``max_workers`` minus the runs it took and that
have not ended — and is taken right before each acquisition, so runs
registered but not yet started count as busy. :class:`Rationing` decides
which ticks get the slots when they are fewer: the oldest fire time first,
then the tasks this replica has left without a slot the longest, then by
name, so a lone replica short of workers takes its tasks in turn instead of
skipping the same ones every time.

Manual runs (run now) do not take a slot: they run in the caller's thread,
not on a worker. Everything that runs on the worker pool does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

from cronlease._run.admission import Candidate
from cronlease._run.ticks import Tick

__all__ = ["Capacity", "Rationing"]


class Capacity:
    """Free worker slots: ``limit`` minus the slots taken and not given back; thread-safe."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a replica needs at least one worker slot")
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()
        # the acquirer and a catch-up may both wait for a slot
        self._waiters: list[Callable[[], None]] = []

    @property
    def free(self) -> int:
        with self._lock:
            return self.limit - self._used

    def take(self, wanted: int) -> int:
        """Take up to ``wanted`` slots; return how many were taken (maybe 0)."""
        with self._lock:
            granted = max(0, min(wanted, self.limit - self._used))
            self._used += granted
            return granted

    def give_back(self, count: int = 1) -> None:
        """Return slots (a run ended, or a taken slot was not used); wakes a waiter."""
        if count <= 0:
            return
        with self._lock:
            if count > self._used:
                raise ValueError(f"{count} slot(s) given back, but only {self._used} taken")
            self._used -= count
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter()

    def when_free(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, at the next give-back, or at once if a slot is free now."""
        with self._lock:
            if self._used >= self.limit:
                if callback not in self._waiters:
                    self._waiters.append(callback)
                return
        callback()


class Rationing:
    """Orders ticks for too few slots: oldest fire time first, then the tasks left
    out longest, then by name; a round robin when the same ticks come back."""

    def __init__(self) -> None:
        # task name -> the rationing round since which it has been left out
        self._left_out: dict[str, int] = {}
        self._round = 0

    def order(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        left_out, never = self._left_out, self._round + 1
        return sorted(
            candidates,
            key=lambda candidate: (
                candidate.tick.fire_time,
                left_out.get(candidate.request.name, never),
                candidate.request.name,
            ),
        )

    def served(self, candidates: Iterable[Candidate]) -> None:
        if self._left_out:
            for candidate in candidates:
                self._left_out.pop(candidate.request.name, None)

    def left_out(self, ticks: Iterable[Tick]) -> None:
        self._round += 1
        for tick in ticks:
            self._left_out.setdefault(tick.task.full_name, self._round)
