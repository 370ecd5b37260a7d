"""``manage.py cronlease COMMAND``: the ``cronlease`` commands, on the settings.

Each is the CLI's own command (cronlease/cli), given the settings' configuration
(``DATABASES[CRONLEASE["DATABASE"]]``, the settings' and the ``tasks.py``
decorators' tasks) and, for ``run``, this process's scheduler (with any listener
put on it) instead of a file: the same options, output and exit statuses as
``cronlease COMMAND``. Three are not offered, as they do not act on the settings:
``web`` (the project's own server has the admin pages, behind its login),
``import-crontab`` and ``import-celery-beat`` (they write a cronlease.toml, which a
Django project does not read); ``cronlease web|import-crontab|import-celery-beat``
remain for them.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from django.core.management.base import BaseCommand

from cronlease.cli import EXIT_USAGE, Preset, main
from cronlease.cli.output import print_error
from cronlease.cli.parser import COMMANDS as CLI_COMMANDS
from cronlease.cli.parser import build_parser
from cronlease.contrib.django._database import WHERE
from cronlease.contrib.django._replica import PROG, declared_config, get_scheduler
from cronlease.errors import ConfigError

#: the CLI's commands less three: ``web`` (the project's own server serves the admin pages,
#: behind its login), ``import-crontab`` and ``import-celery-beat`` (they write a
#: cronlease.toml, which a Django project does not read)
COMMANDS = tuple(
    name for name in CLI_COMMANDS if name not in ("web", "import-crontab", "import-celery-beat")
)
#: options that ``manage.py`` itself reads (ManagementUtility has applied them)
_DJANGO_OPTIONS = ("--settings", "--pythonpath")


def run_cli(argv: Sequence[str]) -> int:
    try:
        config = declared_config()
        scheduler = get_scheduler()
    except ConfigError as exc:  # settings.CRONLEASE: task ..., key ...: exit 2, start nothing
        print_error(str(exc))
        return EXIT_USAGE
    # Django's LOGGING covers cronlease (or the root): the CLI must not replace it
    keep = logging.getLogger("cronlease").hasHandlers()
    preset = Preset(config=config, scheduler=scheduler, keep_logging=keep)
    return main(list(argv), preset=preset, prog=PROG, commands=COMMANDS)


def _without_django_options(argv: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in _DJANGO_OPTIONS:
            skip = True
        elif not word.startswith(tuple(f"{option}=" for option in _DJANGO_OPTIONS)):
            kept.append(word)
    return kept


class Command(BaseCommand):
    help = f"cronlease's commands on this project's settings ({', '.join(COMMANDS)})"

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("cli_args", nargs=argparse.REMAINDER, metavar="COMMAND")

    def print_help(self, prog_name: str, subcommand: str) -> None:
        # ``manage.py help cronlease``: the CLI's help, as ``manage.py cronlease --help``
        build_parser(PROG, COMMANDS, WHERE).print_help(self.stdout)

    def run_from_argv(self, argv: list[str]) -> None:
        # the CLI parses its own options (Django's parser would refuse --json, --grace, ...)
        sys.exit(run_cli(_without_django_options(argv[2:])))

    def handle(self, *args: Any, **options: Any) -> None:  # call_command("cronlease", ...)
        code = run_cli([*args, *options.get("cli_args", [])])
        if code:
            sys.exit(code)
