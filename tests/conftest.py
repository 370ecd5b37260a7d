"""Shared fixtures: real databases, skipped with a visible reason when unreachable.

``CRONLEASE_TEST_POSTGRES_URL`` / ``CRONLEASE_TEST_MYSQL_URL`` point at the
servers (default: the local services). ``CRONLEASE_TEST_REQUIRE`` (e.g.
``postgresql,mysql``) turns an unreachable server into a failure instead of
a skip, so CI cannot pass by skipping.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from cronlease._lease.database import normalize_url
from cronlease._lease.store import LeaseStore
from tests.support.procs import wait_for

POSTGRES_URL = os.environ.get(
    "CRONLEASE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
MYSQL_URL = os.environ.get("CRONLEASE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
REQUIRED = {
    name.strip()
    for name in os.environ.get("CRONLEASE_TEST_REQUIRE", "").replace(",", " ").split()
    if name.strip()
}
BACKENDS = ["sqlite", "postgresql", "mysql"]
_unreachable: dict[str, str | None] = {}


def _server_problem(backend: str) -> str | None:
    """Why the backend's server cannot be used, or None if it can (cached per session)."""
    if backend not in _unreachable:
        url = POSTGRES_URL if backend == "postgresql" else MYSQL_URL
        try:
            engine = create_engine(normalize_url(url), connect_args={"connect_timeout": 3})
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            engine.dispose()
            _unreachable[backend] = None
        except Exception as exc:  # any failure means: not usable here
            _unreachable[backend] = (
                f"{backend} at {url} is unreachable: {type(exc).__name__}: {exc}"
            )
    return _unreachable[backend]


def url_for(backend: str, tmp_path: Path) -> str:
    """A database URL for ``backend``; skips (or fails when required) if it is unreachable."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'cronlease.db'}"
    problem = _server_problem(backend)
    if problem is not None:
        if backend in REQUIRED:
            pytest.fail(f"{problem} (CRONLEASE_TEST_REQUIRE names it)")
        pytest.skip(problem)
    return POSTGRES_URL if backend == "postgresql" else MYSQL_URL


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
