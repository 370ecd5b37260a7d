"""MySQL/MariaDB lease transactions: one request each, and every path kept proven.

cronlease's own MySQL engines send each lease transaction as one
multi-statement request, deciding by RETURNING on MariaDB >= 10.5 and by a
read-back elsewhere (MySQL 8 has no RETURNING; there is no MySQL server here).
Engines given to ``LeaseStore(engine)`` send one statement per request. The
contract and batch suites run here again with the read-back and the
statement-per-request paths forced on MariaDB (the default path runs in
tests/contract/test_contract.py), and the round trips, a failure midway through a
request, and a connection killed midway are checked on the wire.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql  # type: ignore[import-untyped]
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from cronlease._lease.database import create_store_engine, normalize_url
from cronlease._lease.dialects.mysql import MySQLStatements, scripts_enabled
from cronlease._lease.model import AcquireRequest, FinishRequest, Lease, Refusal
from cronlease._lease.store import LeaseStore
from cronlease.errors import StoreError
from tests.conftest import url_for
from tests.contract.test_batch import (  # noqa: F401 (rerun here under every forced path)
    test_a_batch_explains_each_refusal,
    test_a_batch_marks_abandoned_runs,
    test_a_batch_names_each_task_once,
)
from tests.contract.test_contract import *  # noqa: F403 (rerun here under every forced path)
from tests.support.contract_store import FORMS, ContractStore
from tests.support.leases import won
from tests.support.procs import wait_for

FORCED = ["read-back", "statements"]


@pytest.fixture
def backend() -> str:
    return "mysql"


@pytest.fixture(params=FORCED)
def forced_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LeaseStore]:
    """cronlease's engine, its statements forced onto one path."""
    lease_store = LeaseStore.from_url(url_for("mysql", tmp_path))
    lease_store.statements = MySQLStatements(mode=request.param)
    lease_store.create_tables()
    yield lease_store
    lease_store.dispose()


@pytest.fixture(params=FORMS)
def store(forced_store: LeaseStore, request: pytest.FixtureRequest) -> ContractStore:
    """Each forced path through the single forms (one row, scalar parameters) and the
    batch forms (JSON rows), as the contract suite runs on the default path."""
    return ContractStore(forced_store, request.param)


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[Engine]:
    engine = create_engine(normalize_url(url_for("mysql", tmp_path)), isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


def server_slot(store: LeaseStore) -> int:
    return int(store.database_time() * 1000) - 60_000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# --- which path, and its round trips ------------------------------------------------


def test_each_engine_gets_its_path(tmp_path: Path) -> None:
    url = url_for("mysql", tmp_path)
    ours = create_store_engine(url)
    users = create_engine(normalize_url(url), isolation_level="READ COMMITTED")
    statements = MySQLStatements()
    try:
        with ours.connect() as conn:
            assert scripts_enabled(conn)
            assert conn.get_isolation_level() == "READ COMMITTED"  # scripts rely on it
            expected = "returning" if getattr(conn.dialect, "is_mariadb", False) else "read-back"
            assert statements.mode_for(conn) == expected
        with users.connect() as conn:
            assert not scripts_enabled(conn)
            assert statements.mode_for(conn) == "statements"
    finally:
        ours.dispose()
        users.dispose()


class RequestCounter:
    """Counts the requests PyMySQL sends (every query, COMMIT and ROLLBACK is one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = pymysql.connections.Connection._execute_command

        def counting(connection: Any, command: int, sql: Any) -> Any:
            self.count += 1
            return original(connection, command, sql)

        monkeypatch.setattr(pymysql.connections.Connection, "_execute_command", counting)

    def requests(self, action: Any) -> int:
        before = self.count
        action()
        return self.count - before


@pytest.mark.parametrize("mode", ["returning", "read-back"])
def test_a_tick_costs_one_request_before_and_one_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    store = LeaseStore(create_store_engine(url_for("mysql", tmp_path), pool_size=1))
    store.statements = MySQLStatements(mode=mode)
    try:
        store.create_tables()
        name, slot = unique("trips"), server_slot(store)
        counter = RequestCounter(monkeypatch)
        leases: list[Lease | Refusal] = []
        take = AcquireRequest(name=name, slot=slot, ttl=30, holder="a", tolerance=1)
        assert counter.requests(lambda: leases.append(store.acquire(take))) == 1
        lease = leases[0]
        assert isinstance(lease, Lease)
        # A slot this store saw taken is refused without an acquisition; its row is
        # read instead (one SELECT and its COMMIT), to notice a database that lost it.
        assert counter.requests(lambda: leases.append(store.acquire(take))) == 2  # skipped
        assert leases[1] == Refusal("taken")
        assert counter.requests(lambda: store.finish(lease, "succeeded")) == 1
        batch = [
            AcquireRequest(name=f"{name}-{i}", slot=slot, ttl=30, holder="a", tolerance=1)
            for i in range(20)
        ]
        won: list[Lease | Refusal] = []
        assert counter.requests(lambda: won.extend(store.acquire_many(batch))) == 1
        finished = [
            FinishRequest.of(lease, "succeeded", None) for lease in won if isinstance(lease, Lease)
        ]
        assert len(finished) == 20
        assert counter.requests(lambda: store.finish_many(finished)) == 1
        assert [run.outcome for run in store.history(name)] == ["succeeded"]
    finally:
        store.dispose()


# --- failures midway -----------------------------------------------------------------


def engine_with_short_lock_waits(url: str) -> Engine:
    init = "SET time_zone = '+00:00', innodb_lock_wait_timeout = 1"
    return create_store_engine(
        url, pool_size=1, max_overflow=0, connect_args={"init_command": init}
    )


def lock_old_run(raw: Engine, name: str, slot: int) -> Any:
    """Another transaction holding the run row a winner's sweep must update; returns it."""
    conn = raw.connect()  # autocommit: the transaction is the explicit one
    conn.exec_driver_sql("START TRANSACTION")
    conn.execute(
        text("UPDATE cronlease_runs SET error = 'locked' WHERE name = :n AND slot = :s"),
        {"n": name, "s": slot},
    )
    return conn


@pytest.mark.parametrize("mode", ["returning", "read-back"])
def test_a_statement_failing_midway_rolls_back_the_whole_request(
    tmp_path: Path, raw: Engine, mode: str
) -> None:
    """The sweep times out waiting for a locked run row after the upsert took the lease:
    the lease is untouched, and the pool's only connection is clean for its next use."""
    store = LeaseStore(engine_with_short_lock_waits(url_for("mysql", tmp_path)))
    store.statements = MySQLStatements(mode=mode)
    try:
        store.create_tables()
        name, slot = unique("midway"), server_slot(store)
        first = won(store.acquire(AcquireRequest(name=name, slot=slot, ttl=30, holder="old")))
        assert first is not None and store.release(first)
        (before,) = store.leases([name])
        blocker = lock_old_run(raw, name, slot)
        try:
            with pytest.raises(StoreError, match="Lock wait timeout"):
                store.acquire(AcquireRequest(name=name, slot=slot + 1, ttl=30, holder="new"))
        finally:
            blocker.exec_driver_sql("ROLLBACK")
            blocker.close()
        assert store.leases([name]) == [before]  # the upsert was rolled back too
        with store.engine.connect() as conn:  # the same pooled connection
            assert conn.exec_driver_sql("SELECT @@in_transaction").scalar_one() == 0
        lease = won(store.acquire(AcquireRequest(name=name, slot=slot + 1, ttl=30, holder="new")))
        assert lease is not None and lease.fence == 2
        runs = {run.slot: run.outcome for run in store.history(name)}
        assert runs == {slot: "abandoned", slot + 1: "running"}
    finally:
        store.dispose()


def test_a_connection_killed_midway_is_checked_by_its_nonce_and_retried(
    tmp_path: Path, raw: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The server drops the connection while the request waits for a lock: the error
    is a disconnect (the connection is invalidated), the nonce shows the request
    did not take effect, and the retry on a new connection wins."""
    caplog.set_level(logging.DEBUG, logger="cronlease")
    store = LeaseStore(create_store_engine(url_for("mysql", tmp_path), pool_size=1))
    try:
        store.create_tables()
        name, slot = unique("killed"), server_slot(store)
        first = won(store.acquire(AcquireRequest(name=name, slot=slot, ttl=30, holder="old")))
        assert first is not None and store.release(first)
        with store.engine.connect() as conn:
            connection_id = conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar_one()
        blocker = lock_old_run(raw, name, slot)
        result: list[Lease | Refusal | BaseException] = []

        def acquire() -> None:
            try:
                result.append(
                    store.acquire(AcquireRequest(name=name, slot=slot + 1, ttl=30, holder="x"))
                )
            except BaseException as exc:
                result.append(exc)

        thread = threading.Thread(target=acquire)
        thread.start()
        try:
            with raw.connect() as probe:
                wait_for(
                    lambda: probe.execute(
                        text(
                            "SELECT COUNT(*) FROM information_schema.innodb_trx"
                            " WHERE trx_mysql_thread_id = :id AND trx_state = 'LOCK WAIT'"
                        ),
                        {"id": connection_id},
                    ).scalar_one(),
                    timeout=8,
                    interval=0.15,  # innodb_trx is refreshed after 0.1 s without reads
                )
                probe.exec_driver_sql(f"KILL {int(connection_id)}")
        finally:
            blocker.exec_driver_sql("ROLLBACK")
            blocker.close()
            thread.join(timeout=30)
        assert len(result) == 1 and isinstance(result[0], Lease), result
        assert result[0].fence == 2
        assert any("outcome unknown" in record.getMessage() for record in caplog.records)
        runs = {run.slot: run.outcome for run in store.history(name)}
        assert runs == {slot: "abandoned", slot + 1: "running"}
    finally:
        store.dispose()
