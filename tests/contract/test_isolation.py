"""Each test run has its own PostgreSQL schema and MySQL/MariaDB database, children included.

What tests/support/databases.py promises, checked on the servers: cronlease's
own engine keeps the run URL's query string, ``create_all`` and every lease
statement land in the run's schema/database (``pg_tables`` /
``information_schema``), a child process given the URL lands there too, and
nothing reaches the configured database. (That nothing is left behind at the
end of the run is checked when the session finishes: see tests/conftest.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from cronlease._lease.database import create_store_engine, normalize_url
from cronlease._lease.model import AcquireRequest
from cronlease._lease.store import LeaseStore
from tests.conftest import url_for
from tests.support import databases, ledger
from tests.support.procs import Proc

SERVERS = ["postgresql", "mysql"]
TABLES = {"cronlease_leases", "cronlease_members", "cronlease_runs"}

# A child process: takes a lease from the URL it is given, says where it is.
CHILD = """
import sys
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.store import LeaseStore
url, name = sys.argv[1:3]
store = LeaseStore.from_url(url)
store.create_tables()
lease = store.acquire(AcquireRequest(name=name, slot=1000, ttl=60, holder="child", tolerance=1))
with store.engine.connect() as conn:
    where = conn.exec_driver_sql(sys.argv[3]).scalar_one()
print("took", isinstance(lease, Lease), where, flush=True)
store.dispose()
"""

WHERE = {"postgresql": "SELECT current_schema()", "mysql": "SELECT DATABASE()"}


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The run's URL on each database server."""
    return url_for(str(request.param), tmp_path)


@pytest.fixture
def configured(server: str) -> Iterator[Engine]:
    """A plain engine on the configured database (what CRONLEASE_TEST_*_URL names)."""
    backend = normalize_url(server).get_backend_name()
    engine = create_engine(
        normalize_url(databases.CONFIGURED[backend]),
        poolclass=NullPool,
        isolation_level="AUTOCOMMIT",
    )
    yield engine
    engine.dispose()


def tables_in(engine: Engine, namespace: str) -> set[str]:
    """The ``cronlease%`` tables in a PostgreSQL schema or a MySQL database."""
    if engine.dialect.name == "postgresql":
        query = (
            "SELECT tablename FROM pg_tables WHERE schemaname = :ns AND tablename LIKE 'cronlease%'"
        )
    else:
        query = (
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = :ns AND table_name LIKE 'cronlease%'"
        )
    with engine.connect() as conn:
        return {str(name) for (name,) in conn.execute(text(query), {"ns": namespace})}


def lease_rows(engine: Engine, namespace: str, name: str) -> int | None:
    """Rows of task ``name`` in ``namespace``'s lease table; None if it has none."""
    quote = '"' if engine.dialect.name == "postgresql" else "`"
    table = f"{quote}{namespace}{quote}.cronlease_leases"
    if "cronlease_leases" not in tables_in(engine, namespace):
        return None
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE name = :n"), {"n": name}
            ).scalar_one()
        )


def configured_namespace(engine: Engine) -> str:
    with engine.connect() as conn:
        return str(conn.execute(text(WHERE[engine.dialect.name])).scalar_one())


def test_the_run_url_names_the_run_schema_or_database(server: str) -> None:
    url = normalize_url(server)
    if url.get_backend_name() == "postgresql":
        assert str(url.query["options"]).endswith(f"-csearch_path={databases.RUN_NAME}")
        assert url.query["application_name"] == databases.RUN_NAME
    else:
        assert url.database == databases.RUN_NAME
    assert databases.RUN_NAME.startswith("cronlease_test_") and len(databases.RUN_NAME) == 23


def test_tables_and_statements_land_in_the_run_schema_or_database(
    server: str, configured: Engine, task_name: str
) -> None:
    engine = create_store_engine(server)  # cronlease's own engine keeps the query string
    backend = engine.dialect.name
    store = LeaseStore(engine)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql(WHERE[backend]).scalar_one() == databases.RUN_NAME
        store.create_tables()  # metadata.create_all
        lease = store.acquire(
            AcquireRequest(name=task_name, slot=1000, ttl=60, holder="here", tolerance=1)
        )
        assert lease is not None
        store.finish(lease, "succeeded")
        assert [run.outcome for run in store.history(task_name)] == ["succeeded"]
    finally:
        store.dispose()
    ledger.setup(server)
    ledger.append(server, task_name, 1000)
    assert TABLES | {"cronlease_test_ledger"} <= tables_in(configured, databases.RUN_NAME)
    assert lease_rows(configured, databases.RUN_NAME, task_name) == 1
    assert lease_rows(configured, configured_namespace(configured), task_name) in (None, 0)


def test_a_child_process_given_the_url_lands_there_too(
    server: str, configured: Engine, task_name: str
) -> None:
    backend = normalize_url(server).get_backend_name()
    child = Proc("-c", CHILD, server, task_name, WHERE[backend])
    try:
        assert child.expect("took", 60).split() == ["took", "True", databases.RUN_NAME]
        assert child.popen.wait(timeout=30) == 0, child.stderr()
    finally:
        child.kill()
    assert lease_rows(configured, databases.RUN_NAME, task_name) == 1
    assert lease_rows(configured, configured_namespace(configured), task_name) in (None, 0)
