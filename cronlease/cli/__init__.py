"""The ``cronlease`` command: run a replica from ``cronlease.toml``, inspect and steer the fleet.

``main`` is the console script. The package's modules, one job each:

- ``parser``: the argument parser (every command and option);
- ``common``: exit statuses, errors, the config file and the database;
- ``output``: error lines, JSON and tables (values read as :mod:`cronlease._status` says);
- ``run``: ``run``;
- ``check``: ``check`` (the check model and its two outputs);
- ``inspect``: ``status`` and ``history``;
- ``manage``: ``pause``, ``resume``, ``trigger``, ``init-db``, ``web``, ``import-crontab``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from cronlease.cli.check import cmd_check as cmd_check
from cronlease.cli.common import DISABLED_ENV as DISABLED_ENV
from cronlease.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from cronlease.cli.common import Failure as Failure
from cronlease.cli.common import UsageError as UsageError
from cronlease.cli.common import logger as logger
from cronlease.cli.inspect import cmd_history as cmd_history
from cronlease.cli.inspect import cmd_status as cmd_status
from cronlease.cli.manage import cmd_import_crontab as cmd_import_crontab
from cronlease.cli.manage import cmd_init_db as cmd_init_db
from cronlease.cli.manage import cmd_pause as cmd_pause
from cronlease.cli.manage import cmd_resume as cmd_resume
from cronlease.cli.manage import cmd_trigger as cmd_trigger
from cronlease.cli.manage import cmd_web as cmd_web
from cronlease.cli.output import print_error, safe_output
from cronlease.cli.parser import EPILOG as EPILOG
from cronlease.cli.parser import build_parser as build_parser
from cronlease.cli.run import cmd_run as cmd_run
from cronlease.errors import ConfigError, StoreError

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "main"]


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
    with safe_output():  # foreign text printed escaped, passwords hidden
        try:
            return handler(args)
        except (ConfigError, UsageError) as exc:
            print_error(str(exc))
            return EXIT_USAGE
        except (StoreError, Failure) as exc:
            print_error(str(exc))
            return EXIT_FAILURE
        except KeyboardInterrupt:
            return 130


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if level != "DEBUG":
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
