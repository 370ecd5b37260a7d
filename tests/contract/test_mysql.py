"""The MySQL/MariaDB backend against a real server, beyond the shared contract suite.

- Real OS processes released by a start gate race for the same slot, round
  after round, under READ COMMITTED sessions (cronlease's own engine) and
  REPEATABLE READ sessions (a user's engine, also in a non-UTC time zone).
  Wins are counted at a side-effect ledger without a unique constraint.
- A brand-new task name raced by every process at once, and neighbouring
  task names raced together (their winners write neighbouring index entries).
  (These two are in tests/processes/test_mysql_race.py, with this module's
  fixtures; the rest is here.)
- An acquisition chosen as a deadlock victim is retried once and wins.
- A session time zone other than UTC, even in a daylight-saving fold, does
  not move lease times; task names are case-sensitive and keep any Unicode.

The server is ``CRONLEASE_TEST_MYSQL_URL`` (default the local MariaDB); an
unreachable server skips, or fails when ``CRONLEASE_TEST_REQUIRE`` names mysql.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine

from cronlease._lease.database import create_store_engine, normalize_url
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.store import LeaseStore
from tests.conftest import url_for
from tests.support.leases import won
from tests.support.procs import wait_for

# Offsets, not zone names: MariaDB knows zone names only once its time zone tables are loaded.
ODD_TIME_ZONES = ["+05:30", "-09:30", "+12:45", "+03:00"]


@pytest.fixture
def mysql_url(tmp_path: Path) -> str:
    return url_for("mysql", tmp_path)


@pytest.fixture
def store(mysql_url: str) -> Iterator[LeaseStore]:
    lease_store = LeaseStore.from_url(mysql_url)
    lease_store.create_tables()
    yield lease_store
    lease_store.dispose()


@pytest.fixture
def raw(mysql_url: str) -> Iterator[Engine]:
    """A plain SQLAlchemy engine on the same server, for probes and setup."""
    engine = create_engine(normalize_url(mysql_url), isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


@pytest.fixture
def ledger(raw: Engine, store: LeaseStore) -> Iterator[str]:
    """A side-effect ledger table of this test's own, without a unique constraint."""
    table = f"cronlease_test_mysql_ledger_{uuid.uuid4().hex[:8]}"
    with raw.connect() as conn:
        conn.execute(
            text(
                f"CREATE TABLE {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
                " task VARCHAR(255) NOT NULL, slot BIGINT NOT NULL,"
                " fence BIGINT NOT NULL, pid INT NOT NULL)"
            )
        )
    yield table
    with raw.connect() as conn:
        conn.execute(text(f"DROP TABLE {table}"))


def unique_name(prefix: str = "mysql") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def server_slot(store: LeaseStore) -> int:
    """A slot a minute behind the database clock, so it and its successors are never 'future'."""
    return int(store.database_time() * 1000) - 60_000


def ledger_rows(raw: Engine, ledger: str) -> list[tuple[str, int, int, int]]:
    with raw.connect() as conn:
        rows = conn.execute(text(f"SELECT task, slot, fence, pid FROM {ledger} ORDER BY id")).all()
    return [(str(task), int(slot), int(fence), int(pid)) for task, slot, fence, pid in rows]


# --- a deadlock victim is retried once -------------------------------------------


def innodb_deadlocks(conn: Connection) -> int:
    """How many deadlocks InnoDB has detected since the server started."""
    row = conn.execute(text("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")).first()  # MariaDB
    if row is not None:
        return int(row[1])
    return int(  # MySQL: a metric that is enabled by default
        conn.execute(
            text(
                "SELECT `COUNT` FROM information_schema.INNODB_METRICS"
                " WHERE NAME = 'lock_deadlocks'"
            )
        ).scalar_one()
    )


def test_a_deadlock_victim_acquisition_is_retried_once(
    mysql_url: str, store: LeaseStore, raw: Engine, ledger: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Another transaction locks an old run row, then the lease row, while acquire waits.

    The acquisition holds the lease row and waits for the run row (to mark it
    abandoned); the other transaction, made heavier so that InnoDB picks the
    acquisition as the victim, then asks for the lease row: a deadlock. The
    acquisition is rolled back whole, retried once, and wins with the next fence.
    """
    caplog.set_level(logging.DEBUG, logger="cronlease")
    name = unique_name("deadlock")
    slot = server_slot(store)
    first = won(store.acquire(AcquireRequest(name=name, slot=slot, ttl=30, holder="old")))
    assert first is not None
    assert store.release(first)  # the lease is free; its run is still 'running'

    with raw.connect() as probe:
        deadlocks_before = innodb_deadlocks(probe)
    other_engine = create_engine(normalize_url(mysql_url))
    result: list[Lease | BaseException | None] = []

    def acquire() -> None:
        try:
            result.append(
                won(store.acquire(AcquireRequest(name=name, slot=slot + 1, ttl=30, holder="new")))
            )
        except BaseException as exc:
            result.append(exc)

    acquirer = threading.Thread(target=acquire)
    try:
        with other_engine.connect() as other:
            transaction = other.begin()
            other.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            other.execute(
                text(f"INSERT INTO {ledger} (task, slot, fence, pid) VALUES (:t, :s, 0, 0)"),
                [{"t": name, "s": index} for index in range(200)],
            )
            other.execute(
                text("UPDATE cronlease_runs SET error = 'locked' WHERE name = :n AND slot = :s"),
                {"n": name, "s": slot},
            )
            acquirer.start()
            with raw.connect() as probe:
                wait_for(
                    lambda: (
                        result  # finished without waiting: shown by the asserts below
                        or probe.execute(
                            text(
                                "SELECT COUNT(*) FROM information_schema.innodb_trx"
                                " WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE :runs"
                                " AND trx_query LIKE :task"
                            ),
                            {"runs": "%UPDATE %cronlease_runs%", "task": f"%{name}%"},
                        ).scalar_one()
                    ),
                    timeout=20,
                    message="the acquisition to wait for the locked run row",
                    # InnoDB refreshes information_schema.innodb_trx only after 0.1 s
                    # without reads: faster polling would see a stale table forever
                    interval=0.15,
                )
            # closes the cycle; InnoDB rolls back the lighter transaction: the acquisition
            other.execute(
                text("UPDATE cronlease_leases SET fingerprint = 'x' WHERE name = :n"), {"n": name}
            )
            transaction.rollback()
        acquirer.join(timeout=30)
    finally:
        other_engine.dispose()
        acquirer.join(timeout=30)

    assert len(result) == 1 and isinstance(result[0], Lease), result
    assert result[0].fence == 2  # the rolled-back first attempt left no trace
    with raw.connect() as probe:
        assert innodb_deadlocks(probe) > deadlocks_before
    assert any("deadlock victim; retrying once" in r.getMessage() for r in caplog.records)
    runs = {run.slot: run for run in store.history(name)}
    assert (runs[slot].outcome, runs[slot].error) == (
        "abandoned",
        "its holder stopped renewing the lease",
    )
    assert (runs[slot + 1].outcome, runs[slot + 1].fence) == ("running", 2)
    (row,) = store.leases([name])
    assert (row.fence, row.slot, row.fingerprint) == (2, slot + 1, None)


# --- time zones ---------------------------------------------------------------


def engine_in_zone(url: str, zone: str) -> Engine:
    """cronlease's engine with a user-supplied session time zone."""
    return create_store_engine(url, connect_args={"init_command": f"SET time_zone = '{zone}'"})


@pytest.mark.parametrize("zone", ODD_TIME_ZONES)
def test_database_time_ignores_the_session_time_zone(mysql_url: str, zone: str) -> None:
    store = LeaseStore(engine_in_zone(mysql_url, zone))
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT @@session.time_zone").scalar_one() == zone
            # UNIX_TIMESTAMP() without an argument is whole epoch seconds in any zone
            ours, whole = conn.execute(
                text(f"SELECT {store.statements.now}, UNIX_TIMESTAMP()")
            ).one()
        assert 0 <= float(ours) - int(whole) < 1
        assert abs(store.database_time() - time.time()) < 5  # the server is this machine's
    finally:
        store.dispose()


def test_leases_taken_in_different_time_zones_agree(mysql_url: str, store: LeaseStore) -> None:
    stores = {zone: LeaseStore(engine_in_zone(mysql_url, zone)) for zone in ODD_TIME_ZONES}
    try:
        name = unique_name("zones")
        slot = server_slot(store)
        for index, (zone, zoned) in enumerate(stores.items()):
            before = store.database_time()
            lease = won(
                zoned.acquire(AcquireRequest(name=name, slot=slot + index, ttl=20, holder=zone))
            )
            assert lease is not None, zone
            after = store.database_time()
            (row,) = store.leases([name])
            assert before <= row.acquired_at <= after, zone
            assert row.expires_at - row.acquired_at == pytest.approx(20.0, abs=1e-6)
            # the lease is held: neither the UTC store nor another zone takes the next slot
            for other in (store, *stores.values()):
                refused = won(
                    other.acquire(
                        AcquireRequest(name=name, slot=slot + index + 1, ttl=20, holder="x")
                    )
                )
                assert refused is None, zone
            zoned.finish(lease, "succeeded")
            (row,) = store.leases([name])
            assert row.expires_at < store.database_time()
    finally:
        for zoned in stores.values():
            zoned.dispose()


def test_lease_times_are_right_in_a_daylight_saving_fold(
    mysql_url: str, raw: Engine, store: LeaseStore
) -> None:
    """At the autumn change local times repeat, and UNIX_TIMESTAMP(NOW(6)) maps the second
    02:30 back to the first: an hour off. Needs the server's time zone tables."""
    with raw.connect() as conn:
        loaded = conn.exec_driver_sql("SELECT COUNT(*) FROM mysql.time_zone_name").scalar_one()
    if not loaded:
        pytest.skip("the server's time zone tables are empty: load them with mariadb-tzinfo-to-sql")
    # 2024-10-27 00:30 UTC is 02:30 CEST in Berlin; an hour later it is 02:30 CET.
    name = unique_name("fold")
    first_0230 = 1729989000.25
    for index, instant in enumerate((first_0230, first_0230 + 3600)):
        # a session in Berlin whose clock stands still at that instant
        init = f"SET time_zone = 'Europe/Berlin', timestamp = {instant}"
        zoned = LeaseStore(create_store_engine(mysql_url, connect_args={"init_command": init}))
        try:
            assert zoned.database_time() == pytest.approx(instant, abs=1e-6)
            lease = won(zoned.acquire(AcquireRequest(name=name, slot=index, ttl=60, holder="fold")))
            assert lease is not None
            (row,) = zoned.leases([name])
            assert (row.acquired_at, row.expires_at) == pytest.approx((instant, instant + 60))
            zoned.finish(lease, "succeeded")
            with zoned.engine.connect() as conn:
                naive = conn.exec_driver_sql("SELECT UNIX_TIMESTAMP(NOW(6))").scalar_one()
            assert float(naive) == pytest.approx(first_0230)  # why the clock avoids it
        finally:
            zoned.dispose()


# --- names -------------------------------------------------------------------


def test_task_names_differing_in_case_are_two_leases(store: LeaseStore) -> None:
    lower = unique_name("case")
    upper = lower.upper()
    slot = server_slot(store)
    first = won(store.acquire(AcquireRequest(name=lower, slot=slot, ttl=30, holder="a")))
    second = won(store.acquire(AcquireRequest(name=upper, slot=slot, ttl=30, holder="b")))
    assert first is not None and second is not None
    assert (first.fence, second.fence) == (1, 1)
    assert [info.name for info in store.leases([lower, upper])] == sorted([lower, upper])
    store.pause(upper)
    assert [info.paused for info in store.leases([upper, lower])] == [True, False]


def test_unicode_task_names_round_trip(store: LeaseStore) -> None:
    name = unique_name("İstanbul-gece-raporu-🌙")
    slot = server_slot(store)
    lease = won(store.acquire(AcquireRequest(name=name, slot=slot, ttl=30, holder="h")))
    assert lease is not None
    assert [info.name for info in store.leases([name])] == [name]
    assert won(store.acquire(AcquireRequest(name=name, slot=slot + 1, ttl=30, holder="h"))) is None
