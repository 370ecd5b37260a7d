"""What one replica saw of each task's lease row: the highest slot and fence, and how
long the lease of that fence may still be held by another replica.

A database that loses committed writes (a failover to an asynchronous standby
that lagged, a point-in-time restore) shows a lease row older than one it
showed before: slots that ran look free again, fences that were issued are
issued again. A replica that remembers the highest of each it saw can tell,
refuse the slots up to what it saw, and write both back so that replicas that
never saw them (started later) do not run them either (docs/design.md §3.8).
The holder of a lease it saw may still be running when the database shows the
row behind it: until that lease's expiry as last seen, plus one TTL, the
holder may still write it back, and the replica gives up a slot it wins
meanwhile instead of starting it beside that run. Memory only: a replica
restarted after the loss knows what the database knows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Seen", "Watermarks"]


@dataclass(frozen=True)
class Seen:
    """The highest slot cursor and fence seen in a task's lease row."""

    slot: int
    fence: int
    #: the expiry (monotonic) of the lease of ``fence`` as last seen held, unexpired,
    #: by another attempt; None when it was not (the newest fence seen was this
    #: replica's own win)
    held_until: float | None = None

    def __post_init__(self) -> None:
        if self.fence < 0:
            raise ValueError(f"a fence is never negative, got {self.fence}")

    def held_for(self, ttl: float) -> float | None:
        """Seconds the lease of ``fence`` may still be held — renewed, or written back
        by its holder after the database lost writes: until its expiry as last seen
        plus ``ttl`` (one TTL) —, None if no longer (or never seen held)."""
        if self.held_until is None:
            return None
        left = self.held_until + ttl - time.monotonic()
        return left if left > 0 else None

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

    def saw(
        self, name: str, slot: int | None, fence: int, held_until: float | None = None
    ) -> Seen | None:
        """Record what the database showed (``slot`` None: the row's cursor was not
        read, as for a manual run; ``held_until``: the lease of ``fence`` was held by
        another attempt, and may be until then); return what was remembered if the
        database went back behind it, else None."""
        with self._lock:
            before = self._seen.get(name)
            if before is None:
                self._seen[name] = Seen(-1 if slot is None else slot, fence, held_until)
                return None
            if fence > before.fence:
                held = held_until  # a newer lease: what was known of the older one is moot
            elif fence == before.fence and held_until is not None:
                held = max(held_until, before.held_until or held_until)
            else:
                held = before.held_until
            self._seen[name] = Seen(
                before.slot if slot is None else max(before.slot, slot),
                max(before.fence, fence),
                held,
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
