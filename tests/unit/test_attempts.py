"""The attempt policy (cronlease/_run/recording/attempts.py) and the task options that drive it."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cronlease._lease.model import AttemptCandidate, Outcome
from cronlease._run.recording.attempts import JITTER, MAX_RECOVERIES, backoff, jitter_of, plan
from cronlease._task import Liveness, RunContext, Task
from cronlease._timing.schedule import slot_of
from cronlease.config import load_config
from cronlease.errors import ConfigError, ConfigFileError

FIRE = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
SLOT = slot_of(FIRE)
T0 = FIRE.timestamp()  # the slot's instant, epoch seconds
NEXT = T0 + 60.0  # every="1m": the next fire time


def job() -> None:
    pass


def task(**options: object) -> Task:
    return Task.declare(job, every="1m", **options)  # type: ignore[arg-type]


def candidate(
    outcome: Outcome = "failed",
    *,
    attempt: int = 1,
    finished_at: float | None = T0 + 1.0,
    expires_at: float = T0 + 0.5,
    db_now: float = T0 + 1.0,
    manual: bool = False,
) -> AttemptCandidate:
    return AttemptCandidate(
        name="job",
        slot=SLOT,
        manual=manual,
        fence=7,
        attempt=attempt,
        outcome=outcome,
        finished_at=finished_at,
        expires_at=expires_at,
        db_now=db_now,
    )


# --- retries ----------------------------------------------------------------------


def test_backoff_doubles_per_attempt() -> None:
    assert [backoff(0.2, k) for k in (1, 2, 3, 4)] == pytest.approx([0.2, 0.4, 0.8, 1.6])


def test_a_failed_attempt_is_retried_after_the_backoff_with_a_little_jitter() -> None:
    for attempt, outcome in ((1, "failed"), (2, "timed_out")):
        decided = plan(candidate(outcome, attempt=attempt), task(retries=2, retry_delay="2s"))
        assert decided is not None
        assert decided.why == "retry" and not decided.recovering
        assert decided.attempt == attempt + 1
        delay = decided.due - (T0 + 1.0)
        assert backoff(2.0, attempt) <= delay < backoff(2.0, attempt) * (1 + JITTER)
        assert decided.until == NEXT
        assert not decided.ready(decided.due - 0.001) and decided.ready(decided.due)


def test_jitter_is_stable_per_slot_and_attempt_and_spreads_tasks() -> None:
    assert jitter_of("a", 1, 1) == jitter_of("a", 1, 1)
    spread = {jitter_of(f"task-{n}", 1, 1) for n in range(50)}
    assert len(spread) == 50 and all(0 <= j < JITTER for j in spread)


def test_retries_bound_the_attempts() -> None:
    assert plan(candidate(attempt=1), task(retries=1)) is not None
    assert plan(candidate(attempt=2), task(retries=1)) is None
    assert plan(candidate(attempt=3), task(retries=2)) is None


def test_no_retries_by_default() -> None:
    assert plan(candidate("failed"), task()) is None
    assert plan(candidate("running", finished_at=None), task()) is None


def test_a_retry_that_would_reach_the_next_fire_time_is_not_planned() -> None:
    slow = task(retries=3, retry_delay="40s")
    assert plan(candidate(attempt=1), slow) is not None  # due at +41 s, before +60 s
    assert plan(candidate(attempt=2), slow) is None  # due at +81 s: past the next tick
    # due at the next fire time (with no jitter) or after it: never started
    assert plan(candidate(attempt=1), task(retries=1, retry_delay="59s")) is None
    # the database clock already at the next fire time: nothing more for this slot
    assert (
        plan(candidate(db_now=NEXT, finished_at=NEXT - 30), task(retries=1, retry_delay=1)) is None
    )


def test_lost_and_finished_attempts_are_never_retried() -> None:
    for outcome in ("lost", "succeeded", "interrupted", "missed"):
        assert plan(candidate(outcome), task(retries=5, recover=True)) is None  # type: ignore[arg-type]


def test_manual_runs_are_never_retried_nor_recovered() -> None:
    both = task(retries=5, recover=True)
    assert plan(candidate(manual=True), both) is None
    assert plan(candidate("running", manual=True, finished_at=None), both) is None


# --- recovery ---------------------------------------------------------------------


def test_a_dead_holders_run_is_recovered_at_once_when_recover_is_set() -> None:
    for outcome in ("running", "abandoned"):
        dead = candidate(outcome, finished_at=None, expires_at=T0 + 0.5, db_now=T0 + 0.6)  # type: ignore[arg-type]
        assert plan(dead, task()) is None  # recover=False: today's behaviour
        decided = plan(dead, task(recover=True))
        assert decided is not None
        assert decided.why == "recover" and decided.recovering
        assert decided.attempt == 2 and decided.ready(dead.db_now)


def test_a_run_whose_lease_is_still_live_is_not_recovered() -> None:
    alive = candidate("running", finished_at=None, expires_at=T0 + 5, db_now=T0 + 1)
    assert plan(alive, task(recover=True)) is None


def test_recoveries_are_bounded_and_stay_before_the_next_fire_time() -> None:
    crash = candidate("running", finished_at=None, expires_at=T0, db_now=T0 + 1)
    assert plan(replace(crash, attempt=MAX_RECOVERIES), task(recover=True)) is not None
    assert plan(replace(crash, attempt=1 + MAX_RECOVERIES), task(recover=True)) is None
    late = replace(crash, expires_at=NEXT - 1, db_now=NEXT)
    assert plan(late, task(recover=True)) is None


# --- options ----------------------------------------------------------------------


def test_task_options_and_their_defaults() -> None:
    plain = task()
    assert (plain.retries, plain.retry_delay, plain.recover) == (0, 10.0, False)
    assert not plain.wants_attempts
    both = task(retries=2, retry_delay="1m30s", recover=True)
    assert (both.retries, both.retry_delay, both.recover) == (2, 90.0, True)
    assert both.wants_attempts and task(recover=True).wants_attempts


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"retries": -1}, "key 'retries': must be a whole number"),
        ({"retries": True}, "key 'retries': must be a whole number"),
        ({"retries": 1.5}, "key 'retries': must be a whole number"),
        ({"retries": 101}, "key 'retries': must be a whole number"),
        ({"retry_delay": "soon"}, "retry_delay"),
        ({"retry_delay": 0}, "retry_delay"),
        ({"retry_delay": "2d"}, "key 'retry_delay': must be at most 1 day"),
        ({"recover": "yes"}, "key 'recover': must be true or false"),
    ],
)
def test_bad_task_options_name_the_task_and_the_option(
    options: dict[str, object], words: str
) -> None:
    with pytest.raises(ConfigError, match=words) as raised:
        Task.declare(job, every="1m", name="nightly", **options)  # type: ignore[arg-type]
    assert "'nightly'" in str(raised.value)


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "cronlease.toml"
    path.write_text('[tasks.sync]\ncall = "os:getcwd"\nevery = "1m"\n' + body, encoding="utf-8")
    return path


def test_toml_retries_retry_delay_and_recover(tmp_path: Path) -> None:
    spec = load_config(
        write(tmp_path, 'retries = 3\nretry_delay = "2s"\nrecover = true\n'), import_calls=False
    ).tasks["sync"]
    assert (spec.retries, spec.retry_delay, spec.recover) == (3, 2.0, True)
    plain = load_config(write(tmp_path, ""), import_calls=False).tasks["sync"]
    assert (plain.retries, plain.retry_delay, plain.recover) == (0, 10.0, False)


@pytest.mark.parametrize(
    ("line", "key", "words"),
    [
        ("retries = -2", "retries", "whole number from 0 to 100"),
        ('retries = "3"', "retries", "whole number from 0 to 100"),
        ("retries = true", "retries", "whole number from 0 to 100"),
        ('retry_delay = "later"', "retry_delay", "not a duration"),
        ("retry_delay = 0", "retry_delay", "positive"),
        ('retry_delay = "2d"', "retry_delay", "at most 1 day"),
        ('recover = "yes"', "recover", "true or false"),
        ("recover = 1", "recover", "true or false"),
        ("retrys = 1", "retrys", "did you mean 'retries'"),
    ],
)
def test_bad_toml_values_name_file_task_key_and_line(
    tmp_path: Path, line: str, key: str, words: str
) -> None:
    path = write(tmp_path, line + "\n")
    with pytest.raises(ConfigFileError) as raised:
        load_config(path, import_calls=False)
    error = raised.value
    assert error.task == "sync" and error.key == key and error.line == 4
    assert str(path) in str(error) and words in str(error)


# --- the run context ----------------------------------------------------------------


def context(name: str, full_name: str, slot: int, *, manual: bool = False) -> RunContext:
    return RunContext(
        name=name,
        slot=slot,
        fence=3,
        scheduled_for=FIRE,
        manual=manual,
        liveness=Liveness(60.0, 0.0),
        attempt=2,
        recovering=True,
        full_name=full_name,
        holder="host:1:abc",
    )


def test_the_key_is_the_same_per_slot_and_distinct_per_slot_namespace_and_manual() -> None:
    first = context("sync", "app:sync", SLOT)
    assert first.attempt == 2 and first.recovering
    assert first.key == context("sync", "app:sync", SLOT).key  # another attempt, same key
    keys = {
        first.key,
        context("sync", "app:sync", SLOT + 60_000).key,
        context("sync", "other:sync", SLOT).key,
        context("sync", "sync", SLOT).key,
        context("sync", "app:sync", SLOT, manual=True).key,
    }
    assert len(keys) == 5
    assert "app:sync" in first.key and str(SLOT) in first.key
