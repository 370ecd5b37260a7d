"""What the queue-beat process tests (Celery, Dramatiq, RQ) check of a counted window.

The window is the whole seconds between the fleet being up and the stop: inside it
every tick must have been sent and run once. At its edges, replicas start and stop
on a loaded machine, and a tick won past its grace is recorded ``missed`` (the
engine's promise: released unsent, never sent late); that is allowed there only.
"""

from __future__ import annotations

from collections.abc import Iterable

from cronlease._lease.store import LeaseStore


def window(start: float, end: float) -> tuple[int, int]:
    """The first and last whole second (epoch seconds) of the counted window."""
    return int(start) + 1, int(end)


def missing_slots(slots: set[int], start: float, end: float) -> list[int]:
    """The whole seconds in [start, end] (epoch seconds) with no slot (epoch ms)."""
    first, last = window(start, end)
    return [s * 1000 for s in range(first, last + 1) if s * 1000 not in slots]


def assert_sent_outcomes(store: LeaseStore, names: Iterable[str], start: float, end: float) -> None:
    """Every recorded tick of the window succeeded; one at its edges succeeded or was missed."""
    first, last = window(start, end)
    for name in names:
        for run in store.history(name, 200):
            inside = first * 1000 <= run.slot <= last * 1000
            allowed = {"succeeded"} if inside else {"succeeded", "missed"}
            assert run.outcome in allowed, (name, run.slot, run.outcome, inside)
