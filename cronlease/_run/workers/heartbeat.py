"""Lease renewal for runs in progress, on one thread and one connection of its own.

The replica renews, not the task: a task that blocks, or an application event
loop that stalls, cannot starve the renewals. Each run's lease is renewed
every ttl/3; every lease due at once (or nearly) is renewed by one statement,
:meth:`LeaseStore.heartbeat_many`, on the store's renewal connection, so a
busy pool (the application's own, with ``Scheduler(engine=...)``) or a busy
acquirer never delays a renewal. :meth:`Heartbeats.stop_tracking` waits for a
renewal in flight, so a late renewal can never re-extend a lease that was just
released. The thread survives any error: it logs it and tries again soon, and
the runs learn of a lease lost meanwhile through their :class:`Liveness`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cronlease._lease.model import Lease
from cronlease._lease.store import LeaseStore
from cronlease._run.replica_log.outage import OutageLog
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


class Heartbeats:
    """Renews the leases of runs in progress until told to stop."""

    def __init__(self, store: LeaseStore, outage: OutageLog) -> None:
        self._store = store
        # a renewal left unanswered starts an outage; one answered ends it
        self._outage = outage
        self._tracked: dict[int, _Tracked] = {}
        self._changed = threading.Condition()
        # held while a renewal is in flight
        self._sending = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._broken = False  # an unexpected error is being reported (once per streak)

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
        with self._sending:
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
                # what is due, and what would be within a tenth of its TTL: one statement
                due = [
                    entry
                    for entry in self._tracked.values()
                    if entry.due - entry.lease.ttl / 10 <= now
                ]
                if not any(entry.due <= now for entry in due):
                    wake = min((entry.due for entry in self._tracked.values()), default=None)
                    self._changed.wait(None if wake is None else wake - now)
                    continue
            try:
                self._renew(due)
            except Exception:  # the thread renews every lease: it must live on
                self._unexpected(due)

    def _renew(self, due: list[_Tracked]) -> None:
        with self._sending:
            batch = [entry for entry in due if entry.active]
            if not batch:
                return
            sent_at = time.monotonic()
            try:
                ours = self._renew_leases([entry.lease for entry in batch])
            except StoreError as exc:
                for entry in batch:
                    self._failed(entry, exc)
                return
            if self._broken:
                logger.info("renewing leases works again")
                self._broken = False
            lost = []
            for entry, still_ours in zip(batch, ours, strict=True):
                lease = entry.lease
                if entry.failing:
                    logger.info("renewing the lease of %s works again", lease.name)
                    entry.failing = False
                if still_ours:
                    entry.liveness.renewed(sent_at)
                    entry.due = sent_at + lease.ttl / 3
                    continue
                entry.liveness.mark_lost()
                entry.active = False
                lost.append(entry)
                logger.warning(
                    "%s (slot %s, fence %s) lost its lease: another replica took it over",
                    lease.name,
                    lease.slot,
                    lease.fence,
                )
        if lost:
            with self._changed:
                for entry in lost:
                    self._tracked.pop(id(entry.liveness), None)

    def _renew_leases(self, leases: list[Lease]) -> list[bool]:
        with self._outage.waiting(lambda: f"renewing {len(leases)} lease(s)"):
            ours = self._store.heartbeat_many(leases)
        self._outage.answered()
        return ours

    def _failed(self, entry: _Tracked, exc: Exception) -> None:
        lease = entry.lease
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

    def _unexpected(self, due: list[_Tracked]) -> None:
        """Not a database error (a bug, a driver or event hook raising): say so once
        per streak, with the traceback, and retry like any failed renewal."""
        if not self._broken:
            logger.exception("renewing leases failed unexpectedly; retrying")
            self._broken = True
        for entry in due:
            entry.failing = True
            entry.due = time.monotonic() + max(0.1, entry.lease.ttl / 10)
            _ = entry.liveness.lost
