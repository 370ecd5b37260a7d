"""Celery as a sender: a beat entry's tick sent with ``app.send_task``, and the
translation of an app's ``beat_schedule`` into cronlease schedules.

**Sending** (:class:`CelerySender`): ``app.send_task(task, args, kwargs, **options)``
with the entry's options as beat passes them (queue, routing_key, priority, expires,
headers, ...; beat's ``celery_beat_task`` header too), plus:

- ``task_id``: derived from the tick (:func:`~cronlease._send.sending.task_id_of`);
- headers ``cronlease_key`` (``ctx.key``) and ``cronlease_scheduled_for`` (ISO 8601, UTC);
- its own connections (a few per app, reused; one is closed after any error), opened
  with ``confirm_publish`` on AMQP so that the publish returns only once RabbitMQ
  acknowledged the message (a nack raises). On Redis the push returns once Redis
  answered the write. Other transports confirm what their client library confirms.

**Translating** (:func:`beat_entries`): every form Celery documents for ``schedule``:

- a number of seconds, a ``timedelta`` or ``celery.schedules.schedule``: ``every``
  (cronlease counts intervals from the epoch on every replica, not from a process's
  start: the period is the entry's, the phase is the fleet's);
- ``crontab(...)``: a cron expression of the same minutes, hours, days and months,
  in ``app.conf.timezone`` (UTC when unset and ``enable_utc``); refused when both
  ``day_of_month`` and ``day_of_week`` are restricted (Celery runs on days matching
  both, cron on days matching either) and when the app's zone has no IANA name;
- ``solar(...)`` and any other schedule class: refused, naming the entry.

A refusal is a :class:`~cronlease.errors.ConfigError` naming the entry and the key,
never a silently different schedule.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta, timezone, tzinfo
from typing import Any

from cronlease._send.sending import Message
from cronlease._timing.crontab import Crontab
from cronlease.errors import ConfigError

__all__ = [
    "ENTRY_KEYS",
    "BeatEntry",
    "CelerySender",
    "beat_entries",
    "beat_entry",
    "beat_table",
    "crontab_fields",
    "schedule_options",
    "zone_name",
]

#: the keys of a ``beat_schedule`` entry, as Celery documents them
ENTRY_KEYS = ("task", "schedule", "args", "kwargs", "options", "relative")
#: how long a publish waits for RabbitMQ's confirm before it is a failure
CONFIRM_TIMEOUT = 10.0


class _Connections:
    """The app's connections for sending: a connection serves one send at a time, and is
    closed after an error (the next send opens a fresh one).

    Every connection a send returned healthy is kept: the pool settles at the most sends
    at once, at most the replica's workers, since each entry of an instant is sent at
    the same moment. Keeping fewer made every instant open, set up and close the rest
    again: most of a tick's CPU, and with 200 entries every second, missed ticks. An
    idle connection the broker dropped meanwhile is reopened by kombu's publish retry."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        probe = app.connection_for_write()
        self.driver = str(probe.transport.driver_type)
        #: the broker as logs name it (kombu hides the password)
        self.broker = str(probe.as_uri())
        self.errors: tuple[type[BaseException], ...] = (
            *probe.connection_errors,
            *probe.recoverable_connection_errors,
        )
        probe.release()

    def _open(self) -> Any:
        options = {"confirm_publish": True} if self.driver == "amqp" else {}
        return self._app.connection_for_write(transport_options=options)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._open()
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(Exception):
                conn.release()
            raise
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.release()


_by_app: dict[int, _Connections] = {}
_by_app_lock = threading.Lock()


def _connections(app: Any) -> _Connections:
    with _by_app_lock:
        found = _by_app.get(id(app))
        if found is None:
            found = _by_app[id(app)] = _Connections(app)
        return found


class CelerySender:
    """Sends a Celery task by name for each tick (:class:`~cronlease._send.sending.Sender`)."""

    def __init__(
        self,
        app: Any,
        task: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(task, str) or not task:
            raise ConfigError(f"the Celery task must be a task name (a string), not {task!r}")
        if not isinstance(args, (list, tuple)):
            raise ConfigError(f"args must be a list or tuple, not {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ConfigError(f"kwargs must be a dict, not {type(kwargs).__name__}")
        if options is not None and not isinstance(options, Mapping):
            raise ConfigError(f"options must be a dict, not {type(options).__name__}")
        for reserved in ("task_id", "connection", "producer"):
            if options and reserved in options:
                raise ConfigError(f"options: {reserved!r} is cronlease's to set")
        self.app = app
        self.task = task
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.options = dict(options or {})
        self._connections = _connections(app)

    def __repr__(self) -> str:
        return f"CelerySender({self.task!r}, options={self.options!r})"

    @property
    def broker(self) -> str:
        return self._connections.broker

    @property
    def target(self) -> str:
        return f"{self.task} (Celery)"

    def unreachable(self, exc: BaseException) -> bool:
        from kombu.exceptions import OperationalError

        return isinstance(exc, (OperationalError, OSError, *self._connections.errors))

    def send(self, message: Message) -> None:
        from celery.beat import BeatLazyFunc

        args = [arg() if isinstance(arg, BeatLazyFunc) else arg for arg in self.args]
        kwargs = {
            key: value() if isinstance(value, BeatLazyFunc) else value
            for key, value in self.kwargs.items()
        }
        options = dict(self.options)
        headers = dict(options.pop("headers", None) or {})
        headers.setdefault("celery_beat_task", True)  # as beat marks what it sends
        headers["cronlease_key"] = message.key
        headers["cronlease_scheduled_for"] = message.scheduled_text
        if self._connections.driver == "amqp":
            options.setdefault("confirm_timeout", CONFIRM_TIMEOUT)
        with self._connections.connection() as conn:
            self.app.send_task(
                self.task,
                args,
                kwargs,
                task_id=message.task_id,
                connection=conn,
                headers=headers,
                **options,
            )


# --- translating beat_schedule ---------------------------------------------------------


@dataclass(frozen=True)
class BeatEntry:
    """One ``beat_schedule`` entry, translated: its name, cronlease schedule options
    (``every`` or ``cron`` and ``timezone``) and its sender."""

    name: str
    schedule: Mapping[str, Any]
    sender: CelerySender = field(repr=False)


def zone_name(app: Any, entry: str) -> str:
    """The IANA name of the app's time zone (its crontabs' zone); ConfigError if none."""
    zone: tzinfo = app.timezone
    if zone is timezone.utc or getattr(zone, "key", None) in ("UTC", "Etc/UTC"):
        return "UTC"
    key = getattr(zone, "key", None)
    if not isinstance(key, str):
        raise ConfigError(
            f"beat entry {entry!r}, key 'schedule': the app's time zone {zone!r} has no IANA "
            "name; set app.conf.timezone (e.g. 'Europe/Istanbul')"
        )
    return key


def _field(values: set[int], low: int, high: int) -> str:
    if set(range(low, high + 1)) <= values:
        return "*"
    return ",".join(str(value) for value in sorted(values))


def crontab_fields(schedule: Any, entry: str) -> str:
    """The five-field cron expression of a Celery ``crontab`` (its expanded sets)."""
    dom = _field(set(schedule.day_of_month), 1, 31)
    dow = _field(set(schedule.day_of_week), 0, 6)  # both count from Sunday = 0
    if dom != "*" and dow != "*":
        raise ConfigError(
            f"beat entry {entry!r}, key 'schedule': crontab restricts both day_of_month "
            f"({dom}) and day_of_week ({dow}): Celery runs on days that match both, cron on "
            "days that match either, so it cannot be translated faithfully"
        )
    expression = " ".join(
        (
            _field(set(schedule.minute), 0, 59),
            _field(set(schedule.hour), 0, 23),
            dom,
            _field(set(schedule.month_of_year), 1, 12),
            dow,
        )
    )
    Crontab.parse(expression)  # always valid: the sets are in range
    return expression


def schedule_options(app: Any, entry: str, schedule: Any) -> dict[str, Any]:
    """cronlease schedule options (``every`` or ``cron`` + ``timezone``) of one entry's
    ``schedule``; ConfigError naming the entry for a form that cannot be translated."""
    from celery import schedules

    where = f"beat entry {entry!r}, key 'schedule'"
    if isinstance(schedule, bool):
        raise ConfigError(f"{where}: must be a number of seconds, a timedelta or a crontab")
    if isinstance(schedule, (int, float)):
        return {"every": float(schedule)}
    if isinstance(schedule, timedelta):
        return {"every": schedule}
    if type(schedule) is schedules.schedule:
        return {"every": schedule.run_every}
    if type(schedule) is schedules.crontab:
        return {"cron": crontab_fields(schedule, entry), "timezone": zone_name(app, entry)}
    if isinstance(schedule, schedules.solar):
        raise ConfigError(
            f"{where}: solar schedules ({schedule.event!r} at {schedule.lat}, {schedule.lon}) "
            "are not supported: cronlease has no sunrise/sunset schedule"
        )
    raise ConfigError(
        f"{where}: {type(schedule).__name__} is not a schedule cronlease can translate "
        "(a number of seconds, a timedelta, celery.schedules.schedule or crontab)"
    )


def beat_entries(app: Any) -> list[BeatEntry]:
    """Every entry of ``app.conf.beat_schedule``, translated; ConfigError for the first
    entry that cannot be."""
    return [beat_entry(app, name, entry) for name, entry in beat_table(app).items()]


def beat_table(app: Any) -> Mapping[Any, Any]:
    """``app.conf.beat_schedule`` (empty when unset); ConfigError if it is not a dict."""
    table = app.conf.beat_schedule or {}
    if not isinstance(table, Mapping):
        raise ConfigError(f"beat_schedule must be a dict, not {type(table).__name__}")
    return table


def beat_entry(app: Any, name: Any, entry: Any) -> BeatEntry:
    """One ``beat_schedule`` entry, translated; ConfigError naming it if it cannot be."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"beat entry {name!r}: must be a dict, not {type(entry).__name__}")
    for key in entry:
        if key not in ENTRY_KEYS:
            raise ConfigError(
                f"beat entry {name!r}, key {key!r}: unknown key; known keys: "
                + ", ".join(ENTRY_KEYS)
            )
    for key in ("task", "schedule"):
        if key not in entry:
            raise ConfigError(f"beat entry {name!r}: has no {key!r}")
    schedule = schedule_options(app, str(name), entry["schedule"])
    try:
        sender = CelerySender(
            app,
            entry["task"],
            entry.get("args") or (),
            entry.get("kwargs"),
            entry.get("options"),
        )
    except ConfigError as exc:
        raise ConfigError(f"beat entry {name!r}: {exc}") from None
    return BeatEntry(str(name), schedule, sender)
