"""The databases of one test run: its own PostgreSQL schema and MySQL/MariaDB database.

``CRONLEASE_TEST_POSTGRES_URL`` / ``CRONLEASE_TEST_MYSQL_URL`` name the
configured databases (default: ``test`` on the local servers). The first time
a run needs a server, it creates there a namespace of its own, named
``cronlease_test_<8 hex>`` (:data:`RUN_NAME`):

- PostgreSQL: a schema in the configured database. The run's URL is the
  configured one plus ``options=-csearch_path=<schema>`` (libpq's options,
  which psycopg passes on) and ``application_name=<schema>``: every
  connection made from that URL, in the test process or in a child process
  given the URL, creates and finds its tables in that schema and nowhere else.
- MySQL/MariaDB: a database on the server, with the configured database's
  character set and collation; the run's URL names it.
- PostgreSQL through PgBouncer (tests/support/pgbouncer.py), which refuses
  the ``options`` startup parameter: a database of the same name on the
  PostgreSQL server (:func:`postgres_database`), made on first use.

:func:`finish` (called at the end of the session, whether tests passed or
not) ends the connections the run left open there and drops both, then
checks that the configured databases hold no ``cronlease%`` table that was
not there before the run. Two runs on the same servers never see each
other's tables or rows.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass, field

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from cronlease._lease.database import normalize_url

CONFIGURED = {
    "postgresql": os.environ.get(
        "CRONLEASE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
    ),
    "mysql": os.environ.get("CRONLEASE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"),
}
RUN_NAME = f"cronlease_test_{uuid.uuid4().hex[:8]}"


def postgres_run_url(configured: str, schema: str) -> str:
    """``configured`` with every connection's search_path set to ``schema`` (and named so)."""
    url = make_url(configured)
    options = url.query.get("options")
    search_path = f"-csearch_path={schema}"
    if isinstance(options, str) and options:
        search_path = f"{options} {search_path}"
    url = url.update_query_dict({"options": search_path, "application_name": schema})
    return url.render_as_string(hide_password=False)


def mysql_run_url(configured: str, database: str) -> str:
    """``configured`` with ``database`` as its database."""
    return make_url(configured).set(database=database).render_as_string(hide_password=False)


@dataclass
class RunDatabase:
    """The run's schema (PostgreSQL) or database (MySQL) on one server."""

    backend: str
    url: str
    before: set[str] = field(default_factory=set)  # cronlease% tables the configured one had


_created: dict[str, RunDatabase] = {}
_problems: dict[str, str | None] = {}


def _admin_engine(backend: str) -> Engine:
    """An engine on the configured database, one connection at a time, in autocommit."""
    return create_engine(
        normalize_url(CONFIGURED[backend]),
        poolclass=NullPool,
        isolation_level="AUTOCOMMIT",
        connect_args={"connect_timeout": 3},
    )


def _configured_tables(conn: Connection, backend: str) -> set[str]:
    """The ``cronlease%`` tables in the configured database (PostgreSQL: its current schema)."""
    if backend == "postgresql":
        query = (
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'cronlease%'"
            " AND schemaname = coalesce(current_schema(), 'public')"
        )
    else:
        query = (
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_name LIKE 'cronlease%' AND table_schema = DATABASE()"
        )
    return {str(name) for (name,) in conn.execute(text(query))}


class CannotCreate(Exception):
    """The server is reachable, but the run's schema/database cannot be created there."""


def _create(backend: str) -> RunDatabase:
    engine = _admin_engine(backend)
    try:
        with engine.connect() as conn:
            before = _configured_tables(conn, backend)
            try:
                return _create_on(conn, backend, before)
            except DBAPIError as exc:
                raise CannotCreate(str(exc.orig)) from exc
    finally:
        engine.dispose()


def _create_on(conn: Connection, backend: str, before: set[str]) -> RunDatabase:
    if backend == "postgresql":
        conn.execute(text(f'CREATE SCHEMA "{RUN_NAME}"'))
        return RunDatabase(backend, postgres_run_url(CONFIGURED[backend], RUN_NAME), before)
    # as the configured database (the server's defaults if it names none)
    charset, collation = conn.execute(
        text("SELECT @@character_set_database, @@collation_database")
    ).one()
    conn.execute(text(f"CREATE DATABASE `{RUN_NAME}` CHARACTER SET {charset} COLLATE {collation}"))
    return RunDatabase(backend, mysql_run_url(CONFIGURED[backend], RUN_NAME), before)


def problem(backend: str) -> str | None:
    """Why ``backend`` cannot be used in this run, or None once its run database exists."""
    if backend not in _problems:
        configured = make_url(CONFIGURED[backend]).render_as_string(hide_password=True)
        where = "schema" if backend == "postgresql" else "database"
        try:
            _created[backend] = _create(backend)
            _problems[backend] = None
        except CannotCreate as exc:
            _problems[backend] = (
                f"{backend} at {configured}: cannot create {where} {RUN_NAME}: {exc}"
            )
        except Exception as exc:  # any other failure means: not usable here
            _problems[backend] = (
                f"{backend} at {configured} is unreachable: {type(exc).__name__}: {exc}"
            )
    return _problems[backend]


def url(backend: str) -> str:
    """The run's URL on ``backend`` (call :func:`problem` first)."""
    return _created[backend].url


_PG_DATABASE = "postgresql-database"  # the key of the run's PostgreSQL database in _created


def postgres_database() -> str:
    """The URL of a PostgreSQL database of the run's own (named :data:`RUN_NAME`).

    Call :func:`problem` for ``postgresql`` first. The database is dropped by
    :func:`finish`, its connections ended.
    """
    if _PG_DATABASE not in _created:
        engine = _admin_engine("postgresql")
        try:
            with engine.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{RUN_NAME}"'))
        finally:
            engine.dispose()
        direct = make_url(CONFIGURED["postgresql"]).set(database=RUN_NAME)
        direct = direct.update_query_dict({"application_name": RUN_NAME})
        _created[_PG_DATABASE] = RunDatabase(
            _PG_DATABASE, direct.render_as_string(hide_password=False)
        )
    return _created[_PG_DATABASE].url


def _drop(conn: Connection, backend: str, lock_wait: int) -> None:
    if backend == _PG_DATABASE:
        # FORCE: a bouncer or a stray child may still hold connections to it
        conn.execute(text(f'DROP DATABASE IF EXISTS "{RUN_NAME}" WITH (FORCE)'))
        return
    if backend == "postgresql":
        conn.execute(text(f"SET lock_timeout = '{lock_wait}s'"))
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{RUN_NAME}" CASCADE'))
    else:
        conn.execute(text(f"SET SESSION lock_wait_timeout = {lock_wait}"))
        conn.execute(text(f"DROP DATABASE IF EXISTS `{RUN_NAME}`"))


def _end_connections(conn: Connection, backend: str) -> None:
    """End the connections this run left on its schema/database (a leaked pool, a stray child)."""
    if backend == "postgresql":
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = :name AND datname = current_database()"
                " AND pid <> pg_backend_pid()"
            ),
            {"name": RUN_NAME},
        )
    else:
        ids = conn.execute(
            text(
                "SELECT id FROM information_schema.processlist"
                " WHERE db = :name AND id <> CONNECTION_ID()"
            ),
            {"name": RUN_NAME},
        ).scalars()
        for connection_id in list(ids):
            with contextlib.suppress(DBAPIError):  # it may have ended meanwhile
                conn.execute(text(f"KILL {int(connection_id)}"))


def _still_there(conn: Connection, backend: str) -> bool:
    if backend == _PG_DATABASE:
        query = "SELECT count(*) FROM pg_database WHERE datname = :name"
    elif backend == "postgresql":
        query = "SELECT count(*) FROM pg_namespace WHERE nspname = :name"
    else:
        query = "SELECT count(*) FROM information_schema.schemata WHERE schema_name = :name"
    return bool(conn.execute(text(query), {"name": RUN_NAME}).scalar_one())


def finish() -> tuple[list[str], list[str]]:
    """Drop what the run created; (what was done, what is wrong) as lines for the summary."""
    done: list[str] = []
    wrong: list[str] = []
    for backend, created in _created.items():
        where = "schema" if backend == "postgresql" else "database"
        server = "postgresql" if backend == _PG_DATABASE else backend
        label = "postgresql" if backend == _PG_DATABASE else backend
        configured = make_url(CONFIGURED[server]).render_as_string(hide_password=True)
        engine = _admin_engine(server)
        try:
            with engine.connect() as conn:
                try:
                    _drop(conn, backend, lock_wait=5)
                except DBAPIError:  # a connection of the run holds a lock: end it, then drop
                    _end_connections(conn, backend)
                    _drop(conn, backend, lock_wait=30)
                gone = not _still_there(conn, backend)
                if not gone:
                    wrong.append(f"the run's {label} {where} {RUN_NAME} is still there")
                if backend == _PG_DATABASE:  # its tables went with it
                    if gone:
                        done.append(f"postgresql: dropped database {RUN_NAME}")
                    continue
                added = sorted(_configured_tables(conn, backend) - created.before)
        except Exception as exc:
            wrong.append(
                f"could not drop the run's {label} {where} {RUN_NAME}: {type(exc).__name__}: {exc}"
            )
            continue
        finally:
            engine.dispose()
        if added:
            wrong.append(
                f"{backend}: {configured} has cronlease tables it did not have before this run"
                f" (a test bypassing the run's {where}, or another run of the old layout?):"
                f" {', '.join(added)}"
            )
        else:
            done.append(
                f"{backend}: dropped {where} {RUN_NAME}; no cronlease table was added to"
                f" {configured}"
            )
    _created.clear()
    return done, wrong
