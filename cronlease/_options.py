"""A task's options: one table for ``@scheduler.task(...)``, ``add_task`` and ``cronlease.toml``.

The table is :class:`TaskOptions`, a dataclass whose fields are the options a
task keeps, each declared once by :func:`option` with its type, default,
parser and meaning, and :data:`SCHEDULE_OPTIONS`, the keys that together make
its schedule. :class:`~cronlease._task.Task` and :class:`~cronlease.config.TaskSpec`
inherit their option fields from it; :data:`OPTIONS` lists every key.

Each key parses the value as the decorator or TOML gives it into what a
:class:`~cronlease._task.Task` keeps; a problem is an :class:`OptionError`
naming the key, its message the same one line for both: the decorator prefixes
the task (``task 'purge', key 'retries': ...``), the file its path and line too.
Parsing is idempotent, so a Task built directly re-checks its values here.

To add an option: one :func:`option` field of :class:`TaskOptions` (and its keyword in
the ``task()`` overload of :mod:`cronlease._declare`, for type checkers); then
regenerate the table of docs/reference/task-options.md (``python -m tests.support.reference_docs``).
``tests/unit/test_task_options.py`` pins the decorator, ``add_task``, the file and the
docs' table to this one.
"""

from __future__ import annotations

import difflib
import functools
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import date, datetime, time, timedelta
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronlease._roles import parse_roles
from cronlease._timing.schedule import Schedule, parse_duration
from cronlease.errors import ConfigError

__all__ = [
    "CATCH_UP_POLICIES",
    "DEFAULT_RETRY_DELAY",
    "MAX_ALERT_AFTER",
    "MAX_RETRIES",
    "OPTIONS",
    "SCHEDULE_KEYS",
    "SCHEDULE_OPTIONS",
    "CatchUp",
    "Option",
    "OptionError",
    "TaskOptions",
    "check_jitter",
    "kept_options",
    "option",
    "parse_options",
    "schedule_of",
    "type_name",
    "unknown_key",
]

CatchUp = Literal["skip", "latest", "all"]
CATCH_UP_POLICIES: tuple[str, ...] = get_args(CatchUp)
#: seconds before the first retry of a failed attempt (doubled for each one after)
DEFAULT_RETRY_DELAY = 10.0
#: more is a typo: with the doubling delay, 100 retries of "1s" outlast any schedule
MAX_RETRIES = 100
#: a health probe reads this many runs per task (and one): more would make it a history read
MAX_ALERT_AFTER = 100
DAY = 86400.0


class OptionError(ConfigError):
    """A bad value of one option; ``key`` is None for a problem of the whole schedule."""

    def __init__(self, key: str | None, message: str) -> None:
        self.key = key
        self.detail = message
        super().__init__(message)


@dataclass(frozen=True)
class Option:
    """One key: its default, the function that checks a given value into the kept one,
    and what the options table of the docs says of it."""

    key: str
    default: Any
    parse: Callable[[Any], Any]
    #: what it does, for the docs' table (markdown)
    meaning: str
    #: the default as the docs show it; None: the default itself, written as in TOML
    shown: str | None = None
    #: only a Python callable takes it: a file's ``command`` task refuses it (a command
    #: takes its arguments in its line)
    call_only: bool = False


def type_name(value: object) -> str:
    """The value's type as TOML calls it (a Python list is an array, a dict a table)."""
    names: tuple[tuple[type, str], ...] = (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a float"),
        (str, "a string"),
        (list, "an array"),
        (tuple, "an array"),
        (dict, "a table"),
        (datetime, "a date-time"),
        (date, "a date"),
        (time, "a time"),
    )
    for kind, label in names:
        if type(value) is kind:
            return label
    return f"a {type(value).__name__}"


def unknown_key(key: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    return "unknown key" + (
        f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
    )


# --- the parsers: value as given -> value kept; ConfigError(message) ------------------


def _duration(key: str, most: float, least: float | None = None) -> Callable[[Any], float]:
    most_label = "1 day" if most == DAY else f"{most / DAY:g} days"

    def parse(value: Any) -> float:
        if not isinstance(value, (str, int, float, timedelta)) or isinstance(value, bool):
            raise ConfigError(
                f'must be a duration such as 30, "90s" or "1h30m", not {type_name(value)}'
            )
        seconds = parse_duration(value, what=key).total_seconds()
        if least is not None and not least <= seconds <= most:
            raise ConfigError(f"must be between {least:g} s and {most_label}")
        if seconds > most:
            raise ConfigError(f"must be at most {most_label}")
        return seconds

    return parse


def _optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else parse(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"must be true or false, not {type_name(value)}")
    return value


def _whole(least: int, most: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if type(value) is not int or not least <= value <= most:
            raise ConfigError(f"must be a whole number from {least} to {most}, not {value!r}")
        return value

    return parse


def _string(example: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if not isinstance(value, str):
            raise ConfigError(f"must be a string such as {example!r}, not {type_name(value)}")
        return value

    return parse


def _timezone(value: Any) -> str:
    zone = _string("Europe/Istanbul")(value)
    if zone.upper() == "UTC":
        return zone
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        close = difflib.get_close_matches(zone, available_timezones(), n=1)
        hint = (
            f"did you mean {close[0]!r}?" if close else "use an IANA name such as 'Europe/Istanbul'"
        )
        raise ConfigError(f"unknown time zone {zone!r}: {hint}") from None
    return zone


def _anchor(value: Any) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ConfigError(
            "must be a date-time with its offset, such as 2026-01-01T00:00:00Z, "
            f"not {'one without' if isinstance(value, datetime) else type_name(value)}"
        )
    return value


def _catchup(value: Any) -> str:
    if value not in CATCH_UP_POLICIES:
        choices = ", ".join(map(repr, CATCH_UP_POLICIES))
        raise ConfigError(f"must be one of {choices}, not {value!r}")
    return str(value)


def _args(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"must be an array of positional arguments, not {type_name(value)}")
    return tuple(value)


def _kwargs(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigError(f"must be a table of keyword arguments, not {type_name(value)}")
    return dict(value)


def _ping_url(value: Any) -> str:
    url = _string("https://hc-ping.com/<uuid>")(value)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        # not the URL itself: its path is the check's secret, and errors reach logs
        shown = f"{parts.scheme}://{parts.hostname}/..." if parts.hostname else "that"
        raise ConfigError(
            "must be an http:// or https:// URL without a query, such as "
            f"'https://hc-ping.com/<uuid>', not {shown}"
        )
    # "/start" and "/fail" are appended: a trailing slash would make them "//start"
    return url.rstrip("/")


def _every(value: Any) -> Any:
    if not isinstance(value, (str, int, float, timedelta)) or isinstance(value, bool):
        raise ConfigError(
            f'must be a duration such as 30, "90s" or "1h30m", not {type_name(value)}'
        )
    return value


def _jitter(value: Any) -> float:
    # 0 (the default) is no jitter, where a zero duration elsewhere is a mistake
    if type(value) in (int, float) and value == 0:
        return 0.0
    return _duration("jitter", DAY)(value)


_CATCHUP = (
    'ticks missed while every replica was down: `"skip"`, `"latest"` or `"all"` '
    "(the latest 1 to 1000)"
)
_RETRIES = "[Retries and crash recovery](#retries-and-crash-recovery)"
_ARGUMENTS = (
    "the call's arguments (a `call` only in the file), checked against its signature; "
    "a `celery_task`'s are its message's"
)


def option(
    default: Any,
    parse: Callable[[Any], Any],
    meaning: str,
    *,
    shown: str | None = None,
    call_only: bool = False,
    **kw: Any,
) -> Any:
    """A field of :class:`TaskOptions`: the option of the field's name (``kw``: ``field()``'s)."""
    declared = Option("", default, parse, meaning, shown, call_only)
    if isinstance(default, dict):  # a fresh one per task, as a dataclass wants
        return field(default_factory=dict, metadata={"option": declared}, **kw)
    return field(default=default, metadata={"option": declared}, **kw)


_SCHEDULE = "the schedule: exactly one (above)"
#: the keys that together make a task's ``schedule`` (a task keeps that, not them)
SCHEDULE_OPTIONS: tuple[Option, ...] = (
    Option("every", None, _optional(_every), _SCHEDULE, shown="—"),
    Option("cron", None, _optional(_string("0 3 * * *")), _SCHEDULE, shown="—"),
    Option("timezone", None, _optional(_timezone), "IANA zone of a `cron` schedule", shown="UTC"),
    Option(
        "anchor",
        None,
        _optional(_anchor),
        "an aware date-time an `every` schedule counts from (TOML: `2026-01-01T00:30:00Z`)",
        shown="the Unix epoch",
    ),
)


@dataclass(frozen=True, kw_only=True)
class TaskOptions:
    """The options a task keeps, each declared once: its type, default, parser and meaning.

    :class:`~cronlease._task.Task` and :class:`~cronlease.config.TaskSpec` inherit these
    fields; the decorator, ``add_task`` and a ``[tasks.NAME]`` table take these keys."""

    lease_ttl: float | None = option(
        None,
        _optional(_duration("lease_ttl", DAY, least=1.0)),
        "the lease's TTL, 1 s to 1 day",
        shown="the schedule's",
    )
    grace: float | None = option(
        None,
        _optional(_duration("grace", DAY)),
        "how late a tick may still start, up to 1 day",
        shown="the schedule's",
    )
    #: seconds a run may take: see :mod:`cronlease._run.workers.execution` for what a timeout does
    timeout: float | None = option(
        None,
        _optional(_duration("timeout", 7 * DAY)),
        "how long a run may take, up to 7 days (Timeouts, above)",
    )
    #: False: declared (run_now, pause and the status know it) but never fired by its schedule
    enabled: bool = option(True, _boolean, "false: declared, never fired by its schedule")
    catchup: CatchUp = option("latest", _catchup, _CATCHUP)  # noqa: RUF009 (a field())
    catchup_limit: int = option(10, _whole(1, 1000), _CATCHUP)
    #: failed attempts of a scheduled slot tried again, after ``retry_delay`` seconds
    #: doubled per attempt (:mod:`cronlease._run.recording.attempts`)
    retries: int = option(0, _whole(0, MAX_RETRIES), _RETRIES)
    retry_delay: float = option(
        DEFAULT_RETRY_DELAY, _duration("retry_delay", DAY), _RETRIES, shown='`"10s"`'
    )
    #: a run whose holder died is run again by a survivor, as the slot's next attempt
    recover: bool = option(False, _boolean, _RETRIES)
    args: tuple[Any, ...] = option((), _args, _ARGUMENTS, call_only=True)
    kwargs: Mapping[str, Any] = option({}, _kwargs, _ARGUMENTS, call_only=True)
    #: runs failed in a row before health() and ``status --check`` call the task failing
    alert_after: int = option(
        1,
        _whole(1, MAX_ALERT_AFTER),
        "runs failed in a row (1 to 100) before health() and `status --check` call the task "
        "failing ([Failure alerts](#failure-alerts))",
    )
    #: Healthchecks-style pings: ``/start``, the URL on success, ``/fail``
    #: (:mod:`cronlease._run.pings`)
    ping_url: str | None = option(
        None,
        _optional(_ping_url),
        "an `http(s)://` URL pinged Healthchecks-style at each run's start and end "
        "([Sentry Crons, Healthchecks-style pings, OpenTelemetry]"
        "(#sentry-crons-healthchecks-style-pings-opentelemetry))",
        repr=False,  # its path is a secret
    )
    #: seconds at most a scheduled tick starts after its slot, the same on every replica
    #: (:mod:`cronlease._timing.jitter`); 0: at the slot
    jitter: float = option(
        0.0,
        _jitter,
        "start each scheduled tick up to this long after its slot, the same delay on every "
        "replica ([Jitter](#jitter))",
    )
    #: replicas with none of these roles never run it (:mod:`cronlease._roles`); (): any
    roles: tuple[str, ...] = option(
        (), parse_roles, "run only on replicas with one of these roles ([Roles](#roles))"
    )


#: every key, the schedule's first, in the order the docs list them and a problem is found
OPTIONS: Mapping[str, Option] = {
    declared.key: declared
    for declared in (
        *SCHEDULE_OPTIONS,
        *(replace(f.metadata["option"], key=f.name) for f in fields(TaskOptions)),
    )
}
SCHEDULE_KEYS = tuple(declared.key for declared in SCHEDULE_OPTIONS)


def kept_options(values: TaskOptions) -> dict[str, Any]:
    """The options ``values`` (a Task, a TaskSpec) keeps, by key: what declares it again."""
    return {f.name: getattr(values, f.name) for f in fields(TaskOptions)}


def parse_options(given: Mapping[str, Any], *, also: Sequence[str] = ()) -> dict[str, Any]:
    """Every option's value (the default where not given); OptionError for the first bad one.

    ``also``: the caller's other keys, offered with the options for a misspelt one."""
    for key in given:
        if key not in OPTIONS:
            raise OptionError(key, unknown_key(key, [*OPTIONS, *also]))
    values: dict[str, Any] = {}
    for key, declared in OPTIONS.items():
        value = given.get(key, declared.default)
        try:
            values[key] = declared.parse(value)
        except OptionError:
            raise
        except ConfigError as exc:
            raise OptionError(key, str(exc)) from None
    return values


def schedule_of(values: Mapping[str, Any]) -> Schedule:
    """The schedule of parsed options (``every``/``cron``, ``timezone``, ``anchor``)."""
    every, cron = values.get("every"), values.get("cron")
    if every is not None and cron is not None:
        raise OptionError("cron", "give either 'every' or 'cron', not both")
    if every is None and cron is None:
        raise OptionError(
            None,
            "no schedule: give 'every' (e.g. every = \"5m\") or 'cron' (e.g. cron = \"0 3 * * *\")",
        )
    if every is not None and values.get("timezone") is not None:
        raise OptionError("timezone", "applies to cron schedules only")
    if cron is not None and values.get("anchor") is not None:
        raise OptionError("anchor", "applies to every schedules only")
    try:
        schedule = _schedule(every, cron, values.get("timezone"), values.get("anchor"))
    except ConfigError as exc:
        raise OptionError("every" if every is not None else "cron", str(exc)) from None
    check_jitter(float(values.get("jitter") or 0.0), schedule)
    return schedule


def _schedule(every: Any, cron: Any, zone: Any, anchor: Any) -> Schedule:
    """The schedule of these values; one object for the tasks that give the same ones (a
    Schedule is immutable): 100,000 tasks of one schedule parsed it and built its trigger
    100,000 times (a fifth of declaring them) and kept as many copies."""
    try:
        return _shared_schedule(every, cron, zone, anchor)
    except TypeError:  # a value that cannot be a cache key: built as given, or refused
        return _new_schedule(every, cron, zone, anchor)


def _new_schedule(every: Any, cron: Any, zone: Any, anchor: Any) -> Schedule:
    if every is not None:
        return Schedule.every(every, anchor=anchor)
    return Schedule.cron(str(cron), timezone=zone)


# typed: 1 and True are one key untyped, and True is refused where 1 is not
_shared_schedule = functools.lru_cache(maxsize=256, typed=True)(_new_schedule)


def check_jitter(jitter: float, schedule: Schedule) -> None:
    """OptionError unless ``jitter`` is at most half the schedule's smallest gap.

    Half: a jittered start must leave its grace (half the gap by default) before the
    next fire time, so one slot's run never delays the next slot's. A cron schedule's
    gaps can vary beyond those measured here (a DST change): each tick's offset is
    clamped to half its own gap as well (:func:`cronlease._timing.jitter.offset`)."""
    if jitter <= 0:
        return
    most = schedule.smallest_gap() / 2
    if jitter > most:
        raise OptionError(
            "jitter",
            f"must be at most half the gap between fire times ({most:g} s for {schedule}), "
            f"not {jitter:g} s",
        )
