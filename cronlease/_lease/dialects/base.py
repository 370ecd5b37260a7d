"""What every backend's module provides, and the statements they share.

One module per backend (``postgresql.py``, ``sqlite.py``, ``mysql.py``) holds
everything cronlease knows of that database: its statements, its engine and
session settings, its upgrade of old tables, its batched deletes. Each
subclasses :class:`Statements`, the one interface the generic modules of
``cronlease/_lease/`` use, so none of them asks which database it is talking to
(docs/design.md §3, "Adding a backend"). What is the same on every backend is
here (and in ``attempts.py``: the rare statements of further attempts).

Each backend module builds its statements once, at import, with SQLAlchemy
Core, from one expression for the database clock (epoch seconds as a double).
Every method takes an open :class:`~sqlalchemy.engine.Connection` and owns its
transaction: backends that run in autocommit (PostgreSQL) use one statement
per method, so the ``with conn.begin()`` blocks cost nothing there.
Driver exceptions propagate; :class:`cronlease._lease.store.LeaseStore` wraps them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Double,
    Integer,
    String,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    inspect,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.engine import URL, Connection, Dialect, Engine
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError

from cronlease._lease.model import (
    AcquireRequest,
    FinishRequest,
    Lease,
    LeaseInfo,
    LeaseState,
    RunRecord,
)
from cronlease._lease.schema import deliveries, leases, members, runs

if TYPE_CHECKING:
    from sqlalchemy import Delete

    from cronlease._lease.membership import FileCheck, FleetStatements

__all__ = [
    "CONNECT_TIMEOUT",
    "HEARTBEAT_TIMEOUT",
    "IDLE_IN_TRANSACTION_TIMEOUT",
    "LIMIT",
    "PAUSED_ROW",
    "Statements",
    "acquire_rows",
    "build_set_paused",
    "check_batch",
    "members_lack_roles",
    "state_after_upsert",
    "take_if_free",
    "upgrade_needed",
]

# The longest a lease renewal (one statement for every lease of the replica) may
# take, lock waits included: a hung one fails, is logged, and is retried soon on
# a fresh connection. Leases are at least 1 s long and renewed every ttl/3, so a
# renewal this slow costs only the leases that would have expired anyway.
HEARTBEAT_TIMEOUT = 5.0
# The longest a transaction cronlease opened may sit idle between its statements
# before the server ends the session (PostgreSQL: the transactions of several
# statements, SET LOCAL; MariaDB: every session, idle_transaction_timeout; MySQL
# has no such setting). cronlease sends a transaction's statements one after the
# other, so only a stalled process (SIGSTOP, swapping, a debugger) sits that long,
# and the row locks of its transaction would otherwise hold every other replica's
# statements on those rows until its connection ends, however long it is stopped.
IDLE_IN_TRANSACTION_TIMEOUT = 5

#: how long opening a connection to a database server may take, in seconds
CONNECT_TIMEOUT = 5

#: what the run-history rows of an abandoned run say
ABANDONED_ERROR = "its holder stopped renewing the lease"

name_param = bindparam("b_name", type_=String)
fence_param = bindparam("b_fence", type_=BigInteger)
holder_param = bindparam("b_holder", type_=String)
run_slot_param = bindparam("b_run_slot", type_=BigInteger)
#: the row bound of one batched delete (:meth:`Statements.bounded_delete`)
LIMIT = bindparam("b_limit", type_=Integer)
manual_param = bindparam("b_manual", type_=Boolean)


#: the lease row ``pause`` inserts for a task that never ran: no holder, no fence, and
#: slot -1 so that its first scheduled tick still runs once it is resumed
PAUSED_ROW: dict[str, Any] = {
    "name": name_param,
    "holder": "",
    "fence": 0,
    "slot": -1,
    "acquired_at": 0.0,
    "expires_at": 0.0,
    "paused": True,
}


def take_if_free(now_sql: str) -> str:
    """The conflict clause of the acquisition upsert into ``cronlease_leases AS l``, as
    PostgreSQL and SQLite write it (``ON CONFLICT ... DO UPDATE ... WHERE``; MySQL has
    none: mysql.py).

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
    """Upsert the paused flag, so that a task that never ran can be paused too
    (PostgreSQL's and SQLite's ``insert()`` share the ``on_conflict_do_update`` API)."""
    statement = insert(leases).values(**PAUSED_ROW)
    return statement.on_conflict_do_update(
        index_elements=[leases.c.name], set_={"paused": statement.excluded.paused}
    )


def upgrade_needed(conn: Connection) -> bool:
    """Whether ``cronlease_runs`` is of a version before attempts (no ``attempt`` column)."""
    columns = {column["name"] for column in inspect(conn).get_columns(runs.name)}
    return "attempt" not in columns


def members_lack_roles(conn: Connection) -> bool:
    """Whether ``cronlease_members`` is of a version before roles (no ``roles`` column)."""
    return "roles" not in {c["name"] for c in inspect(conn).get_columns(members.name)}


def acquire_rows(
    requests: Sequence[AcquireRequest], nonce_holders: Sequence[str]
) -> list[dict[str, Any]]:
    """The rows of one acquisition, as every backend's statement reads them.

    ``slot`` is the slot the lease row takes: -1 marks a manual request, which
    keeps the row's slot cursor (and -1 for a task that never ran, so its first
    scheduled tick still runs); scheduled slots are never negative. The run
    row gets ``run_slot`` (for a manual run, the instant it was asked for),
    ``manual = slot < 0`` and ``scheduled_for = run_slot / 1000``: rows carry
    nothing the statement can derive, since a large batch encodes and parses
    every key of every row.
    """
    return [
        {
            "name": request.name,
            "holder": nonce,
            "slot": -1 if request.manual else request.slot,
            "run_slot": request.slot,
            "ttl": float(request.ttl),
            "tolerance": float(request.tolerance),
            "fingerprint": request.fingerprint,
        }
        for request, nonce in zip(requests, nonce_holders, strict=True)
    ]


def check_batch(requests: Sequence[AcquireRequest]) -> None:
    """One acquisition names each task at most once: a row is upserted once per statement."""
    names = [request.name for request in requests]
    if len(set(names)) != len(names):
        raise ValueError("an acquisition names each task at most once")


def state_after_upsert(
    *,
    slot: int,
    expires_at: float,
    paused: bool,
    db_now: float,
    request: AcquireRequest,
    fence: int = 0,
) -> LeaseState:
    """The row a refused upsert left, read back later in the same transaction (SQLite, MySQL).

    The read-back's clock is later than the upsert's. The row was locked (MySQL)
    or the database serialized (SQLite) in between, so a row that is free now,
    not paused and of an older slot was refused only because its lease was
    still held at the upsert and expired since (unless the future gate refused
    it): say so (held, 0 s left), or the late pickup that would win it right
    away is not tried.
    """
    in_time = request.slot / 1000.0 <= db_now + request.tolerance  # not refused as future
    if not paused and expires_at < db_now and (request.manual or (slot < request.slot and in_time)):
        db_now = expires_at
    return LeaseState(slot=slot, expires_at=expires_at, paused=paused, db_now=db_now, fence=fence)


class Statements(ABC):
    """The lease and history statements of one backend."""

    #: names per statement reading lease rows by name: far below every backend's
    #: bound-parameter limit (SQLite's default is 32,766); PostgreSQL's are one array
    names_per_read = 500

    def __init__(self, now: ColumnElement[float]) -> None:
        self.now = now
        # The fence and the attempt's nonce: after the database lost writes, a
        # fence can be issued twice, a nonce cannot (docs/design.md §3.8).
        lease_is_ours = and_(
            leases.c.name == name_param,
            leases.c.fence == fence_param,
            leases.c.holder == holder_param,
        )
        # 1 ms in the past: with the strict '<' of the lease rule and a millisecond
        # clock, an immediate re-acquire would otherwise often fail.
        self._release = update(leases).where(lease_is_ours).values(expires_at=now - 0.001)
        self._finish_run = (
            update(runs)
            .where(
                runs.c.name == name_param,
                runs.c.slot == run_slot_param,
                runs.c.manual == manual_param,
                runs.c.fence == fence_param,
                runs.c.holder == holder_param,
                # not IN (...): an expanding parameter cannot be used with executemany()
                or_(runs.c.outcome == "running", runs.c.outcome == "abandoned"),
            )
            .values(
                # A run marked abandoned while it was still going had lost its lease.
                outcome=case(
                    (runs.c.outcome == "abandoned", literal("lost")),
                    else_=bindparam("b_outcome", type_=String),
                ),
                finished_at=now,
                error=bindparam("b_error", type_=String),
            )
        )
        self._abandon = (
            update(runs)
            .where(
                runs.c.name == name_param,
                runs.c.outcome == "running",
                # another attempt's run: an earlier fence, or a fence issued again
                or_(runs.c.fence < fence_param, runs.c.holder != holder_param),
            )
            .values(outcome="abandoned", error=ABANDONED_ERROR)
        )
        floor_slot = bindparam("b_slot", type_=BigInteger)
        self._raise_floor = (
            update(leases)
            .where(leases.c.name == name_param)
            .values(
                slot=case((leases.c.slot < floor_slot, floor_slot), else_=leases.c.slot),
                fence=case((leases.c.fence < fence_param, fence_param), else_=leases.c.fence),
            )
        )
        new_fence = bindparam("b_new_fence", type_=BigInteger)
        # The attempt's nonce alone says the lease is still ours: another replica's
        # write-back (raise_floor) may have raised its fence since the win. The new
        # fence is above the one asked for and the row's: never lowering, never reused.
        lease_holds_nonce = and_(leases.c.name == name_param, leases.c.holder == holder_param)
        self._refence_lease = (
            update(leases)
            .where(lease_holds_nonce)
            .values(
                fence=case((leases.c.fence < new_fence, new_fence), else_=leases.c.fence + 1),
                slot=case((leases.c.slot < floor_slot, floor_slot), else_=leases.c.slot),
            )
        )
        self._fence_of_nonce = select(leases.c.fence).where(lease_holds_nonce)
        self._refence_run = (
            update(runs)
            .where(
                runs.c.name == name_param,
                runs.c.fence == fence_param,
                runs.c.holder == holder_param,
            )
            .values(fence=new_fence)
        )
        # A holder whose renewal found its row behind it (a database that lost writes,
        # not a takeover) writes its own lease back: its fence, nonce, a slot cursor
        # never lowered and a fresh expiry, only while the row's fence is below its
        # own. A takeover always shows a fence at least the holder's: never written
        # over (docs/design.md §3.8).
        self._reassert = (
            update(leases)
            .where(leases.c.name == name_param, leases.c.fence < fence_param)
            .values(
                fence=fence_param,
                holder=holder_param,
                slot=case((leases.c.slot < floor_slot, floor_slot), else_=leases.c.slot),
                expires_at=now + bindparam("b_ttl", type_=Double),
            )
        )
        its_run = and_(
            runs.c.name == name_param,
            runs.c.slot == run_slot_param,
            runs.c.manual == manual_param,
            runs.c.fence == fence_param,
            runs.c.holder == holder_param,
        )
        # its run, marked abandoned meanwhile (by an acquisition's sweep or the stuck
        # watcher, which saw the row go back), runs on: so it is recorded
        self._revive_run = (
            update(runs)
            .where(its_run, runs.c.outcome == "abandoned")
            .values(outcome="running", finished_at=None, error=None)
        )
        # A win that revealed lost writes while a lease this replica saw held may still
        # run: the acquisition is undone (its fence back by the one it added, the lease
        # expired) and the slot given up, its run row recorded 'missed'. The slot
        # cursor stays: the slot is not run, by anyone.
        # Found by the nonce alone, as refence: a write-back may have raised the fence
        # since the win, and is kept then.
        self._give_back = (
            update(leases)
            .where(leases.c.name == name_param, leases.c.holder == holder_param)
            .values(
                fence=case(
                    (leases.c.fence == fence_param, leases.c.fence - 1), else_=leases.c.fence
                ),
                expires_at=now - 0.001,
            )
        )
        self._give_up_run = (
            update(runs)
            .where(its_run, runs.c.outcome == "running")
            .values(outcome="missed", finished_at=now, error=bindparam("b_error", type_=String))
        )
        # Resuming also marks the lease free as of now (as release does), unless a run
        # holds it: the status counts overdue ticks from there, not through the pause.
        self._resume = (
            update(leases)
            .where(leases.c.name == name_param)
            .values(
                paused=False,
                expires_at=case(
                    (leases.c.expires_at < now, now - 0.001), else_=leases.c.expires_at
                ),
            )
        )
        self._now = select(now)
        # The run row a winner records in the acquiring transaction (SQLite; the other
        # backends write it in their own acquisition SQL).
        self._record_run = runs.insert().values(
            name=name_param,
            slot=run_slot_param,
            manual=manual_param,
            fence=fence_param,
            holder=holder_param,
            scheduled_for=bindparam("b_scheduled_for", type_=Double),
            started_at=bindparam("b_started_at", type_=Double),
            outcome=literal("running", String),
        )
        self._lease_columns = list(leases.c)
        self._all_leases = select(*self._lease_columns).order_by(leases.c.name)
        self._some_leases = (
            select(*self._lease_columns)
            .where(leases.c.name.in_(bindparam("b_names", expanding=True)))
            .order_by(leases.c.name)
        )
        run_columns = [
            runs.c.name,
            runs.c.slot,
            runs.c.manual,
            runs.c.fence,
            runs.c.holder,
            runs.c.scheduled_for,
            runs.c.started_at,
            runs.c.finished_at,
            runs.c.outcome,
            runs.c.error,
            runs.c.attempt,
        ]
        newest_first = (runs.c.started_at.desc(), runs.c.slot.desc())
        self._history = (
            select(*run_columns)
            .where(runs.c.name == name_param)
            .order_by(*newest_first)
            .limit(bindparam("b_limit", type_=Integer))
        )
        ranked = (
            select(
                *run_columns,
                func.row_number()
                .over(partition_by=runs.c.name, order_by=newest_first)
                .label("newness"),
            )
            .where(runs.c.name.in_(bindparam("b_names", expanding=True)))
            .subquery("ranked")
        )
        self._recent_runs = (
            select(*(ranked.c[column.name] for column in run_columns))
            .where(ranked.c.newness <= bindparam("b_limit", type_=Integer))
            .order_by(ranked.c.name, ranked.c.newness)
        )

    # --- backend-specific -------------------------------------------------

    @abstractmethod
    def acquire(
        self, conn: Connection, requests: Sequence[AcquireRequest], nonce_holders: Sequence[str]
    ) -> list[int | LeaseState | None]:
        """Take the leases of ``requests`` (distinct tasks) in one atomic step each.

        Aligned with ``requests``: the new fence where the request won, else the
        lease row as it stood (None: no row), learnt in the same round trip or
        transaction. A winner's run is recorded ``running`` and runs of earlier
        fences still ``running`` become ``abandoned``, atomically with the
        acquisition. One statement (or one transaction) whatever the count,
        lease rows locked in name order, so concurrent acquisitions of
        overlapping tasks cannot deadlock.
        """

    @abstractmethod
    def finish(self, conn: Connection, items: Sequence[FinishRequest]) -> None:
        """Record the outcomes of runs of distinct tasks and, where asked, free their
        leases (fenced), in one transaction, lease rows locked first."""

    @abstractmethod
    def set_paused(self, conn: Connection, name: str) -> None:
        """Set the paused flag, creating the row for a task that never ran."""

    @abstractmethod
    def heartbeat(self, conn: Connection, beats: Sequence[Lease]) -> set[str]:
        """Extend each lease (distinct tasks) by its TTL where its fence and holder are
        still the row's, in one statement (or transaction) whatever the count, rows
        locked in name order; the names of the leases that were still ours."""

    # --- what else differs between backends ---------------------------------
    # Asked by the generic modules (the engine factory, pruning, forgetting, attempts,
    # migration, membership, side engines, table state), so that none of them names a
    # database.

    @abstractmethod
    def make_engine(
        self, url: URL, connect_args: dict[str, Any], *, read_only: bool, options: dict[str, Any]
    ) -> Engine:
        """An engine for lease statements on ``url`` over cronlease's pool (``options``:
        database.py's), with the connect arguments, session settings and driver hooks
        this backend needs; ``connect_args`` are the user's and win over its defaults.
        ``read_only``: an engine that only reads (the read commands)."""

    def adopt(self, engine: Engine) -> Engine | None:
        """The user's ``engine`` for lease statements, on the user's own pool; None when
        what this backend needs is set when connecting (a pool of cronlease's own from
        the same URL is made instead)."""
        return None

    def configure_side_pool(self, engine: Engine, pool: Any) -> None:
        """Set up ``pool``, cronlease's own, made with ``engine``'s pool creator (the
        renewal and page connections: side_engines.py): nothing by default."""
        return None

    def file_guard(self, engine: Engine) -> FileCheck | None:
        """The guard of ``engine``'s database file (docs/design.md §5.17), whose
        ``check()`` raises once the path names another file; None without one."""
        return None

    def write_transaction(self, conn: Connection) -> AbstractContextManager[None]:
        """One READ COMMITTED transaction of several statements (docs/design.md §3.9).

        A session left idle in it (a process stopped between two statements) is
        ended by the server after IDLE_IN_TRANSACTION_TIMEOUT, with its row locks,
        where the backend can (PostgreSQL, MariaDB). Here: a plain transaction.
        """
        return _begun(conn)

    def begin_batch(self, conn: Connection) -> None:
        """Start the transaction of one bounded delete (pruning, forgetting): nothing
        by default."""
        return None

    @abstractmethod
    def bounded_delete(self, where: ColumnElement[bool]) -> Delete:
        """``DELETE FROM runs WHERE where``, at most ``b_limit`` rows, as this backend can
        (docs/design.md §5.12)."""

    @abstractmethod
    def upgrade_runs(self, conn: Connection) -> None:
        """Add ``attempt`` to a ``cronlease_runs`` of a version before attempts and swap
        its unique key, safely when several replicas start at once (§3.9); ``conn``
        has no transaction open."""

    @abstractmethod
    def add_member_roles(self, conn: Connection, column: str) -> None:
        """Add the column ``column`` (DDL) to a ``cronlease_members`` without roles, safely
        when several replicas start at once: the loser of the race finds it there."""

    @abstractmethod
    def fleet_statements(self) -> FleetStatements:
        """The membership and slot-check statements (membership.py), built once."""

    def renewal_session(self, dialect: Dialect) -> list[str]:
        """Statements run on each new connection of the renewal pool, bounding every
        renewal by HEARTBEAT_TIMEOUT server-side (side_engines.py); none by default."""
        return []

    def configure_sibling(self, engine: Engine) -> None:
        """Set up an engine sharing a store engine's dialect over a pool of its own
        (side_engines.py) as the store's engine is: nothing by default."""
        return None

    def file_missing(self, url: Any) -> bool:
        """Whether ``url`` names a database file that does not exist (opening it would
        create it): never, for a backend without files."""
        return False

    def file_uncreatable(self, url: Any) -> str | None:
        """For a missing database file (:meth:`file_missing`), why it could not be
        created where ``url`` puts it (its folder), None when it could."""
        return None

    # --- shared -----------------------------------------------------------

    # --- driver errors: each answers for its own driver's, None for another's ----

    def answered(self, orig: object) -> bool | None:
        """Whether the database answered with ``orig`` (an error about the statement,
        not an outage: faults.py, docs/design.md §5.19), by the driver's own code."""
        return None

    def refused_connect(self, exc: BaseException) -> bool | None:
        """Whether a failed connect was the server's answer (it logged it), not silence
        (pool.py's connect gate, docs/design.md §8)."""
        return None

    def connect_failure(self, where: str, orig: object) -> str | None:
        """One line for a failure of this driver to open ``where`` that is not the
        network's (connect_errors.py): the server's refusal, a file that is no database."""
        return None

    def refuses_row(self, exc: DBAPIError) -> bool:
        """Whether the database answered ``exc`` about a row's data or constraints
        (not an outage): a value it cannot store, a constraint it checks."""
        return isinstance(exc, (DataError, IntegrityError)) and not exc.connection_invalidated

    def release(self, conn: Connection, name: str, fence: int, holder: str) -> bool:
        params = {"b_name": name, "b_fence": fence, "b_holder": holder}
        with conn.begin():
            return bool(conn.execute(self._release, params).rowcount)

    def raise_floor(self, conn: Connection, name: str, slot: int, fence: int) -> None:
        """Raise the row's slot cursor and fence to at least ``slot`` and ``fence``,
        never lowering either: what a replica saw before the database lost it."""
        with conn.begin():
            conn.execute(self._raise_floor, {"b_name": name, "b_slot": slot, "b_fence": fence})

    def refence(self, conn: Connection, lease: Lease, fence: int, slot: int) -> int | None:
        """Give a lease just won a fence higher than any this replica saw (its own was
        issued before, and lost), its run row too, and the slot cursor at least
        ``slot``: ``fence``, or the row's fence + 1 if a write-back raised it that far
        meanwhile; None if the lease is no longer ours (another attempt's nonce)."""
        params = {
            "b_name": lease.name,
            "b_fence": lease.fence,
            "b_holder": lease.holder,
            "b_new_fence": fence,
            "b_slot": slot,
        }
        with conn.begin():
            if not conn.execute(self._refence_lease, params).rowcount:
                return None
            given = int(conn.execute(self._fence_of_nonce, params).scalar_one())
            conn.execute(self._refence_run, {**params, "b_new_fence": given})
            return given

    def reassert(self, conn: Connection, lease: Lease) -> bool:
        """Write ``lease`` back (its fence, nonce, slot at least its own, expiring a TTL
        from now) where the row's fence is below its own — the database lost writes,
        nobody took it over — and its run row back to ``running`` if it was marked
        abandoned meanwhile; whether the lease was written back."""
        params = {
            "b_name": lease.name,
            "b_fence": lease.fence,
            "b_holder": lease.holder,
            "b_slot": -1 if lease.manual else lease.slot,
            "b_ttl": float(lease.ttl),
            "b_run_slot": lease.slot,
            "b_manual": lease.manual,
        }
        with self.write_transaction(conn):
            if not conn.execute(self._reassert, params).rowcount:
                return False
            conn.execute(self._revive_run, params)
            return True

    def give_back(self, conn: Connection, lease: Lease, error: str) -> bool:
        """Undo the acquisition of ``lease`` (not run): the lease expired and, if the row
        still has the win's fence, that fence back by one, where the row still carries
        the win's nonce; its run row ``missed`` with ``error``. Whether the lease was
        given back (False: taken over meanwhile)."""
        params = {
            "b_name": lease.name,
            "b_fence": lease.fence,
            "b_holder": lease.holder,
            "b_run_slot": lease.slot,
            "b_manual": lease.manual,
            "b_error": error,
        }
        with self.write_transaction(conn):
            conn.execute(self._give_up_run, params)
            return bool(conn.execute(self._give_back, params).rowcount)

    # --- the worker-side guard's deliveries (docs/design.md §5.36) -----------------

    def claim_delivery(self, conn: Connection, task_id: str, name: str) -> bool:
        """Insert ``task_id``'s row; False when it is there already (the message was
        delivered before). One statement: the primary key decides, on every backend."""
        try:
            with conn.begin():
                conn.execute(
                    insert(deliveries).values(task_id=task_id, name=name, claimed_at=self.now)
                )
        except IntegrityError:
            return False
        return True

    def forget_deliveries(self, conn: Connection, max_age: float) -> int:
        """Delete the deliveries claimed more than ``max_age`` seconds ago; how many."""
        with conn.begin():
            done = conn.execute(
                delete(deliveries).where(deliveries.c.claimed_at < self.now - max_age)
            )
            return int(done.rowcount)

    def resume(self, conn: Connection, name: str) -> None:
        with conn.begin():
            conn.execute(self._resume, {"b_name": name})

    def database_time(self, conn: Connection) -> float:
        with conn.begin():
            return float(conn.execute(self._now).scalar_one())

    def leases(self, conn: Connection, names: Sequence[str] | None) -> list[LeaseInfo]:
        with conn.begin():
            if names is None:
                rows = conn.execute(self._all_leases).all()
            elif not names:
                return []
            else:
                rows = conn.execute(self._some_leases, {"b_names": list(names)}).all()
        return [
            LeaseInfo(
                name=row.name,
                holder=row.holder,
                fence=int(row.fence),
                slot=int(row.slot),
                acquired_at=float(row.acquired_at),
                expires_at=float(row.expires_at),
                paused=bool(row.paused),
                fingerprint=row.fingerprint,
            )
            for row in rows
        ]

    def history(self, conn: Connection, name: str, limit: int) -> list[RunRecord]:
        with conn.begin():
            rows = conn.execute(self._history, {"b_name": name, "b_limit": limit}).all()
        return [_run_record(row) for row in rows]

    def recent_runs(
        self, conn: Connection, names: Sequence[str], limit: int
    ) -> dict[str, list[RunRecord]]:
        """The latest ``limit`` runs of each of ``names``, newest first, in one statement."""
        with conn.begin():
            rows = conn.execute(self._recent_runs, {"b_names": list(names), "b_limit": limit}).all()
        recent: dict[str, list[RunRecord]] = {}
        for row in rows:
            recent.setdefault(row.name, []).append(_run_record(row))
        return recent


@contextmanager
def _begun(conn: Connection) -> Iterator[None]:
    with conn.begin():
        yield


def _run_record(row: Any) -> RunRecord:
    return RunRecord(
        name=row.name,
        slot=int(row.slot),
        manual=bool(row.manual),
        fence=int(row.fence),
        holder=row.holder,
        scheduled_for=float(row.scheduled_for),
        started_at=float(row.started_at),
        finished_at=None if row.finished_at is None else float(row.finished_at),
        outcome=row.outcome,
        error=row.error,
        attempt=int(row.attempt),
    )
