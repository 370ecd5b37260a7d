"""The read-only check of a staged tick: its slot already taken costs no row lock.

A tick tried after the rendezvous delay (``Tick.checked``: a backup's, or an
unsettled view's) reads its lease row's slot cursor first, in one
``SELECT name, slot`` for the batch; one whose cursor is at or past its slot
is refused ``taken`` here, and only the ticks still free go on to admission
and the acquisition (docs/design.md §4.4). Before admission, so that a backup
whose check comes past the grace does not report a tick that ran elsewhere as
missed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from cronlease._lease.store import LeaseStore
from cronlease._run.acquisition.skips import Skips, heard
from cronlease._run.replica_log.outage import OutageLog
from cronlease._run.timer.ticks import Tick
from cronlease._stats import Stats
from cronlease._timing.schedule import slot_of
from cronlease.errors import StoreError

__all__ = ["SlotCheck"]


class SlotCheck:
    """Checks staged ticks against their lease rows, on the thread deciding the batch."""

    def __init__(
        self,
        store: LeaseStore,
        stats: Stats,
        skips: Skips,
        outage: OutageLog,
        ensure_schema: Callable[[], None],
    ) -> None:
        self._store = store
        self._stats = stats
        self._skips = skips
        self._outage = outage
        self._ensure_schema = ensure_schema

    def check(self, ticks: Sequence[Tick]) -> list[Tick]:
        """The ticks still to admit and acquire: a ``checked`` tick whose slot its lease
        row's cursor has reached is refused ``taken`` here, from one read-only SELECT
        for the batch (no row lock, no write). Before admission, so that a backup whose
        check comes past the grace does not report a tick that ran elsewhere as
        missed. A database error skips the checked ticks (``error``)."""
        checked = [tick for tick in ticks if tick.checked]
        if not checked:
            return list(ticks)
        slots: dict[datetime, int] = {}
        for tick in checked:
            if tick.fire_time not in slots:
                slots[tick.fire_time] = slot_of(tick.fire_time)
        try:
            self._ensure_schema()  # not watched: an upgrade of a long history takes its time
            with self._outage.waiting(f"checking the slots of {len(checked)} tick(s)"):
                cursors = self._store.fleet.slot_cursors([tick.task.full_name for tick in checked])
        except StoreError as exc:
            for tick in checked:
                self._skips.skipped(tick.task, slots[tick.fire_time], "error")
            shown = ", ".join(tick.task.full_name for tick in checked[:5])
            more = f" and {len(checked) - 5} more" if len(checked) > 5 else ""
            what = f"checking {len(checked)} ticks ({shown}{more})"
            self._outage.failed(what, exc, ticks=heard(tick.task for tick in checked))
            return [tick for tick in ticks if not tick.checked]
        self._outage.succeeded()
        remaining: list[Tick] = []
        taken = 0
        for tick in ticks:
            cursor = cursors.get(tick.task.full_name) if tick.checked else None
            if cursor is None or cursor < slots[tick.fire_time]:
                remaining.append(tick)
                continue
            self._skips.skipped(tick.task, slots[tick.fire_time], "taken", count=False)
            taken += not tick.task.builtin  # a built-in task's is not counted (§4.11)
        if taken:
            self._stats.add("ticks_not_acquired", taken)
            self._stats.add("ticks_checked_taken", taken)
            self._skips.count("taken", taken)
        return remaining
