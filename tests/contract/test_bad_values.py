"""One bad value costs nothing: text and schedules no backend can store are made safe
where they are made, so a batch that holds them runs and records every task.

Reproduces issue 11 item 3 on the real databases: a schedule fingerprint over the
column's 200 characters (a long cron list in a long zone name) made every batch
containing it fail on PostgreSQL and MariaDB (string data right truncation: every
task due at that instant skipped, logged as "database unavailable"), and an error
text with a NUL character made PostgreSQL refuse the finish of the whole batch
(every run in it left ``running``, leases unreleased).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pytest

from cronlease import Scheduler
from cronlease._lease.model import AcquireRequest
from cronlease._lease.schema import MAX_FINGERPRINT_LENGTH
from cronlease._run.ticks import Tick
from cronlease._timing.schedule import Schedule, slot_of
from cronlease.errors import ConfigError
from tests.support.procs import wait_for

EVERY_MINUTE = ",".join(str(minute) for minute in range(60)) + " * * * *"
LONG_ZONE = "America/Argentina/ComodRivadavia"


def test_a_long_schedule_has_a_bounded_fingerprint_that_still_tells_schedules_apart() -> None:
    plain = f"cron {EVERY_MINUTE} in {LONG_ZONE}"
    assert len(plain) > MAX_FINGERPRINT_LENGTH  # 216 characters: what broke the batch
    first = Schedule.cron(EVERY_MINUTE, timezone=LONG_ZONE).fingerprint
    again = Schedule.cron(EVERY_MINUTE, timezone=LONG_ZONE).fingerprint
    other = Schedule.cron(EVERY_MINUTE, timezone="America/Argentina/Buenos_Aires").fingerprint
    assert len(first) <= MAX_FINGERPRINT_LENGTH
    assert first == again and first != other  # stable across replicas, and distinct
    assert first.startswith("cron 0,1,2,")
    short = Schedule.cron("0 3 * * *", timezone="Europe/Berlin").fingerprint
    assert short == "cron 0 3 * * * in Europe/Berlin"  # unchanged: no false conflict on deploy


def test_an_overlong_fingerprint_is_refused_where_the_request_is_made() -> None:
    with pytest.raises(ConfigError, match="fingerprint"):
        AcquireRequest(name="t", slot=1, ttl=1, holder="h", fingerprint="x" * 201)


def test_a_batch_with_a_long_schedule_and_a_nul_error_runs_and_records_every_task(
    db_url: str, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cronlease")
    scheduler = Scheduler(db_url, history_retention=None)
    fire_time = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(milliseconds=50)
    fire_time = fire_time.replace(microsecond=(fire_time.microsecond // 1000) * 1000)

    def fails_with_nul() -> None:
        raise ValueError("bad\x00byte and a lone \udcff surrogate")

    tasks = [
        scheduler.add_task(lambda: None, every="10s", name=f"{task_name}-{i:02d}", anchor=fire_time)
        for i in range(48)
    ]
    tasks.append(
        scheduler.add_task(
            lambda: None, cron=EVERY_MINUTE, timezone=LONG_ZONE, name=f"{task_name}-long"
        )
    )
    tasks.append(
        scheduler.add_task(fails_with_nul, every="10s", name=f"{task_name}-nul", anchor=fire_time)
    )
    runner = scheduler.runner
    runner.ensure_schema()
    try:
        decision = runner.acquire_ticks([Tick(task, fire_time) for task in tasks])
        assert len(decision.runs) == 50, scheduler.stats.snapshot()
        outcomes = sorted(run() for run in decision.runs)
        assert outcomes == ["failed"] + ["succeeded"] * 49
        names = [task.full_name for task in tasks]
        wait_for(
            lambda: (
                all(
                    runs and runs[0].outcome != "running"
                    for runs in scheduler.store.recent_runs(names, 1).values()
                )
                and len(scheduler.store.recent_runs(names, 1)) == 50
            ),
            10,
            "every run to be recorded",
        )
        recent = scheduler.store.recent_runs(names, 1)
        assert {run[0].slot for run in recent.values()} == {slot_of(fire_time)}
        bad = recent[f"{task_name}-nul"][0]
        assert bad.outcome == "failed"
        assert bad.error is not None and "bad\\x00byte" in bad.error and "\\udcff" in bad.error
        assert recent[f"{task_name}-long"][0].outcome == "succeeded"
        db_now = scheduler.store.database_time()
        assert not any(row.held(db_now) for row in scheduler.store.leases(names))  # released
        assert not [r for r in caplog.records if "database unavailable" in r.getMessage()]
        assert scheduler.stats["lease_errors"] == 0
    finally:
        runner.close()
        scheduler.store.dispose()
