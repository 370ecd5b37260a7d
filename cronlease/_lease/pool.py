"""The pool of a lease store: few connections, closed when idle, reconnects backed off.

SQLAlchemy's ``QueuePool`` with three changes (docs/design.md §8):

- **overflow last**: a checkout that finds every kept connection in use
  waits up to :data:`OVERFLOW_WAIT` for one to come back before it opens an
  overflow connection. Lease statements take milliseconds, so the acquirer
  and the finisher meeting at one instant share the one connection instead of
  opening (and at once closing) a second one on every tick; a statement that
  holds its connection longer (a lock wait, a large batch) still gets a second.
  When the server refuses a new connection (it is full; or the gate below
  holds it back) and connections of this pool are in use, the checkout waits for one
  of those, up to ``pool_timeout``, instead of failing: a replica whose server
  refuses more connections works on the ones it has.
- **idle close**: a kept connection unused for ``idle_timeout`` seconds is
  closed by one sweeper thread per process (:class:`Sweeper`), so a replica
  whose ticks are minutes apart holds no connection between them. The record
  stays in the pool and reconnects on its next checkout, as after an
  invalidation. A SQLite store keeps one connection open: it pins the file's
  inode, which the deleted-file guard relies on (§5.17).
- **the connect gate** (:class:`ConnectGate`): after a server *refused* a
  connection (it answered: too many clients, slots reserved, a role's limit,
  a password refused — each a FATAL line in its log and a backend started for
  nothing), no new connection is tried before a backoff (0.5 s doubling to
  15 s, jittered); checkouts meanwhile fail at once with the last error,
  without a round trip. A full server (``max_connections``) is then asked by
  each replica every 15 s at most, not on every tick and every renewal: its
  log took 1,816 FATAL lines from 60 replicas, 15 of which could not connect.
  A server that did not answer (down, unreachable) costs nothing to ask and is
  asked again at once, so the replica is back the moment it is. The store's
  pool and its renewal pool share one gate.
- **the fork gate** (:data:`FORK_GATE`, SQLite engines only): ``os.fork()`` waits
  until no connection of a watched engine is on loan, so no SQLite transaction
  of another thread is open at the fork (docs/design.md §5.13).
"""

from __future__ import annotations

import copy
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine
from sqlalchemy.pool import QueuePool
from sqlalchemy.pool.base import ConnectionPoolEntry
from sqlalchemy.util import queue as sqla_queue

from cronlease._lease.dialects import installed_backends

__all__ = [
    "BACKOFF_CAP",
    "BACKOFF_FIRST",
    "FORK_GATE",
    "OVERFLOW_WAIT",
    "ConnectGate",
    "ConnectState",
    "ForkGate",
    "StorePool",
    "Sweeper",
    "server_refused",
]

logger = logging.getLogger("cronlease")
T = TypeVar("T")

#: how long a checkout waits for a kept connection before it opens an overflow one
OVERFLOW_WAIT = 0.05
#: the wait after the first failed connect; it doubles with each failure, up to the cap
BACKOFF_FIRST = 0.5
BACKOFF_CAP = 15.0
# when a record was last checked in (monotonic), in its connection's info
_RETURNED = "cronlease_returned_at"
# the thread a watched connection is on loan to, in its record's info (ForkGate)
_LOANED_TO = "cronlease_loaned_to"
#: how long a fork waits for watched connections to come back before it goes ahead
FORK_WAIT = 10.0


@dataclass(frozen=True)
class ConnectState:
    """Why a pool has not connected: ``failures`` attempts in a row failed, the
    first ``failing_for`` seconds ago; the next is tried in ``retry_in`` seconds."""

    failures: int
    failing_for: float
    retry_in: float
    error: str

    def __post_init__(self) -> None:
        if self.failures < 1 or self.failing_for < 0 or self.retry_in < 0:
            raise ValueError("a connect state counts at least one failure")

    def describe(self) -> str:
        return (
            f"no new connection to the database for {self.failing_for:.0f} s: "
            f"{self.failures} attempt(s) failed, the next in {self.retry_in:.0f} s "
            f"({self.error})"
        )


class ConnectGate:
    """Lets a connection attempt through, or fails it at once during a backoff."""

    def __init__(
        self,
        *,
        first: float = BACKOFF_FIRST,
        cap: float = BACKOFF_CAP,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._first = first
        self._cap = cap
        self._jitter = jitter
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._refusals = 0  # of the failures in a row, those the server answered
        self._failing_since = 0.0
        self._retry_at = 0.0
        self._error: BaseException | None = None
        #: attempts that reached the server (or tried to), and those failed at once
        #: during a backoff instead: for tests and benchmarks
        self.attempts = 0
        self.held_back = 0
        _GATES.add(self)

    def after_fork(self) -> None:
        """In a forked child: a parent thread may have held the lock at the fork."""
        self._lock = threading.Lock()

    def connect(self, create: Callable[[], T]) -> T:
        with self._lock:
            error = self._error
            if error is not None and self._clock() < self._retry_at:
                self.held_back += 1
                # A copy, with no traceback: the same object raised over and over
                # would grow its traceback, and the kind of error (no answer, or an
                # answer such as a refused password) stays what the server said.
                raise _fresh(error)
            self.attempts += 1
        try:
            connection = create()
        except Exception as exc:
            self._failed(exc)
            raise
        with self._lock:
            self._failures, self._refusals, self._error = 0, 0, None
        return connection

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            now = self._clock()
            if self._failures == 0:
                self._failing_since = now
            self._failures += 1
            self._error = exc
            if not server_refused(exc):
                self._retry_at = now  # nothing answered: try again whenever asked
                self._refusals = 0
                return
            self._refusals += 1
            wait = min(self._cap, self._first * 2 ** (self._refusals - 1))
            # half fixed, half random: replicas that failed together spread out
            self._retry_at = now + wait / 2 + self._jitter() * wait / 2
        if self._failures == 1:
            logger.debug("connecting failed (%s); backing off", exc)

    def state(self) -> ConnectState | None:
        """None while the last attempt worked (or none was made)."""
        with self._lock:
            if self._error is None:
                return None
            now = self._clock()
            return ConnectState(
                failures=self._failures,
                failing_for=now - self._failing_since,
                retry_in=max(0.0, self._retry_at - now),
                error=" ".join(str(self._error).split())[:300],
            )


def server_refused(exc: BaseException) -> bool:
    """Whether a failed connect was the server's answer (it logged it), not silence:
    each driver's backend tells (``Statements.refused_connect``)."""
    for backend in installed_backends():
        said = backend.refused_connect(exc)
        if said is not None:
            return said
    return False


def _fresh(error: BaseException) -> BaseException:
    try:
        again = copy.copy(error)
    except Exception:  # an exception that cannot be copied: raise it as it is
        again = error
    return again.with_traceback(None)


class StorePool(QueuePool):
    """A ``QueuePool`` that opens overflow last, closes idle connections and backs
    off reconnects (module docstring). ``keep`` connections are never closed for
    idleness. Its arguments are named so ``create_engine(poolclass=StorePool,
    idle_timeout=..., gate=...)`` passes them on."""

    # SQLAlchemy names a pool's logger after its class's module: keep its lines under
    # "sqlalchemy.pool", where they were, not under the "cronlease" logger
    _sqla_logger_namespace = "sqlalchemy.pool.impl.QueuePool"

    def __init__(
        self,
        creator: Any,
        idle_timeout: float = 60.0,
        gate: ConnectGate | None = None,
        keep: int = 0,
        overflow_wait: float = OVERFLOW_WAIT,
        **kw: Any,
    ) -> None:
        super().__init__(creator, **kw)
        self.idle_timeout = idle_timeout
        self.gate = gate if gate is not None else ConnectGate()
        self.keep = keep
        self.overflow_wait = overflow_wait
        invoke = self._invoke_creator
        gate_ = self.gate
        self._invoke_creator = lambda record: gate_.connect(lambda: invoke(record))
        SWEEPER.add(self)

    def recreate(self) -> StorePool:
        return self.__class__(
            self._creator,
            idle_timeout=self.idle_timeout,
            gate=self.gate,
            keep=self.keep,
            overflow_wait=self.overflow_wait,
            pool_size=self._pool.maxsize,
            max_overflow=self._max_overflow,
            pre_ping=self._pre_ping,
            use_lifo=self._pool.use_lifo,
            timeout=self._timeout,
            recycle=self._recycle,
            echo=self.echo,
            logging_name=self._orig_logging_name,
            reset_on_return=self._reset_on_return,
            _dispatch=self.dispatch,
            dialect=self._dialect,
        )

    def _do_get(self) -> ConnectionPoolEntry:
        if self.overflow_wait > 0 and 0 <= self._overflow < self._max_overflow:
            # every kept connection exists and is in use: wait a moment for one
            try:
                return self._pool.get(True, self.overflow_wait)
            except sqla_queue.Empty:
                pass
        try:
            return super()._do_get()
        except sa_exc.TimeoutError:
            raise
        except Exception as exc:
            # The server refused a new connection (it is full); connections of this
            # pool are in use: wait for one. A server that did not answer fails now.
            if not server_refused(exc) or self._overflow + self._pool.maxsize <= 0:
                raise
            try:
                return self._pool.get(True, self._timeout)
            except sqla_queue.Empty:
                pass
            raise

    def _do_return_conn(self, record: ConnectionPoolEntry) -> None:
        record.info[_RETURNED] = time.monotonic()
        super()._do_return_conn(record)
        SWEEPER.wake(self)

    def close_idle(self) -> float | None:
        """Close the kept connections unused for ``idle_timeout``; the monotonic time
        the next open one falls due (None: no open connection is kept)."""
        now = time.monotonic()
        expired: list[ConnectionPoolEntry] = []
        due: float | None = None
        queue = self._pool
        assert isinstance(queue, sqla_queue.Queue)
        with queue.mutex:
            open_ = [record for record in queue.queue if record.dbapi_connection is not None]
            in_use = self.checkedout()
            spare = len(open_) + in_use - self.keep
            for record in sorted(open_, key=lambda r: r.info.get(_RETURNED, now)):
                when = record.info.get(_RETURNED, now) + self.idle_timeout
                if when <= now and spare > 0:
                    queue.queue.remove(record)
                    expired.append(record)
                    spare -= 1
                elif when > now:
                    due = when if due is None else min(due, when)
        for record in expired:
            try:
                record.close()
            except Exception as exc:  # closing a dead connection: it is gone either way
                logger.debug("closing an idle connection failed: %s", exc)
            finally:
                try:
                    queue.put(record, False)
                except sqla_queue.Full:  # a checkin took its place meanwhile
                    self._dec_overflow()
        return due


class Sweeper:
    """One daemon thread per process that closes idle connections of every StorePool,
    waking when the first open one falls due (started on first use, again after fork)."""

    def __init__(self) -> None:
        self._pools: weakref.WeakSet[StorePool] = weakref.WeakSet()
        self._changed = threading.Condition()
        self._wake_at: float | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, pool: StorePool) -> None:
        with self._changed:
            self._pools.add(pool)

    def wake(self, pool: StorePool) -> None:
        """A connection of ``pool`` was checked in: it may fall due before the next wake."""
        due = time.monotonic() + pool.idle_timeout
        with self._changed:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()
                self._wake_at = due
                self._thread = threading.Thread(
                    target=self._loop, name="cronlease-idle-connections", daemon=True
                )
                self._thread.start()
            elif self._wake_at is None or due < self._wake_at:
                self._wake_at = due
                self._changed.notify()

    def sweep(self) -> float | None:
        """Sweep every pool now; the next time one falls due."""
        with self._changed:
            pools = list(self._pools)
        due: float | None = None
        for pool in pools:
            try:
                when = pool.close_idle()
            except Exception:  # the thread serves every pool: it must live on
                logger.exception("closing idle connections failed")
                when = time.monotonic() + pool.idle_timeout
            if when is not None:
                due = when if due is None else min(due, when)
        return due

    def _loop(self) -> None:
        while True:
            with self._changed:
                wake_at = self._wake_at
                now = time.monotonic()
                if wake_at is None or wake_at > now:
                    self._changed.wait(None if wake_at is None else wake_at - now)
                    continue
            due = self.sweep()
            with self._changed:
                # a checkin meanwhile may have asked for an earlier wake
                current = self._wake_at
                if current is not None and current > now and (due is None or current < due):
                    due = current
                self._wake_at = due

    def after_fork(self) -> None:
        """In a forked child: no sweeper thread, and a fresh lock (a parent thread may
        have held it at the fork); the next checkin starts the thread again. The
        parent's pools are forgotten: closing their connections from here would end
        the parent's sessions (a child disposes them with ``close=False``)."""
        self._pools = weakref.WeakSet()
        self._changed = threading.Condition()
        self._thread = None
        self._wake_at = None


class ForkGate:
    """Holds ``os.fork()`` until no connection of a watched engine is on loan.

    SQLite keeps its lock bookkeeping per process, shared by every connection to
    a file, and ``fork`` copies it while the file locks themselves stay with the
    parent: a fork during another thread's write transaction leaves a child that
    believes it holds the write lock, and every write it tries is busy, forever
    (SQLite's rule: no connection open across a fork). gunicorn ``--preload``
    forks workers while the master's scheduler threads write. A connection is on
    loan from checkout to checkin, and SQLite transactions live inside a loan, so
    a fork that waits for loans to end meets none. While a fork waits, threads
    that hold no loan wait to borrow; one that holds a loan may borrow more (it
    would otherwise wait for itself). A loan of the forking thread itself cannot
    be waited for; a fork waits :data:`FORK_WAIT` seconds at most, then warns and
    goes ahead. Forks without a watched connection on loan (``subprocess`` does
    not call fork hooks at all) cost one lock.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._loans: dict[int, list[str]] = {}  # thread ident -> files it holds
        self._forks = 0  # forks waiting or under way in this process

    def watch(self, engine: Engine, label: str) -> None:
        """Count ``engine``'s connections on loan; ``label`` names its file in warnings."""

        def checkout(_dbapi: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
            if _LOANED_TO not in record.info:  # a retried checkout is one loan
                record.info[_LOANED_TO] = self._borrow(label)

        def checkin(_dbapi: Any, record: ConnectionPoolEntry) -> None:
            ident = record.info.pop(_LOANED_TO, None)
            if ident is not None:
                self._give_back(ident, label)

        event.listen(engine, "checkout", checkout)
        event.listen(engine, "checkin", checkin)

    def _borrow(self, label: str) -> int:
        me = threading.get_ident()
        with self._changed:
            while self._forks and me not in self._loans:
                self._changed.wait()
            self._loans.setdefault(me, []).append(label)
        return me

    def _give_back(self, ident: int, label: str) -> None:
        with self._changed:
            held = self._loans.get(ident)
            if held is None:
                return  # lent before a fork, given back in the child
            held.remove(label)
            if not held:
                del self._loans[ident]
            self._changed.notify_all()

    def before_fork(self) -> None:
        me = threading.get_ident()
        deadline = time.monotonic() + FORK_WAIT
        with self._changed:
            self._forks += 1
            others = [t for t in self._loans if t != me]
            while others:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
                others = [t for t in self._loans if t != me]
            files = sorted({f for t, held in self._loans.items() for f in held})
        if files:
            logger.warning(
                "forking while a SQLite connection is in use (%s): the child may be unable "
                "to write to it; fork before starting the scheduler, or start it in the child",
                ", ".join(files),
            )

    def after_fork_in_parent(self) -> None:
        with self._changed:
            self._forks -= 1
            self._changed.notify_all()

    def after_fork_in_child(self) -> None:
        """Loans were the parent's threads', which the child does not have."""
        self._changed = threading.Condition()
        self._loans = {}
        self._forks = 0


_GATES: weakref.WeakSet[ConnectGate] = weakref.WeakSet()
SWEEPER = Sweeper()
FORK_GATE = ForkGate()


def _after_fork_in_child() -> None:
    FORK_GATE.after_fork_in_child()
    SWEEPER.after_fork()
    for gate in list(_GATES):
        gate.after_fork()


if hasattr(os, "register_at_fork"):
    # Registered when the lease layer is first imported, so before the scheduler's
    # own hook: a scheduler restarted in the child borrows from a fresh gate.
    os.register_at_fork(
        before=FORK_GATE.before_fork,
        after_in_parent=FORK_GATE.after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
