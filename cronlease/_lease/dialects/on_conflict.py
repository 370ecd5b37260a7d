"""What PostgreSQL's and SQLite's statements share: the ``ON CONFLICT ... DO UPDATE ...
WHERE`` clause that takes a lease only if it is free (docs/design.md §3.2), and
the pause upsert (their ``insert()`` have the same ``on_conflict_do_update`` API)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cronlease._lease.dialects.base import PAUSED_ROW
from cronlease._lease.schema import leases

__all__ = ["build_set_paused", "take_if_free"]


def take_if_free(now_sql: str) -> str:
    """The conflict clause of the acquisition upsert into ``cronlease_leases AS l``.

    The row is taken only if its lease expired, the task is not paused and,
    for a scheduled request, the slot is newer than the row's; a manual
    request (slot -1) keeps the row's slot cursor.
    """
    return f"""ON CONFLICT (name) DO UPDATE
   SET holder = excluded.holder, fence = l.fence + 1,
       slot = CASE WHEN excluded.slot < 0 THEN l.slot ELSE excluded.slot END,
       acquired_at = excluded.acquired_at, expires_at = excluded.expires_at,
       fingerprint = excluded.fingerprint
 WHERE l.expires_at < {now_sql} AND NOT l.paused
   AND (excluded.slot < 0 OR l.slot < excluded.slot)"""


def build_set_paused(insert: Callable[[Any], Any]) -> Any:
    """Upsert the paused flag, so that a task that never ran can be paused too."""
    statement = insert(leases).values(**PAUSED_ROW)
    return statement.on_conflict_do_update(
        index_elements=[leases.c.name], set_={"paused": statement.excluded.paused}
    )
