"""Declared tasks and the context a run receives."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from cronlease._call_args import call_shape
from cronlease._lease.fencing import verify_lease
from cronlease._lease.model import check_task_name
from cronlease._options import (
    OPTIONS,
    SCHEDULE_KEYS,
    OptionError,
    TaskOptions,
    check_jitter,
    parse_options,
    schedule_of,
)
from cronlease._timing import jitter
from cronlease._timing.schedule import Schedule, time_of_slot
from cronlease.errors import ConfigError

__all__ = ["Liveness", "RunContext", "Task"]


class Liveness:
    """Whether a run may still believe it holds its lease.

    The lease is ours for ``ttl`` after the moment the acquiring (or the last
    successful renewing) statement was *sent*, measured on the monotonic clock,
    so a run learns it lost the lease even while the database cannot answer.
    Once lost, always lost.
    """

    def __init__(
        self, ttl: float, sent_at: float, on_lost: Callable[[], None] = lambda: None
    ) -> None:
        self.ttl = ttl
        self._deadline = sent_at + ttl
        # a flag, not a threading.Event: nobody waits on it, and one is made per run
        self._lost = False
        self._lock = threading.Lock()
        self._on_lost = on_lost

    def renewed(self, sent_at: float) -> None:
        if not self._lost:
            self._deadline = max(self._deadline, sent_at + self.ttl)

    def mark_lost(self) -> None:
        with self._lock:
            if self._lost:
                return
            self._lost = True
        self._on_lost()

    @property
    def lost(self) -> bool:
        if not self._lost and time.monotonic() >= self._deadline:
            self.mark_lost()
        return self._lost


class RunContext:
    """What a running task knows about its run: a task asks for it with a parameter
    annotated ``: RunContext`` or named ``ctx`` (:mod:`cronlease._call_args`)."""

    __slots__ = (
        "_holder",
        "_liveness",
        "_stored_name",
        "attempt",
        "fence",
        "key",
        "manual",
        "name",
        "recovering",
        "scheduled_for",
        "slot",
    )

    def __init__(
        self,
        *,
        name: str,
        slot: int,
        fence: int,
        scheduled_for: datetime,
        manual: bool,
        liveness: Liveness,
        attempt: int = 1,
        recovering: bool = False,
        full_name: str | None = None,
        holder: str = "",
    ) -> None:
        self.name = name
        self.slot = slot
        self.fence = fence
        self.scheduled_for = scheduled_for
        self.manual = manual
        #: 1 for the first attempt at this slot, 2 for its first retry or recovery, ...
        self.attempt = attempt
        #: True when this attempt follows one whose replica died mid-run
        self.recovering = recovering
        self._liveness = liveness
        self._stored_name = full_name or name
        self._holder = holder
        #: the same on every attempt of a slot, different for every slot, namespace and
        #: manual run: an idempotency key for effects outside the database
        self.key = idempotency_key(self._stored_name, slot, manual)

    @property
    def lost(self) -> bool:
        """True once this run can no longer be sure it holds the lease; stop writing then."""
        return self._liveness.lost

    def verify(self, connection: Connection) -> None:
        """Raise :class:`~cronlease.errors.LeaseLostError` unless this attempt still holds
        its task's lease; call it in your transaction on the lease database, before commit.

        It locks the lease row for share until ``connection``'s transaction ends, so no
        other attempt can take the lease between the check and the commit.
        """
        verify_lease(connection, name=self._stored_name, fence=self.fence, holder=self._holder)

    def __repr__(self) -> str:
        return (
            f"RunContext(name={self.name!r}, slot={self.slot}, fence={self.fence}, "
            f"attempt={self.attempt}, scheduled_for={self.scheduled_for.isoformat()}, "
            f"lost={self.lost})"
        )


#: set by Task.declare (on its thread) while it builds a task of values it has parsed
_declaring = threading.local()


def idempotency_key(full_name: str, slot: int, manual: bool) -> str:
    """``<stored full name>@<slot>``, ``@manual-<slot>`` for a manual run: the slot is the
    last field and a number, so two different (name, slot) pairs never give one key."""
    return f"{full_name}@{'manual-' if manual else ''}{slot}"


@dataclass(frozen=True)
class Task(TaskOptions):
    """A declared task: a name, a schedule, what to run, and its options, the fields of
    :class:`~cronlease._options.TaskOptions` (keyword-only)."""

    name: str
    schedule: Schedule
    func: Callable[..., Any] = field(repr=False)
    namespace: str | None = None
    full_name: str = field(init=False)
    #: where the RunContext goes: None (not passed), "" (first argument) or a keyword
    context_as: str | None = field(init=False, repr=False)
    is_async: bool = field(init=False, repr=False)
    #: one of cronlease's own tasks (the stuck watcher, housekeeping), declared by
    #: :func:`cronlease._run.housekeeping.builtin.builtin_task`: leased and run like any,
    #: but silent to users: no event, no counter, no per-tick line; its trouble (its
    #: body raising, an outage) is still logged (docs/design.md §4.11)
    builtin: bool = field(default=False, repr=False, kw_only=True)

    def __repr__(self) -> str:
        # its own fields first, then the options: a dataclass would list the base's first
        options = [f.name for f in fields(TaskOptions) if f.repr]
        ordered = ["name", "schedule", "namespace", *options, "full_name"]
        return f"Task({', '.join(f'{key}={getattr(self, key)!r}' for key in ordered)})"

    def __post_init__(self) -> None:
        # the stored form (NFC): a decomposed "é" and a composed one are one task
        object.__setattr__(self, "name", check_task_name(self.name))
        if self.namespace is not None:
            object.__setattr__(self, "namespace", check_task_name(self.namespace))
        full_name = f"{self.namespace}:{self.name}" if self.namespace else self.name
        check_task_name(full_name)
        if not callable(self.func):
            raise ConfigError(f"task {self.name!r}: {self.func!r} is not callable")
        # the same checks as the decorator's and the file's (idempotent on parsed values);
        # skipped for the values Task.declare has just parsed with the same parsers: a
        # replica declaring 10,000 schedule rows would parse every option twice
        for key, option in () if getattr(_declaring, "parsed", False) else OPTIONS.items():
            if key not in SCHEDULE_KEYS:
                try:
                    object.__setattr__(self, key, option.parse(getattr(self, key)))
                except ConfigError as exc:
                    raise _task_error(self.name, OptionError(key, str(exc))) from None
        try:
            check_jitter(self.jitter, self.schedule)
            context_as = call_shape(self.func, self.args, self.kwargs, RunContext)
        except OptionError as exc:
            raise _task_error(self.name, exc) from None
        object.__setattr__(self, "full_name", full_name)
        object.__setattr__(self, "context_as", context_as)
        object.__setattr__(
            self,
            "is_async",
            inspect.iscoroutinefunction(self.func)
            # an instance with an async __call__; calling a class only makes an instance
            or (
                not inspect.isclass(self.func)
                and inspect.iscoroutinefunction(getattr(self.func, "__call__", None))  # noqa: B004
            ),
        )

    @classmethod
    def declare(
        cls,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        namespace: str | None = None,
        builtin: bool = False,
        **options: Any,
    ) -> Task:
        """Validate a declaration as the decorator receives it; ConfigError if invalid.

        ``options`` are the keys of :data:`cronlease._options.OPTIONS`, the same as a
        ``[tasks.NAME]`` table's, parsed and checked by the same code.
        """
        # An explicit name="" is an error, not a request for the function's name.
        label = name if name is not None else getattr(func, "__name__", None)
        if label is None:
            # repr() holds a memory address: every replica would name the task differently.
            raise ConfigError(f"task {func!r} has no __name__: pass name=")
        try:
            values = parse_options(options, also=("name",))
            schedule = schedule_of(values)
        except OptionError as exc:
            raise _task_error(label, exc) from None
        for key in SCHEDULE_KEYS:
            del values[key]
        _declaring.parsed = True
        try:
            return cls(
                name=label,
                schedule=schedule,
                func=func,
                namespace=namespace,
                builtin=builtin,
                **values,
            )
        finally:
            _declaring.parsed = False

    @property
    def wants_context(self) -> bool:
        """Whether a run passes the RunContext (:mod:`cronlease._call_args`)."""
        return self.context_as is not None

    def call_arguments(self, context: RunContext) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments of a run's call."""
        if self.context_as is None:
            return self.args, dict(self.kwargs)
        if self.context_as == "":
            return (context, *self.args), dict(self.kwargs)
        return self.args, {**self.kwargs, self.context_as: context}

    @property
    def wants_attempts(self) -> bool:
        """Whether a slot of this task may get attempts after the first."""
        return self.retries > 0 or self.recover

    def ttl(self, fire_time: datetime) -> float:
        return self.lease_ttl if self.lease_ttl is not None else self.schedule.ttl(fire_time)

    def jitter_for(self, fire_time: datetime) -> float:
        """Seconds after ``fire_time`` its scheduled tick starts (0 without jitter)."""
        return jitter.start_after(self.full_name, self.schedule, fire_time, self.jitter)

    def grace_for(self, fire_time: datetime) -> float:
        return self.grace if self.grace is not None else self.schedule.grace(fire_time)

    def missed_ticks(
        self, cursor_slot: int, now: datetime, busy_until: float | None = None
    ) -> list[datetime]:
        """The ticks to catch up after every replica was down, per the catch-up policy.

        ``latest``: the last fire time before ``now`` if the fleet did not run
        it and it is younger than min(interval, 1 h) (Kubernetes CronJob's
        behaviour). ``all``: every missed fire time, the latest ``catchup_limit``.
        ``skip``: none. A task that never ran has nothing to catch up.
        ``busy_until`` (epoch seconds) is when the lease of the cursor's run
        ended: a tick that fell due before it found the run still going and
        was skipped for overlap — not missed.
        """
        if self.catchup == "skip" or cursor_slot < 0:
            return []
        after = time_of_slot(cursor_slot)
        if busy_until is not None and busy_until > after.timestamp():
            after = datetime.fromtimestamp(busy_until, tz=after.tzinfo)
        missed = self.schedule.missed(after, now, self.catchup_limit)
        if self.catchup == "all":
            return missed
        if not missed:
            return []
        latest = missed[-1]
        window = min(self.schedule.gap_after(latest), 3600.0)
        return [latest] if (now - latest).total_seconds() < window else []


def _task_error(label: str, exc: OptionError) -> ConfigError:
    """``task 'x', key 'k': message``: the decorator's form of the file's one-line errors."""
    subject = f"task {label!r}" + (f", key {exc.key!r}" if exc.key else "")
    return ConfigError(f"{subject}: {exc.detail}")
