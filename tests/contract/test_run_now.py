"""``run_now`` twice within one millisecond: each a run of its own, on every backend.

A manual run's slot is the instant it was asked for, in milliseconds, and the
run rows are unique per (task, slot, manual, attempt): two runs asked for in
the same millisecond (a fast task run back to back) had the database refuse the
second ("UNIQUE constraint failed", the run skipped). Seen in CI; here the
clock is held still to make it certain.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from cronlease import Scheduler
from cronlease._run import runner


class _StillClock(datetime):
    """``datetime`` whose ``now()`` is one instant, for the runner module only."""

    @classmethod
    def now(cls, tz: object = None) -> _StillClock:  # type: ignore[override]
        return cls(2026, 12, 3, 12, 0, 0, 123000, tzinfo=timezone.utc)


def test_two_manual_runs_in_one_millisecond_are_two_runs(
    db_url: str, task_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = Scheduler(db_url)
    ran: list[int] = []
    scheduler.add_task(lambda ctx: ran.append(ctx.slot), every="1h", name=task_name)
    monkeypatch.setattr(runner, "datetime", _StillClock)
    try:
        assert [scheduler.run_now(task_name) for _ in range(3)] == ["succeeded"] * 3
        assert len(set(ran)) == 3 and ran == sorted(ran)  # a millisecond apart
        history = scheduler.store.history(task_name, 10)
        assert sorted(run.outcome for run in history) == ["succeeded"] * 3
    finally:
        scheduler.store.dispose()
