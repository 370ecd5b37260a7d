"""Declared options at work: what a run's call receives (args as declared, the RunContext
only where a parameter asks), and a task declared ``enabled=False``.

On SQLite only: neither depends on the backend.
"""

from __future__ import annotations

import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

from cronlease import LeaseStore, RunContext, Scheduler
from cronlease._lease.model import AcquireRequest
from cronlease._service import read_report
from cronlease._status import read_status
from cronlease._status.rules import DeclaredTask
from cronlease.config import load_config
from tests.support.leases import set_lease_end, won
from tests.support.procs import wait_for


def test_a_run_receives_args_and_the_context_only_where_asked(tmp_path: Path) -> None:
    received: dict[str, Any] = {}
    module = f"purges_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            received = []

            def purge(days):
                received.append(days)
            """
        )
    )
    path = tmp_path / "cronlease.toml"
    path.write_text(f'[tasks.purge]\ncall = "{module}:purge"\nevery = "1h"\nargs = [30]\n')
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'calls.db'}")
    load_config(path).tasks["purge"].add_to(scheduler)

    @scheduler.task(every="1h")
    def annotated(context: RunContext) -> None:
        received["annotated"] = context

    @scheduler.task(every="1h")
    def named(ctx, days=1):  # type: ignore[no-untyped-def]
        received["named"] = (ctx, days)

    @scheduler.task(every="1h", args=[7])
    async def keyword(days: int, *, ctx: RunContext) -> None:
        received["keyword"] = (days, ctx)

    try:
        for name in ("purge", "annotated", "named", "keyword"):
            assert scheduler.run_now(name) == "succeeded", name
    finally:
        scheduler.runner.close()
        scheduler.store.dispose()
    assert sys.modules[module].received == [30]  # not purge(ctx, 30)
    assert isinstance(received["annotated"], RunContext)
    assert received["annotated"].name == "annotated" and received["annotated"].manual
    assert isinstance(received["named"][0], RunContext) and received["named"][1] == 1
    assert received["keyword"][0] == 7 and isinstance(received["keyword"][1], RunContext)


def test_a_disabled_task_is_declared_but_never_fired_by_its_schedule(
    tmp_path: Path, task_name: str
) -> None:
    runs: list[str] = []
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'disabled.db'}")
    scheduler.add_task(lambda: runs.append("on"), every="1s", name=f"{task_name}-on")
    scheduler.add_task(lambda: runs.append("off"), every="1s", name=task_name, enabled=False)
    with scheduler:
        wait_for(lambda: runs.count("on") >= 2, 20, "two ticks of the enabled twin")
        assert "off" not in runs  # same schedule, same ticks: fired by none of them
        declared = [DeclaredTask.of(task) for task in scheduler.tasks.values()]
        report = read_status(scheduler.store, declared, runs=0)
        status = {task.task: task for task in report.tasks}
        assert status[task_name].enabled is False and status[task_name].next_fire is None
        assert scheduler.health().ok
        assert scheduler.run_now(task_name) == "succeeded"  # a manual run still runs it
    assert runs.count("off") == 1


def test_the_files_grace_is_the_one_the_status_command_judges_by(tmp_path: Path) -> None:
    path = tmp_path / "cronlease.toml"
    path.write_text(
        '[tasks.patient]\ncommand = "true"\nevery = "1m"\ngrace = "1h"\n'
        '[tasks.strict]\ncommand = "true"\nevery = "1m"\n'
    )
    config = load_config(path)
    store = LeaseStore.from_url(f"sqlite:///{tmp_path / 'status.db'}")
    store.create_tables()
    five_minutes_ago = (int(time.time()) // 60 - 5) * 60
    try:
        for name in config.tasks:
            request = AcquireRequest(
                name=name, slot=five_minutes_ago * 1000, ttl=1, holder="earlier", tolerance=1
            )
            lease = won(store.acquire(request))
            assert lease is not None
            store.finish(lease, "succeeded")
            set_lease_end(store, name, five_minutes_ago + 1.0)
        report = read_report(store, config, tables=True)
    finally:
        store.dispose()
    # 4 minutes late: within the hour the file gives one, past the half minute of the other
    assert {task.task: task.overdue for task in report.tasks} == {
        "patient": False,
        "strict": True,
    }
