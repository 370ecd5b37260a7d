"""Jobs: what a schedule row may run, registered in code or in ``cronlease.toml``.

A row of ``cronlease_schedules`` names a job, never code: whoever can write the
table chooses among the jobs the replicas offer and passes them arguments
(docs/design.md §5.37). A job is a registered callable
(``@scheduler.job()``, ``scheduler.register(fn, name=...)``) or a ``[jobs.NAME]``
table's ``call``/``command``. A replica publishes a description of each job it
offers (:meth:`Job.describe`) so that a writer without the code checks a row's
arguments against the same signature (:func:`stand_in`).
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cronlease._call_args import context_parameter
from cronlease._lease.model import check_task_name
from cronlease._shell_task import CommandTask
from cronlease._task import RunContext
from cronlease.errors import ConfigError

__all__ = ["Job", "Jobs", "stand_in"]


@dataclass(frozen=True)
class Job:
    """One job: a callable (``func``) or a command (``command`` and how it runs)."""

    name: str
    func: Callable[..., Any] | None = field(default=None, repr=False)
    command: str | tuple[str, ...] | None = None
    shell: bool = False
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", check_task_name(self.name))
        if (self.func is None) == (self.command is None):
            raise ConfigError(f"job {self.name!r}: give a callable or a command, one of them")
        if self.func is not None and not callable(self.func):
            raise ConfigError(f"job {self.name!r}: {self.func!r} is not callable")

    @property
    def kind(self) -> str:
        return "call" if self.func is not None else "command"

    def function(self, task_name: str, timeout: float | None) -> Callable[..., Any]:
        """What a schedule's task calls: the callable, or a command run under the
        schedule's name (its log lines) and timeout (the command enforces it)."""
        if self.func is not None:
            return self.func
        assert self.command is not None
        return CommandTask(
            task_name, self.command, shell=self.shell, cwd=self.cwd, env=self.env, timeout=timeout
        )

    def describe(self) -> str:
        """JSON: the job's kind and parameters, what a writer without the code checks a
        row's arguments against (:func:`stand_in`)."""
        func = self.func if self.func is not None else self.function(self.name, None)
        try:
            signature: inspect.Signature | None = inspect.signature(func)
        except (TypeError, ValueError):  # a builtin without one: called as given, unchecked
            signature = None
        params = None
        if signature is not None:
            context = context_parameter(func, RunContext)
            params = [
                {
                    "name": p.name,
                    "kind": p.kind.name,
                    "default": p.default is not inspect.Parameter.empty,
                    "context": p.name == context,
                }
                for p in signature.parameters.values()
            ]
        return json.dumps({"kind": self.kind, "params": params}, sort_keys=True)


class _StandIn:
    """A callable with a given signature and name, never called: what a writer checks a
    row against when only a replica's description of the job is known."""

    def __init__(self, name: str, signature: inspect.Signature) -> None:
        self.__name__ = name
        self.__signature__ = signature

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a job's stand-in is never run")


def stand_in(name: str, description: str) -> Callable[..., Any]:
    """A callable of the signature a replica described (:meth:`Job.describe`) for job
    ``name``; ConfigError when the description is not one."""
    try:
        described = json.loads(description)
        params = described["params"]
        if params is None:
            anything = [
                inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
                inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
            ]
            return _StandIn(name, inspect.Signature(anything))
        parameters = [
            inspect.Parameter(
                str(p["name"]),
                _KINDS[str(p["kind"])],
                default=None if p["default"] else inspect.Parameter.empty,
                annotation="RunContext" if p["context"] else inspect.Parameter.empty,
            )
            for p in params
        ]
        return _StandIn(name, inspect.Signature(parameters))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"job {name!r}: its description cannot be read ({exc})") from None


_KINDS = {
    kind.name: kind
    for kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    )
}


class Jobs(Mapping[str, Callable[..., Any]]):
    """The jobs one scheduler (or one :class:`~cronlease.Schedules`) offers, by name;
    thread-safe. As a mapping: each job's callable (a command's runner)."""

    def __init__(self, jobs: Mapping[str, Callable[..., Any] | Job] | None = None) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        for name, given in (jobs or {}).items():
            self.add(given if isinstance(given, Job) else Job(name, func=given))

    def register(self, func: Callable[..., Any], name: str | None = None) -> Job:
        """Offer ``func`` as the job ``name`` (default: its ``__name__``)."""
        label = name if name is not None else getattr(func, "__name__", None)
        if label is None:
            raise ConfigError(f"job {func!r} has no __name__: pass name=")
        return self.add(Job(label, func=func))

    def add(self, job: Job) -> Job:
        with self._lock:
            if job.name in self._jobs:
                raise ConfigError(f"job {job.name!r} is registered twice")
            self._jobs[job.name] = job
        return job

    def job(self, name: str) -> Job | None:
        return self._jobs.get(name)

    def names(self) -> list[str]:
        return sorted(self._jobs)

    def all(self) -> list[Job]:
        return [self._jobs[name] for name in self.names()]

    def __getitem__(self, name: str) -> Callable[..., Any]:
        return self._jobs[name].function(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._jobs)

    def descriptions(self) -> dict[str, str]:
        """Each job's :meth:`Job.describe`, by name: what a replica publishes."""
        return {job.name: job.describe() for job in self.all()}
