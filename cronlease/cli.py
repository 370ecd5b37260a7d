"""The ``cronlease`` command: run a replica from ``cronlease.toml``, inspect and steer the fleet."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any
from zoneinfo import ZoneInfo

from cronlease import __version__
from cronlease.clock import measure_skew
from cronlease.commands import terminate_running
from cronlease.config import DATABASE_ENV, DEFAULT_CONFIG, Config, TaskSpec, load_config
from cronlease.crontab import local_timezone, translate_crontab
from cronlease.database import DEFAULT_URL, create_store_engine, normalize_url, redact
from cronlease.errors import ConfigError, StoreError
from cronlease.health import overdue_tasks
from cronlease.model import LeaseInfo, RunRecord
from cronlease.schedule import Schedule, time_of_slot
from cronlease.scheduler import HOUSEKEEPING_TASK, Scheduler
from cronlease.store import LeaseStore
from cronlease.task import Task
from cronlease.web import serve

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
DISABLED_ENV = "CRONLEASE_DISABLED"

logger = logging.getLogger("cronlease")

EPILOG = f"""\
exit status:
  0  success
  1  runtime failure: the database is unreachable, a triggered run failed or was
     refused (a run is in progress, or the task is paused), import-crontab left
     lines untranslated
  2  usage or configuration error (bad arguments, invalid {DEFAULT_CONFIG}, unknown task);
     nothing was started and no database was touched

environment:
  {DATABASE_ENV}  overrides `database` in the config file (--database overrides both)
  {DISABLED_ENV}=1      `run` starts but fires nothing (e.g. a staging copy of production)
"""


class UsageError(Exception):
    """A mistake in how the command was called: exit status 2."""


class Failure(Exception):
    """A runtime failure: exit status 1."""


# --- entry point -------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``cronlease`` with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help, --version or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    _configure_logging(args.log_level)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except (ConfigError, UsageError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    except (StoreError, Failure) as exc:
        _error(str(exc))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cronlease",
        description="Periodic tasks on every replica, each tick run once, held by a database lease",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cronlease {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help=f"the config file (default ./{DEFAULT_CONFIG})",
    )
    common.add_argument(
        "--database",
        metavar="URL",
        help=f"the database URL (overrides the config file and ${DATABASE_ENV})",
    )
    common.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level on stderr (default INFO)",
    )
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON instead of text")

    def command(
        name: str,
        handler: Callable[[argparse.Namespace], int],
        help_text: str,
        *,
        json_output: bool = False,
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=help_text,
            description=help_text,
            parents=[common, as_json] if json_output else [common],
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.set_defaults(handler=handler)
        return sub

    run = command("run", cmd_run, "run a replica in the foreground until SIGINT or SIGTERM")
    run.add_argument(
        "--shutdown-grace",
        type=_seconds,
        default=25.0,
        metavar="SECONDS",
        help="on SIGINT/SIGTERM, how long to wait for running tasks before terminating "
        "them (default 25)",
    )
    command(
        "check",
        cmd_check,
        "validate the config file; list tasks and next fire times",
        json_output=True,
    )
    status = command(
        "status", cmd_status, "show every task's lease, state and last run", json_output=True
    )
    status.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if a declared task is overdue past its grace or the database is "
        "unreachable (a health probe)",
    )
    history = command("history", cmd_history, "show a task's latest runs", json_output=True)
    history.add_argument("task", metavar="TASK")
    history.add_argument(
        "--limit", type=_positive_int, default=20, metavar="N", help="how many runs (default 20)"
    )
    pause = command("pause", cmd_pause, "pause a task on every replica (running runs finish)")
    pause.add_argument("task", metavar="TASK")
    resume = command("resume", cmd_resume, "resume a paused task on every replica")
    resume.add_argument("task", metavar="TASK")
    trigger = command(
        "trigger",
        cmd_trigger,
        "run a task once now, here, through its lease (refused while a run is in progress)",
    )
    trigger.add_argument("task", metavar="TASK")
    command("init-db", cmd_init_db, "create the cronlease tables if they are missing")
    web = command("web", cmd_web, "serve the read-only status page (default on 127.0.0.1 only)")
    web.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    web.add_argument("--port", type=_port, default=8080, help="port (default 8080; 0: any free)")
    imports = command(
        "import-crontab",
        cmd_import_crontab,
        "print a cronlease.toml equivalent to a crontab file ('-' reads stdin)",
    )
    imports.add_argument("file", metavar="FILE")
    imports.add_argument(
        "--system",
        action="store_true",
        help="the file has a user column (/etc/crontab, /etc/cron.d/*)",
    )
    imports.add_argument(
        "--timezone",
        metavar="ZONE",
        help="the time zone the crontab ran in (default: this machine's)",
    )
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if level != "DEBUG":
        logging.getLogger("apscheduler").setLevel(logging.WARNING)


def _error(message: str) -> None:
    print(f"cronlease: error: {' '.join(message.split())}", file=sys.stderr)


def _print_json(value: object) -> None:
    json.dump(value, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


# --- configuration and database ----------------------------------------------


def _config(args: argparse.Namespace, *, required: bool, import_calls: bool) -> Config | None:
    """The config file: the one given with -c, else ./cronlease.toml if it exists."""
    if args.config is not None:
        return load_config(args.config, import_calls=import_calls)
    if Path(DEFAULT_CONFIG).exists():
        return load_config(DEFAULT_CONFIG, import_calls=import_calls)
    if required:
        raise UsageError(f"no ./{DEFAULT_CONFIG} here: give the config file with -c FILE")
    return None


def _database(args: argparse.Namespace, config: Config | None, *, fallback: bool = False) -> str:
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


def _missing_sqlite_file(url: str) -> bool:
    """True for a SQLite URL whose file does not exist (read commands must not create it)."""
    parsed = normalize_url(url)
    return (
        parsed.get_backend_name() == "sqlite"
        and parsed.database is not None
        and not Path(parsed.database).exists()
    )


@contextmanager
def _open_store(url: str) -> Iterator[LeaseStore]:
    store = LeaseStore(create_store_engine(url))
    try:
        yield store
    finally:
        store.dispose()


def _full_name(config: Config | None, task: str) -> str:
    return config.full_name(task) if config else task


def _spec(config: Config, task: str) -> TaskSpec:
    try:
        return config.tasks[task]
    except KeyError:
        known = ", ".join(sorted(config.tasks)) or "none"
        raise UsageError(f"no task {task!r} in {config.path} (declared: {known})") from None


# --- run ----------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    config = _config(args, required=True, import_calls=True)
    assert config is not None
    url = _database(args, config)
    specs = [spec for spec in config.tasks.values() if spec.enabled]
    if os.environ.get(DISABLED_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        logger.warning(
            "%s: this replica fires nothing (%d task(s) declared in %s); "
            "waiting for SIGINT or SIGTERM",
            f"{DISABLED_ENV}={os.environ[DISABLED_ENV]}",
            len(specs),
            config.path,
        )
        _wait_for_signal()
        logger.info("stopped (it was disabled)")
        return EXIT_OK
    scheduler = Scheduler(
        url,
        namespace=config.namespace,
        holder=config.holder,
        shutdown_timeout=args.shutdown_grace,
    )
    for spec in specs:
        spec.add_to(scheduler)
    if not specs:
        logger.warning("%s declares no enabled task: this replica has nothing to run", config.path)
    try:
        scheduler.run_forever()
    finally:
        # Commands still running after the grace: terminate their process groups
        # (their runs are already recorded interrupted), and let them finish.
        stopped = terminate_running("the replica shut down past its grace period")
        if stopped:
            scheduler.runner.wait_idle(10.0)
        scheduler.store.dispose()
    return EXIT_OK


def _wait_for_signal() -> None:
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logger.info("received %s", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# --- check --------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    config = _config(args, required=True, import_calls=True)
    assert config is not None
    url = _database(args, config)
    now = datetime.now(timezone.utc)
    tasks = [_describe_spec(config, spec, now, count=3) for spec in config.tasks.values()]
    if args.json:
        _print_json(
            {
                "config": str(config.path),
                "database": redact(url),
                "namespace": config.namespace,
                "tasks": tasks,
            }
        )
        return EXIT_OK
    print(
        f"{config.path}: OK, {len(tasks)} task(s) on {redact(url)}"
        + (f", namespace {config.namespace!r}" if config.namespace else "")
    )
    for task in tasks:
        extras = [f"ttl {_format_duration(task['lease_ttl'])}"]
        if task["timeout"] is not None:
            extras.append(f"timeout {_format_duration(task['timeout'])}")
        if not task["enabled"]:
            extras.append("DISABLED")
        print()
        print(f"{task['name']}  {task['schedule']}  {', '.join(extras)}")
        print(f"  {task['kind']}: {task['target']}")
        for fire in task["next"]:
            print(f"  next: {fire}")
    return EXIT_OK


def _describe_spec(config: Config, spec: TaskSpec, now: datetime, count: int) -> dict[str, Any]:
    upcoming = spec.schedule.upcoming(now, count)
    ttl = (
        spec.lease_ttl
        if spec.lease_ttl is not None
        else spec.schedule.ttl(upcoming[0] if upcoming else now)
    )
    zone = _zone(spec.schedule)
    return {
        "name": spec.name,
        "full_name": config.full_name(spec.name),
        "kind": spec.kind,
        "target": spec.target,
        "schedule": str(spec.schedule),
        "every": spec.schedule.expression if spec.schedule.kind == "every" else None,
        "cron": spec.schedule.expression if spec.schedule.kind == "cron" else None,
        "timezone": spec.schedule.timezone,
        "lease_ttl": ttl,
        "timeout": spec.timeout,
        "enabled": spec.enabled,
        "next": [fire.astimezone(zone).isoformat() for fire in upcoming],
    }


def _zone(schedule: Schedule) -> ZoneInfo | timezone:
    return timezone.utc if schedule.timezone.upper() == "UTC" else ZoneInfo(schedule.timezone)


# --- status and history -------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    config = _config(args, required=False, import_calls=False)
    url = _database(args, config)
    with _open_store(url) as store:
        if _missing_sqlite_file(url):
            rows: dict[str, LeaseInfo] = {}
            clock = None
            db_now = datetime.now(timezone.utc).timestamp()
            last_runs: dict[str, RunRecord] = {}
        else:
            store.create_tables()
            rows = {row.name: row for row in store.leases()}
            clock = measure_skew(store)
            db_now = store.database_time()
            names = [config.full_name(name) for name in config.tasks] if config else sorted(rows)
            last_runs = {name: runs[0] for name, runs in store.recent_runs(names, 1).items()}
    now = datetime.now(timezone.utc)
    tasks: list[dict[str, Any]] = []
    declared: set[str] = set()
    if config is not None:
        for spec in config.tasks.values():
            full = config.full_name(spec.name)
            declared.add(full)
            tasks.append(_status_of(full, spec, rows.get(full), last_runs.get(full), db_now, now))
        internal = config.full_name(HOUSEKEEPING_TASK)
        orphans = [
            _status_of(name, None, row, None, db_now, now)
            for name, row in rows.items()
            if name not in declared and name != internal and _in_namespace(name, config.namespace)
        ]
    else:
        tasks = [
            _status_of(name, None, row, last_runs.get(name), db_now, now)
            for name, row in rows.items()
        ]
        orphans = []
    overdue = _overdue(config, rows, db_now, now) if config else []
    if args.json:
        _print_json(
            {
                "database": redact(url),
                "config": str(config.path) if config else None,
                "namespace": config.namespace if config else None,
                "database_time": db_now,
                "clock_skew": None
                if clock is None
                else {"skew": clock.skew, "round_trip": clock.round_trip},
                "overdue": overdue,
                "tasks": tasks,
                "orphaned": orphans,
            }
        )
        return EXIT_FAILURE if args.check and overdue else EXIT_OK
    _print_table(
        ["TASK", "SCHEDULE", "STATE", "HOLDER", "FENCE", "LAST SLOT", "LAST RUN", "LEASE", "NEXT"],
        [_status_row(task) for task in tasks],
    )
    if not tasks:
        print("(no tasks)" if config else "(no lease rows in this database)")
    if orphans:
        print()
        print(
            "Orphaned lease rows (tasks no longer declared; kept, since deleting one "
            "resets its slot cursor):"
        )
        _print_table(
            ["TASK", "STATE", "HOLDER", "FENCE", "LAST SLOT", "LEASE"],
            [
                [
                    o["name"],
                    o["state"],
                    o["holder"] or "-",
                    str(o["fence"] or "-"),
                    _short_time(o["last_slot_time"]),
                    _lease_text(o),
                ]
                for o in orphans
            ],
        )
    if clock is not None:
        print(
            f"\nclock: this host is {-clock.skew:+.3f} s off the database clock "
            f"(±{clock.round_trip / 2:.3f} s)"
        )
    if args.check and overdue:
        for name in overdue:
            _error(f"{name} is overdue: its last tick did not start within its grace")
        return EXIT_FAILURE
    return EXIT_OK


def _overdue(config: Config, rows: dict[str, LeaseInfo], db_now: float, now: datetime) -> list[str]:
    """Declared, enabled tasks whose next tick after the last one taken is overdue."""
    tasks = [
        Task(
            name=spec.name,
            schedule=spec.schedule,
            func=_never_called,
            namespace=config.namespace,
            lease_ttl=spec.lease_ttl,
        )
        for spec in config.tasks.values()
        if spec.enabled
    ]
    return overdue_tasks(tasks, rows, now=now, db_now=db_now)


def _never_called() -> None:
    raise AssertionError("status only reads schedules")


def _in_namespace(name: str, namespace: str | None) -> bool:
    """Whether a lease row belongs to this config's namespace (no namespace: rows without one)."""
    if namespace:
        return name.startswith(f"{namespace}:")
    return ":" not in name


def _status_of(
    name: str,
    spec: TaskSpec | None,
    row: LeaseInfo | None,
    last: RunRecord | None,
    db_now: float,
    now: datetime,
) -> dict[str, Any]:
    held = row is not None and row.expires_at > db_now
    acquired = row is not None and row.fence > 0  # a row made by pause was never acquired
    if row is not None and row.paused:
        state = "paused"
    elif held:
        state = "running"
    else:
        state = "idle"
    upcoming = spec.schedule.upcoming(now, 1) if spec is not None and spec.enabled else []
    cursor = row.slot if row is not None and row.slot >= 0 else None
    return {
        "name": name,
        "task": spec.name if spec else name,
        "declared": spec is not None,
        "enabled": spec.enabled if spec else None,
        "schedule": str(spec.schedule) if spec else None,
        "state": state,
        "paused": bool(row and row.paused),
        "running": held,
        "holder": _holder(row.holder) if row and acquired else None,
        "fence": row.fence if row and row.fence else None,
        "last_slot": cursor,
        "last_slot_time": _iso(time_of_slot(cursor)) if cursor is not None else None,
        "lease_expires_at": row.expires_at if row and acquired else None,
        "lease_expires_in": round(row.expires_at - db_now, 3) if row and acquired else None,
        "last_run": _run_dict(last) if last else None,
        "next_fire_time": upcoming[0].astimezone(_zone(spec.schedule)).isoformat()
        if spec is not None and upcoming
        else None,
    }


def _status_row(task: dict[str, Any]) -> list[str]:
    last = task["last_run"]
    if last is None:
        last_text = "never"
    elif last["duration"] is None:
        last_text = last["outcome"]
    else:
        last_text = f"{last['outcome']} ({_format_duration(last['duration'])})"
    if last is not None and last["manual"]:
        last_text += " manual"
    schedule = task["schedule"] or "?"
    if task["enabled"] is False:
        schedule += " (disabled)"
    return [
        task["task"],
        schedule,
        task["state"],
        task["holder"] or "-",
        str(task["fence"] or "-"),
        _short_time(task["last_slot_time"]),
        last_text,
        _lease_text(task),
        _short_time(task["next_fire_time"]),
    ]


def _lease_text(task: dict[str, Any]) -> str:
    remaining = task["lease_expires_in"]
    if remaining is None:
        return "-"
    if remaining > 0:
        return f"expires in {_format_duration(remaining)}"
    return "free"


def _holder(holder: str) -> str:
    """The holder id without the per-attempt nonce."""
    return holder.rsplit("#", 1)[0]


def _run_dict(run: RunRecord) -> dict[str, Any]:
    return {
        "name": run.name,
        "slot": run.slot,
        "scheduled_for": _iso(time_of_slot(run.slot)),
        "manual": run.manual,
        "fence": run.fence,
        "holder": _holder(run.holder),
        "started_at": _iso(datetime.fromtimestamp(run.started_at, timezone.utc)),
        "finished_at": _iso(datetime.fromtimestamp(run.finished_at, timezone.utc))
        if run.finished_at is not None
        else None,
        "duration": None if run.duration is None else round(run.duration, 3),
        "outcome": run.outcome,
        "error": run.error,
    }


def cmd_history(args: argparse.Namespace) -> int:
    config = _config(args, required=False, import_calls=False)
    url = _database(args, config)
    name = _full_name(config, args.task)
    with _open_store(url) as store:
        if _missing_sqlite_file(url):
            runs: list[RunRecord] = []
        else:
            store.create_tables()
            runs = store.history(name, args.limit)
    records = [_run_dict(run) for run in runs]
    if args.json:
        _print_json(records)
        return EXIT_OK
    if not records:
        print(f"no runs of {name!r} recorded")
        return EXIT_OK
    rows = []
    for record in records:
        error = _error_summary(record["error"] or "").splitlines()
        rows.append(
            [
                _short_time(record["scheduled_for"]) + (" (manual)" if record["manual"] else ""),
                record["outcome"],
                "-" if record["duration"] is None else _format_duration(record["duration"]),
                str(record["fence"]),
                record["holder"],
                (error[0][:100] if error else ""),
            ]
        )
    _print_table(["SCHEDULED FOR", "OUTCOME", "DURATION", "FENCE", "HOLDER", "ERROR"], rows)
    return EXIT_OK


# --- pause, resume, trigger, init-db ----------------------------------------------


def _target(args: argparse.Namespace, store: LeaseStore, config: Config | None) -> str:
    """The stored name of TASK: declared in the config file, or a lease row that exists."""
    name = _full_name(config, args.task)
    if config is not None and args.task in config.tasks:
        return name
    if store.leases([name]):
        return name
    if config is not None:
        _spec(config, args.task)  # raises with the list of declared tasks
    raise UsageError(
        f"no task {name!r} in the database; to pause a task that never ran, "
        "give the config file that declares it (-c FILE)"
    )


def cmd_pause(args: argparse.Namespace) -> int:
    return _set_paused(args, paused=True)


def cmd_resume(args: argparse.Namespace) -> int:
    return _set_paused(args, paused=False)


def _set_paused(args: argparse.Namespace, *, paused: bool) -> int:
    config = _config(args, required=False, import_calls=False)
    url = _database(args, config)
    with _open_store(url) as store:
        store.create_tables()
        name = _target(args, store, config)
        if paused:
            store.pause(name)
            print(f"paused {name!r} on every replica (a run in progress finishes)")
        else:
            store.resume(name)
            print(f"resumed {name!r} on every replica")
    return EXIT_OK


def cmd_trigger(args: argparse.Namespace) -> int:
    config = _config(args, required=True, import_calls=True)
    assert config is not None
    spec = _spec(config, args.task)
    url = _database(args, config)
    scheduler = Scheduler(url, namespace=config.namespace, holder=config.holder)
    # This process only runs the one manual run: it must not start catch-up runs
    # that would be cut off when it exits.
    task = spec.add_to(scheduler, catchup="skip")
    try:
        with _interrupt_on_sigterm():
            outcome = scheduler.run_now(spec.name)
        if outcome is None:
            raise Failure(_why_not_acquired(scheduler.store, task.full_name))
        runs = [
            run
            for run in scheduler.store.history(task.full_name, 5)
            if run.manual and run.holder.startswith(scheduler.holder)
        ]
    finally:
        scheduler.runner.close()
        scheduler.store.dispose()
    run = runs[0] if runs else None
    duration = f" in {_format_duration(run.duration)}" if run and run.duration is not None else ""
    fence = f" (fence {run.fence})" if run else ""
    print(f"{task.full_name}: {outcome}{duration}{fence}")
    if outcome != "succeeded":
        if run and run.error:
            print(_error_summary(run.error), file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _why_not_acquired(store: LeaseStore, name: str) -> str:
    try:
        rows = store.leases([name])
        db_now = store.database_time()
    except StoreError as exc:
        return f"{name}: not run: {exc}"
    row = rows[0] if rows else None
    if row is not None and row.paused:
        return f"{name}: not run: the task is paused (cronlease resume ...)"
    if row is not None and row.expires_at > db_now:
        return (
            f"{name}: not run: a run is in progress (holder {_holder(row.holder)}, "
            f"fence {row.fence}, lease for {_format_duration(row.expires_at - db_now)} more)"
        )
    return f"{name}: not run: the lease could not be taken; try again"


@contextmanager
def _interrupt_on_sigterm() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C: the run is recorded interrupted and its command killed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def cmd_init_db(args: argparse.Namespace) -> int:
    config = _config(args, required=False, import_calls=False)
    url = _database(args, config, fallback=True)
    with _open_store(url) as store:
        store.create_tables()
    print(f"cronlease tables are ready on {redact(url)}")
    return EXIT_OK


def cmd_web(args: argparse.Namespace) -> int:
    config = _config(args, required=False, import_calls=False)
    url = _database(args, config, fallback=True)
    with _open_store(url) as store:
        tasks = (
            {config.full_name(spec.name): spec.schedule for spec in config.tasks.values()}
            if config
            else None
        )
        serve(
            store,
            host=args.host,
            port=args.port,
            tasks=tasks,
            namespace=config.namespace if config else None,
            ready=lambda page: print(f"status page on {page}", flush=True),
        )
    return EXIT_OK


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0 to 65535, got {port}")
    return port


# --- import-crontab ----------------------------------------------------------------


def cmd_import_crontab(args: argparse.Namespace) -> int:
    source = "stdin" if args.file == "-" else args.file
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {source}: {getattr(exc, 'strerror', None) or exc}") from None
    zone = args.timezone
    if zone is None:
        zone = local_timezone()
        if zone is None:
            zone = "UTC"
            print(
                f"cronlease: {source}: this machine's time zone is unknown; schedules are in "
                "UTC (give --timezone ZONE if cron ran in another zone)",
                file=sys.stderr,
            )
    else:
        Schedule.cron("* * * * *", timezone=zone)  # ConfigError for an unknown zone
    translation = translate_crontab(text, source=source, system=args.system, timezone=zone)
    sys.stdout.write(translation.toml)
    for note in translation.notes:
        print(f"cronlease: {note}", file=sys.stderr)
    for problem in translation.problems:
        print(f"cronlease: {problem}", file=sys.stderr)
    if translation.problems:
        print(
            f"cronlease: {len(translation.problems)} line(s) of {source} not translated",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    return EXIT_OK


# --- formatting --------------------------------------------------------------------


def _error_summary(error: str) -> str:
    """A recorded error without its traceback: the exception line and what follows it."""
    lines = error.strip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    if not lines or not lines[0].startswith("Traceback") or not frames:
        return error.strip()
    rest = lines[frames[-1] + 1 :]
    while rest and rest[0].startswith(" "):
        rest.pop(0)  # the source line (and carets) of the last frame
    return "\n".join(rest) if rest else error.strip()


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _short_time(iso: str | None) -> str:
    return "-" if iso is None else iso.replace("T", " ")


def _format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.3g}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _print_table(headers: list[str], rows: list[list[str]]) -> None:
    if not rows:
        return
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    for row in [headers, *rows]:
        print(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
