"""OpenTelemetry spans of real runs, through the real SDK's in-memory exporter.

SQLite only: the spans follow the run's events, the same on every backend.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cronlease import Scheduler
from cronlease.opentelemetry import instrument
from tests.conftest import url_for
from tests.support.procs import wait_for


def broken() -> None:
    raise RuntimeError("disk full")


def test_a_span_per_attempt_with_its_attributes_and_the_error_recorded(
    tmp_path: Path, task_name: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    scheduler = Scheduler(url_for("sqlite", tmp_path), holder="replica-a")
    ok = scheduler.add_task(lambda: None, every="1m", name=task_name)
    bad = scheduler.add_task(broken, every="1m", name=f"{task_name}-bad")
    spans = instrument(scheduler, tracer_provider=provider)
    now = datetime.now(timezone.utc)
    assert scheduler.runner.run_tick(ok, now) == "succeeded"
    assert scheduler.runner.run_tick(bad, now) == "failed"
    assert scheduler.run_now(task_name) == "succeeded"
    assert spans.open == 0

    finished = exporter.get_finished_spans()
    assert [span.name for span in finished] == [
        f"cronlease.run {task_name}",
        f"cronlease.run {task_name}-bad",
        f"cronlease.run {task_name}",
    ]
    history = {(run.name, run.fence): run for name in (ok.full_name, bad.full_name)
               for run in scheduler.store.history(name, 5)}  # fmt: skip
    for span in finished:
        attributes = dict(span.attributes or {})
        run = history[(attributes["cronlease.task"], attributes["cronlease.fence"])]  # type: ignore[index]
        assert attributes["cronlease.slot"] == run.slot
        assert attributes["cronlease.attempt"] == 1
        assert attributes["cronlease.outcome"] == run.outcome
        assert attributes["cronlease.holder"] == "replica-a"
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time
    assert [dict(s.attributes or {})["cronlease.manual"] for s in finished] == [False, False, True]
    good, failed = finished[0], finished[1]
    assert good.status.status_code is StatusCode.OK and not good.events
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "RuntimeError: disk full"
    (event,) = failed.events
    assert event.name == "exception"
    assert dict(event.attributes or {})["exception.message"] == "RuntimeError: disk full"
    assert "Traceback" in str(dict(event.attributes or {})["exception.stacktrace"])

    spans.close()
    assert scheduler.runner.run_tick(ok, datetime.now(timezone.utc)) == "succeeded"
    assert len(exporter.get_finished_spans()) == 3


def test_a_running_scheduler_ends_each_span_it_started(tmp_path: Path, task_name: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    scheduler = Scheduler(url_for("sqlite", tmp_path))
    scheduler.add_task(lambda: None, every="1s", name=task_name)
    spans = instrument(scheduler, tracer_provider=provider)

    def runs() -> list[ReadableSpan]:
        return [s for s in exporter.get_finished_spans() if s.name == f"cronlease.run {task_name}"]

    with scheduler:
        wait_for(lambda: len(runs()) >= 2, 15, "two runs' spans", interval=0.02)
    assert spans.open == 0
    slots = [dict(span.attributes or {})["cronlease.slot"] for span in runs()]
    assert len(set(slots)) == len(slots)
    assert {dict(span.attributes or {})["cronlease.outcome"] for span in runs()} == {"succeeded"}


def test_a_retried_slot_is_a_span_per_attempt(tmp_path: Path, task_name: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    scheduler = Scheduler(url_for("sqlite", tmp_path))
    calls: list[int] = []

    def fails_once() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first attempt fails")

    task = scheduler.add_task(fails_once, every="1h", name=task_name, retries=2, retry_delay="0.1s")
    instrument(scheduler, tracer_provider=provider)

    def runs() -> list[ReadableSpan]:
        return [s for s in exporter.get_finished_spans() if s.name == f"cronlease.run {task_name}"]

    with scheduler:
        assert scheduler.runner.run_tick(task, datetime.now(timezone.utc)) == "failed"
        wait_for(lambda: len(runs()) >= 2, 15, "the retry's span", interval=0.02)
    attributes = [dict(span.attributes or {}) for span in runs()]
    assert [(a["cronlease.attempt"], a["cronlease.outcome"]) for a in attributes] == [
        (1, "failed"),
        (2, "succeeded"),
    ]
    assert attributes[0]["cronlease.slot"] == attributes[1]["cronlease.slot"]
    assert attributes[0]["cronlease.fence"] != attributes[1]["cronlease.fence"]
