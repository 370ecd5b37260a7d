"""Helpers for reading acquisition results, and shaping lease rows, in tests."""

from __future__ import annotations

from collections.abc import Sequence

from cronlease._lease.model import Lease, Refusal
from cronlease._lease.schema import leases
from cronlease._lease.store import LeaseStore


def won(result: Lease | Refusal) -> Lease | None:
    """The lease if the acquisition won, else None (for ``wait_for`` and ``is None`` checks)."""
    return result if isinstance(result, Lease) else None


def set_lease_end(store: LeaseStore, name: str, expires_at: float) -> None:
    """Make the lease row of ``name`` look as if its last run ended at ``expires_at``
    (epoch seconds), as it would had that run really happened then: a test that makes
    an old cursor with a fresh acquisition otherwise has it end just now."""
    with store.engine.begin() as conn:
        conn.execute(leases.update().where(leases.c.name == name).values(expires_at=expires_at))


def paused(store: LeaseStore, name: str) -> bool:
    """Whether the lease row of ``name`` says paused (no row yet: not paused)."""
    rows = store.leases([name])
    return bool(rows) and rows[0].paused


def ran_every_task(store: LeaseStore, names: Sequence[str]) -> bool:
    """Whether every task in ``names`` has a recorded run. Not
    ``all(store.recent_runs(names).values())``: tasks without runs are absent from
    that dict, so it is true before any task has run."""
    recent = store.recent_runs(names, 1)
    return all(recent.get(name) for name in names)
