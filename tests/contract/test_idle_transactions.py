"""A transaction of cronlease's left idle — its process stopped between two statements —
is ended by the server after IDLE_IN_TRANSACTION_TIMEOUT, and its row locks with it.

Without that bound a SIGSTOPped replica kept its lease row locked for as long as it
was stopped, and no survivor could take the task over
(tests/processes/test_attempts.py found it on MariaDB). On PostgreSQL the bound is
a setting of the transaction itself, so it holds through PgBouncer's transaction
pooling too (the third case).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from cronlease._lease.database import IDLE_IN_TRANSACTION_TIMEOUT, normalize_url
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.schema import leases
from cronlease._lease.store import LeaseStore
from tests.conftest import url_for
from tests.support import databases

# Far past the bound, so a probe that gets the lock got it because the idle session
# was ended, not because it waited the lock out.
PROBE_LOCK_WAIT = 6 * IDLE_IN_TRANSACTION_TIMEOUT

pytestmark = pytest.mark.slow


@pytest.fixture(params=["postgresql", "mysql", "pgbouncer-transaction"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(the store's URL, a URL of the same database on the server itself)."""
    if request.param == "pgbouncer-transaction":
        bouncer = request.getfixturevalue("pgbouncers")["transaction"]
        return bouncer.url(), databases.postgres_database()
    url = url_for(str(request.param), tmp_path)
    return url, url


@contextlib.contextmanager
def locked_by_other(url: str, name: str) -> Iterator[Connection]:
    """Another session waiting up to PROBE_LOCK_WAIT to lock the lease row of ``name``."""
    engine = create_engine(normalize_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SET lock_timeout = '{PROBE_LOCK_WAIT}s'")
            else:
                conn.exec_driver_sql(f"SET SESSION innodb_lock_wait_timeout = {PROBE_LOCK_WAIT}")
            conn.commit()
            with conn.begin():
                conn.execute(select(leases.c.name).where(leases.c.name == name).with_for_update())
                yield conn
    finally:
        engine.dispose()


def test_a_transaction_left_idle_is_ended_with_its_row_locks(
    urls: tuple[str, str], task_name: str
) -> None:
    store_url, server_url = urls
    store = LeaseStore.from_url(store_url)
    try:
        store.create_tables()
        slot = int(store.database_time() * 1000) - 60_000
        first = store.acquire(AcquireRequest(name=task_name, slot=slot, ttl=60, holder="h"))
        assert isinstance(first, Lease)
        stopped = store.engine.connect()
        transaction = store.statements.write_transaction(stopped)
        transaction.__enter__()
        try:
            stopped.execute(
                select(leases.c.name).where(leases.c.name == task_name).with_for_update()
            )
            # the process stops here: nothing more is sent in its transaction
            with locked_by_other(server_url, task_name) as other:
                other.execute(text("SELECT 1"))  # it holds the lock now
        finally:
            with contextlib.suppress(DBAPIError):  # its session was ended under it
                transaction.__exit__(None, None, None)
            stopped.close()
        # and the store goes on, on a fresh connection
        assert store.heartbeat(first)
        store.finish(first, "succeeded")
    finally:
        store.dispose()
