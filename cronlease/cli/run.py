"""``cronlease run`` and ``cronlease check``: run a replica from the config file, or validate it."""

from __future__ import annotations

import argparse
import os
import signal
import threading
from datetime import datetime, timezone
from types import FrameType
from typing import Any

from cronlease._lease.database import redact
from cronlease._scheduler import Scheduler
from cronlease._shell_task import terminate_running
from cronlease._status import format_duration, format_time, zone_of
from cronlease.cli.common import (
    DISABLED_ENV,
    EXIT_OK,
    config_from_args,
    database_url,
    logger,
)
from cronlease.cli.output import print_json
from cronlease.config import Config, TaskSpec

# --- run ----------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    config = config_from_args(args, required=True, import_calls=True)
    assert config is not None
    url = database_url(args, config)
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
        history_keep=config.history_keep,
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
    config = config_from_args(args, required=True, import_calls=True)
    assert config is not None
    url = database_url(args, config)
    now = datetime.now(timezone.utc)
    tasks = [_describe_spec(config, spec, now, count=3) for spec in config.tasks.values()]
    if args.json:
        print_json(
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
        extras = [f"ttl {format_duration(task['lease_ttl'])}"]
        if task["timeout"] is not None:
            extras.append(f"timeout {format_duration(task['timeout'])}")
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
    zone = zone_of(spec.schedule)
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
        "next": [format_time(fire.astimezone(zone)) for fire in upcoming],
    }
