"""``[celery]`` and ``cronlease run --celery-app``: a Celery app's ``beat_schedule`` as
task specs, each entry a task whose body sends the entry's message
(:mod:`cronlease._send`), with the options the table gives every entry."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cronlease._lease.model import check_task_name
from cronlease._options import SCHEDULE_KEYS, OptionError, parse_options, schedule_of
from cronlease._send.celery_beat import beat_entries
from cronlease._send.sending import SendTask
from cronlease.config._calls import import_target
from cronlease.config._spec import TaskSpec
from cronlease.errors import ConfigError

__all__ = ["CELERY_DEFAULTS", "celery_specs", "import_app"]

#: what every entry gets unless the table says otherwise: a tick whose replica died
#: before the broker confirmed its message is resent (with the same task id)
CELERY_DEFAULTS: Mapping[str, Any] = {"recover": True}


def import_app(target: str, base: Path | None = None) -> Any:
    """Import ``"proj.celery:app"``: a Celery application (anything with ``send_task``
    and ``conf``); ConfigError otherwise."""
    obj = import_target(target, base)
    # the class itself (``proj:Celery``) has both attributes too, but no configuration
    if isinstance(obj, type) or not hasattr(obj, "send_task") or not hasattr(obj, "conf"):
        raise ConfigError(f"{target!r} is a {type(obj).__name__}, not a Celery application")
    return obj


def celery_specs(
    target: Any,
    options: Mapping[str, Any],
    *,
    base: Path | None = None,
    line: int | None = None,
) -> list[TaskSpec]:
    """One spec per entry of the app's ``beat_schedule``; ``target``: the app, or its
    ``"module:attribute"`` path; ``options``: task options for every entry (the schedule
    keys excluded). ConfigError naming the entry."""
    app = import_app(target, base) if isinstance(target, str) else target
    label = target if isinstance(target, str) else str(getattr(app, "main", None) or "app")
    given = {**CELERY_DEFAULTS, **options}
    for key in given:
        if key in SCHEDULE_KEYS:
            raise OptionError(key, "the schedule of each entry is its beat_schedule's")
    specs = []
    for entry in beat_entries(app):
        try:
            name = check_task_name(entry.name)
            values = parse_options({**given, **entry.schedule})
        except OptionError as exc:
            raise ConfigError(f"beat entry {entry.name!r}, key {exc.key!r}: {exc.detail}") from None
        except ConfigError as exc:
            raise ConfigError(f"beat entry {entry.name!r}: {exc}") from None
        schedule = schedule_of(values)
        common = {key: value for key, value in values.items() if key not in SCHEDULE_KEYS}
        specs.append(
            TaskSpec(
                name=name,
                schedule=schedule,
                sender=SendTask(name, entry.sender),
                sends=f"{entry.sender.task} via Celery app {label}",
                line=line,
                **common,
            )
        )
    return specs
