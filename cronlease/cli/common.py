"""What every ``cronlease`` command shares: exit statuses, errors, the config file and the database.

The commands raise :class:`UsageError` (exit status 2) or :class:`Failure`
(exit status 1); ``main`` turns them into an error line on stderr.

Read commands (``status``, ``history``, ``web``) never create tables, nor a
SQLite file: they ask :func:`tables_exist` first (cronlease/_lease/table_state.py),
which also turns a database that cannot be opened into one line, before any
statement is sent: ``database unreachable`` (the network), ``cannot connect``
(the server refused: login, unknown database) or ``not a database``
(cronlease/_lease/connect_errors.py). Their engines are ``read_only``: a SQLite
file is not switched to WAL, and a read-only copy can be read.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from cronlease._lease.connect_errors import connect_failure
from cronlease._lease.database import DEFAULT_URL, create_store_engine, normalize_url, redact
from cronlease._lease.names import normal_form
from cronlease._lease.recovery import describe_error
from cronlease._lease.settings import READER_POOL
from cronlease._lease.store import LeaseStore
from cronlease._lease.table_state import TableState, missing_sqlite_file, table_state
from cronlease._scheduler import Scheduler
from cronlease._status import DeclaredTask
from cronlease.config import DATABASE_ENV, DEFAULT_CONFIG, Config, TaskSpec, load_config

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: 128 + SIGPIPE, what a shell reports for a command whose reader went away
EXIT_PIPE = 141
EXIT_INTERRUPTED = 130
DISABLED_ENV = "CRONLEASE_DISABLED"

logger = logging.getLogger("cronlease")


class UsageError(Exception):
    """A mistake in how the command was called: exit status 2."""


class Failure(Exception):
    """A runtime failure: exit status 1."""


@dataclass(frozen=True)
class Preset:
    """What a host application gives the commands instead of a config file: its
    :class:`Config` (database and declared tasks) and, for ``run``, the scheduler its
    code declared tasks and listeners on (``manage.py cronlease``)."""

    config: Config
    scheduler: Scheduler | None = None
    #: the host configured logging (Django's LOGGING): the CLI leaves it alone
    keep_logging: bool = False

    def __post_init__(self) -> None:
        if self.scheduler is not None and self.scheduler.namespace != self.config.namespace:
            raise ValueError("the preset scheduler's namespace is not its config's")


# --- configuration and database ----------------------------------------------


def config_from_args(
    args: argparse.Namespace, *, required: bool, import_calls: bool
) -> Config | None:
    """The config file: the one given with -c, else ./cronlease.toml if it exists
    (a host application's :class:`Preset` wins: it has no file)."""
    preset: Preset | None = getattr(args, "preset", None)
    if preset is not None:
        if args.config is not None:
            raise UsageError("-c: the configuration is the application's settings here")
        return preset.config
    if args.config is not None:
        return load_config(args.config, import_calls=import_calls)
    if Path(DEFAULT_CONFIG).exists():
        return load_config(DEFAULT_CONFIG, import_calls=import_calls)
    if required:
        raise UsageError(f"no ./{DEFAULT_CONFIG} here: give the config file with -c FILE")
    return None


def config_scheduler(url: str, config: Config, **options: Any) -> Scheduler:
    """A replica of the config file: its namespace, holder and ``[database]`` settings."""
    pool = config.pool
    return Scheduler(
        url,
        namespace=config.namespace,
        holder=config.holder,
        pool_size=pool.pool_size,
        max_overflow=pool.max_overflow,
        pool_timeout=pool.pool_timeout,
        pool_idle_timeout=pool.pool_idle_timeout,
        connect_args=dict(config.connect_args) if config.connect_args else None,
        **options,
    )


def database_url(args: argparse.Namespace, config: Config | None, *, fallback: bool = False) -> str:
    """--database, else the config file's (environment included), else the environment."""
    url = args.database or (config.database if config else None) or os.environ.get(DATABASE_ENV)
    if not url:
        if not fallback:
            raise UsageError(
                f"no ./{DEFAULT_CONFIG} here and no database given: use -c FILE or --database URL"
            )
        url = DEFAULT_URL
    normalize_url(url)  # ConfigError for an invalid URL, before anything connects
    return url


@contextmanager
def open_store(url: str, config: Config | None, *, read_only: bool = False) -> Iterator[LeaseStore]:
    """A store for one command: a pool of one connection (a command's statements run
    one after another), with the config file's ``connect_args``. ``read_only``: for a
    command that only reads (a SQLite file keeps its journal mode; a read-only copy reads)."""
    connect_args = dict(config.connect_args) if config and config.connect_args else None
    engine = create_store_engine(
        url, connect_args=connect_args, base=READER_POOL, read_only=read_only
    )
    store = LeaseStore(engine)
    try:
        yield store
    finally:
        store.dispose()


def tables_exist(store: LeaseStore, url: str) -> bool:
    """Whether the cronlease tables are there, asked without creating anything (a missing
    SQLite file is not opened: opening creates it). Failure if the database cannot be
    opened, or holds tables of an earlier version (a read of them would fail; the
    upgrade is a write: a replica's or ``init-db``'s)."""
    found = reachable_tables(store, url)
    if found is TableState.EARLIER:
        raise Failure(
            f"the cronlease tables in {redact(url)} are of an earlier version: a replica of "
            "this version, or cronlease init-db, upgrades them"
        )
    return found is TableState.CURRENT


def require_tables(store: LeaseStore, url: str) -> None:
    """For commands that write: create missing tables, upgrade earlier ones, after checking
    the database can be opened (so an outage reads as one, not as a failed CREATE TABLE)."""
    reachable_tables(store, url)
    store.create_tables()


def reachable_tables(store: LeaseStore, url: str) -> TableState:
    """The tables' state (table_state.py); Failure, in one line, if the database cannot
    be opened (connect_errors.py) or read."""
    if missing_sqlite_file(store.engine.url):
        return TableState.NO_FILE  # not opened: opening would create it
    try:
        store.engine.connect().close()  # pooled: the inspection below reuses it
    except SQLAlchemyError as exc:
        raise Failure(connect_failure(redact(url), exc)) from None
    try:
        return table_state(store.engine)
    except SQLAlchemyError as exc:
        raise Failure(
            f"reading the tables of {redact(url)} failed: {describe_error(exc)}"
        ) from None


def no_tables(url: str) -> str:
    return f"no cronlease tables yet in {redact(url)}: a replica or init-db creates them"


def known_task(
    task: str, store: LeaseStore, config: Config | None, *, tables: bool = True
) -> tuple[str, bool]:
    """TASK's stored name and whether the config declares it; UsageError (exit 2)
    unless the config declares it or a lease row of it exists."""
    name = stored_name(config, task)
    if config is not None and normal_form(task) in config.tasks:
        return name, True
    if tables and store.leases([name]):
        return name, False
    if config is not None:
        task_spec(config, task)  # raises with the list of declared tasks
    where = "in the database" if tables else f"anywhere: {no_tables(store.url)}"
    raise UsageError(
        f"no task {name!r} {where}; for a task that never ran, give the config file "
        "that declares it (-c FILE)"
    )


def stored_name(config: Config | None, task: str) -> str:
    """TASK as stored: with the config's namespace, or as given without a config (in
    normalization form C, as names are stored, whatever form the terminal typed)."""
    return config.full_name(task) if config else normal_form(task)


def task_spec(config: Config, task: str) -> TaskSpec:
    try:
        return config.tasks[normal_form(task)]
    except KeyError:
        known = ", ".join(sorted(config.tasks)) or "none"
        raise UsageError(f"no task {task!r} in {config.path} (declared: {known})") from None


def declared_tasks(config: Config | None) -> list[DeclaredTask] | None:
    """The config's tasks as the status model judges them (None: no config, every
    lease row is a task): ``status`` and ``web`` read them from here alike."""
    if config is None:
        return None
    return [
        DeclaredTask(
            name=config.full_name(spec.name),
            schedule=spec.schedule,
            task=spec.name,
            enabled=spec.enabled,
            alert_after=spec.alert_after,
            grace=spec.grace,
            roles=spec.roles,
            jitter=spec.jitter,
        )
        for spec in config.tasks.values()
    ]
