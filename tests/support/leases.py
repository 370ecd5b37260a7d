"""Helpers for reading acquisition results in tests."""

from __future__ import annotations

from cronlease._lease.model import Lease, Refusal


def won(result: Lease | Refusal) -> Lease | None:
    """The lease if the acquisition won, else None (for ``wait_for`` and ``is None`` checks)."""
    return result if isinstance(result, Lease) else None
