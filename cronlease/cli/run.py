"""``cronlease run``: run a replica from the config file until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
import threading
from pathlib import Path
from types import FrameType

from cronlease._scheduler import DEFAULT_SHUTDOWN_GRACE
from cronlease._service import UsageError, config_scheduler, exit_after_stop
from cronlease.cli.common import (
    DISABLED_ENV,
    EXIT_OK,
    Preset,
    config_from_args,
    database_url,
    logger,
)
from cronlease.config import DEFAULT_CONFIG, Config, TaskSpec, celery_specs
from cronlease.errors import ConfigError

#: the most of the grace kept for running commands to end after their SIGTERM
COMMAND_STOP_SECONDS = 5.0
# --- run ----------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    celery_app = getattr(args, "celery_app", None)
    config = config_from_args(args, required=celery_app is None, import_calls=True)
    if config is None:  # --celery-app without a config file: its defaults
        config = Config(path=Path(DEFAULT_CONFIG), database="", database_source="default")
    url = database_url(args, config)
    specs = [spec for spec in config.tasks.values() if spec.enabled]
    if celery_app is not None:
        specs = [spec for spec in specs if spec.kind != "send"] + beat_specs(celery_app, config)
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
    grace = resolve_grace(args, config)
    # Of the grace, the end is kept for commands (if any) to stop after their SIGTERM.
    has_commands = any(spec.command is not None for spec in specs)
    for_commands = min(COMMAND_STOP_SECONDS, grace / 5) if has_commands else 0.0
    preset: Preset | None = getattr(args, "preset", None)
    if preset is not None and preset.scheduler is not None:
        if args.database:
            raise UsageError("--database: the database is the application's settings here")
        if args.roles is not None:
            raise UsageError("--role: this replica's roles are the application's settings here")
        scheduler = preset.scheduler  # its tasks and listeners, declared by the application
        scheduler.shutdown_grace = grace - for_commands
    else:
        scheduler = config_scheduler(
            url,
            config,
            shutdown_grace=grace - for_commands,
            history_keep=config.history_keep,
            roles=config.roles if args.roles is None else args.roles,
        )
    for spec in specs:
        if spec.name not in scheduler.tasks:
            spec.add_to(scheduler)
    for job in config.jobs.values():
        if job.name not in scheduler.jobs:
            job.add_to(scheduler)
    if not specs and not config.jobs:
        logger.warning("%s declares no enabled task: this replica has nothing to run", config.path)
    exit_after_stop(scheduler, for_commands)
    try:
        scheduler.run_forever()
    finally:
        scheduler.store.dispose()
    return EXIT_OK


def beat_specs(target: str, config: Config) -> list[TaskSpec]:
    """``--celery-app``'s entries, with the config file's ``[celery]`` options."""
    try:
        specs = celery_specs(target, config.celery_options, base=Path.cwd())
    except ConfigError as exc:
        raise UsageError(f"--celery-app {target}: {exc}") from None
    for spec in specs:
        if spec.name in config.tasks and config.tasks[spec.name].kind != "send":
            raise UsageError(
                f"--celery-app {target}: beat entry {spec.name!r} has the name of a task "
                f"in {config.path}"
            )
    return specs


def resolve_grace(args: argparse.Namespace, config: Config) -> float:
    """``--grace``, else the deprecated ``--shutdown-grace``, else the config's, else 25 s."""
    if args.shutdown_grace is not None:
        logger.warning("--shutdown-grace is deprecated: use --grace")
    for grace in (args.grace, args.shutdown_grace, config.shutdown_grace):
        if grace is not None:
            return float(grace)
    return DEFAULT_SHUTDOWN_GRACE


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
