"""Shared fixtures: real databases, skipped with a visible reason when unreachable.

``CRONLEASE_TEST_POSTGRES_URL`` / ``CRONLEASE_TEST_MYSQL_URL`` point at the
servers (default: the ``test`` databases of the local services). A run never
writes to those databases themselves: it creates a PostgreSQL schema and a
MySQL/MariaDB database of its own, ``cronlease_test_<8 hex>``, on first use,
and drops both at the end of the session, passed or failed; the session fails
if a ``cronlease%`` table was left in the configured databases
(tests/support/databases.py). ``CRONLEASE_TEST_REQUIRE`` (e.g.
``postgresql,mysql,pgbouncer,spin,celery``) turns an unreachable server (or a missing
``pgbouncer``, or SPIN for the model check, or a missing Celery, Dramatiq or RQ or an
unreachable RabbitMQ or Redis for their process tests: ``celery``, ``dramatiq``, ``rq``,
or ``rabbitmq``/``redis`` alone) into a failure instead of a skip, so CI cannot pass by
skipping.

``pgbouncers`` starts, once per test process, two real PgBouncers in front of
a PostgreSQL database of the run's own (tests/support/pgbouncer.py): one in
transaction pooling, one in session pooling; ``bouncer_url`` is a URL through
each in turn.
"""

from __future__ import annotations

import functools
import os
import signal
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cronlease._lease.store import LeaseStore
from tests.support import databases, ordering, pgbouncer
from tests.support.procs import wait_for

# The configured databases; tests get their run's own ones from url_for().
POSTGRES_URL = databases.CONFIGURED["postgresql"]
MYSQL_URL = databases.CONFIGURED["mysql"]
REQUIRED = {
    name.strip()
    for name in os.environ.get("CRONLEASE_TEST_REQUIRE", "").replace(",", " ").split()
    if name.strip()
}
BACKENDS = ["sqlite", "postgresql", "mysql"]


def url_for(backend: str, tmp_path: Path) -> str:
    """A database URL for ``backend``; skips (or fails when required) if it is unreachable.

    PostgreSQL and MySQL/MariaDB: the URL of this run's own schema/database.
    """
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'cronlease.db'}"
    skip_or_fail(backend, databases.problem(backend))
    return databases.url(backend)


def skip_or_fail(name: str, problem: str | None) -> None:
    """Nothing if ``problem`` is None; else skip the test with it as the reason, or fail
    it when ``CRONLEASE_TEST_REQUIRE`` names ``name`` (CI must not pass by skipping)."""
    if problem is None:
        return
    if name in REQUIRED:
        pytest.fail(f"{problem} (CRONLEASE_TEST_REQUIRE names {name})")
    pytest.skip(problem)


_cleanup_report: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first, balanced over the xdist workers (tests/support/ordering.py)."""
    ordering.order(items)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Drop the run's schema and database; fail the session if anything was left behind."""
    done, wrong = databases.finish()
    _cleanup_report[:] = [*done, *(f"LEFT BEHIND: {line}" for line in wrong)]
    if wrong and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _cleanup_report:
        terminalreporter.write_line(f"cronlease test databases: {line}")


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(autouse=True)
def _stop_signals_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that leaves the test process's SIGINT or SIGTERM changed (a library that
    runs in the process and installs its own: ignored is inherited through exec) gets it
    put back, with a warning naming it: a later test's child would not stop on Ctrl-C."""
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in before.items():
        now = signal.getsignal(signum)
        if now is not handler and handler is not None:
            signal.signal(signum, handler)
            warnings.warn(
                f"{request.node.nodeid} left {signal.Signals(signum).name} set to {now!r}",
                stacklevel=1,
            )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> str:
    return url_for(backend, tmp_path)


@pytest.fixture
def store(db_url: str) -> Iterator[LeaseStore]:
    lease_store = LeaseStore.from_url(db_url)
    lease_store.create_tables()
    yield lease_store
    lease_store.dispose()


@pytest.fixture
def task_name() -> str:
    """A task name no other test (or earlier run on a shared server) uses."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(name="wait_for")
def wait_for_fixture() -> Callable[..., object]:
    """:func:`tests.support.procs.wait_for`, polling fast, for in-process contract tests."""
    return functools.partial(wait_for, interval=0.01)


@pytest.fixture(scope="session")
def pgbouncers() -> Iterator[dict[str, pgbouncer.Bouncer]]:
    """Both PgBouncers of this test process, by pool mode, stopped at the end of the session."""
    for problem, names in (
        (databases.problem("postgresql"), {"postgresql", "pgbouncer"}),
        (pgbouncer.problem(), {"pgbouncer"}),
    ):
        if problem is not None:
            if names & REQUIRED:
                pytest.fail(f"{problem} (CRONLEASE_TEST_REQUIRE names it)")
            pytest.skip(problem)
    databases.postgres_database()
    bouncers: dict[str, pgbouncer.Bouncer] = {}
    try:
        for mode in pgbouncer.MODES:
            bouncers[mode] = pgbouncer.start(mode, databases.RUN_NAME, POSTGRES_URL)
        # transaction mode: consecutive transactions of a client go to different ones
        pgbouncer.warm(bouncers["transaction"], pgbouncer.POOL_SIZES["transaction"])
        yield bouncers
    finally:
        for bouncer in bouncers.values():
            bouncer.stop()


@pytest.fixture(params=pgbouncer.MODES)
def pool_mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def bouncer_url(pgbouncers: dict[str, pgbouncer.Bouncer], pool_mode: str) -> str:
    """The run's PostgreSQL database through PgBouncer in ``pool_mode``."""
    return pgbouncers[pool_mode].url()
