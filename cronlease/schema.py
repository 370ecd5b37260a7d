"""The cronlease tables, for migration tools: add ``metadata`` to Alembic's ``target_metadata``."""

from __future__ import annotations

from cronlease._lease.schema import leases, members, metadata, runs

__all__ = ["leases", "members", "metadata", "runs"]
