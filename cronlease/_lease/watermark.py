"""What one replica saw of each task's lease row: the highest slot and fence.

A database that loses committed writes (a failover to an asynchronous standby
that lagged, a point-in-time restore) shows a lease row older than one it
showed before: slots that ran look free again, fences that were issued are
issued again. A replica that remembers the highest of each it saw can tell,
refuse the slots up to what it saw, and write both back so that replicas that
never saw them (started later) do not run them either (docs/design.md §3.8).
Memory only: a replica restarted after the loss knows what the database knows.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Seen", "Watermarks"]


@dataclass(frozen=True)
class Seen:
    """The highest slot cursor and fence seen in a task's lease row."""

    slot: int
    fence: int

    def __post_init__(self) -> None:
        if self.fence < 0:
            raise ValueError(f"a fence is never negative, got {self.fence}")

    def above(self, slot: int | None, fence: int) -> bool:
        """Whether the database, showing ``slot`` (None: not known) and ``fence``, went
        back behind this: it lost writes this replica saw."""
        return fence < self.fence or (slot is not None and slot < self.slot)


class Watermarks:
    """Per task, the highest :class:`Seen`; thread-safe, never lowered."""

    def __init__(self) -> None:
        self._seen: dict[str, Seen] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Seen | None:
        with self._lock:
            return self._seen.get(name)

    def saw(self, name: str, slot: int | None, fence: int) -> Seen | None:
        """Record what the database showed (``slot`` None: the row's cursor was not
        read, as for a manual run); return what was remembered if the database went
        back behind it, else None."""
        with self._lock:
            before = self._seen.get(name)
            if before is None:
                self._seen[name] = Seen(-1 if slot is None else slot, fence)
                return None
            self._seen[name] = Seen(
                before.slot if slot is None else max(before.slot, slot),
                max(before.fence, fence),
            )
            return before if before.above(slot, fence) else None

    def drop(self, names: Sequence[str]) -> None:
        """Forget what was seen of tasks whose rows were deleted on purpose (``forget``):
        a row made again starts from fence 1, which is no lost write."""
        with self._lock:
            for name in names:
                self._seen.pop(name, None)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._seen)
