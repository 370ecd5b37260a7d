"""Statements run on the driver's cursor fail the way SQLAlchemy's execution would.

The store's retry and unknown-outcome checks depend on it: a driver error
must arrive as a DBAPIError, with ``connection_invalidated`` set exactly when
the connection is gone, and must leave a pooled connection usable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Boolean, Integer, String, bindparam, literal, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from cronlease._lease.database import create_store_engine
from cronlease._lease.dialects.driver import DriverStatement
from tests.conftest import url_for

ECHO = DriverStatement(
    select(
        bindparam("b_text", type_=String),
        bindparam("b_flag", type_=Boolean),
        literal(7, Integer),
    )
)


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    store_engine = create_store_engine(url_for(str(request.param), tmp_path))
    request.addfinalizer(store_engine.dispose)
    return store_engine


def test_parameters_and_literals_reach_the_driver(engine: Engine) -> None:
    with engine.connect() as conn:
        rows, _ = ECHO.execute(conn, {"b_text": "héllo", "b_flag": True})
    ((echoed, flag, literal_value),) = rows
    assert (echoed, bool(flag), literal_value) == ("héllo", True, 7)  # SQLite: flag is 1


def test_expanding_parameters_are_refused(engine: Engine) -> None:
    statement = DriverStatement(
        select(literal(1)).where(literal(1).in_(bindparam("b_values", expanding=True)))
    )
    with pytest.raises(TypeError, match="expanding"):
        statement.compiled(engine.dialect)


def test_a_failing_statement_is_a_dbapi_error_and_the_connection_stays_usable(
    engine: Engine,
) -> None:
    failing = DriverStatement(text("SELECT * FROM no_such_table_for_cronlease"))
    with engine.connect() as conn, pytest.raises(DBAPIError) as caught:
        failing.execute(conn, {})
    assert not caught.value.connection_invalidated
    with engine.connect() as conn:
        rows, _ = ECHO.execute(conn, {"b_text": "after", "b_flag": False})
    assert rows[0][0] == "after"


def test_a_killed_connection_is_invalidated_and_the_next_one_works(tmp_path: Path) -> None:
    engine = create_store_engine(url_for("postgresql", tmp_path), pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        other = create_store_engine(url_for("postgresql", tmp_path))
        with other.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        other.dispose()
        with engine.connect() as conn, pytest.raises(DBAPIError) as caught:
            ECHO.execute(conn, {"b_text": "x", "b_flag": True})
        assert caught.value.connection_invalidated
        with engine.connect() as conn:
            rows, _ = ECHO.execute(conn, {"b_text": "fresh", "b_flag": True})
        assert rows[0][0] == "fresh"
    finally:
        engine.dispose()
