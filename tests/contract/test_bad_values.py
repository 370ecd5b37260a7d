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
from sqlalchemy import text

from cronlease import Scheduler
from cronlease._lease.model import AcquireRequest
from cronlease._lease.schema import MAX_FINGERPRINT_LENGTH
from cronlease._run.timer.ticks import Tick
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
    # 50 runs handed out together: a worker slot for each (docs/design.md §4.3)
    scheduler = Scheduler(db_url, history_retention=None, max_workers=50)
    fire_time = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(milliseconds=50)
    fire_time = fire_time.replace(microsecond=(fire_time.microsecond // 1000) * 1000)

    def fails_with_nul() -> None:
        raise ValueError("bad\x00byte and a lone \udcff surrogate")

    tasks = [
        scheduler.add_task(lambda: None, every="10s", name=f"{task_name}-{i:02d}", anchor=fire_time)
        for i in range(48)
    ]
    # Its tick is handed in at fire_time, which is not one of its fire times: when that
    # is hh:mm:59.950 the next fire is 50 ms on and the default grace (half the gap) is
    # 25 ms, so the tick would be missed one run in sixty. The grace is set to say so.
    tasks.append(
        scheduler.add_task(
            lambda: None,
            cron=EVERY_MINUTE,
            timezone=LONG_ZONE,
            name=f"{task_name}-long",
            grace="30s",
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


def poison(backend: str, bad_name: str, marker: str, tag: str) -> tuple[list[str], list[str]]:
    """DDL that makes the database refuse the run row of ``bad_name`` and any error text
    containing ``marker`` (a constraint or trigger, as a corrupted or stricter schema
    would), and the DDL that removes it again."""
    if backend == "sqlite":
        return (
            [
                f"CREATE TRIGGER {tag}_row BEFORE INSERT ON cronlease_runs"
                f" WHEN NEW.name = '{bad_name}' BEGIN SELECT RAISE(ABORT, 'poisoned row'); END",
                f"CREATE TRIGGER {tag}_error BEFORE UPDATE ON cronlease_runs"
                f" WHEN NEW.error LIKE '%{marker}%' BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
            ],
            [f"DROP TRIGGER {tag}_row", f"DROP TRIGGER {tag}_error"],
        )
    check = f"CHECK (name <> '{bad_name}' AND (error IS NULL OR error NOT LIKE '%{marker}%'))"
    return (
        [f"ALTER TABLE cronlease_runs ADD CONSTRAINT {tag} {check}"],
        [f"ALTER TABLE cronlease_runs DROP CONSTRAINT {tag}"],
    )


def test_a_batch_the_database_refuses_for_one_row_costs_that_row_only(
    backend: str, db_url: str, task_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The database refuses one task's run row and another's error text (a constraint
    as a stricter or corrupted schema would have): the batch is retried item by item,
    the other 48 run and are recorded, each bad one is named in one error line, and
    nothing is reported as an outage."""
    caplog.set_level(logging.WARNING, logger="cronlease")
    # 50 runs handed out together: a worker slot for each (docs/design.md §4.3)
    scheduler = Scheduler(db_url, history_retention=None, max_workers=50)
    fire_time = datetime.now(timezone.utc) - timedelta(milliseconds=50)
    fire_time = fire_time.replace(microsecond=(fire_time.microsecond // 1000) * 1000)
    tag = "poison_" + task_name.replace("-", "_")
    marker = f"poison-{task_name}"

    def fails_with_marker() -> None:
        raise RuntimeError(marker)

    tasks = [
        scheduler.add_task(lambda: None, every="10s", name=f"{task_name}-{i:02d}", anchor=fire_time)
        for i in range(48)
    ]
    bad_row = scheduler.add_task(
        lambda: None, every="10s", name=f"{task_name}-row", anchor=fire_time
    )
    bad_error = scheduler.add_task(
        fails_with_marker, every="10s", name=f"{task_name}-error", anchor=fire_time
    )
    tasks += [bad_row, bad_error]
    runner = scheduler.runner
    runner.ensure_schema()
    add, remove = poison(backend, bad_row.full_name, marker, tag)
    with scheduler.store.engine.begin() as conn:
        for statement in add:
            conn.execute(text(statement))
    try:
        decision = runner.acquire_ticks([Tick(task, fire_time) for task in tasks])
        assert len(decision.runs) == 49, scheduler.stats.snapshot()
        assert sorted(run() for run in decision.runs) == ["failed"] + ["succeeded"] * 48
        good = [task.full_name for task in tasks[:48]]
        wait_for(
            lambda: (
                [runs[0].outcome for runs in scheduler.store.recent_runs(good, 1).values()]
                == ["succeeded"] * 48
            ),
            10,
            "the 48 good runs to be recorded",
        )
        wait_for(
            lambda: any("could not record" in r.getMessage() for r in caplog.records),
            10,
            "the refused record to be reported",
        )
        messages = [r.getMessage() for r in caplog.records]
        refused_row = [m for m in messages if "the database refused its row" in m]
        assert len(refused_row) == 1 and bad_row.full_name in refused_row[0]
        unrecorded = [m for m in messages if "could not record" in m]
        assert len(unrecorded) == 1 and bad_error.full_name in unrecorded[0]
        assert not [m for m in messages if "database unavailable" in m]
        assert scheduler.store.history(bad_row.full_name) == []  # skipped, not half-written
        db_now = scheduler.store.database_time()
        assert not any(row.held(db_now) for row in scheduler.store.leases(good))
    finally:
        runner.close()
        with scheduler.store.engine.begin() as conn:
            for statement in remove:
                conn.execute(text(statement))
        scheduler.store.dispose()
