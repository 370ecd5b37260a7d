"""The commands that act on tasks and tables, and the two tools.

``pause``, ``resume`` and ``trigger`` steer one task on every replica;
``init-db`` creates the tables; ``web`` serves the status page;
``import-crontab`` and ``import-celery-beat`` translate a crontab, a Celery beat schedule
into a config file.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from cronlease._service import (
    Failure,
    UsageError,
    declared_tasks,
    open_store,
    redact,
    require_tables,
    set_paused,
    task_spec,
    trigger,
)
from cronlease._status import format_duration, run_json
from cronlease._timing.schedule import Schedule
from cronlease.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    config_from_args,
    database_url,
)
from cronlease.cli.output import print_json
from cronlease.config import local_timezone, translate_crontab
from cronlease.web import serve

# --- pause, resume, trigger, init-db ----------------------------------------------


def cmd_pause(args: argparse.Namespace) -> int:
    return _set_paused(args, paused=True)


def cmd_resume(args: argparse.Namespace) -> int:
    return _set_paused(args, paused=False)


def _set_paused(args: argparse.Namespace, *, paused: bool) -> int:
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config)
    name = set_paused(url, config, args.task, paused=paused)
    model: dict[str, Any] = {"task": name, "paused": paused}
    if args.json:
        print_json(model)
    elif model["paused"]:
        print(f"paused {model['task']!r} on every replica (a run in progress finishes)")
    else:
        print(f"resumed {model['task']!r} on every replica")
    return EXIT_OK


def cmd_trigger(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=True, import_calls=True)
    assert config is not None
    spec = task_spec(config, args.task)
    url = database_url(args, config)
    done = trigger(url, config, spec, running=_interrupt_on_sigterm())
    model: dict[str, Any] = {
        "task": done.name,
        "outcome": done.outcome,
        "run": None if done.run is None else run_json(done.run),
    }
    failed = model["outcome"] != "succeeded"
    if args.json:
        print_json(model)
        return EXIT_FAILURE if failed else EXIT_OK
    run = model["run"]
    duration = ""
    if run is not None and run["duration"] is not None:
        duration = f" in {format_duration(run['duration'])}"
    fence = f" (fence {run['fence']})" if run is not None else ""
    print(f"{model['task']}: {model['outcome']}{duration}{fence}")
    if failed:
        if run is not None and run["error_summary"]:
            print(run["error_summary"], file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


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
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config, fallback=True)
    with open_store(url, config) as store:
        require_tables(store, url)
    model: dict[str, Any] = {"database": redact(url), "tables": "ready"}
    if args.json:
        print_json(model)
    else:
        print(f"cronlease tables are {model['tables']} on {model['database']}")
    return EXIT_OK


def cmd_web(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=False, import_calls=False)
    url = database_url(args, config, fallback=True)
    # the command's page is read-only (no authorize hook on a command line): its reads
    # leave a SQLite file's journal mode as it is, and read a read-only copy
    with open_store(url, config, read_only=True) as store:
        serve(
            store,
            host=args.host,
            port=args.port,
            tasks=declared_tasks(config),  # enabled, grace, alert_after: as `status` judges
            namespace=config.namespace if config else None,
            ready=lambda page: print(f"status page on {page}", flush=True),
        )
    return EXIT_OK


# --- import-crontab ----------------------------------------------------------------


def cmd_import_crontab(args: argparse.Namespace) -> int:
    """A refused line is a config mistake: exit 2 and nothing written, unless --partial."""
    source = "stdin" if args.file == "-" else args.file
    text = _read_crontab(args.file, source)
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
    for note in translation.notes:
        print(f"cronlease: {note}", file=sys.stderr)
    for problem in translation.problems:
        print(f"cronlease: {problem}", file=sys.stderr)
    refused = len(translation.problems)
    if refused and not args.partial:
        print(
            f"cronlease: error: {refused} line(s) of {source} cannot be translated faithfully; "
            "nothing written (fix them, or give --partial to write the rest with these lines "
            "as comments)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.output is None:
        sys.stdout.write(translation.toml)
    else:
        _write_atomically(Path(args.output), translation.toml)
    if refused:
        print(
            f"cronlease: {refused} line(s) of {source} left out (--partial); each is a "
            "NOT TRANSLATED comment in the output",
            file=sys.stderr,
        )
    return EXIT_OK


# --- import-celery-beat ------------------------------------------------------------


def cmd_import_celery_beat(args: argparse.Namespace) -> int:
    """As import-crontab: an entry not translated is exit 2 and nothing written, unless
    --partial (then exit 2 only if no entry could be)."""
    from cronlease.config import translate_celery_app, translate_django_beat

    # the app, and Django's settings, are imported from here, as `celery -A` and
    # manage.py do
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if args.django:
        _setup_django(args.settings)
        try:
            from django.db import DatabaseError
        except ImportError:  # pragma: no cover - _setup_django imported Django
            raise
        try:
            result = translate_django_beat(args.app, partial=args.partial)
        except DatabaseError as exc:
            raise Failure(
                f"cannot read django-celery-beat's periodic tasks: {exc} (are its migrations "
                "applied? `manage.py migrate django_celery_beat`)"
            ) from None
        source = "django-celery-beat"
    else:
        if args.settings is not None:
            raise UsageError("--settings applies to --django only")
        result = translate_celery_app(args.app, partial=args.partial)
        source = f"the beat_schedule of {args.app}"
    for note in result.notes:
        print(f"cronlease: {note}", file=sys.stderr)
    for problem in result.problems:
        print(f"cronlease: {problem}", file=sys.stderr)
    refused = len(result.problems)
    if refused and not args.partial:
        print(
            f"cronlease: error: {refused} entr{'y' if refused == 1 else 'ies'} of {source} "
            "cannot be translated faithfully; nothing written (fix them, or give --partial "
            "to write the others with these as comments)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if refused and result.tasks == 0:
        print(
            f"cronlease: error: no entry of {source} could be translated; nothing written",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.output is None:
        sys.stdout.write(result.toml)
    else:
        _write_atomically(Path(args.output), result.toml)
    if refused:
        print(
            f"cronlease: {refused} entr{'y' if refused == 1 else 'ies'} of {source} left out "
            "(--partial); each is a NOT TRANSLATED comment in the output",
            file=sys.stderr,
        )
    return EXIT_OK


def _setup_django(settings: str | None) -> None:
    """Django set up as manage.py does: --settings wins over DJANGO_SETTINGS_MODULE."""
    if settings is not None:
        os.environ["DJANGO_SETTINGS_MODULE"] = settings
    elif not os.environ.get("DJANGO_SETTINGS_MODULE"):
        raise UsageError("--django: give --settings MODULE or set DJANGO_SETTINGS_MODULE")
    try:
        import django
    except ImportError:
        raise UsageError("--django needs Django and django-celery-beat installed") from None
    try:
        django.setup()
    except Exception as exc:  # the project's settings may raise anything on import
        raise UsageError(
            f"cannot set up Django with settings {os.environ['DJANGO_SETTINGS_MODULE']!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from None


def _read_crontab(file: str, source: str) -> str:
    """The crontab as cron reads it: UTF-8 (what TOML holds), lines ending at \\n only."""
    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(
            f"{source}:{line}: not UTF-8 (byte {data[exc.start]:#04x}); a cronlease.toml is "
            "UTF-8: convert the crontab first (iconv -f LATIN1 -t UTF-8, say)"
        ) from None


def _write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` whole or not at all: a failed write leaves the old file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
