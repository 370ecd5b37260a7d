"""The ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` acquisition PostgreSQL and SQLite share.

Both dialects' ``insert()`` constructs have the same ``on_conflict_do_update``
API; only the database clock differs. The statement is the one in docs/design.md
§3.2, with the future-slot gate on the inserting ``SELECT`` too, so that even the
first acquisition of a task cannot take a slot from the future.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Double,
    String,
    and_,
    bindparam,
    cast,
    false,
    literal,
    not_,
    select,
    true,
)

from cronlease._lease.dialects.base import name_param, slot_param, ttl_param
from cronlease._lease.schema import leases

__all__ = ["build_acquire", "build_set_paused"]

holder_param = bindparam("b_holder", type_=String)
fingerprint_param = bindparam("b_fingerprint", type_=String)
tolerance_param = bindparam("b_tolerance", type_=Double)


def build_acquire(insert: Callable[[Any], Any], now: ColumnElement[float], *, manual: bool) -> Any:
    """The acquisition upsert, returning ``fence`` (plus ``holder`` and ``acquired_at``).

    A scheduled acquisition needs the lease expired, the slot newer than the
    row's and not from the future, and the task not paused. A manual one (run
    now) needs only expiry and no pause, and leaves the slot cursor as it is.
    """
    statement = insert(leases)
    excluded = statement.excluded
    if manual:
        # A task that never ran keeps slot -1 so its first scheduled tick still runs.
        new_slot: Any = literal(-1, BigInteger)
        gate: Any = true()
    else:
        new_slot = cast(slot_param, BigInteger)
        gate = cast(slot_param, Double) / 1000.0 <= now + tolerance_param
    source = select(
        cast(name_param, leases.c.name.type),
        cast(holder_param, String),
        literal(1, BigInteger),
        new_slot,
        now,
        now + ttl_param,
        cast(false(), Boolean),
        cast(fingerprint_param, String),
    ).where(gate)
    lease_free = and_(leases.c.expires_at < now, not_(leases.c.paused))
    if not manual:
        lease_free = and_(lease_free, leases.c.slot < excluded.slot)
    return (
        statement.from_select(
            list(leases.c),
            source,
        )
        .on_conflict_do_update(
            index_elements=[leases.c.name],
            set_={
                "holder": excluded.holder,
                "fence": leases.c.fence + 1,
                "slot": leases.c.slot if manual else excluded.slot,
                "acquired_at": excluded.acquired_at,
                "expires_at": excluded.expires_at,
                "fingerprint": excluded.fingerprint,
            },
            where=lease_free,
        )
        .returning(leases.c.name, leases.c.fence, leases.c.holder, leases.c.acquired_at)
    )


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
