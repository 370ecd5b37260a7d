"""The pulse rule (docs/design.md §5.18), on fixed instants; the real threads are stopped in
tests/contract/test_stalled_replica.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from cronlease._run.replica_log.pulse import PULSE_SLACK, Pulse
from cronlease._task import Task


def task(every: str, name: str, grace: str | None = None) -> Task:
    return Task.declare(lambda: None, every=every, name=name, grace=grace)


def test_a_replica_that_never_started_or_stopped_is_not_stalled() -> None:
    pulse = Pulse()
    later = datetime.now(timezone.utc) + timedelta(days=1)
    assert pulse.stall([task("1s", "a")], later) is None
    pulse.beat()
    pulse.stop()
    assert pulse.stall([task("1s", "a")], later) is None


def test_stalled_once_the_first_tick_after_the_last_beat_is_past_grace_and_slack() -> None:
    pulse = Pulse()
    pulse.beat()
    assert pulse.last is not None
    last = datetime.fromtimestamp(pulse.last, tz=timezone.utc)
    tasks = [task("10s", "a"), task("1h", "b"), task("10s", "c")]
    due = tasks[0].schedule.next_fire_time(last)
    assert due is not None
    limit = due + timedelta(seconds=5 + PULSE_SLACK)  # grace: half the 10 s gap
    assert pulse.stall(tasks, limit - timedelta(seconds=0.1)) is None
    problem = pulse.stall(tasks, limit + timedelta(seconds=0.1))
    assert problem is not None and "stuck" in problem and due.isoformat() in problem
    pulse.beat()  # it decided a pass again
    assert pulse.stall(tasks, datetime.now(timezone.utc)) is None


def test_a_task_s_own_grace_counts() -> None:
    pulse = Pulse()
    pulse.beat()
    assert pulse.last is not None
    last = datetime.fromtimestamp(pulse.last, tz=timezone.utc)
    patient = task("10s", "a", grace="30s")
    due = patient.schedule.next_fire_time(last)
    assert due is not None
    assert pulse.stall([patient], due + timedelta(seconds=30 + PULSE_SLACK - 0.1)) is None
    assert pulse.stall([patient], due + timedelta(seconds=30 + PULSE_SLACK + 0.1)) is not None


def test_a_wall_clock_stepped_back_after_the_beat_does_not_hide_a_stall() -> None:
    # Issue 12: stepped back an hour, the tick after the last beat looked an hour away
    # by the wall clock while the timer slept; the monotonic clock says how long it was.
    wall, monotonic = [1_000_000.0], [50.0]
    pulse = Pulse(wall=lambda: wall[0], monotonic=lambda: monotonic[0])
    pulse.beat()
    tasks = [task("1s", "a")]  # grace 0.5 s: stalled 1 + 0.5 + PULSE_SLACK s after the beat
    wall[0] -= 3600
    monotonic[0] += 1 + 0.5 + PULSE_SLACK - 0.1
    assert pulse.stall(tasks) is None
    monotonic[0] += 0.2
    problem = pulse.stall(tasks)
    assert problem is not None and "decided no tick for 7 s" in problem
