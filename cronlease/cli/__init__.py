"""The ``cronlease`` command: run a replica from ``cronlease.toml``, inspect and steer the fleet.

``main`` is the console script. The package's modules, one job each:

- ``parser``: the argument parser (every command and option);
- ``common``: exit statuses, errors, the config file and the database;
- ``output``: error lines, JSON and tables (values read as :mod:`cronlease._status` says);
- ``run``: ``run``;
- ``check``: ``check`` (the check model and its two outputs);
- ``inspect``: ``status`` and ``history``; ``table``: the ``status`` table (narrow, wide);
- ``manage``: ``pause``, ``resume``, ``trigger``, ``init-db``, ``web``, ``import-crontab``,
  ``import-celery-beat``;
- ``forget``: ``forget`` (an orphaned lease row and its history);
- ``schedules``: ``schedule add|set|rm|ls|show|history`` (schedules kept in the database,
  through :class:`cronlease.Schedules`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from cronlease._service import Failure as Failure
from cronlease._service import UsageError as UsageError
from cronlease._service import commands_named
from cronlease.cli.check import cmd_check as cmd_check
from cronlease.cli.common import DISABLED_ENV as DISABLED_ENV
from cronlease.cli.common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PIPE,
    EXIT_USAGE,
)
from cronlease.cli.common import Preset as Preset
from cronlease.cli.common import logger as logger
from cronlease.cli.inspect import cmd_history as cmd_history
from cronlease.cli.inspect import cmd_status as cmd_status
from cronlease.cli.manage import cmd_import_celery_beat as cmd_import_celery_beat
from cronlease.cli.manage import cmd_import_crontab as cmd_import_crontab
from cronlease.cli.manage import cmd_init_db as cmd_init_db
from cronlease.cli.manage import cmd_pause as cmd_pause
from cronlease.cli.manage import cmd_resume as cmd_resume
from cronlease.cli.manage import cmd_trigger as cmd_trigger
from cronlease.cli.manage import cmd_web as cmd_web
from cronlease.cli.output import print_error, safe_output
from cronlease.cli.parser import COMMANDS
from cronlease.cli.parser import EPILOG as EPILOG
from cronlease.cli.parser import build_parser as build_parser
from cronlease.cli.run import cmd_run as cmd_run
from cronlease.errors import ConfigError, StoreError

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_PIPE", "EXIT_USAGE", "main"]


# --- entry point -------------------------------------------------------------


def main(
    argv: Sequence[str] | None = None,
    *,
    preset: Preset | None = None,
    prog: str | None = None,
    commands: Sequence[str] | None = None,
) -> int:
    """Run ``cronlease`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    ``preset``: a host application's configuration and scheduler instead of a file
    (``manage.py cronlease``: cronlease/contrib/django); ``commands`` are the ones it
    offers (its help lists, its parser knows; its hints name them after ``prog``).
    The commands themselves are the same code either way."""
    argv = sys.argv[1:] if argv is None else list(argv)
    offered = COMMANDS if commands is None else commands
    settings = None if preset is None else str(preset.config.path)
    parser = build_parser(prog or "cronlease", offered, settings)
    given = next((word for word in argv if not word.startswith("-")), None)
    if given in COMMANDS and given not in offered:  # a command of cronlease's alone
        print_error(f"{parser.prog} runs {', '.join(offered)}; for {given}, use cronlease")
        return EXIT_USAGE
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help, --version or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not hasattr(args, "handler"):  # bare ``cronlease``: what there is to do
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args.preset = preset
    if preset is None or not preset.keep_logging:
        _configure_logging(args.log_level)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        # foreign text printed escaped, passwords hidden; hints name commands as typed here
        with safe_output(), commands_named(parser.prog):
            try:
                code = handler(args)
            except (ConfigError, UsageError) as exc:
                print_error(str(exc))
                code = EXIT_USAGE
            except (StoreError, Failure) as exc:
                print_error(str(exc))
                code = EXIT_FAILURE
            except KeyboardInterrupt:
                code = EXIT_INTERRUPTED
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The reader of stdout went away (``cronlease status --json | head -1``): stop quietly,
    as a command killed by SIGPIPE would (exit 141), without a traceback. Writes still
    buffered go to /dev/null, so the flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_PIPE


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if level != "DEBUG":
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
