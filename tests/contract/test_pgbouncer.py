"""The lease store through a real PgBouncer, in transaction and in session pooling.

The bouncers (tests/support/pgbouncer.py) serve a PostgreSQL database of the
run's own. The transaction-mode one hands out a small pool of server
connections in turn, so anything a client leaves on a server connection — a
prepared statement, a session setting — is met on another connection by its
next transaction, or by another client.

One store per pool mode serves the whole module, so its pooled connections
run each statement many times: psycopg would prepare them (after 5
executions) if cronlease let it. Besides the tests written here, a selection
of the contract suites' own tests runs through it unchanged (imported below,
with this module's ``store``): the core operations, not the whole suite twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from cronlease._lease.database import adopt_engine, create_store_engine, normalize_url
from cronlease._lease.model import AcquireRequest, AttemptRequest, Lease
from cronlease._lease.schema import runs
from cronlease._lease.store import LeaseStore
from cronlease.errors import ConfigError, StoreError
from tests.conftest import url_for
from tests.contract.test_attempts import (  # noqa: F401 (collected here, through PgBouncer)
    effects,
    slot,
    test_batch_answers_each_request_its_own,
    test_recovery_marks_the_dead_attempt_abandoned_and_its_late_finish_lost,
    test_retry_after_a_failure_is_granted_with_the_next_fence,
    test_the_database_refuses_one_attempt_twice,
    test_verify_never_ends_the_callers_transaction,
    test_verify_passes_for_the_current_attempt_and_raises_after_another_took_it,
    test_watcher_marks_dead_runs_of_any_task_and_leaves_live_ones,
)
from tests.contract.test_contract import (  # noqa: F401 (collected here, through PgBouncer)
    base_slot,
    test_expired_running_run_is_abandoned_and_its_late_finish_is_lost,
    test_fence_grows_by_one_per_acquisition,
    test_finish_without_release_keeps_the_lease,
    test_first_acquire_returns_fence_1_and_the_lease,
    test_heartbeats_keep_a_lease_past_its_ttl,
    test_history_after_finish,
    test_later_slot_is_granted_after_expiry_and_not_before,
    test_manual_acquire_ignores_the_slot_gate_and_keeps_the_cursor,
    test_odd_names_are_stored_verbatim,
    test_one_winner_per_round_among_threads,
    test_pause_of_a_task_that_never_ran,
    test_paused_task_is_refused_and_resume_grants,
    test_recent_runs_of_many_tasks_in_one_read,
    test_stale_fence_cannot_heartbeat_release_or_finish,
    test_try_acquire_says_why_it_was_refused,
)
from tests.contract.test_heartbeat_faults import (
    test_a_hung_renewal_is_bounded as a_hung_renewal_is_bounded,
)
from tests.support import databases, pgbouncer
from tests.support.contract_store import FORMS, ContractStore
from tests.support.old_schema import make_old_tables, old_history

HOLDER = "bouncer:1"


@pytest.fixture(scope="module", params=pgbouncer.MODES)
def bouncer_store(
    pgbouncers: dict[str, pgbouncer.Bouncer], request: pytest.FixtureRequest
) -> Iterator[LeaseStore]:
    """The module's store through the PgBouncer of one pool mode."""
    lease_store = LeaseStore.from_url(pgbouncers[str(request.param)].url())
    lease_store.create_tables()
    yield lease_store
    lease_store.dispose()


@pytest.fixture(params=FORMS)
def store(bouncer_store: LeaseStore, request: pytest.FixtureRequest) -> ContractStore:
    return ContractStore(bouncer_store, str(request.param))


@pytest.fixture
def user_engine(bouncer_store: LeaseStore) -> Iterator[Engine]:
    """An application's own engine through the same bouncer, set up for it as the
    README says: psycopg must not prepare its statements either."""
    engine = create_engine(bouncer_store.engine.url, connect_args={"prepare_threshold": None})
    yield engine
    engine.dispose()


def test_acquisitions_through_pgbouncer(bouncer_store: LeaseStore, task_name: str) -> None:
    """90 acquisitions, 30 ticks of 3 tasks, each finished: none fails. With psycopg
    preparing cronlease's statements, transaction pooling failed 85 to 90 of them with
    'prepared statement "_pg3_0" does not exist'."""
    store = bouncer_store
    names = [f"{task_name}-{index}" for index in range(3)]
    base = int(store.database_time() * 1000) - 120_000
    failures: list[str] = []
    won = 0
    for tick in range(30):
        for name in names:
            request = AcquireRequest(name=name, slot=base + tick * 1000, ttl=30, holder=HOLDER)
            try:
                lease = store.acquire(request)
                assert isinstance(lease, Lease), lease
                won += 1
                assert store.heartbeat(lease)
                store.finish(lease, "succeeded")
            except StoreError as exc:
                failures.append(str(exc).splitlines()[0])
    assert not failures, f"{len(failures)} of 90 failed, first: {failures[0]}"
    assert won == 90


@pytest.mark.slow
def test_a_hung_renewal_is_bounded_through_transaction_pooling(
    pgbouncers: dict[str, pgbouncer.Bouncer], task_name: str
) -> None:
    """The renewal's time bound holds on whichever server connection it is given: it
    travels with the statement (the test of test_heartbeat_faults.py, once)."""
    store = LeaseStore.from_url(pgbouncers["transaction"].url())
    try:
        store.create_tables()
        a_hung_renewal_is_bounded(store, task_name)
    finally:
        store.dispose()


# What a session leaves on a server connection, read on that connection.
SESSION_STATE = """
SELECT pg_backend_pid(),
       current_setting('statement_timeout'),
       current_setting('idle_in_transaction_session_timeout'),
       current_setting('lock_timeout'),
       current_setting('search_path'),
       current_setting('default_transaction_isolation'),
       (SELECT count(*) FROM pg_prepared_statements),
       (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()),
       (SELECT count(*) FROM pg_listening_channels()),
       pg_my_temp_schema() <> 0,
       (SELECT coalesce(string_agg(name || '=' || setting, ', ' ORDER BY name), '')
          FROM pg_settings
         WHERE source = 'session'
           -- the ones PgBouncer sets itself when it hands a server connection over
           AND name NOT IN ('application_name', 'client_encoding', 'DateStyle', 'TimeZone',
                            'standard_conforming_strings'))
"""


def test_nothing_is_left_on_a_server_connection(
    pgbouncers: dict[str, pgbouncer.Bouncer], task_name: str
) -> None:
    """Every kind of lease operation through transaction pooling, then each server
    connection of the pool is read: no setting made in a session (pg_settings' source
    'session', besides those PgBouncer makes itself), prepared statement, advisory
    lock, LISTEN or temporary table is left for the next client (the renewal connection's
    ``SET statement_timeout`` was, on one of them)."""
    bouncer = pgbouncers["transaction"]
    # two server connections open whatever ran before on this bouncer: two client
    # transactions at once (one at a time, PgBouncer would open only one)
    opener = create_engine(normalize_url(bouncer.url()), poolclass=NullPool)
    try:
        with opener.connect() as first, opener.connect() as second:
            first.execute(text("SELECT 1"))
            second.execute(text("SELECT 1"))
    finally:
        opener.dispose()
    store = LeaseStore.from_url(bouncer.url())
    try:
        store.create_tables()
        base = int(store.database_time() * 1000) - 120_000
        names = [f"{task_name}-{index}" for index in range(3)]
        for tick in range(8):
            leases = [
                lease
                for lease in store.acquire_many(
                    [
                        AcquireRequest(name=n, slot=base + tick * 1000, ttl=30, holder=HOLDER)
                        for n in names
                    ]
                )
                if isinstance(lease, Lease)
            ]
            assert len(leases) == 3
            assert all(store.heartbeat_many(leases))
            store.finish(leases[0], "failed", "boom")
            (retry,) = store.reacquire_many(
                [
                    AttemptRequest(
                        name=names[0],
                        slot=leases[0].slot,
                        after_fence=leases[0].fence,
                        attempt=2,
                        ttl=30,
                        holder=HOLDER,
                    )
                ]
            )
            assert isinstance(retry, Lease)
            store.finish_many([])
            for lease in (retry, *leases[1:]):
                store.finish(lease, "succeeded")
            store.pause(names[1])
            store.resume(names[1])
            store.abandon_expired()
            store.attempt_candidates(names)
            store.leases(names)
            store.history(names[0])
            store.prune_beyond(names[2], keep=2, limit=10)
    finally:
        store.dispose()
    with create_engine(
        normalize_url(direct_url_of(bouncer.database)), poolclass=NullPool
    ).connect() as direct:
        fresh = tuple(direct.execute(text(SESSION_STATE)).one())[1:]  # a new session's
    assert fresh[5:] == (0, 0, 0, False, "")
    seen: dict[int, tuple[object, ...]] = {}
    client = create_engine(
        normalize_url(bouncer.url()),
        poolclass=NullPool,
        connect_args={"prepare_threshold": None},
    )
    try:
        with client.connect() as conn:
            # server connections are handed out in turn: each is met within a few rounds
            for _ in range(6 * pgbouncer.POOL_SIZES["transaction"]):
                row = tuple(conn.execute(text(SESSION_STATE)).one())
                conn.commit()
                seen[int(row[0])] = row[1:]
    finally:
        client.dispose()
    assert len(seen) >= 2, "transaction pooling handed out one server connection only"
    left = {pid: state for pid, state in seen.items() if state != fresh}
    assert not left, f"left on server connections (a new session has {fresh}): {left}"


def test_old_tables_are_upgraded_through_pgbouncer(
    pgbouncers: dict[str, pgbouncer.Bouncer], pool_mode: str
) -> None:
    """The upgrade's table lock and DDL run in one transaction, which transaction pooling
    keeps on one server connection (a scratch database behind the bouncer)."""
    bouncer = pgbouncers[pool_mode]
    database = f"{bouncer.database}_m{uuid.uuid4().hex[:6]}"
    admin = create_engine(
        normalize_url(direct_url_of(bouncer.database)),
        poolclass=NullPool,
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{database}"'))
    try:
        direct = create_engine(normalize_url(direct_url_of(database)), poolclass=NullPool)
        before = old_history("hourly", [1_700_000_000_000, 1_700_000_060_000])
        make_old_tables(direct, before)
        store = LeaseStore.from_url(bouncer.url(database))
        try:
            store.create_tables()
            store.create_tables()
            assert "attempt" in {c["name"] for c in inspect(direct).get_columns(runs.name)}
            assert [(r.slot, r.attempt) for r in store.history("hourly")] == [
                (1_700_000_060_000, 1),
                (1_700_000_000_000, 1),
            ]
        finally:
            store.dispose()
            direct.dispose()
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
        admin.dispose()


def direct_url_of(database: str) -> str:
    """The URL of ``database`` on the PostgreSQL server itself, not through a bouncer."""
    url = normalize_url(databases.CONFIGURED["postgresql"]).set(database=database)
    return url.render_as_string(hide_password=False)


def test_an_adopted_engine_that_prepares_runs_ours_unprepared(
    pgbouncers: dict[str, pgbouncer.Bouncer], task_name: str
) -> None:
    """``Scheduler(engine=app)`` with an application engine left at psycopg's default
    (prepare after 5 executions): cronlease's statements on its connections are not
    prepared, through transaction pooling too, and the application's connections get
    their own setting back when cronlease returns them."""
    app = create_engine(normalize_url(pgbouncers["transaction"].url()), pool_size=2)
    store = LeaseStore(adopt_engine(app))
    try:
        store.create_tables()
        base = int(store.database_time() * 1000) - 60_000
        for tick in range(20):
            lease = store.acquire(
                AcquireRequest(name=task_name, slot=base + tick * 1000, ttl=30, holder=HOLDER)
            )
            assert isinstance(lease, Lease), lease
            assert store.heartbeat(lease)  # the renewal connection: made by the app's creator
            store.finish(lease, "succeeded")
        with app.connect() as conn:
            dbapi_connection = conn.connection.dbapi_connection
            assert dbapi_connection is not None
            assert dbapi_connection.prepare_threshold == 5  # the application's own
        # the renewal connection is cronlease's alone: nothing on it is prepared (the
        # renewal itself never is; any other statement there would be, after 5)
        for _ in range(10):
            with store.heartbeat_engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT 1 + 1").scalar() == 2
    finally:
        store.dispose()
        app.dispose()


# --- prepare_threshold: the default, the URL, connect_args --------------------------


@pytest.fixture
def direct_url(tmp_path: Path) -> str:
    return url_for("postgresql", tmp_path)


def threshold(engine: Engine) -> object:
    try:
        with engine.connect() as conn:
            return conn.connection.dbapi_connection.prepare_threshold  # type: ignore[union-attr]
    finally:
        engine.dispose()


def with_query(url: str, **query: str) -> str:
    return normalize_url(url).update_query_dict(query).render_as_string(hide_password=False)


def test_cronleases_engines_never_prepare_by_default(direct_url: str) -> None:
    assert threshold(create_store_engine(direct_url)) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [("none", None), ("None", None), ("0", 0), ("5", 5), ("12", 12)],
)
def test_prepare_threshold_in_the_url(direct_url: str, value: str, expected: object) -> None:
    engine = create_store_engine(with_query(direct_url, prepare_threshold=value))
    assert "prepare_threshold" not in engine.url.query  # psycopg gets the value, not the text
    assert threshold(engine) == expected


def test_connect_args_choose_over_the_url(direct_url: str) -> None:
    url = with_query(direct_url, prepare_threshold="none")
    assert threshold(create_store_engine(url, connect_args={"prepare_threshold": 3})) == 3
    assert threshold(create_store_engine(direct_url, connect_args={"prepare_threshold": "7"})) == 7
    engine = create_store_engine(direct_url, connect_args={"prepare_threshold": None})
    assert threshold(engine) is None


@pytest.mark.parametrize("value", ["-1", "five", "1.5"])
def test_a_bad_prepare_threshold_in_the_url_is_a_config_error(value: str) -> None:
    url = f"postgresql://u:secret@db.example/d?prepare_threshold={value}"
    with pytest.raises(ConfigError) as caught:
        create_store_engine(url)
    message = str(caught.value)
    assert "prepare_threshold" in message and repr(value) in message
    assert "secret" not in message and "\n" not in message


@pytest.mark.parametrize("value", [-1, 1.5, True, "never ever"])
def test_a_bad_prepare_threshold_in_connect_args_is_a_config_error(value: object) -> None:
    with pytest.raises(ConfigError, match="connect_args: prepare_threshold"):
        create_store_engine(
            "postgresql://u@db.example/d", connect_args={"prepare_threshold": value}
        )
