"""Which ticks get a replica's free workers when they are fewer than the ticks.

:class:`Rationing` orders them: the oldest fire time first, then the tasks this
replica has left without a worker the longest, then by name, so a lone
replica short of workers takes its tasks in turn instead of skipping the same
ones every time (docs/design.md §4.3; the slots themselves are
:class:`~cronlease._run.workers.pool.WorkerPool`'s).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cronlease._run.acquisition.admission import Candidate
from cronlease._run.timer.ticks import Tick

__all__ = ["Rationing"]


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
