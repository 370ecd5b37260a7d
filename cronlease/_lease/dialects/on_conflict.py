"""The pause upsert PostgreSQL and SQLite share (their ``insert()`` have the same
``on_conflict_do_update`` API)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cronlease._lease.dialects.base import name_param
from cronlease._lease.schema import leases

__all__ = ["build_set_paused"]


def build_set_paused(insert: Callable[[Any], Any]) -> Any:
    """Upsert the paused flag, so that a task that never ran can be paused too."""
    statement = insert(leases).values(
        name=name_param,
        holder="",
        fence=0,
        slot=-1,
        acquired_at=0.0,
        expires_at=0.0,
        paused=True,
    )
    return statement.on_conflict_do_update(
        index_elements=[leases.c.name], set_={"paused": statement.excluded.paused}
    )
