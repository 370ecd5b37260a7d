"""What the commands, the status page and the Django admin pages ask of cronlease.

The surfaces (``cronlease/cli``, ``cronlease/web``, ``cronlease/contrib/django``)
format; this module does: it opens a store for a config file, says whether the
tables are there, reads the status model and a task's history, and pauses,
resumes, triggers and forgets tasks. It is the one place the surfaces reach the
engine and the store through (docs/design.md §9): they import it, the
scheduler and the status model, never ``_run`` or ``_lease`` modules.

It raises :class:`UsageError` (the caller named something that is not there:
the CLI's exit status 2, the admin's 404) and :class:`Failure` (the database
cannot be opened or read: exit status 1, a note on the page).

Reads never create tables, nor a SQLite file: they ask :func:`tables_exist`
first (``_lease/table_state.py``), which also turns a database that cannot be
opened into one line, before any statement is sent: ``database unreachable``
(the network), ``cannot connect`` (the server refused: login, unknown
database) or ``not a database`` (``_lease/connect_errors.py``). Their engines
are ``read_only``: a SQLite file is not switched to WAL, and a read-only copy
can be read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from cronlease._lease.connect_errors import connect_failure
from cronlease._lease.database import (
    DEFAULT_URL,
    connect_state,
    create_store_engine,
    normalize_url,
    redact,
)
from cronlease._lease.model import check_task_name
from cronlease._lease.names import normal_form
from cronlease._lease.recovery import describe_error
from cronlease._lease.settings import READER_POOL
from cronlease._lease.side_engines import reader_engine
from cronlease._lease.store import LeaseStore
from cronlease._lease.table_state import (
    TableState,
    missing_sqlite_file,
    table_state,
    uncreatable_sqlite_file,
)
from cronlease._run.housekeeping.builtin import BUILTIN_TASKS
from cronlease._run.housekeeping.schedule_poll import DEFAULT_POLL_SECONDS
from cronlease._run.stopping import ExitAfterStop
from cronlease._scheduler import Scheduler
from cronlease._shell_task import CommandTask
from cronlease._status import (
    DeclaredTask,
    RunStatus,
    Scrubber,
    Snapshot,
    StatusReport,
    build_report,
    by_slot,
    format_duration,
    format_time,
    holder_id,
    read_status,
    streak_runs,
)
from cronlease.config import Config, TaskSpec
from cronlease.errors import StatementError, StoreError

__all__ = [
    "DEFAULT_URL",
    "INTERNAL_TASKS",
    "Failure",
    "Triggered",
    "UsageError",
    "check_task_name",
    "command_line",
    "commands_named",
    "config_scheduler",
    "config_warnings",
    "connection",
    "declared_tasks",
    "exit_after_stop",
    "forget",
    "known_task",
    "no_tables",
    "normalize_url",
    "open_store",
    "probe_database",
    "reachable_tables",
    "read_history",
    "read_report",
    "reader_store",
    "redact",
    "require_tables",
    "set_paused",
    "stored_name",
    "tables_exist",
    "task_spec",
    "trigger",
]

#: the built-in tasks every replica declares (housekeeping, the stuck-run watcher): the
#: status leaves them out of the declared tasks' list, and never calls them orphaned
INTERNAL_TASKS = BUILTIN_TASKS
#: runs read back to name the one still ``running`` when forget refuses
_RUNS_READ = 200


class UsageError(Exception):
    """The caller named something that is not there (a task, a file): exit status 2."""


class Failure(Exception):
    """The database cannot be opened or read, or an action was not done: exit status 1."""


# --- the store ------------------------------------------------------------------------


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
        schedule_poll=config.schedule_poll or DEFAULT_POLL_SECONDS,
        **options,
    )


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


def reader_store(store: LeaseStore) -> LeaseStore:
    """A store for the status page's reads, on a pool of its own beside ``store``'s."""
    return LeaseStore(reader_engine(store.engine))


def tables_exist(store: LeaseStore, url: str) -> bool:
    """Whether the cronlease tables are there, asked without creating anything (a missing
    SQLite file is not opened: opening creates it). Failure if the database cannot be
    opened, or holds tables of an earlier version (a read of them would fail; the
    upgrade is a write: a replica's or ``init-db``'s)."""
    found = reachable_tables(store, url)
    if found is TableState.EARLIER:
        raise Failure(
            f"the cronlease tables in {redact(url)} are of an earlier version: a replica of "
            f"this version, or {command_line('init-db')}, upgrades them"
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


def probe_database(url: str, config: Config | None) -> dict[str, Any]:
    """Connect to the database and look for the tables, creating nothing (``check
    --connect``): ``reachable``, then ``tables`` (``present``, ``missing``, ``earlier``:
    of an earlier version) or the one-line ``error``."""
    with open_store(url, config, read_only=True) as store:
        try:
            state = reachable_tables(store, url)
        except Failure as exc:
            return {"reachable": False, "tables": None, "error": str(exc)}
        if state is TableState.NO_FILE:
            # not opened (that would create it): whether a replica could create it
            problem = uncreatable_sqlite_file(store.engine.url)
            if problem:
                error = f"cannot create the SQLite file {redact(url)}: {problem}"
                return {"reachable": False, "tables": None, "error": error}
            return {"reachable": True, "tables": "no file", "error": None}
    tables = {TableState.CURRENT: "present", TableState.EARLIER: "earlier"}.get(state, "missing")
    return {"reachable": True, "tables": tables, "error": None}


def no_tables(url: str) -> str:
    return (
        f"no cronlease tables yet in {redact(url)}: a replica or {command_line('init-db')} "
        "creates them"
    )


#: how hints name the command line here: ``manage.py cronlease`` runs the same commands
#: under Django, and a hint must name one the user can type where they are
_COMMAND: ContextVar[str] = ContextVar("cronlease_command", default="cronlease")


@contextmanager
def commands_named(prog: str) -> Iterator[None]:
    """Within the block, hints name the commands as ``prog COMMAND``."""
    token = _COMMAND.set(prog)
    try:
        yield
    finally:
        _COMMAND.reset(token)


def command_line(words: str) -> str:
    """``words`` (a command and its arguments) as typed here: ``cronlease init-db``."""
    return f"{_COMMAND.get()} {words}"


def connection(scheduler: Scheduler) -> dict[str, Any] | None:
    """Why the replica makes no new database connection now (scrubbed); None while it can."""
    state = connect_state(scheduler.store.engine)
    if state is None:
        return None
    scrub = Scrubber.of(scheduler.store)
    return {
        "failures": state.failures,
        "failing_for": round(state.failing_for, 3),
        "retry_in": round(state.retry_in, 3),
        "error": scrub(state.error),
        "text": scrub(state.describe()),
    }


def config_warnings(config: Config) -> list[dict[str, str]]:
    """What a valid config holds that would fail at run time: a command whose program is
    not on PATH, or not executable (of a shell command, the shell: its words are its own).
    As seen from here: a replica's PATH and files may differ."""
    warnings = []
    for spec in config.tasks.values():
        if spec.command is None:
            continue
        command = spec.function()
        assert isinstance(command, CommandTask)  # what a command spec makes
        problem = command.program_problem()
        if problem is not None:
            warnings.append(
                {"file": str(config.path), "task": spec.name, "key": "command", "message": problem}
            )
    return warnings


# --- tasks by name ----------------------------------------------------------------------


def known_task(
    task: str, store: LeaseStore, config: Config | None, *, tables: bool = True
) -> tuple[str, bool]:
    """TASK's stored name and whether the config declares it; UsageError (exit 2)
    unless the config declares it, a lease row of it exists or a schedule row does."""
    name = stored_name(config, task)
    if config is not None and normal_form(task) in config.tasks:
        return name, True
    if tables and (store.leases([name]) or _schedule_row(store, name)):
        return name, False
    if config is not None:
        task_spec(config, task)  # raises with the list of declared tasks
    where = "in the database" if tables else f"anywhere: {no_tables(store.url)}"
    raise UsageError(
        f"no task {name!r} {where}; for a task that never ran, give the config file "
        "that declares it (-c FILE)"
    )


def _schedule_row(store: LeaseStore, name: str) -> bool:
    """Whether a schedule row of the stored name exists: a declared task of the status
    (§5.37), known before it first runs. A database without its table has none."""
    try:
        return store.schedule_rows.row(name) is not None
    except StatementError:
        return False


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


# --- reads ---------------------------------------------------------------------------


def read_report(store: LeaseStore, config: Config | None, *, tables: bool) -> StatusReport:
    """The report on the config's tasks (none: on every lease row), with the clock skew."""
    declared = declared_tasks(config)
    namespace = config.namespace if config is not None else None
    if not tables:  # a read command creates nothing: the declared tasks, with no rows
        now = datetime.now(timezone.utc)
        return build_report(Snapshot(), declared, database=store.url, now=now, namespace=namespace)
    report = read_status(
        store,
        declared,
        namespace=namespace,
        internal=INTERNAL_TASKS,
        runs=streak_runs(task.alert_after for task in declared or ()),
        clock=True,
        abandoned=True,
        schedules=True,  # the schedule rows are declared tasks too (§5.37)
    )
    if report.database_error is not None:
        raise Failure(report.database_error)
    return report


def read_history(
    store: LeaseStore, config: Config | None, task: str, limit: int, *, tables: bool
) -> tuple[str, Sequence[RunStatus]]:
    """TASK's stored name and its latest runs; an unknown task is a UsageError (exit 2),
    as for pause (a declared one may not have run yet)."""
    name, _declared = known_task(task, store, config, tables=tables)
    records = store.history(name, limit) if tables else []
    scrub = Scrubber.of(store)
    return name, by_slot([RunStatus.of(record, scrub) for record in records])


# --- actions -------------------------------------------------------------------------


def set_paused(url: str, config: Config | None, task: str, *, paused: bool) -> str:
    """Pause or resume TASK on every replica (creating the tables if need be): its stored name."""
    with open_store(url, config) as store:
        require_tables(store, url)
        name, _declared = known_task(task, store, config)
        if paused:
            store.pause(name)
        else:
            store.resume(name)
    return name


@dataclass(frozen=True)
class Triggered:
    """A manual run, done in this process: its outcome and its run row, if it was read back."""

    name: str
    outcome: str
    run: RunStatus | None


def trigger(
    url: str,
    config: Config,
    spec: TaskSpec,
    *,
    running: AbstractContextManager[None] | None = None,
) -> Triggered:
    """Run SPEC's task once now, in this process, through a replica of the config file
    (``running``: entered for as long as the run runs); Failure (saying why) if its lease
    could not be taken."""
    with open_store(url, config) as store:
        # an outage reads as one, before the scheduler starts; tables missing or of an
        # earlier version are the scheduler's to create or upgrade, as a replica's are
        reachable_tables(store, url)
    scheduler = config_scheduler(url, config)
    # This process only runs the one manual run: it must not start catch-up runs
    # that would be cut off when it exits.
    task = spec.add_to(scheduler, catchup="skip")
    try:
        with running or nullcontext():
            outcome = scheduler.run_now(spec.name)
        if outcome is None:
            raise Failure(_why_not_acquired(scheduler.store, task.full_name))
        scrub = Scrubber.of(scheduler.store)
        runs = [
            RunStatus.of(run, scrub)
            for run in scheduler.store.history(task.full_name, 5)
            if run.manual and run.holder.startswith(scheduler.holder)
        ]
    finally:
        scheduler.runner.close()
        scheduler.store.dispose()
    return Triggered(task.full_name, outcome, runs[0] if runs else None)


def _why_not_acquired(store: LeaseStore, name: str) -> str:
    try:
        rows = store.leases([name])
        db_now = store.database_time()
    except StoreError as exc:
        return f"{name}: not run: {exc}"
    row = rows[0] if rows else None
    if row is not None and row.paused:
        return f"{name}: not run: the task is paused ({command_line('resume ...')})"
    if row is not None and row.expires_at > db_now:
        return (
            f"{name}: not run: a run is in progress (holder {holder_id(row.holder)}, "
            f"fence {row.fence}, lease for {format_duration(row.expires_at - db_now)} more)"
        )
    return f"{name}: not run: the lease could not be taken; try again"


def forget(url: str, config: Config | None, task: str, *, force: bool) -> tuple[str, bool]:
    """Delete an orphaned task's lease row and its run history (docs/design.md §5.15): its
    stored name and whether it had a row. UsageError, nothing deleted, for a task with
    nothing to forget, one the config declares (unless ``force``) or one a run holds."""
    with open_store(url, config) as store:
        if not tables_exist(store, url):
            raise UsageError(f"nothing to forget: {no_tables(url)}")
        name = stored_name(config, task)
        had_row = bool(store.leases([name]))
        if not had_row and not store.history(name, limit=1):
            raise UsageError(
                f"no lease row and no runs of {name!r} in the database: nothing to forget"
            )
        if config is not None and not force and normal_form(task) in config.tasks:
            raise UsageError(
                f"{name!r} is declared in {config.path}: its next tick would make a new row "
                "(remove it from the config first, or give --force)"
            )
        if store.forget([name]) != [name]:
            raise UsageError(f"not forgotten: {_why_kept(store, name)}")
    return name, had_row


def _why_kept(store: LeaseStore, name: str) -> str:
    """What kept the row, read after the deleting transaction said it stays."""
    now = store.database_time()
    rows = store.leases([name])
    if rows and rows[0].expires_at >= now:
        row = rows[0]
        return (
            f"a run holds the lease of {name!r} (holder {holder_id(row.holder)}, fence "
            f"{row.fence}, for {format_duration(row.expires_at - now)} more); try again once "
            "it has finished"
        )
    running = [run for run in store.history(name, limit=_RUNS_READ) if run.outcome == "running"]
    if not running:
        return f"the lease row of {name!r} changed meanwhile; try again"
    run = running[-1]  # the oldest: the one most likely stale
    ended = f" {format_duration(now - rows[0].expires_at)} ago" if rows else ""
    scheduled = format_time(datetime.fromtimestamp(run.scheduled_for, timezone.utc))
    return (
        f"the run of {name!r} scheduled for {scheduled} (attempt {run.attempt}, holder "
        f"{holder_id(run.holder)}, fence {run.fence}) is still 'running' though its lease "
        f"ended{ended}, and no replica's stuck-run watcher has recorded it abandoned yet "
        "(any replica of this database does within a minute): start one or wait, then "
        "forget again"
    )


def exit_after_stop(scheduler: Scheduler, seconds: float) -> None:
    """The process exits once ``scheduler`` stopped, and what still runs then dies with it:
    its stop records those runs interrupted (their leases left to expire), terminates
    running commands and waits up to ``seconds`` for them to end (SIGKILL then; at once
    after a second signal), before it says the replica stopped."""
    scheduler.runner.exit_after_stop = ExitAfterStop(seconds, hurried=lambda: scheduler.hurried)
