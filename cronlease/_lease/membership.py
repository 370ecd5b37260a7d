"""Fleet membership rows and the read-only slot check, on every backend.

Two things the tick path uses to spread work and keep its cost flat as the
fleet grows (docs/design.md §4.4); neither decides who runs a tick — the lease
row's slot cursor alone does (§3.2):

- ``cronlease_members``: one row per live replica. :meth:`FleetStatements.renew`
  upserts the rows of a batch (renewed and expiry times on the database clock;
  ``started_at`` kept from the first insert), deletes rows that have expired
  (skipping rows another renewer holds) and reads every live row back, in one
  statement on PostgreSQL (data-modifying CTEs) and one transaction elsewhere
  (each backend's module subclasses :class:`FleetStatements`).
  :meth:`FleetStatements.leave` deletes rows (a clean shutdown).
- :meth:`FleetStatements.slot_cursors`: one ``SELECT name, slot`` of the lease
  rows of a batch's tasks — no row lock, no write — so a replica that would
  only be refused ``taken`` learns it without locking the row
  (``ON CONFLICT DO UPDATE`` locks a row before it tests its ``WHERE``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from sqlalchemy import ColumnElement, Double, String, bindparam, delete, select
from sqlalchemy.engine import Connection

from cronlease._lease.dialects.driver import DriverStatement
from cronlease._lease.schema import (
    MAX_HOLDER_LENGTH,
    MAX_NAME_LENGTH,
    MAX_TASK_SET_LENGTH,
    leases,
    members,
)
from cronlease._roles import MAX_ROLES_LENGTH, decode
from cronlease.errors import ConfigError

__all__ = [
    "KEPT",
    "MEMBER_COLUMNS",
    "FileCheck",
    "FleetStatements",
    "FleetStore",
    "Member",
    "MemberBeat",
    "Members",
    "members_of",
]

T = TypeVar("T")
#: names per slot-check statement: far below every backend's bound-parameter limit
CHUNK = 500

#: the member columns as the renewal reads them back
MEMBER_COLUMNS = "holder, namespace, task_set, started_at, renewed_at, expires_at, roles"
#: the columns a renewal updates (``started_at`` is kept from the first insert)
KEPT = ("namespace", "task_set", "renewed_at", "expires_at", "roles")


@dataclass(frozen=True)
class MemberBeat:
    """One replica's membership renewal: its row lives ``ttl`` seconds from now."""

    holder: str
    task_set: str
    ttl: float
    namespace: str = ""
    #: the replica's roles, comma-joined (cronlease/_roles.py)
    roles: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.holder, str) or not self.holder:
            raise ConfigError(f"a member's holder id must be a non-empty string: {self.holder!r}")
        if len(self.holder) > MAX_HOLDER_LENGTH:
            raise ConfigError(f"holder id {self.holder[:40]!r}... is too long")
        if len(self.namespace) > MAX_NAME_LENGTH:
            raise ConfigError(f"namespace {self.namespace[:40]!r}... is too long")
        if len(self.roles) > MAX_ROLES_LENGTH:
            raise ConfigError(f"roles {self.roles[:40]!r}... are too long")
        if not self.task_set or len(self.task_set) > MAX_TASK_SET_LENGTH:
            raise ConfigError(f"a task-set digest of 1 to {MAX_TASK_SET_LENGTH} characters")
        if not (isinstance(self.ttl, (int, float)) and math.isfinite(self.ttl) and self.ttl > 0):
            raise ConfigError(f"a member's ttl must be a positive number of seconds: {self.ttl!r}")


@dataclass(frozen=True)
class Member:
    """A live member row; times are database-clock epoch seconds."""

    holder: str
    namespace: str
    task_set: str
    started_at: float
    renewed_at: float
    expires_at: float
    #: its roles (none for a row an older version wrote)
    roles: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Members:
    """The live member rows (sorted by holder) and the database clock they were read at."""

    members: tuple[Member, ...]
    db_now: float


def members_of(rows: Sequence[Any], db_now: float | None) -> Members:
    found = tuple(
        sorted(
            (
                Member(
                    holder=str(row[0]),
                    namespace=str(row[1]),
                    task_set=str(row[2]),
                    started_at=float(row[3]),
                    renewed_at=float(row[4]),
                    expires_at=float(row[5]),
                    roles=decode(row[6]),
                )
                for row in rows
            ),
            key=lambda member: member.holder,
        )
    )
    return Members(found, float(db_now) if db_now is not None else math.nan)


class FleetStatements:
    """Membership and slot-check statements for one backend; ``now`` is its clock.

    This is the form of one transaction per renewal (upsert, expired rows,
    live rows); each backend's module subclasses it with its own upsert
    (:meth:`member_upsert`) and, where it has one, a slot check on the driver's
    cursor (:meth:`cursor_statement`) or a renewal of one statement (PostgreSQL).
    """

    #: whether expired rows are read ``FOR UPDATE SKIP LOCKED``: rows another renewer
    #: is deleting are its own (SQLite: the write lock serializes renewers anyway)
    skip_locked = True

    def __init__(self, now: ColumnElement[float]) -> None:
        self._now = now
        self._live = (
            select(*members.c, now.label("db_now"))
            .where(members.c.expires_at >= now)
            .order_by(members.c.holder)
        )
        self._clock = select(now)
        self._leave = delete(members).where(
            members.c.holder.in_(bindparam("b_holders", expanding=True))
        )
        self._expired = select(members.c.holder).where(
            members.c.expires_at < now,
            members.c.holder.not_in(bindparam("b_holders", expanding=True)),
        )
        self._delete_expired = delete(members).where(
            members.c.expires_at < now,
            members.c.holder.in_(bindparam("b_expired", expanding=True)),
        )
        values = {
            "holder": bindparam("b_holder", type_=String),
            "namespace": bindparam("b_namespace", type_=String),
            "task_set": bindparam("b_task_set", type_=String),
            "started_at": now,
            "renewed_at": now,
            "expires_at": now + bindparam("b_ttl", type_=Double),
            "roles": bindparam("b_roles", type_=String),
        }
        self._upsert = self.member_upsert(values, KEPT)
        # the fence and expiry too: what the replica saw (lost_writes.py, §3.8)
        self._cursors = select(
            leases.c.name, leases.c.slot, leases.c.fence, leases.c.expires_at, now
        ).where(leases.c.name.in_(bindparam("b_names", expanding=True)))
        # The slot check on the driver's cursor, outside SQLAlchemy's transaction: one
        # statement text for any count, and on SQLite no BEGIN IMMEDIATE (every
        # transaction of the store's engine takes the write lock; a plain SELECT in
        # WAL mode reads the last commit without waiting for a writer).
        self._driver_cursors = self.cursor_statement()

    def member_upsert(self, values: dict[str, Any], kept: Sequence[str]) -> Any:
        """The member-row upsert of ``values``, updating the columns ``kept``."""
        raise NotImplementedError

    def cursor_statement(self) -> DriverStatement | None:
        """The slot check as a driver statement reading ``b_names`` (None: through
        SQLAlchemy, an expanding ``IN``)."""
        return None

    def cursor_names(self, names: Sequence[str]) -> Any:
        """The ``b_names`` parameter of :meth:`cursor_statement`."""
        return list(names)

    def renew(self, conn: Connection, beats: Sequence[MemberBeat]) -> Members:
        """Upsert ``beats`` (distinct holders), delete expired rows, read the live ones."""
        holders = [beat.holder for beat in beats]
        with conn.begin():
            conn.execute(
                self._upsert,
                [
                    {
                        "b_holder": b.holder,
                        "b_namespace": b.namespace,
                        "b_task_set": b.task_set,
                        "b_ttl": float(b.ttl),
                        "b_roles": b.roles,
                    }
                    for b in sorted(beats, key=lambda beat: beat.holder)
                ],
            )
            expired = self._expired
            if self.skip_locked:  # rows another renewer is deleting are its own
                expired = expired.with_for_update(skip_locked=True)
            gone = [row[0] for row in conn.execute(expired, {"b_holders": holders})]
            if gone:
                conn.execute(self._delete_expired, {"b_expired": gone})
            return self._read(conn)

    def live(self, conn: Connection) -> Members:
        """The live member rows, without renewing any."""
        with conn.begin():
            return self._read(conn)

    def _read(self, conn: Connection) -> Members:
        rows = conn.execute(self._live).all()
        if rows:
            return members_of([row[:7] for row in rows], rows[0][7])
        return members_of([], conn.execute(self._clock).scalar_one())

    def leave(self, conn: Connection, holders: Sequence[str]) -> None:
        """Delete the member rows of ``holders``."""
        with conn.begin():
            conn.execute(self._leave, {"b_holders": list(holders)})

    def slot_cursors(self, conn: Connection, names: Sequence[str]) -> list[CursorRow]:
        """The lease row of each of ``names`` that has one, read only: its slot cursor,
        fence and expiry, and the database clock."""
        if self._driver_cursors is not None:
            rows, _ = self._driver_cursors.execute(conn, {"b_names": self.cursor_names(names)})
        else:
            with conn.begin():
                rows = conn.execute(self._cursors, {"b_names": list(names)}).all()
        return [
            CursorRow(str(name), int(slot), int(fence), float(expires_at), float(db_now))
            for name, slot, fence, expires_at, db_now in rows
        ]


class FileCheck(Protocol):
    """The guard of a database file (dialects/sqlite.py, docs/design.md §5.17)."""

    def check(self) -> None:
        """Raise DatabaseFileChanged once the path names another file."""


class _Call(Protocol):
    """:meth:`LeaseStore._call`: run an operation, StoreError for a database failure."""

    def __call__(
        self,
        what: str,
        operation: Callable[[Connection], T],
    ) -> T: ...


class CursorRow(NamedTuple):
    """A lease row as the slot check reads it."""

    name: str
    slot: int
    fence: int
    expires_at: float
    db_now: float


class FleetStore:
    """The store's membership and slot-check methods (``LeaseStore.fleet``): every one
    raises StoreError for a database failure, like the store's own."""

    def __init__(
        self,
        statements: FleetStatements,
        call: _Call,
        file: FileCheck | None = None,
        seen: Callable[[CursorRow], None] = lambda row: None,
    ) -> None:
        self._statements = statements
        self._call = call
        # told each row the slot check read: the store's memory of fences (§3.8)
        self._seen = seen
        # a SQLite file no longer at its path: no membership, no slot check (§5.17)
        self._file = file

    def renew(self, beats: Sequence[MemberBeat]) -> Members:
        """Renew the member rows of ``beats`` (distinct holders; new ones are inserted),
        delete expired rows, and return every live row with the database clock: one
        round trip on PostgreSQL (one transaction elsewhere), on the store's pool
        (not the renewal connection: docs/design.md §4.4). A single member is the
        batch of one."""
        holders = [beat.holder for beat in beats]
        if not holders or len(set(holders)) != len(holders):
            raise ValueError("a membership renewal names each holder once, and at least one")
        if self._file is not None:
            self._file.check()
        return self._call(
            "renewing fleet membership",
            functools.partial(self._statements.renew, beats=beats),
        )

    def members(self) -> Members:
        """The live member rows, without renewing any."""
        return self._call("reading fleet membership", self._statements.live)

    def leave(self, holders: Sequence[str]) -> None:
        """Delete the member rows of ``holders`` (a clean shutdown)."""
        if holders:
            self._call(
                "leaving the fleet",
                functools.partial(self._statements.leave, holders=holders),
            )

    def slot_cursors(self, names: Sequence[str]) -> dict[str, int]:
        """The slot cursor of each of ``names`` with a lease row, read only (no row lock,
        no write): a tick whose slot is at or below its cursor would be refused
        ``taken``. One statement per 500 names."""
        if names and self._file is not None:
            self._file.check()
        cursors: dict[str, int] = {}
        unique = sorted(set(names))
        for start in range(0, len(unique), CHUNK):
            rows = self._call(
                "checking slot cursors",
                functools.partial(
                    self._statements.slot_cursors, names=unique[start : start + CHUNK]
                ),
            )
            for row in rows:
                self._seen(row)
                cursors[row.name] = row.slot
        return cursors
