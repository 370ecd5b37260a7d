"""The ``cronlease`` argument parser: every command, its options and its handler."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Collection

from cronlease._roles import parse_roles
from cronlease._version import __version__
from cronlease.cli.check import DEFAULT_COUNT, MAX_COUNT, cmd_check
from cronlease.cli.common import DISABLED_ENV
from cronlease.cli.forget import cmd_forget
from cronlease.cli.inspect import cmd_history, cmd_status
from cronlease.cli.manage import (
    cmd_import_celery_beat,
    cmd_import_crontab,
    cmd_init_db,
    cmd_pause,
    cmd_resume,
    cmd_trigger,
    cmd_web,
)
from cronlease.cli.run import cmd_run
from cronlease.cli.schedules import (
    OPTION_FLAGS,
    UNSETTABLE,
    cmd_schedule_add,
    cmd_schedule_history,
    cmd_schedule_ls,
    cmd_schedule_rm,
    cmd_schedule_set,
    cmd_schedule_show,
    option_help,
    unset_key,
)
from cronlease.config import DATABASE_ENV, DEFAULT_CONFIG
from cronlease.errors import ConfigError

#: every command, as ``cronlease --help`` lists them
COMMANDS = (
    "run",
    "check",
    "status",
    "history",
    "pause",
    "resume",
    "trigger",
    "forget",
    "schedule",
    "init-db",
    "web",
    "import-crontab",
    "import-celery-beat",
)


def epilog(settings: str | None = None, commands: Collection[str] = COMMANDS) -> str:
    """The exit statuses and environment, for the ``commands`` offered; ``settings``: what
    configures them instead of a config file (``manage.py cronlease``: settings.CRONLEASE)."""
    crontab = (
        ", a crontab line or beat entry an import command cannot translate faithfully"
        if "import-crontab" in commands
        else ""
    )
    schedule = (
        "; a schedule write refused (bad input, a stale --version) or an unknown schedule"
        if "schedule" in commands
        else ""
    )
    source = DEFAULT_CONFIG if settings is None else settings
    environment = (
        f"  {DATABASE_ENV}  overrides `database` in the config file (--database overrides both)\n"
        if settings is None
        else ""
    )
    if "run" in commands:
        environment += (
            f"  {DISABLED_ENV}=1      `run` starts but fires nothing "
            "(e.g. a staging copy of production)\n"
        )
    usage = textwrap.fill(
        f"usage or configuration error (bad arguments, invalid {source}, unknown task, "
        f"forget refused{crontab}){schedule}; nothing was started, nothing was written",
        width=86,
        initial_indent="  2    ",
        subsequent_indent="       ",
    )
    text = f"""\
exit status:
  0    success
  1    runtime failure: the database is unreachable ("database unreachable: ..."),
       status --check found a problem, a triggered run failed or was refused
{usage}
  130  interrupted (Ctrl-C)
  141  stdout was closed before the output ended (`... | head`); nothing more printed
"""
    if environment:
        text += f"\nenvironment:\n{environment}"
    if settings is not None:
        text += f"\nconfiguration: {settings} (tasks and database), not a config file\n"
    return text


EPILOG = epilog()


def build_parser(
    prog: str = "cronlease",
    offered: Collection[str] = COMMANDS,
    settings: str | None = None,
) -> argparse.ArgumentParser:
    """The parser of the ``offered`` commands (the rest are neither listed nor parsed).
    ``settings``: what configures them instead of a config file (``manage.py cronlease``:
    settings.CRONLEASE), so -c and --database are not offered."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Periodic tasks on every replica, each tick run once, held by a database lease",
        epilog=epilog(settings, offered),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cronlease {__version__}")
    # not required: bare ``cronlease`` prints the whole help (main), not one usage line
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    # a command not offered is built here, out of sight, so its options need no guard
    unlisted = argparse.ArgumentParser(add_help=False).add_subparsers()
    source = "the config file" if settings is None else settings

    common = argparse.ArgumentParser(add_help=False)
    if settings is None:
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
    else:
        common.set_defaults(config=None, database=None)
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
        options: bool = True,
    ) -> argparse.ArgumentParser:
        assert name in COMMANDS, name
        parents = [common, as_json] if json_output else [common]
        sub = (commands if name in offered else unlisted).add_parser(
            name,
            help=help_text,
            description=help_text,
            parents=parents if options else [],
            epilog=f"exit status and environment: {prog} --help",
        )
        sub.set_defaults(handler=handler, command_name=name)
        return sub

    run = command("run", cmd_run, "run a replica in the foreground until SIGINT or SIGTERM")
    run.add_argument(
        "--grace",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="on SIGINT/SIGTERM, the most the replica takes to exit: it waits for running "
        "tasks, then terminates running commands, all within this (default: [scheduler] "
        "shutdown_grace in the config file, else 25, under Kubernetes' 30); a second "
        "signal exits at once",
    )
    run.add_argument(
        "--role",
        action="append",
        dest="roles",
        type=_role,
        default=None,
        metavar="ROLE",
        help="a role of this replica (repeat for more; default: [scheduler] roles in the "
        "config file): a task with roles = [...] runs only on replicas with one of them",
    )
    run.add_argument(
        "--celery-app",
        default=None,
        metavar="MODULE:APP",
        help="also run this Celery app's beat_schedule: each tick of each entry sent once "
        "across the replicas (default: [celery] app in the config file, which this replaces)",
    )
    run.add_argument(  # the old name, deprecated
        "--shutdown-grace", type=_seconds, default=None, help=argparse.SUPPRESS
    )
    check = command(
        "check",
        cmd_check,
        f"validate {source}; list tasks and next fire times",
        json_output=True,
    )
    check.add_argument(
        "--count",
        type=_count,
        default=DEFAULT_COUNT,
        metavar="N",
        help=f"how many next fire times per task, 1 to {MAX_COUNT} (default {DEFAULT_COUNT}), "
        "each the wall time in the task's zone with its UTC offset",
    )
    check.add_argument(
        "--connect",
        action="store_true",
        help="also connect to the database and say whether the cronlease tables are there "
        "(creating nothing); exit 1 if it cannot be reached. Without it, check reads the "
        "config only",
    )
    status = command(
        "status", cmd_status, "show every task's lease, state and last run", json_output=True
    )
    status.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if a declared task is failing (its last alert_after runs failed) or "
        "overdue past its grace, an enabled schedule row is invalid, or the database is "
        "unreachable (a health probe)",
    )
    status.add_argument(
        "-o",
        "--output",
        choices=["wide"],
        help="wide: every column, times as ISO 8601 instants (default: fits 100 columns, "
        "times relative: 3m ago, in 12s)",
    )
    status.add_argument(
        "--orphaned",
        action="store_true",
        help="list every orphaned lease row (rows no declared task owns) instead of the tasks",
    )
    history = command("history", cmd_history, "show a task's latest runs", json_output=True)
    history.add_argument("task", metavar="TASK")
    history.add_argument(
        "--limit", type=_positive_int, default=20, metavar="N", help="how many runs (default 20)"
    )
    pause = command(
        "pause",
        cmd_pause,
        "pause a task on every replica (running runs finish)",
        json_output=True,
    )
    pause.add_argument("task", metavar="TASK")
    resume = command(
        "resume", cmd_resume, "resume a paused task on every replica", json_output=True
    )
    resume.add_argument("task", metavar="TASK")
    trigger = command(
        "trigger",
        cmd_trigger,
        "run a task once now, here, through its lease (refused while a run is in progress)",
        json_output=True,
    )
    trigger.add_argument("task", metavar="TASK")
    forget = command(
        "forget",
        cmd_forget,
        "delete an orphaned task's lease row and its run history (refused while a run "
        "holds its lease)",
        json_output=True,
    )
    forget.add_argument("task", metavar="TASK")
    forget.add_argument(
        "--force",
        action="store_true",
        help=f"forget a task {source} still declares (its next tick makes a new row, "
        "from a fresh slot cursor)",
    )
    _schedule_commands(
        command("schedule", _schedule_help, _SCHEDULE_HELP, options=False), [common, as_json], prog
    )
    command(
        "init-db",
        cmd_init_db,
        "create the cronlease tables if they are missing",
        json_output=True,
    )
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
    imports.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the config to FILE (replaced whole, and only if the translation is "
        "written) instead of stdout",
    )
    imports.add_argument(
        "--partial",
        action="store_true",
        help="write the lines that translate even if some cannot be translated faithfully "
        "(those stay in the output as comments, and are listed on stderr); without it such "
        "a crontab exits 2 and nothing is written",
    )
    beat = command(
        "import-celery-beat",
        cmd_import_celery_beat,
        "print a cronlease.toml equivalent to a Celery app's beat_schedule (or, with "
        "--django, to django-celery-beat's periodic tasks)",
    )
    beat.add_argument(
        "app", metavar="APP", help='the Celery app, as "module:attribute" (proj.celery:app)'
    )
    beat.add_argument(
        "--django",
        action="store_true",
        help="read django-celery-beat's PeriodicTask rows instead of the app's beat_schedule "
        "(each becomes a [tasks.NAME] table sending through APP)",
    )
    beat.add_argument(
        "--settings",
        metavar="MODULE",
        help="with --django: the Django settings module (default: DJANGO_SETTINGS_MODULE)",
    )
    beat.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the config to FILE (replaced whole, and only if the translation is "
        "written) instead of stdout",
    )
    beat.add_argument(
        "--partial",
        action="store_true",
        help="write the entries that translate even if some cannot be translated faithfully "
        "(those stay in the output as comments, and are listed on stderr); without it such "
        "a schedule exits 2 and nothing is written",
    )
    return parser


_SCHEDULE_HELP = (
    "add, change, remove and list the schedules kept in the database (each runs a job "
    "the replicas offer)"
)


def _schedule_help(args: argparse.Namespace) -> int:
    """Bare ``cronlease schedule``: its subcommands."""
    args.schedule_parser.print_help(sys.stderr)
    return 2


def _schedule_commands(
    schedule: argparse.ArgumentParser, parents: list[argparse.ArgumentParser], prog: str
) -> None:
    """``schedule add|set|rm|ls|show|history``; a task option is one flag each, made from
    the option table (cronlease/_options.py) for the options a schedule row keeps."""
    schedule.set_defaults(schedule_parser=schedule, log_level="INFO")
    subcommands = schedule.add_subparsers(title="subcommands", metavar="SUBCOMMAND")

    def subcommand(
        name: str, handler: Callable[[argparse.Namespace], int], help_text: str
    ) -> argparse.ArgumentParser:
        sub = subcommands.add_parser(
            name,
            help=help_text,
            description=help_text,
            parents=parents,
            epilog=f"exit status and environment: {prog} --help",
        )
        sub.set_defaults(handler=handler)
        return sub

    def fields(sub: argparse.ArgumentParser, *, adding: bool) -> None:
        sub.add_argument(
            "--job",
            required=adding,
            metavar="JOB",
            help="the job it runs: one the replicas offer (registered in code)",
        )
        when = sub.add_mutually_exclusive_group(required=adding)
        when.add_argument(
            "--every",
            metavar="DURATION",
            help='run every DURATION (30, "90s", "1h30m"); replaces a cron schedule',
        )
        when.add_argument(
            "--cron",
            metavar="EXPR",
            help='run at the times of a cron expression ("0 3 * * *"); replaces an every schedule',
        )
        sub.add_argument(
            "--timezone", metavar="ZONE", help="the IANA zone of a --cron schedule (default UTC)"
        )
        sub.add_argument(
            "--args",
            dest="call_args",
            metavar="JSON",
            help="the job's positional arguments, a JSON array",
        )
        sub.add_argument(
            "--kwargs",
            dest="call_kwargs",
            metavar="JSON",
            help="the job's keyword arguments, a JSON object",
        )
        for key, flag in OPTION_FLAGS.items():
            sub.add_argument(flag, dest=f"option_{key}", metavar="VALUE", help=option_help(key))
        switch = sub.add_mutually_exclusive_group()
        switch.add_argument(
            "--enable",
            dest="enabled",
            action="store_const",
            const=True,
            default=None,
            help="fire it (the default of a new schedule)",
        )
        switch.add_argument(
            "--disable",
            dest="enabled",
            action="store_const",
            const=False,
            help="keep it, fire nothing",
        )

    def writer(sub: argparse.ArgumentParser, *, versioned: bool) -> None:
        if versioned:
            sub.add_argument(
                "--version",
                dest="expected_version",
                type=_positive_int,
                default=None,
                metavar="N",
                help="refuse (exit 2, nothing written) unless the schedule is at version N, "
                "the one you read: another change since is named",
            )
        sub.add_argument(
            "--changed-by",
            metavar="WHO",
            help="who the change log names (default: user@host)",
        )

    add = subcommand("add", cmd_schedule_add, "add a schedule")
    add.add_argument("name", metavar="NAME")
    fields(add, adding=True)
    writer(add, versioned=False)
    change = subcommand("set", cmd_schedule_set, "change a schedule's fields")
    change.add_argument("name", metavar="NAME")
    fields(change, adding=False)
    change.add_argument(
        "--unset",
        action="append",
        type=unset_key,
        metavar="KEY",
        help=f"take an option back to its default (repeat for more): {', '.join(UNSETTABLE)}",
    )
    writer(change, versioned=True)
    remove = subcommand(
        "rm", cmd_schedule_rm, "remove a schedule: it fires nothing more; its history stays"
    )
    remove.add_argument("name", metavar="NAME")
    writer(remove, versioned=True)
    subcommand(
        "ls",
        cmd_schedule_ls,
        "list the schedules: job, schedule, version, who changed it, whether a live "
        "replica offers its job and it loads",
    )
    show = subcommand("show", cmd_schedule_show, "show one schedule whole")
    show.add_argument("name", metavar="NAME")
    changes = subcommand(
        "history", cmd_schedule_history, "show each change of a schedule (kept after rm)"
    )
    changes.add_argument("name", metavar="NAME")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def _role(text: str) -> str:
    try:
        return parse_roles([text])[0]
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _count(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_COUNT}, got {value}")
    return value


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0 to 65535, got {port}")
    return port
