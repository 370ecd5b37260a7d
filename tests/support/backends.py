"""Which backends a test runs on: every one by default, one for a rule that is not SQL.

The ``backend`` fixture (tests/conftest.py) runs a test on SQLite, PostgreSQL
and MySQL/MariaDB. A process test of a rule the replica decides in Python —
a backoff, a worker count, a timer, a shutdown, a fork — proves nothing more
on the second and third backend, yet waits for real ticks on each. Such a test
says so with :func:`backend_independent`: why its rule does not depend on
the database, and which contract test proves the statements it relies on on
every backend. It then runs on one backend (PostgreSQL: a server, as a fleet
uses; a test that needs SQLite's one-host clock names its own).

``CRONLEASE_TEST_ALL_BACKENDS=1`` runs them on every backend again (a
nightly's or a doubter's run); ``pytest -m backend_independent`` selects them.
Races, failover, upgrades, lost writes, PgBouncer and anything SQL-shaped
never use this: they run on every backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

BACKENDS = ("sqlite", "postgresql", "mysql")
ALL_BACKENDS_ENV = "CRONLEASE_TEST_ALL_BACKENDS"
TESTS = Path(__file__).resolve().parents[1]

F = TypeVar("F", bound=Callable[..., object])


def backend_independent(
    why: str, *, covered_by: str, on: Sequence[str] = ("postgresql",)
) -> Callable[[F], F]:
    """Run the decorated test on ``on`` only: its rule is ``why``; the database's part of
    it is proven on every backend by ``covered_by`` (a file under tests/, ``::`` and a
    test name allowed; several separated by ``, ``)."""
    if not why.strip():
        raise ValueError("say why the rule does not depend on the backend")
    for cited in covered_by.split(", "):
        path, _, name = cited.partition("::")
        source = TESTS / path
        if not source.is_file() or f"def {name}" not in source.read_text():
            raise ValueError(f"covered_by names no test: {cited!r}")
    if unknown := set(on) - set(BACKENDS):
        raise ValueError(f"unknown backends: {sorted(unknown)}")
    backends = list(BACKENDS if os.environ.get(ALL_BACKENDS_ENV) == "1" else on)

    def apply(test: F) -> F:
        test = pytest.mark.backend_independent(why=why, covered_by=covered_by)(test)
        # a direct parametrization of ``backend`` replaces the fixture's three params
        return pytest.mark.parametrize("backend", backends)(test)

    return apply
