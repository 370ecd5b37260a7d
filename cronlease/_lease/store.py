"""The lease store: acquire, heartbeat, finish/release, pause, history — on one database.

Contract (the same on every backend; the contract suite in ``tests/`` proves it):

- :meth:`LeaseStore.acquire_many` returns, per request, a
  :class:`~cronlease._lease.model.Lease` when this call took the task's lease
  for the slot, and a :class:`~cronlease._lease.model.Refusal` saying why when
  it did not (someone holds or already ran the slot, the slot is old or from
  the future, or the task is paused). A slot can be acquired once, ever. The
  single forms (:meth:`acquire`, :meth:`finish`) are the batch of one.
- :meth:`heartbeat_many`, :meth:`release` and :meth:`finish_many` are fenced:
  they only touch the lease (and the run row) if its fence *and* holder nonce
  are still the ones the attempt got — a fence alone can be issued twice by a
  database that lost writes. Renewals run on a connection of their own
  (:func:`~cronlease._lease.side_engines.heartbeat_engine`), never waiting behind
  the application or the acquirer for a pooled one.
- The store remembers, per task, the highest slot and fence it saw
  (:mod:`cronlease._lease.lost_writes`): a database that shows less lost
  committed writes; the store refuses the slots it saw, writes both back and
  logs an error.
- Every method raises :class:`~cronlease.errors.StoreError` (with the driver
  error as ``__cause__``) when the database fails, and nothing else for it. A
  statement whose connection broke is retried once on a fresh connection; an
  acquisition whose outcome is unknown is first checked by its nonce.
- The store is thread-safe; use one per process (engines are not fork-safe).
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from cronlease._lease import attempts, migration, side_engines
from cronlease._lease.database import create_store_engine, redact
from cronlease._lease.dialects import Statements, statements_for
from cronlease._lease.dialects.attempts import AttemptStatements
from cronlease._lease.dialects.base import check_batch
from cronlease._lease.forgetting import Forgetting
from cronlease._lease.lost_writes import LostWrites
from cronlease._lease.membership import FleetStore
from cronlease._lease.model import (
    AcquireRequest,
    AttemptCandidate,
    AttemptRequest,
    FinishRequest,
    Lease,
    LeaseInfo,
    Outcome,
    Refusal,
    RunRecord,
    check_task_name,
)
from cronlease._lease.pruning import Pruning
from cronlease._lease.recovery import describe_error, recover, store_error
from cronlease._lease.schedule_rows import ScheduleRowStore
from cronlease._safe_text import remember_password
from cronlease.errors import StoreError

__all__ = ["LeaseStore"]

T = TypeVar("T")
# A false "won" needs a fresh nonce equal to the one already in the row: 2**-64.
NONCE_BYTES = 8
# names per recent-runs statement: far below every backend's bound-parameter limit
RECENT_RUNS_CHUNK = 500
logger = logging.getLogger("cronlease")


class LeaseStore:
    """Leases and run history of cronlease tasks in one database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # hidden from every log line and page from now on (cronlease/_safe_text.py)
        remember_password(engine.url.password)
        self.statements: Statements = statements_for(engine)
        self._file = self.statements.file_guard(engine)  # None unless a SQLite file
        self._pruning = Pruning(self.statements)
        self._forgetting = Forgetting(self.statements)
        self.lost_writes = LostWrites(lambda: self.statements, lambda w, op: self._call(w, op))
        self._attempts = attempts.Attempts(
            AttemptStatements(self.statements), self._call, self.lost_writes
        )
        self._beat = side_engines.RenewalEngine(engine)
        #: fleet membership and the read-only slot check (docs/design.md §4.4)
        self.fleet = FleetStore(
            self.statements.fleet_statements(),
            self._call,
            self._file,
            seen=self.lost_writes.cursor_seen,
        )
        #: schedule rows, their changes and the jobs replicas offer (docs/design.md §5.37)
        self.schedule_rows = ScheduleRowStore(self.statements, self._call)
        # set after an outage: what this store saw is read back before the next operation
        self._recheck = False
        self._checking = threading.Lock()

    @classmethod
    def from_url(cls, url: str | None = None) -> LeaseStore:
        return cls(create_store_engine(url))

    @property
    def url(self) -> str:
        """The database URL with its password hidden."""
        return redact(self.engine.url)

    def dispose(self) -> None:
        self.engine.dispose()
        self._beat.dispose()

    @property
    def heartbeat_engine(self) -> Engine:
        """The one-connection engine renewals run on (made on first use)."""
        return self._beat.engine

    # --- plumbing ---------------------------------------------------------

    def _call(
        self,
        what: str,
        operation: Callable[[Connection], T],
        *,
        retry: bool = True,
        engine: Engine | None = None,
    ) -> T:
        try:
            return self._once(operation, engine)
        except DBAPIError as exc:
            if not (retry and exc.connection_invalidated):
                raise store_error(what, exc, self.statements) from exc
            first = exc
        except SQLAlchemyError as exc:
            raise store_error(what, exc, self.statements) from exc
        logger.debug("%s: connection broke (%s); retrying once", what, describe_error(first))
        try:
            return self._once(operation, engine)
        except SQLAlchemyError as exc:
            raise store_error(what, exc, self.statements) from exc

    def _once(self, operation: Callable[[Connection], T], engine: Engine | None = None) -> T:
        if self._recheck and engine is None:
            self._check_seen()
        try:
            with (engine or self.engine).connect() as conn:
                return operation(conn)
        except DBAPIError as exc:
            if not self.statements.refuses_row(exc):
                # An outage or a broken connection: the database met again may be a
                # promoted standby that lost writes. Check before the next operation.
                self._recheck = True
            raise

    def _check_seen(self) -> None:
        """Read back every lease row this store saw (which repairs rows that went back),
        once after an outage; on a thread that is about to use the database anyway."""
        if not self._checking.acquire(blocking=False):
            return  # another thread is at it
        try:
            self._recheck = False
            names = self.lost_writes.seen.names()
            for start in range(0, len(names), RECENT_RUNS_CHUNK):
                self.leases(names[start : start + RECENT_RUNS_CHUNK])
        except StoreError:
            self._recheck = True  # still down: again next time
        finally:
            self._checking.release()

    # --- schema -----------------------------------------------------------

    def create_tables(self) -> None:
        """Create the tables if missing, and upgrade tables of earlier versions in place
        (docs/design.md §3.9); safe when many replicas do it at the same moment."""
        migration.create_tables(self.engine)

    # --- leases -----------------------------------------------------------

    def acquire(self, request: AcquireRequest) -> Lease | Refusal:
        """Take one lease: :meth:`acquire_many` of a batch of one."""
        return self.acquire_many([request])[0]

    def acquire_many(self, requests: Sequence[AcquireRequest]) -> list[Lease | Refusal]:
        """Try to take the lease of each request (distinct tasks), in one round trip.

        Aligned with ``requests``: a :class:`Lease` where this call took the
        task's lease for its slot, else a :class:`Refusal` saying why (someone
        holds or already ran the slot, the slot is old or from the future, or
        the task is paused) — not getting a lease is a normal outcome. One
        statement (PostgreSQL) or one transaction (SQLite, MySQL) whatever the
        count; lease rows are locked in name order, so concurrent batches
        cannot deadlock. Raises StoreError for the whole batch when the
        database fails; a connection that broke after the batch was sent is
        checked by the nonces first.
        """
        if not requests:
            return []
        check_batch(requests)
        if self._file is not None:
            self._file.check()  # no lease on a file no longer at its path (§5.17)
        # Slots this replica saw taken are refused here, even if the database lost them.
        known = self.lost_writes.refusals(requests)
        sent = [r for r, refusal in zip(requests, known, strict=True) if refusal is None]
        if len(sent) < len(requests):
            # Asked for a slot this replica saw taken: only a database that lost it
            # would grant it. Its rows are read instead, which repairs such a loss.
            self.leases([r.name for r, no in zip(requests, known, strict=True) if no is not None])
            results = iter(self._acquire_sent(sent) if sent else [])
            return [next(results) if refusal is None else refusal for refusal in known]
        return self._acquire_sent(requests)

    def _acquire_sent(self, requests: Sequence[AcquireRequest]) -> list[Lease | Refusal]:
        floors = self.lost_writes.before([request.name for request in requests])
        nonces = [f"{request.holder}#{secrets.token_hex(NONCE_BYTES)}" for request in requests]
        sent_at = time.monotonic()
        what = (
            f"acquiring the lease of {requests[0].name!r}"
            if len(requests) == 1
            else f"acquiring the leases of {len(requests)} tasks"
        )
        try:
            results = self._once(lambda conn: self.statements.acquire(conn, requests, nonces))
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise store_error(what, exc, self.statements) from exc
            # The connection broke after the statement may have been sent: the
            # nonces tell which requests took effect; the others are sent once
            # more, which is safe because a slot can be acquired once, ever.
            logger.debug("%s: outcome unknown (%s); checking", what, describe_error(exc))
            results = self._call(
                what,
                lambda conn: recover(self.statements, conn, requests, nonces),
                retry=False,
            )
        except SQLAlchemyError as exc:
            raise store_error(what, exc, self.statements) from exc
        outcomes: list[Lease | Refusal] = [
            Lease(
                name=request.name,
                slot=request.slot,
                fence=result,
                holder=nonce,
                ttl=request.ttl,
                manual=request.manual,
                sent_at=sent_at,
            )
            if isinstance(result, int)
            else Refusal.explain(request, result)
            for request, nonce, result in zip(requests, nonces, results, strict=True)
        ]
        return self.lost_writes.check(requests, results, outcomes, floors)

    # --- further attempts (retries, recoveries: docs/design.md §3.9) ------------

    def reacquire_many(self, requests: Sequence[AttemptRequest]) -> list[Lease | Refusal]:
        """Take the lease of each request (distinct tasks) for one more attempt at its slot.

        Aligned with ``requests``: a :class:`Lease` (``attempt = request.attempt``,
        ``manual`` False) where the lease row still carried ``after_fence`` and the
        slot, was not paused and its lease was free — the row then gets the next
        fence, a fresh nonce holder and ``expires_at = now + ttl``, the task's other
        runs still ``running`` (the followed one, when its holder died) become
        ``abandoned`` and the attempt's run row is inserted, in one transaction.
        Else a :class:`Refusal`: ``paused``, ``held`` (``expires_in``) or ``taken``
        (a newer tick or another attempt won). StoreError as :meth:`acquire_many`.
        """
        if requests and self._file is not None:
            self._file.check()
        return self._attempts.reacquire(requests)

    def attempt_candidates(self, names: Sequence[str]) -> list[AttemptCandidate]:
        """For each named task not paused, its latest attempt — the run row of the lease
        row's fence and holder — if that ended ``failed`` / ``timed_out``, or is still
        ``running`` / ``abandoned`` with the lease expired; sorted by name. Manual runs
        are never candidates. One statement per 500 names."""
        return self._attempts.candidates(names)

    def abandon_expired(self, limit: int = 1000) -> list[tuple[str, int, int]]:
        """The stuck watcher, fleet-wide: mark ``abandoned`` (finished now) at most ``limit``
        runs still ``running`` whose lease expired or moved to another fence or holder, of
        every task in the database (paused, removed, undeclared ones too), in one
        transaction; their (name, slot, attempt)."""
        return self._attempts.abandon_expired(limit)

    def abandoned_counts(self, names: Sequence[str] | None = None) -> dict[str, int]:
        """How many runs are recorded ``abandoned``, per task of ``names`` (or all) with any."""
        return self._attempts.abandoned_counts(names)

    def finish(
        self, lease: Lease, outcome: Outcome, error: str | None = None, *, release: bool = True
    ) -> None:
        """Record one run's outcome: :meth:`finish_many` of a batch of one."""
        self.finish_many([FinishRequest.of(lease, outcome, error, release=release)])

    def finish_many(self, items: Sequence[FinishRequest]) -> None:
        """Record the outcomes of runs of distinct tasks and, with ``release``, free their
        leases at once, in one round trip.

        Fenced: a run that lost its lease changes neither the lease nor a
        newer run's history. A run that was marked ``abandoned`` meanwhile is
        recorded as ``lost``.
        """
        if not items:
            return
        many = f"finishing {len(items)} runs"
        what = f"finishing the run of {items[0].name!r}" if len(items) == 1 else many
        self._call(what, lambda conn: self.statements.finish(conn, items))

    def heartbeat(self, lease: Lease) -> bool:
        """Extend one lease by its TTL: :meth:`heartbeat_many` of a batch of one."""
        return self.heartbeat_many([lease])[0]

    def heartbeat_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Extend each lease (distinct tasks) by its own TTL, in one statement, on the
        renewal connection; aligned with ``leases``: False where another acquisition
        has taken it since (fence or holder no longer the row's). A lease whose row
        went back to a lower fence (the database lost writes) is written back and
        counts as renewed."""
        if not leases:
            return []
        names = [lease.name for lease in leases]
        if len(set(names)) != len(names):
            raise ValueError("a renewal names each task at most once")
        many = f"renewing {len(leases)} leases"
        what = f"renewing the lease of {names[0]!r}" if len(leases) == 1 else many
        reasserted: list[Lease] = []

        def renew(conn: Connection) -> set[str]:
            renewed = self.statements.heartbeat(conn, leases)
            reasserted.clear()
            # A lease not renewed was taken over, or its row went back (the database
            # lost writes): then its holder, which runs, writes it back, only over a
            # lower fence — never over a newer holder's (docs/design.md §3.8).
            for lease in leases:
                if lease.name not in renewed and self.statements.reassert(conn, lease):
                    renewed.add(lease.name)
                    reasserted.append(lease)
            return renewed

        renewed = self._call(what, renew, engine=self.heartbeat_engine)
        for lease in reasserted:
            self.lost_writes.reasserted(lease)
        return [name in renewed for name in names]

    def release(self, lease: Lease) -> bool:
        """Free the lease without touching history; False if it was no longer ours."""
        return self._call(
            f"releasing the lease of {lease.name!r}",
            lambda conn: self.statements.release(conn, lease.name, lease.fence, lease.holder),
        )

    def pause(self, name: str) -> None:
        """Pause a task fleet-wide (also one that never ran); running runs finish."""
        check_task_name(name)
        self._call(f"pausing {name!r}", lambda conn: self.statements.set_paused(conn, name))
        self.lost_writes.paused(name, True)

    def resume(self, name: str) -> None:
        check_task_name(name)
        self._call(f"resuming {name!r}", lambda conn: self.statements.resume(conn, name))
        self.lost_writes.paused(name, False)

    # --- reading ----------------------------------------------------------

    def leases(self, names: Sequence[str] | None = None) -> list[LeaseInfo]:
        """Lease rows, sorted by name: all of them, or those of ``names``. A row older
        than one this store saw before is written back and shown as it was seen."""
        floors = self.lost_writes.before(self.lost_writes.seen.names() if names is None else names)
        chunk_size = self.statements.names_per_read
        if names is None or len(names) <= chunk_size:
            rows = self._call("reading leases", lambda conn: self.statements.leases(conn, names))
        else:
            # by chunks: 100,000 names at start (the schedule check, catch-up) in one
            # statement would pass a bound-parameter limit (SQLite's default 32,766)
            ordered = sorted(names)
            rows = []
            for start in range(0, len(ordered), chunk_size):
                chunk = ordered[start : start + chunk_size]
                read = functools.partial(self.statements.leases, names=chunk)
                rows += self._call(f"reading {len(ordered)} leases", read)
        return self.lost_writes.check_rows(rows, floors)

    def history(self, name: str, limit: int = 20) -> list[RunRecord]:
        """The task's latest runs, newest first."""
        return self._call(
            f"reading the history of {name!r}",
            lambda conn: self.statements.history(conn, name, limit),
        )

    def recent_runs(self, names: Sequence[str], limit: int = 1) -> dict[str, list[RunRecord]]:
        """The latest ``limit`` runs of each task in ``names``, newest first; tasks
        without runs are absent. One statement per 500 names, whatever the count."""
        recent: dict[str, list[RunRecord]] = {}
        unique = sorted(set(names))
        for start in range(0, len(unique), RECENT_RUNS_CHUNK):
            chunk = unique[start : start + RECENT_RUNS_CHUNK]
            recent.update(
                self._call(
                    "reading recent runs",
                    functools.partial(self.statements.recent_runs, names=chunk, limit=limit),
                )
            )
        return recent

    def database_time(self) -> float:
        """The database clock, as epoch seconds."""
        return self._call("reading the database clock", self.statements.database_time)

    def claim_delivery(self, task_id: str, name: str) -> bool:
        """Record that the message ``task_id`` (of worker task ``name``) is about to run:
        True the first time, False when it was claimed before (a resend or a
        redelivery), decided by the table's primary key (docs/design.md §5.36)."""
        # not retried after a broken connection: a claim that committed before the
        # break would be refused as a redelivery, and the body never run
        return self._call(
            "claiming a delivery",
            lambda conn: self.statements.claim_delivery(conn, task_id, name),
            retry=False,
        )

    def forget_deliveries(self, max_age: float) -> int:
        """Delete the deliveries claimed more than ``max_age`` seconds ago; how many."""
        return self._call(
            "forgetting old deliveries",
            lambda conn: self.statements.forget_deliveries(conn, max_age),
        )

    def prune_old(self, names: Sequence[str], max_age: float, limit: int) -> int:
        """Delete at most ``limit`` finished runs of ``names`` older than ``max_age`` seconds,
        in one statement and transaction; returns how many (docs/design.md §5.12)."""
        return self._call(
            "pruning run history by age",
            lambda conn: self._pruning.old(conn, names, max_age, limit),
        )

    def prune_beyond(self, name: str, keep: int, limit: int) -> int:
        """Delete at most ``limit`` finished runs of ``name`` older than its ``keep`` newest,
        in one transaction; returns how many."""
        return self._call(
            f"pruning the run history of {name!r}",
            lambda conn: self._pruning.beyond(conn, name, keep, limit),
        )

    def forget(self, names: Sequence[str]) -> list[str]:
        """Delete free rows of ``names``, then runs of names rowless; those (forgetting.py)."""
        return self._forgetting.forget(self._call, names, self.lost_writes.seen)
