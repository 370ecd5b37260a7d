"""What every ``cronlease`` command shares: exit statuses, the config file and the database URL.

The commands raise :class:`~cronlease._service.UsageError` (exit status 2) or
:class:`~cronlease._service.Failure` (exit status 1); ``main`` turns them into an
error line on stderr. What they do with the database is :mod:`cronlease._service`'s
(the status page and the Django admin pages do it through the same module).
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from cronlease._scheduler import Scheduler
from cronlease._service import DEFAULT_URL, UsageError, normalize_url
from cronlease.config import DATABASE_ENV, DEFAULT_CONFIG, Config, load_config

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: 128 + SIGPIPE, what a shell reports for a command whose reader went away
EXIT_PIPE = 141
EXIT_INTERRUPTED = 130
DISABLED_ENV = "CRONLEASE_DISABLED"

logger = logging.getLogger("cronlease")


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
