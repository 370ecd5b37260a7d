"""The store's pool on real servers: idle connections closed, overflow opened last, a full
server worked around and not hammered (docs/design.md §8).

Server-side facts are read from the server: a connection closed for idleness is
gone from ``pg_stat_activity`` / ``information_schema.processlist`` by its
backend id; a server that refuses connections is a real one (a PostgreSQL role
with ``CONNECTION LIMIT 1``, a port nothing listens on).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import NullPool

from cronlease import LeaseStore, Scheduler, StoreError
from cronlease._lease.database import create_store_engine, normalize_url
from cronlease._lease.pool import ConnectGate, StorePool
from tests.conftest import url_for
from tests.support.databases import CONFIGURED
from tests.support.tcpproxy import TcpProxy

SERVERS = ["postgresql", "mysql"]


def backend_id(engine: Engine) -> int:
    with engine.connect() as conn:
        query = (
            "SELECT pg_backend_pid()"
            if engine.dialect.name == "postgresql"
            else "SELECT CONNECTION_ID()"
        )
        return int(conn.exec_driver_sql(query).scalar_one())


def alive(url: str, ident: int) -> bool:
    """Whether the server still has the connection ``ident`` (asked on a connection of its own)."""
    probe = create_engine(normalize_url(url), poolclass=NullPool)
    try:
        with probe.connect() as conn:
            if probe.dialect.name == "postgresql":
                query = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :id")
            else:
                query = text("SELECT count(*) FROM information_schema.processlist WHERE id = :id")
            return bool(conn.execute(query, {"id": ident}).scalar_one())
    finally:
        probe.dispose()


def opened(engine: Engine) -> list[object]:
    """Every DB-API connection the engine's pool opens from now on."""
    seen: list[object] = []
    event.listen(engine.pool, "connect", lambda dbapi, _record: seen.append(dbapi))
    return seen


@pytest.mark.parametrize("server", SERVERS)
def test_an_idle_connection_is_closed_on_the_server_and_reopened_on_use(
    server: str, tmp_path: Path, wait_for: Callable[..., object]
) -> None:
    store = LeaseStore(create_store_engine(url_for(server, tmp_path), pool_idle_timeout=0.3))
    try:
        first = backend_id(store.engine)
        assert alive(url_for(server, tmp_path), first)
        wait_for(lambda: not alive(url_for(server, tmp_path), first), 10, "the idle one closed")
        assert store.database_time() > 0  # reconnects on its next use
        assert backend_id(store.engine) != first
    finally:
        store.dispose()


@pytest.mark.parametrize("server", SERVERS)
def test_the_renewal_connection_closes_once_no_run_renews(
    server: str, tmp_path: Path, task_name: str, wait_for: Callable[..., object]
) -> None:
    url = url_for(server, tmp_path)
    scheduler = Scheduler(url, pool_idle_timeout=0.3)
    done = threading.Event()
    renewals = opened(scheduler.store.heartbeat_engine)

    @scheduler.task(every="1s", name=task_name, lease_ttl=1)
    def slow() -> None:
        done.wait(10)  # renewed every 1/3 s while it runs

    try:
        scheduler.start()
        wait_for(lambda: renewals, 20, "a renewal connection")
        ident = backend_id(scheduler.store.heartbeat_engine)
        done.set()
        scheduler.shutdown()
        wait_for(lambda: not alive(url, ident), 10, "the renewal connection closed")
    finally:
        done.set()
        scheduler.shutdown()
        scheduler.store.dispose()


def test_sqlite_keeps_one_connection_open_its_file_pin(
    tmp_path: Path, wait_for: Callable[..., object]
) -> None:
    """The deleted-file guard (§5.17) needs the file's inode kept allocated."""
    store = LeaseStore(create_store_engine(f"sqlite:///{tmp_path}/l.db", pool_idle_timeout=0.05))
    try:
        store.create_tables()
        pool = store.engine.pool
        assert isinstance(pool, StorePool)
        # every open one past its idle time and none left to close: what the sweeper sees
        wait_for(lambda: pool.close_idle() is None, 10, "the idle time to pass")
        queue = pool._pool.queue  # type: ignore[attr-defined]
        assert [record.dbapi_connection is not None for record in queue] == [True]
    finally:
        store.dispose()


@pytest.mark.parametrize("backend", ["sqlite", *SERVERS])
def test_a_checkout_waits_for_the_kept_connection_before_opening_an_overflow(
    backend: str, tmp_path: Path
) -> None:
    # A wait long enough for any machine: the second checkout starts while the first
    # holds the only kept connection, which comes back right after.
    engine = create_store_engine(url_for(backend, tmp_path), pool_size=1, max_overflow=2)
    assert isinstance(engine.pool, StorePool)
    engine.pool.overflow_wait = 30.0
    seen = opened(engine)
    first = engine.connect()
    first.exec_driver_sql("SELECT 1")
    got: list[object] = []
    second = threading.Thread(target=lambda: got.append(engine.connect().close()))
    second.start()
    first.close()
    second.join(30)
    assert got and len(seen) == 1, f"{len(seen)} connections opened for two short checkouts"
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", *SERVERS])
def test_a_connection_held_past_the_wait_gets_an_overflow_and_a_burst_past_the_pool_fails(
    backend: str, tmp_path: Path
) -> None:
    url = url_for(backend, tmp_path)
    store = LeaseStore(create_store_engine(url, pool_size=1, max_overflow=1, pool_timeout=0.5))
    seen = opened(store.engine)
    held = [store.engine.connect(), store.engine.connect()]  # the kept one and the overflow
    try:
        assert len(seen) == 2
        with pytest.raises(StoreError, match="QueuePool limit"):
            store.database_time()  # the third waits pool_timeout, then is a StoreError
    finally:
        for conn in held:
            conn.close()
    assert store.database_time() > 0
    store.dispose()


# --- a server that refuses connections ---------------------------------------------------


@pytest.fixture
def limited_url(tmp_path: Path) -> Iterator[str]:
    """A PostgreSQL URL of a role of its own that may hold one connection at a time."""
    url = url_for("postgresql", tmp_path)
    role = f"cronlease_limited_{uuid.uuid4().hex[:8]}"
    admin = create_engine(normalize_url(url), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 1")
    try:
        yield make_url(url).set(username=role).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
            )
            conn.exec_driver_sql(f"DROP ROLE {role}")
        admin.dispose()


def test_a_full_server_is_not_asked_again_before_the_backoff_and_the_pool_works_on(
    limited_url: str, wait_for: Callable[..., object]
) -> None:
    gate = ConnectGate(first=60.0, cap=60.0)  # one backoff outlasts the test
    engine = create_engine(
        normalize_url(limited_url),
        poolclass=StorePool,
        gate=gate,
        overflow_wait=0.0,  # straight to the overflow, which the server refuses
        pool_size=1,
        max_overflow=2,
        isolation_level="AUTOCOMMIT",
    )
    store = LeaseStore(engine)
    errors: list[BaseException] = []
    answers: list[float] = []

    def read() -> None:
        try:
            answers.append(store.database_time())
        except BaseException as exc:
            errors.append(exc)

    try:
        holder = engine.connect()
        holder.exec_driver_sql("SELECT 1")
        readers = [threading.Thread(target=read)]
        readers[0].start()  # its new connection is refused: it waits for the kept one
        wait_for(lambda: gate.state() is not None, 15, "the server's refusal")
        state = gate.state()
        assert state is not None and "too many connections" in state.error
        attempts = gate.attempts
        readers += [threading.Thread(target=read) for _ in range(3)]
        for reader in readers[1:]:
            reader.start()
        wait_for(lambda: gate.held_back >= 3, 15, "three overflows held back by the gate")
        holder.close()
        for reader in readers:
            reader.join(30)
        assert not errors and len(answers) == 4, errors
        assert gate.attempts == attempts, "the full server was asked again during the backoff"
    finally:
        store.dispose()


def test_a_server_that_does_not_answer_is_asked_again_at_once(
    wait_for: Callable[..., object],
) -> None:
    """Down costs the server nothing: no backoff, back the moment it is."""
    server = make_url(CONFIGURED["postgresql"])
    proxy = TcpProxy(server.host or "127.0.0.1", server.port or 5432)
    url = server.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    store = LeaseStore(create_store_engine(url))
    pool = store.engine.pool
    assert isinstance(pool, StorePool)
    try:
        for _ in range(3):
            with pytest.raises(StoreError, match="Connection refused"):
                store.database_time()
        assert pool.gate.attempts == 3 and pool.gate.held_back == 0
        state = pool.gate.state()
        assert state is not None and state.failures == 3
        proxy.up()
        assert store.database_time() > 0
        assert pool.gate.state() is None
    finally:
        proxy.down()
        store.dispose()


def test_a_forked_child_never_closes_the_parents_idle_connections(tmp_path: Path) -> None:
    from cronlease._lease.pool import SWEEPER

    url = url_for("postgresql", tmp_path)
    store = LeaseStore(create_store_engine(url))
    pool = store.engine.pool
    assert isinstance(pool, StorePool)
    try:
        ident = backend_id(store.engine)
        pid = os.fork()
        if pid == 0:  # the child: the inherited connection looks idle here; sweep
            code = 1
            try:
                pool.idle_timeout = 0.0
                SWEEPER.sweep()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert alive(url, ident), "the child ended the parent's session"
        assert backend_id(store.engine) == ident  # the parent's connection, still working
    finally:
        store.dispose()
