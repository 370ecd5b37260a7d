"""Noticing a database that lost committed lease writes, and repairing what it lost.

An asynchronous standby promoted after the primary died, or a point-in-time
restore, can hand back a lease row older than one it showed before: slots that
ran look free again and fences are issued a second time. Fenced writes match
the holder nonce too, so a stale holder changes nothing; this module covers
the rest (docs/design.md §3.8). The store remembers, per task, the highest
slot and fence it saw (:mod:`cronlease._lease.watermark`); when the database
shows less, it

- refuses slots up to the one it saw (``taken``, without asking the database),
- writes the higher slot and fence back (never lowering either), so replicas
  that never saw them — started later — do not run them either,
- gives a lease it just won with a fence issued before a fence of its own —
  unless the lease of the fence it saw may still be held by another replica
  (until its expiry as last seen plus one TTL): that holder may be running and
  write its lease back, so the win is undone and its slot given up (``held``),
  and the write-back raises the fence only to just below that lease's,
- and logs one error (again at most every :data:`REPEAT_AFTER` seconds).

Repairs are best effort: one that fails is logged and the outcome stands.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy.engine import Connection

from cronlease._lease.dialects.base import Statements
from cronlease._lease.membership import CursorRow
from cronlease._lease.model import (
    AcquireRequest,
    AttemptRequest,
    Lease,
    LeaseInfo,
    LeaseState,
    Refusal,
)
from cronlease._lease.watermark import Seen, Watermarks
from cronlease.errors import StoreError

#: the store's way of running one operation: (what, operation) -> result; StoreError
Call = Callable[[str, Callable[[Connection], Any]], Any]

__all__ = ["LOST_WRITES", "LostWrites"]

logger = logging.getLogger("cronlease")

LOST_WRITES = "the database lost committed lease writes"
#: seconds before a later loss is logged as an error again (a second failover)
REPEAT_AFTER = 600.0


class LostWrites:
    """A store's memory of what it saw, and what it does when the database shows less."""

    def __init__(self, statements: Callable[[], Statements], call: Call) -> None:
        self._statements = statements  # the store's current ones (tests swap them)
        self._call = call
        self.seen = Watermarks()
        self._said_at: float | None = None
        self._said_lock = threading.Lock()
        self._paused: set[str] = set()  # tasks this store paused (and did not resume)

    def refusals(self, requests: Sequence[AcquireRequest]) -> list[Refusal | None]:
        """Per request: ``taken`` if this replica saw the slot (or a later one) taken
        (``paused`` if this store paused the task, as the database would say)."""
        out: list[Refusal | None] = []
        for request in requests:
            seen = None if request.manual else self.seen.get(request.name)
            if seen is None or request.slot > seen.slot:
                out.append(None)
            else:
                out.append(Refusal("paused" if request.name in self._paused else "taken"))
        return out

    def attempt_refusals(self, requests: Sequence[AttemptRequest]) -> list[Refusal | None]:
        """Per further attempt: ``taken`` if this replica saw the task's fence move past
        the one it follows, or a later slot (only a database that lost that would still
        show ``after_fence``), else None."""
        out: list[Refusal | None] = []
        for request in requests:
            seen = self.seen.get(request.name)
            if seen is None or (request.slot >= seen.slot and request.after_fence >= seen.fence):
                out.append(None)
            else:
                out.append(Refusal("paused" if request.name in self._paused else "taken"))
        return out

    def reacquired(self, lease: Lease, before: Seen | None) -> Lease | Refusal:
        """Learn a further attempt's win; a fence not above what was seen gets a new one
        (or is given back while the lease seen may still be held)."""
        self.seen.saw(lease.name, lease.slot, lease.fence)
        if before is not None and lease.fence <= before.fence:
            return self._renumber_or_give_up(lease, before)
        return lease

    def went_back(
        self, name: str, slot: int, fence: int, floors: dict[str, Seen], ttl: float = 0.0
    ) -> bool:
        """Learn a lease row's slot and fence as read; if it went back behind ``floors``,
        repair it and say so (the row must not be trusted)."""
        self.seen.saw(name, slot, fence)
        before = floors.get(name)
        if before is None or not before.above(slot, fence):
            return False
        self._lost(name, slot, fence, before)
        self._raise_floor(name, before, ttl)
        return True

    def cursor_seen(self, row: CursorRow) -> None:
        """Learn a lease row the slot check read (it repairs nothing: a read-only check)."""
        left = row.expires_at - row.db_now
        held = time.monotonic() + left if left >= 0 else None
        self.seen.saw(row.name, row.slot, row.fence, held)

    def reasserted(self, lease: Lease) -> None:
        """A renewal found the row of ``lease`` at a lower fence and wrote the lease back."""
        self._lost(lease.name, None, 0, Seen(lease.slot, lease.fence), "a lower fence")
        logger.warning(
            "%s (slot %s, fence %s): its lease row went back to a lower fence; the run "
            "goes on and wrote its lease back",
            lease.name,
            lease.slot,
            lease.fence,
        )

    def paused(self, name: str, paused: bool) -> None:
        with self._said_lock:
            if paused:
                self._paused.add(name)
            else:
                self._paused.discard(name)

    def before(self, names: Sequence[str]) -> dict[str, Seen]:
        """What was seen before a statement is sent: all it may be compared with. A
        statement sent later sees at least that; a concurrent one of another thread
        of this replica may have seen less, and that is no loss."""
        return {name: seen for name in names if (seen := self.seen.get(name)) is not None}

    def check(
        self,
        requests: Sequence[AcquireRequest],
        results: Sequence[int | LeaseState | None],
        outcomes: list[Lease | Refusal],
        floors: dict[str, Seen],
    ) -> list[Lease | Refusal]:
        """Learn from an acquisition's results; repair what went back behind ``floors``."""
        now = time.monotonic()
        for index, (request, result) in enumerate(zip(requests, results, strict=True)):
            before = floors.get(request.name)
            if isinstance(result, int):
                self.seen.saw(request.name, None if request.manual else request.slot, result)
                outcome = outcomes[index]
                # A win issues a new fence: one not above what was seen was issued before.
                if before is not None and result <= before.fence and isinstance(outcome, Lease):
                    outcomes[index] = self._renumber_or_give_up(outcome, before)
            elif isinstance(result, LeaseState):
                # a lease another attempt holds: its holder may renew it, or (after the
                # database lost writes) write it back, until its expiry plus one TTL
                left = result.expires_at - result.db_now
                held = now + left if left >= 0 else None
                self.seen.saw(request.name, result.slot, result.fence, held)
                if before is not None and before.above(result.slot, result.fence):
                    self._lost(request.name, result.slot, result.fence, before)
                    self._raise_floor(request.name, before, request.ttl)
        return outcomes

    def check_rows(self, rows: list[LeaseInfo], floors: dict[str, Seen]) -> list[LeaseInfo]:
        """Learn from lease rows read; a row that went back behind ``floors`` is
        repaired and returned as seen (catch-up must not trust a cursor that went
        backwards)."""
        checked: list[LeaseInfo] = []
        for row in rows:
            self.seen.saw(row.name, row.slot, row.fence)
            before = floors.get(row.name)
            if before is None or not before.above(row.slot, row.fence):
                checked.append(row)
                continue
            self._lost(row.name, row.slot, row.fence, before)
            self._raise_floor(row.name, before, 0.0)
            checked.append(
                replace(row, slot=max(row.slot, before.slot), fence=max(row.fence, before.fence))
            )
        return checked

    # --- repairs ----------------------------------------------------------

    def _renumber_or_give_up(self, lease: Lease, before: Seen) -> Lease | Refusal:
        """A win with a fence not above the one seen: the database lost writes. While
        the lease seen may still be held by another replica, that holder may be
        running and write its lease back: the win is undone and its slot given up
        (never run beside it); after that, the win gets a fence of its own."""
        left = before.held_for(lease.ttl)
        if left is None:
            return self._refence(lease, before)
        self._lost(lease.name, None if lease.manual else lease.slot, lease.fence, before)
        self._give_up(
            lease,
            f"not run: the database lost lease writes, and the lease of fence {before.fence} "
            f"may still be held for {left:.3f} s (its expiry as last seen plus one TTL)",
            "%s: slot %s not run: the database lost lease writes and the lease of fence %s, "
            "held by another replica, may still be held for %.3f s",
            lease.name,
            lease.slot,
            before.fence,
            left,
        )
        return Refusal("held", expires_in=left)

    def _refence(self, lease: Lease, before: Seen) -> Lease | Refusal:
        """A lease won with a fence this replica saw issued before: give it a new one.
        Taken over between the win and the renumbering (a holder that wrote its lease
        back over it): not run, its run row recorded ``missed``."""
        fence = before.fence + 1
        self._lost(lease.name, None if lease.manual else lease.slot, lease.fence, before)
        floor = before.slot if lease.manual else max(before.slot, lease.slot)
        try:
            given = self._call(
                f"renumbering the lease of {lease.name!r}",
                lambda conn: self._statements().refence(conn, lease, fence, floor),
            )
        except StoreError as exc:
            logger.warning("%s keeps fence %s: %s", lease.name, lease.fence, exc)
            return lease
        if given is None:
            return self._taken_meanwhile(lease)
        # above ``fence`` if another replica wrote back a higher one since the win
        self.seen.saw(lease.name, None if lease.manual else floor, given)
        return replace(lease, fence=given)

    def _taken_meanwhile(self, lease: Lease) -> Refusal:
        """The lease just won carries another nonce already: a holder whose row went
        back wrote its lease back over it (its fence is above the win's). Started, the
        run would go beside that holder's, with a fence this replica may have handed
        out before: it is not run (docs/design.md §3.8)."""
        self._give_up(
            lease,
            "not run: the database lost lease writes, and the lease was written back by its holder",
            "%s: slot %s not run: the database lost lease writes and the lease's holder "
            "wrote it back before this replica could renumber its win",
            lease.name,
            lease.slot,
        )
        return Refusal("taken")

    def _give_up(self, lease: Lease, error: str, line: str, *args: object) -> None:
        """A win not run: its lease given back where it still carries the win's nonce, its
        run row ``missed`` with ``error``; one warning, ``line``."""
        try:
            self._call(
                f"giving back the lease of {lease.name!r}",
                lambda conn: self._statements().give_back(conn, lease, error),
            )
        except StoreError as exc:
            # not run either way; the lease expires after its TTL
            logger.warning("cannot give back the lease of %s: %s", lease.name, exc)
        logger.warning(line, *args)

    def _raise_floor(self, name: str, before: Seen, ttl: float) -> None:
        # While the lease of the fence seen may still be held by another replica (its
        # expiry as seen, plus ``ttl`` where the task's TTL is known), its holder may
        # write it back, over a lower fence only: raise the fence to just below it.
        held = before.held_for(ttl) is not None
        fence = before.fence - 1 if held else before.fence
        try:
            self._call(
                f"writing back the lease of {name!r}",
                lambda conn: self._statements().raise_floor(conn, name, before.slot, fence),
            )
        except StoreError as exc:
            logger.warning("cannot write back the lease of %s: %s", name, exc)

    def _lost(
        self, name: str, slot: int | None, fence: int, before: Seen, shown: str | None = None
    ) -> None:
        now = time.monotonic()
        with self._said_lock:
            loud = self._said_at is None or now - self._said_at > REPEAT_AFTER
            if loud:
                self._said_at = now
        if shown is None:
            shown = f"fence {fence}" if slot is None else f"slot {slot}, fence {fence}"
        if loud:
            logger.error(
                "%s: %s was at slot %s, fence %s here, and the database now shows %s "
                "(a failover to an asynchronous standby, or a restore?). This replica "
                "refuses the slots it saw run and writes them back; exactly-once across "
                "a failover needs synchronous replication",
                LOST_WRITES,
                name,
                before.slot,
                before.fence,
                shown,
            )
        else:
            logger.debug(
                "%s went back too (was slot %s, fence %s; now %s); repairing",
                name,
                before.slot,
                before.fence,
                shown,
            )
