"""Schedule rows, their audit log and the jobs replicas offer, on every backend.

The statements behind :class:`cronlease.Schedules` and the replicas that follow
the rows (docs/design.md §5.37), in portable SQLAlchemy Core:

- ``cronlease_schedules``: one row per live schedule; a write goes through
  :meth:`ScheduleRowStore.write`, which inserts its ``cronlease_schedule_changes``
  row in the same transaction, after locking the namespace's
  ``cronlease_schedule_heads`` row, so the writes of one namespace commit in seq
  order (a reader that saw ``max(seq)`` = n has seen every change up to n).
- :meth:`ScheduleRowStore.latest_seq`: what a replica polls, one small indexed
  statement.
- ``cronlease_jobs``: the jobs a replica offers, live while its member row is.

What a row *means* (its JSON, its job, its options) is decided above, in
:mod:`cronlease._schedules`: here rows are text in, text out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from cronlease._lease.dialects.base import Statements
from cronlease._lease.schema import jobs, members, schedule_changes, schedule_heads, schedules

__all__ = [
    "ChangeRow",
    "JobOffer",
    "ScheduleRow",
    "ScheduleRowStore",
    "Written",
]

T = TypeVar("T")
Action = Literal["add", "set", "remove"]

#: the columns of a schedule row a write gives (the rest: version, changed_by, changed_at)
VALUE_COLUMNS = ("job", "every", "cron", "timezone", "args", "kwargs", "options", "enabled")


@dataclass(frozen=True)
class ScheduleRow:
    """A ``cronlease_schedules`` row as stored: its JSON columns are text."""

    name: str
    namespace: str
    job: str
    every: str | None
    cron: str | None
    timezone: str | None
    args: str
    kwargs: str
    options: str
    enabled: bool
    version: int
    changed_by: str
    changed_at: float


@dataclass(frozen=True)
class ChangeRow:
    """A ``cronlease_schedule_changes`` row; ``changes`` is JSON text."""

    seq: int
    namespace: str
    name: str
    version: int
    action: str
    changed_by: str
    changed_at: float
    changes: str


@dataclass(frozen=True)
class JobOffer:
    """A job a live replica offers, and its description (JSON text)."""

    holder: str
    job: str
    description: str


@dataclass(frozen=True)
class Written:
    """What a write decided: the row's new values (None: removed), its action and the
    JSON of what changed."""

    action: Action
    values: Mapping[str, Any] | None
    version: int
    changes: str


class _Call(Protocol):
    def __call__(self, what: str, operation: Callable[[Connection], T]) -> T: ...


def _row(row: Any) -> ScheduleRow:
    return ScheduleRow(
        name=str(row.name),
        namespace=str(row.namespace),
        job=str(row.job),
        every=row.every,
        cron=row.cron,
        timezone=row.timezone,
        args=str(row.args),
        kwargs=str(row.kwargs),
        options=str(row.options),
        enabled=bool(row.enabled),
        version=int(row.version),
        changed_by=str(row.changed_by),
        changed_at=float(row.changed_at),
    )


def _latest_seq(conn: Connection, namespace: str) -> int:
    """The highest change seq of ``namespace``, 0 before any (index (namespace, seq))."""
    value = conn.execute(
        select(func.max(schedule_changes.c.seq)).where(schedule_changes.c.namespace == namespace)
    ).scalar()
    return int(value) if value is not None else 0


def _rows(conn: Connection, namespace: str) -> list[ScheduleRow]:
    """Every schedule row of ``namespace``, sorted by name."""
    found = conn.execute(
        select(schedules).where(schedules.c.namespace == namespace).order_by(schedules.c.name)
    ).all()
    return [_row(row) for row in found]


class ScheduleRowStore:
    """The schedule statements of one store (``LeaseStore.schedule_rows``); every method
    raises StoreError for a database failure, like the store's own."""

    def __init__(self, statements: Statements, call: _Call) -> None:
        self._backend = statements
        self._call = call
        self._now = statements.now

    # --- reading ------------------------------------------------------------------

    def latest_seq(self, namespace: str) -> int:
        """The highest change seq of ``namespace`` (0 before any): the replicas' poll,
        one indexed statement (index (namespace, seq))."""

        def read(conn: Connection) -> int:
            with conn.begin():
                return _latest_seq(conn, namespace)

        return self._call("reading the latest schedule change", read)

    def rows(self, namespace: str) -> tuple[int, list[ScheduleRow]]:
        """The latest seq and every schedule row of ``namespace``, sorted by name. The seq
        is read first: the rows read after it are at least as new (a change committed
        between the two is read, and read again at the next poll: harmless), so a
        replica that records it never skips a change."""

        def read(conn: Connection) -> tuple[int, list[ScheduleRow]]:
            with conn.begin():
                return _latest_seq(conn, namespace), _rows(conn, namespace)

        return self._call("reading schedule rows", read)

    def rows_only(self, namespace: str) -> list[ScheduleRow]:
        """Every schedule row of ``namespace``, sorted by name, in one statement (the
        status model's read: it follows no change seq)."""

        def read(conn: Connection) -> list[ScheduleRow]:
            with conn.begin():
                return _rows(conn, namespace)

        return self._call("reading schedule rows", read)

    def row(self, name: str) -> ScheduleRow | None:
        """The row of the stored full name ``name``, or None."""

        def read(conn: Connection) -> ScheduleRow | None:
            with conn.begin():
                found = conn.execute(select(schedules).where(schedules.c.name == name)).first()
            return _row(found) if found is not None else None

        return self._call(f"reading the schedule {name!r}", read)

    def history(self, name: str) -> list[ChangeRow]:
        """Every change of the stored full name ``name``, oldest first (kept after removal)."""

        def read(conn: Connection) -> list[ChangeRow]:
            with conn.begin():
                found = conn.execute(
                    select(schedule_changes)
                    .where(schedule_changes.c.name == name)
                    .order_by(schedule_changes.c.seq)
                ).all()
            return [
                ChangeRow(
                    seq=int(row.seq),
                    namespace=str(row.namespace),
                    name=str(row.name),
                    version=int(row.version),
                    action=str(row.action),
                    changed_by=str(row.changed_by),
                    changed_at=float(row.changed_at),
                    changes=str(row.changes),
                )
                for row in found
            ]

        return self._call(f"reading the changes of the schedule {name!r}", read)

    # --- writing ------------------------------------------------------------------

    def write(
        self,
        namespace: str,
        name: str,
        decide: Callable[[ScheduleRow | None], Written],
        changed_by: str,
    ) -> ScheduleRow | None:
        """Write the row of ``name`` as ``decide`` says, given the row as it is now (read
        under a lock), and its change row, in one transaction; the row written (None
        when removed). Whatever ``decide`` raises rolls the transaction back and is
        raised here (nothing is written)."""
        self._call("writing a schedule", functools.partial(self._ensure_head, namespace=namespace))
        return self._call(
            f"writing the schedule {name!r}",
            functools.partial(
                self._write, namespace=namespace, name=name, decide=decide, changed_by=changed_by
            ),
        )

    def _ensure_head(self, conn: Connection, namespace: str) -> None:
        # apart from the write: an insert that loses a race is an error that would end
        # the write's transaction on PostgreSQL
        head = select(schedule_heads.c.namespace).where(schedule_heads.c.namespace == namespace)
        with conn.begin():
            if conn.execute(head).first() is not None:
                return
        try:
            with conn.begin():
                conn.execute(insert(schedule_heads).values(namespace=namespace))
        except IntegrityError:
            pass  # another writer made it

    def _write(
        self,
        conn: Connection,
        namespace: str,
        name: str,
        decide: Callable[[ScheduleRow | None], Written],
        changed_by: str,
    ) -> ScheduleRow | None:
        with self._backend.write_transaction(conn):
            # the namespace's writers one at a time: seq order is commit order
            conn.execute(
                select(schedule_heads.c.namespace)
                .where(schedule_heads.c.namespace == namespace)
                .with_for_update()
            ).first()
            found = conn.execute(
                select(schedules).where(schedules.c.name == name).with_for_update()
            ).first()
            written = decide(_row(found) if found is not None else None)
            stamp = {"version": written.version, "changed_by": changed_by}
            if written.values is None:
                conn.execute(delete(schedules).where(schedules.c.name == name))
            elif found is None:
                conn.execute(
                    insert(schedules).values(
                        name=name,
                        namespace=namespace,
                        changed_at=self._now,
                        **stamp,
                        **written.values,
                    )
                )
            else:
                conn.execute(
                    update(schedules)
                    .where(schedules.c.name == name)
                    .values(changed_at=self._now, **stamp, **written.values)
                )
            conn.execute(
                insert(schedule_changes).values(
                    namespace=namespace,
                    name=name,
                    action=written.action,
                    changes=written.changes,
                    changed_at=self._now,
                    **stamp,
                )
            )
            if written.values is None:
                return None
            return _row(conn.execute(select(schedules).where(schedules.c.name == name)).one())

    # --- the jobs replicas offer -------------------------------------------------

    def offer(self, holder: str, namespace: str, offered: Mapping[str, str]) -> None:
        """Replace ``holder``'s job rows with ``offered`` (job -> description), and delete
        the rows of holders of ``namespace`` without a live member row (they died)."""

        def write(conn: Connection) -> None:
            live = select(members.c.holder).where(members.c.expires_at >= self._now)
            with self._backend.write_transaction(conn):
                conn.execute(delete(jobs).where(jobs.c.holder == holder))
                conn.execute(
                    delete(jobs).where(
                        jobs.c.namespace == namespace,
                        jobs.c.holder != holder,
                        jobs.c.holder.not_in(live.scalar_subquery()),
                    )
                )
                if offered:
                    conn.execute(
                        insert(jobs),
                        [
                            {
                                "holder": holder,
                                "namespace": namespace,
                                "job": job,
                                "description": description,
                            }
                            for job, description in sorted(offered.items())
                        ],
                    )

        self._call("offering this replica's jobs", write)

    def withdraw(self, holder: str) -> None:
        """Delete ``holder``'s job rows (a clean shutdown)."""

        def write(conn: Connection) -> None:
            with conn.begin():
                conn.execute(delete(jobs).where(jobs.c.holder == holder))

        self._call("withdrawing this replica's jobs", write)

    def offered(self, namespace: str) -> list[JobOffer]:
        """The jobs of ``namespace`` that live replicas offer (their member row live)."""

        def read(conn: Connection) -> list[JobOffer]:
            statement = (
                select(jobs.c.holder, jobs.c.job, jobs.c.description)
                .join(members, members.c.holder == jobs.c.holder)
                .where(jobs.c.namespace == namespace, members.c.expires_at >= self._now)
                .order_by(jobs.c.job, jobs.c.holder)
            )
            with conn.begin():
                return [
                    JobOffer(str(row[0]), str(row[1]), str(row[2]))
                    for row in conn.execute(statement)
                ]

        return self._call("reading the jobs replicas offer", read)
