"""Declared tasks and the context a run receives."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.engine import Connection

from cronlease._lease.fencing import verify_lease
from cronlease._lease.model import check_task_name
from cronlease._timing.schedule import Schedule, parse_duration, time_of_slot
from cronlease.errors import ConfigError

__all__ = [
    "CATCH_UP_POLICIES",
    "DEFAULT_RETRY_DELAY",
    "MAX_ALERT_AFTER",
    "MAX_RETRIES",
    "CatchUp",
    "Liveness",
    "RunContext",
    "Task",
    "takes_context",
]

CatchUp = Literal["skip", "latest", "all"]
CATCH_UP_POLICIES: tuple[str, ...] = ("skip", "latest", "all")
#: seconds before the first retry of a failed attempt (doubled for each one after)
DEFAULT_RETRY_DELAY = 10.0
#: more is a typo: with the doubling delay, 100 retries of "1s" outlast any schedule
MAX_RETRIES = 100
#: a health probe reads this many runs per task (and one): more would make it a history read
MAX_ALERT_AFTER = 100


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
    """What a running task knows about its run. Pass ``ctx`` as the task's first parameter."""

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


def idempotency_key(full_name: str, slot: int, manual: bool) -> str:
    """``<stored full name>@<slot>``, ``@manual-<slot>`` for a manual run: the slot is the
    last field and a number, so two different (name, slot) pairs never give one key."""
    return f"{full_name}@{'manual-' if manual else ''}{slot}"


def takes_context(func: Callable[..., Any]) -> bool:
    """A task receives the RunContext if its first parameter is positional and has no default."""
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return False
    if not parameters:
        return False
    first = parameters[0]
    return first.kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ) and (first.default is inspect.Parameter.empty)


@dataclass(frozen=True)
class Task:
    """A declared task: a name, a schedule and what to run."""

    name: str
    schedule: Schedule
    func: Callable[..., Any] = field(repr=False)
    namespace: str | None = None
    lease_ttl: float | None = None
    grace: float | None = None
    catchup: CatchUp = "latest"
    catchup_limit: int = 10
    #: seconds a run may take: see :mod:`cronlease._run.execution` for what a timeout does
    timeout: float | None = None
    #: failed attempts of a scheduled slot tried again, after ``retry_delay`` seconds
    #: doubled per attempt (:mod:`cronlease._run.attempts`)
    retries: int = 0
    retry_delay: float = DEFAULT_RETRY_DELAY
    #: a run whose holder died is run again by a survivor, as the slot's next attempt
    recover: bool = False
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: runs failed in a row before health() and ``status --check`` call the task failing
    alert_after: int = 1
    full_name: str = field(init=False)
    wants_context: bool = field(init=False, repr=False)
    is_async: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # the stored form (NFC): a decomposed "é" and a composed one are one task
        object.__setattr__(self, "name", check_task_name(self.name))
        if self.namespace is not None:
            object.__setattr__(self, "namespace", check_task_name(self.namespace))
        full_name = f"{self.namespace}:{self.name}" if self.namespace else self.name
        check_task_name(full_name)
        if not callable(self.func):
            raise ConfigError(f"task {self.name!r}: {self.func!r} is not callable")
        if self.lease_ttl is not None and not 1.0 <= self.lease_ttl <= 86400.0:
            raise ConfigError(f"task {self.name!r}: lease_ttl must be between 1 s and 1 day")
        if self.grace is not None and not 0 < self.grace <= 86400.0:
            raise ConfigError(f"task {self.name!r}: grace must be positive and at most 1 day")
        if self.timeout is not None and not 0 < self.timeout <= 7 * 86400.0:
            raise ConfigError(f"task {self.name!r}: timeout must be positive and at most 7 days")
        if (
            isinstance(self.retries, bool)
            or not isinstance(self.retries, int)
            or not 0 <= self.retries <= MAX_RETRIES
        ):
            raise ConfigError(
                f"task {self.name!r}: retries must be a whole number from 0 to {MAX_RETRIES}, "
                f"not {self.retries!r}"
            )
        if not 0 < self.retry_delay <= 86400.0:
            raise ConfigError(f"task {self.name!r}: retry_delay must be positive and at most 1 day")
        if not isinstance(self.recover, bool):
            raise ConfigError(
                f"task {self.name!r}: recover must be True or False, not {self.recover!r}"
            )
        if self.catchup not in CATCH_UP_POLICIES:
            raise ConfigError(
                f"task {self.name!r}: catchup must be one of {', '.join(CATCH_UP_POLICIES)}, "
                f"not {self.catchup!r}"
            )
        if (
            isinstance(self.catchup_limit, bool)
            or not isinstance(self.catchup_limit, int)
            or not 1 <= self.catchup_limit <= 1000
        ):
            raise ConfigError(f"task {self.name!r}: catchup_limit must be 1 to 1000")
        if (
            isinstance(self.alert_after, bool)
            or not isinstance(self.alert_after, int)
            or not 1 <= self.alert_after <= MAX_ALERT_AFTER
        ):
            raise ConfigError(
                f"task {self.name!r}: alert_after must be a whole number from 1 to "
                f"{MAX_ALERT_AFTER}, not {self.alert_after!r}"
            )
        object.__setattr__(self, "full_name", full_name)
        object.__setattr__(self, "wants_context", takes_context(self.func))
        object.__setattr__(
            self,
            "is_async",
            inspect.iscoroutinefunction(self.func)
            or inspect.iscoroutinefunction(getattr(self.func, "__call__", None)),  # noqa: B004
        )

    @classmethod
    def declare(
        cls,
        func: Callable[..., Any],
        *,
        every: object = None,
        cron: str | None = None,
        name: str | None = None,
        timezone: str | None = None,
        anchor: datetime | None = None,
        lease_ttl: object = None,
        grace: object = None,
        timeout: object = None,
        catchup: str = "latest",
        catchup_limit: int = 10,
        retries: int = 0,
        retry_delay: object = DEFAULT_RETRY_DELAY,
        recover: bool = False,
        namespace: str | None = None,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        alert_after: int = 1,
    ) -> Task:
        """Validate a declaration as the decorator receives it; ConfigError if invalid."""
        # An explicit name="" is an error, not a request for the function's name.
        label = name if name is not None else getattr(func, "__name__", None)
        if label is None:
            # repr() holds a memory address: every replica would name the task differently.
            raise ConfigError(f"task {func!r} has no __name__: pass name=")
        if (every is None) == (cron is None):
            raise ConfigError(f"task {label!r}: give exactly one of every= or cron=")
        try:
            if every is not None:
                if timezone is not None:
                    raise ConfigError("timezone= applies to cron schedules only")
                schedule = Schedule.every(every, anchor=anchor)
            else:
                if anchor is not None:
                    raise ConfigError("anchor= applies to every= schedules only")
                schedule = Schedule.cron(cron, timezone=timezone)  # type: ignore[arg-type]
            ttl = None if lease_ttl is None else _seconds(lease_ttl, "lease_ttl")
            grace_seconds = None if grace is None else _seconds(grace, "grace")
            timeout_seconds = None if timeout is None else _seconds(timeout, "timeout")
            delay = _seconds(retry_delay, "retry_delay")
        except ConfigError as exc:
            raise ConfigError(f"task {label!r}: {exc}") from None
        return cls(
            name=label,
            schedule=schedule,
            func=func,
            namespace=namespace,
            lease_ttl=ttl,
            grace=grace_seconds,
            timeout=timeout_seconds,
            catchup=catchup,  # type: ignore[arg-type]
            catchup_limit=catchup_limit,
            retries=retries,
            retry_delay=delay,
            recover=recover,
            args=tuple(args),
            kwargs=dict(kwargs or {}),
            alert_after=alert_after,
        )

    @property
    def wants_attempts(self) -> bool:
        """Whether a slot of this task may get attempts after the first."""
        return self.retries > 0 or self.recover

    def ttl(self, fire_time: datetime) -> float:
        return self.lease_ttl if self.lease_ttl is not None else self.schedule.ttl(fire_time)

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


def _seconds(value: object, what: str) -> float:
    return parse_duration(value, what=what).total_seconds()
