"""Sentry Crons check-ins of real runs, sent by the real sentry-sdk to a local capture server.

The DSN's host is a stdlib HTTP server in the test: the envelopes are what
Sentry would receive. SQLite only: the check-ins follow the run's events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import sentry_sdk

from cronlease import Scheduler
from cronlease.sentry import instrument, monitor_slug
from tests.conftest import url_for
from tests.support.capture_server import CaptureServer, capture_server


@pytest.fixture
def sentry() -> Iterator[CaptureServer]:
    with capture_server() as server:
        sentry_sdk.init(
            dsn=f"http://public@127.0.0.1:{server.server_address[1]}/1",
            default_integrations=False,
            auto_enabling_integrations=False,
        )
        try:
            yield server
        finally:
            sentry_sdk.get_client().close()
            sentry_sdk.init()  # no DSN: the next tests send nothing


def check_ins(server: CaptureServer) -> list[dict[str, Any]]:
    """The check-in items of every envelope received, in order."""
    found = []
    for request in server.seen():
        lines = request.body.split(b"\n")
        for header, payload in zip(lines[1::2], lines[2::2], strict=False):
            if header and json.loads(header).get("type") == "check_in":
                found.append(json.loads(payload))
    return found


def broken() -> None:
    raise RuntimeError("disk full")


def test_each_attempt_checks_in_in_progress_then_ok_or_error(
    tmp_path: Path, task_name: str, sentry: CaptureServer, wait_for: Callable[..., object]
) -> None:
    scheduler = Scheduler(url_for("sqlite", tmp_path), namespace="billing")
    ok = scheduler.add_task(lambda: None, cron="*/5 * * * *", name=task_name, timeout="10m")
    bad = scheduler.add_task(broken, every="1h", name=f"{task_name}-bad", grace="90s")
    crons = instrument(scheduler)
    now = datetime.now(timezone.utc)
    assert scheduler.runner.run_tick(ok, now) == "succeeded"
    assert scheduler.runner.run_tick(bad, now) == "failed"
    assert crons.open == 0
    sentry_sdk.flush(timeout=10)
    wait_for(lambda: len(check_ins(sentry)) >= 4, 10, "four check-ins")
    received = check_ins(sentry)
    assert len(received) == 4
    by_slug: dict[str, list[dict[str, Any]]] = {}
    for check_in in received:
        by_slug.setdefault(check_in["monitor_slug"], []).append(check_in)
    ok_slug, bad_slug = monitor_slug(ok.full_name), monitor_slug(bad.full_name)
    assert ok_slug.startswith(f"billing-{task_name}-") and set(by_slug) == {ok_slug, bad_slug}
    for slug, final in ((ok_slug, "ok"), (bad_slug, "error")):
        started, ended = by_slug[slug]
        assert (started["status"], ended["status"]) == ("in_progress", final)
        assert started["check_in_id"] == ended["check_in_id"]
        assert ended["duration"] >= 0
    assert by_slug[ok_slug][0]["monitor_config"] == {
        "schedule": {"type": "crontab", "value": "*/5 * * * *"},
        "timezone": "UTC",
        "checkin_margin": 1,
        "max_runtime": 10,
    }
    assert by_slug[bad_slug][1]["monitor_config"] == {
        "schedule": {"type": "interval", "value": 1, "unit": "hour"},
        "timezone": "UTC",
        "checkin_margin": 2,
    }
    crons.close()
    assert scheduler.runner.run_tick(ok, datetime.now(timezone.utc)) == "succeeded"
    sentry_sdk.flush(timeout=10)
    assert len(check_ins(sentry)) == 4  # closed: no more check-ins
