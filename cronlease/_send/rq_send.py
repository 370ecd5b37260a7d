"""RQ as a sender: each tick one job enqueued on an ``rq.Queue``, its job id the tick's.

**Sending** (:class:`RqSender`): ``queue.enqueue_call(func, args, kwargs, ...)`` with
the caller's options (``enqueue_call``'s: ``timeout``, ``result_ttl``, ``ttl``,
``failure_ttl``, ``description``, ``at_front``, ``meta``, ``retry``, callbacks), and:

- ``job_id``: derived from the tick (:func:`~cronlease._send.sending.task_id_of`), the
  same on every attempt of the tick;
- ``meta`` keys ``cronlease_key`` and ``cronlease_scheduled_for`` (ISO 8601, UTC);
- ``unique=True``: RQ checks that no job hash of that id exists and saves and pushes
  the job in one Lua script. Enqueueing an existing id without it would overwrite
  the job's hash (resetting a finished job to queued) and push its id again: a resend
  of a tick whose first send reached Redis would run twice. With it, the resend is
  refused (``DuplicateJobError``), which means the tick is already in Redis: the send
  counts as done. Once the first job's hash has expired (``result_ttl``, 500 s by
  default, after it finished), a resend is a new job: the guard (``once``) is what
  runs it at most once then.

**Confirmed** when Redis answered the script (Redis acknowledges a write it holds in
memory; how durable it is depends on the server's persistence settings).

Refused options: ``job_id``, ``unique`` and ``pipeline`` (cronlease's), ``depends_on``
(RQ cannot check uniqueness of a dependent job) and ``repeat`` (cronlease schedules
the ticks; RQ's repeats would share the job id, and the guard would skip them).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cronlease._send.sending import Message
from cronlease.errors import ConfigError

__all__ = ["RqSender", "redis_name"]

#: enqueue_call's parameters that are cronlease's or that it cannot honour, and why
REFUSED = {
    "job_id": "cronlease's to set",
    "unique": "cronlease's to set",
    "pipeline": "cronlease's to set",
    "func": "the job's function is the second argument",
    "args": "the job's args are the third argument",
    "kwargs": "the job's kwargs are the fourth argument",
    "depends_on": "not supported: RQ cannot enqueue a dependent job uniquely",
    "repeat": "not supported: cronlease schedules the ticks (a repeat shares the job id)",
}


def redis_name(connection: Any) -> str:
    """A Redis client as logs name it: host, port and database, no password."""
    pool = getattr(connection, "connection_pool", None)
    found = dict(getattr(pool, "connection_kwargs", {}) or {})
    if "path" in found:
        return f"redis+socket://{found['path']}"
    return (
        f"redis://{found.get('host', 'localhost')}:{found.get('port', 6379)}/{found.get('db', 0)}"
    )


def _enqueue_options() -> set[str]:
    from rq import Queue

    return set(inspect.signature(Queue.enqueue_call).parameters) - {"self"}


class RqSender:
    """Enqueues an RQ job for each tick (:class:`~cronlease._send.sending.Sender`)."""

    def __init__(
        self,
        queue: Any,
        func: str | Callable[..., Any],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        from rq import Queue

        if not isinstance(queue, Queue):
            raise ConfigError(f"the queue must be an rq.Queue, not {type(queue).__name__}")
        if not (isinstance(func, str) and func) and not callable(func):
            raise ConfigError(
                f"the job's function must be a callable or a dotted path, not {func!r}"
            )
        if not isinstance(args, (list, tuple)):
            raise ConfigError(f"args must be a list or tuple, not {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ConfigError(f"kwargs must be a dict, not {type(kwargs).__name__}")
        options = dict(options or {})
        known = _enqueue_options()
        for option in options:
            if option in REFUSED:
                raise ConfigError(f"options: {option!r}: {REFUSED[option]}")
            if option not in known:
                raise ConfigError(
                    f"options: {option!r} is not an option of RQ's enqueue_call; known: "
                    + ", ".join(sorted(known - set(REFUSED)))
                )
        meta = options.pop("meta", None)
        if meta is not None and not isinstance(meta, Mapping):
            raise ConfigError(f"options: 'meta' must be a dict, not {type(meta).__name__}")
        self.queue = queue
        self.func = func
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.meta = dict(meta or {})
        self.options = options
        self._name = f"{redis_name(queue.connection)} (queue {queue.name})"

    def __repr__(self) -> str:
        return f"RqSender({self.func_name!r}, queue={self.queue.name!r})"

    @property
    def func_name(self) -> str:
        if isinstance(self.func, str):
            return self.func
        return f"{self.func.__module__}.{getattr(self.func, '__qualname__', self.func)}"

    @property
    def broker(self) -> str:
        return self._name

    @property
    def target(self) -> str:
        return f"{self.func_name} (RQ)"

    def send(self, message: Message) -> None:
        from rq.exceptions import DuplicateJobError

        meta = {
            **self.meta,
            "cronlease_key": message.key,
            "cronlease_scheduled_for": message.scheduled_text,
        }
        try:
            self.queue.enqueue_call(
                self.func,  # type: ignore[type-var]  # a str or a callable, as RQ takes
                args=self.args,
                kwargs=self.kwargs,
                job_id=message.task_id,
                meta=meta,
                unique=True,
                **self.options,
            )
        except DuplicateJobError:
            return  # an earlier attempt of this tick reached Redis: it is enqueued

    def unreachable(self, exc: BaseException) -> bool:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        return isinstance(exc, (OSError, RedisConnectionError, RedisTimeoutError))
