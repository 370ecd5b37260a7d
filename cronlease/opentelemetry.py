"""OpenTelemetry spans for a scheduler's runs, built on its listeners.

Install the extra: ``pip install 'cronlease[otel]'`` (``opentelemetry-api`` only;
the SDK and an exporter are the application's, as with any instrumentation).

::

    from cronlease.opentelemetry import instrument

    instrument(scheduler)                       # the global tracer provider
    instrument(scheduler, tracer_provider=tp)   # or a given one

One span per attempt, ``cronlease.run <task>`` (kind INTERNAL), from its
``RunStarted`` to its ``RunFinished`` (their ``at`` times), with the attributes
``cronlease.task`` (full name), ``cronlease.slot``, ``cronlease.fence``,
``cronlease.attempt``, ``cronlease.manual``, ``cronlease.holder`` (this
replica) and, at its end, ``cronlease.outcome``. An attempt that did not
succeed ends with status ERROR, its description the error's one-line summary,
and an ``exception`` event carrying the recorded error text (a task's
traceback, a command's exit status and stderr tail).

The span is not made current on the run's thread: the two events may be
emitted on different threads (the worker starts a run, the recorder ends it),
so spans are kept by (task, slot, fence, attempt) and a task's own spans are not
its children. A span started by ``RunStarted`` whose ``RunFinished`` never comes
(the process died) is never exported, as with any unended span.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from cronlease._events import Event, RunFinished, RunStarted
from cronlease._status.rules import summarize_error
from cronlease._version import __version__

if TYPE_CHECKING:
    from cronlease._scheduler import Scheduler

__all__ = ["RunSpans", "instrument"]

_Key = tuple[str, int, int, int]


def _nanoseconds(at: float) -> int:
    return int(at * 1e9)


class RunSpans:
    """The spans of one scheduler's runs; :meth:`close` stops making them."""

    def __init__(self, scheduler: Scheduler, tracer_provider: TracerProvider | None = None):
        self._scheduler = scheduler
        self._tracer = trace.get_tracer("cronlease", __version__, tracer_provider=tracer_provider)
        self._lock = threading.Lock()
        self._open: dict[_Key, Span] = {}
        self._unsubscribe: Callable[[], None] | None = scheduler.listen(
            self._on_event, RunStarted, RunFinished
        )

    def _on_event(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._started(event)
        elif isinstance(event, RunFinished):
            self._finished(event)

    def _started(self, event: RunStarted) -> None:
        span = self._tracer.start_span(
            f"cronlease.run {event.task}",
            kind=SpanKind.INTERNAL,
            start_time=_nanoseconds(event.at),
            attributes={
                "cronlease.task": event.task,
                "cronlease.slot": event.slot,
                "cronlease.fence": event.fence,
                "cronlease.attempt": event.attempt,
                "cronlease.manual": event.manual,
                "cronlease.holder": self._scheduler.holder,
            },
        )
        with self._lock:
            self._open[(event.task, event.slot, event.fence, event.attempt)] = span

    def _finished(self, event: RunFinished) -> None:
        with self._lock:
            span = self._open.pop((event.task, event.slot, event.fence, event.attempt), None)
        if span is None:  # it started before instrument(): no span to end
            return
        span.set_attribute("cronlease.outcome", event.outcome)
        if event.outcome != "succeeded":
            summary = summarize_error(event.error) if event.error else event.outcome
            span.add_event(
                "exception",
                {
                    "exception.type": event.outcome,
                    "exception.message": summary,
                    "exception.stacktrace": event.error or "",
                },
                timestamp=_nanoseconds(event.at),
            )
            span.set_status(Status(StatusCode.ERROR, summary))
        else:
            span.set_status(Status(StatusCode.OK))
        span.end(end_time=_nanoseconds(event.at))

    @property
    def open(self) -> int:
        """Spans started and not yet ended."""
        return len(self._open)

    def close(self) -> None:
        """Stop making spans; the ones still open are ended as they are."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        with self._lock:
            spans, self._open = list(self._open.values()), {}
        for span in spans:
            span.end()


def instrument(scheduler: Scheduler, tracer_provider: TracerProvider | None = None) -> RunSpans:
    """A span for every run of ``scheduler``, from ``tracer_provider`` (default: the global)."""
    return RunSpans(scheduler, tracer_provider)
