"""Lease renewal for runs in progress, on one thread of its own.

The replica renews, not the task: a task that blocks, or an application event
loop that stalls, cannot starve the renewals. Each run's lease is renewed
every ttl/3. :meth:`Heartbeats.stop_tracking` waits for a renewal in flight,
so a late renewal can never re-extend a lease that was just released.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cronlease._lease.model import Lease
from cronlease._lease.store import LeaseStore
from cronlease._task import Liveness
from cronlease.errors import StoreError

__all__ = ["Heartbeats"]

logger = logging.getLogger("cronlease")


@dataclass(eq=False)
class _Tracked:
    lease: Lease
    liveness: Liveness
    due: float
    active: bool = True
    failing: bool = False
    # held while a renewal of this lease is in flight
    sending: threading.Lock = field(default_factory=threading.Lock)


class Heartbeats:
    """Renews the leases of runs in progress until told to stop."""

    def __init__(self, store: LeaseStore) -> None:
        self._store = store
        self._tracked: dict[int, _Tracked] = {}
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def track(self, lease: Lease, on_lost: Callable[[], None] = lambda: None) -> Liveness:
        """Start renewing ``lease``; the Liveness tells the run whether it still holds it.

        ``on_lost`` is called once, when the run first counts as having lost the lease.
        """
        liveness = Liveness(lease.ttl, lease.sent_at, on_lost)
        entry = _Tracked(lease, liveness, due=lease.sent_at + lease.ttl / 3)
        with self._changed:
            self._tracked[id(liveness)] = entry
            if self._thread is None or not self._thread.is_alive():
                self._closed = False
                self._thread = threading.Thread(
                    target=self._loop, name="cronlease-heartbeat", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        return liveness

    def stop_tracking(self, liveness: Liveness) -> None:
        """Stop renewing, after any renewal in flight has finished."""
        with self._changed:
            entry = self._tracked.pop(id(liveness), None)
        if entry is None:
            return
        with entry.sending:
            entry.active = False

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._tracked.clear()
            self._changed.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._changed:
                if self._closed:
                    return
                now = time.monotonic()
                due = [entry for entry in self._tracked.values() if entry.due <= now]
                if not due:
                    wake = min((entry.due for entry in self._tracked.values()), default=None)
                    self._changed.wait(None if wake is None else wake - now)
                    continue
            for entry in due:
                self._renew(entry)

    def _renew(self, entry: _Tracked) -> None:
        lease = entry.lease
        with entry.sending:
            if not entry.active:
                return
            sent_at = time.monotonic()
            try:
                still_ours = self._store.heartbeat(lease)
            except StoreError as exc:
                if not entry.failing:
                    logger.warning(
                        "cannot renew the lease of %s (slot %s): %s; the run continues and "
                        "is told it lost the lease if this lasts %.3g s",
                        lease.name,
                        lease.slot,
                        exc,
                        lease.ttl,
                    )
                entry.failing = True
                # retry sooner than ttl/3 while renewals fail, but not in a tight loop
                entry.due = time.monotonic() + max(0.1, lease.ttl / 10)
                _ = entry.liveness.lost  # reports the loss as soon as the deadline passes
                return
            if entry.failing:
                logger.info("renewing the lease of %s works again", lease.name)
                entry.failing = False
            if still_ours:
                entry.liveness.renewed(sent_at)
                entry.due = sent_at + lease.ttl / 3
                return
            entry.liveness.mark_lost()
            entry.active = False
            logger.warning(
                "%s (slot %s, fence %s) lost its lease: another replica took it over",
                lease.name,
                lease.slot,
                lease.fence,
            )
        with self._changed:
            self._tracked.pop(id(entry.liveness), None)
