"""Roles across real ``cronlease run`` processes: a task with roles runs only on the
replica that has one, and ``status`` says when no live replica has it (README, "Roles")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes.test_cli import Replica, cli, write_config
from tests.support import ledger
from tests.support.procs import wait_for

pytestmark = pytest.mark.slow

RUNS = 4
NO_REPLICA = "no live replica has role reports"


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    started: list[Replica] = []
    yield started
    for replica in started:
        replica.kill()


def test_a_task_with_a_role_runs_only_where_it_is_and_status_says_when_none_is(
    tmp_path: Path, task_name: str, replicas: list[Replica]
) -> None:
    url = f"sqlite:///{tmp_path / 'cronlease.db'}"
    ledger.setup(url)
    config = write_config(
        tmp_path,
        url,
        f"""
        [tasks.{task_name}]
        call = "tests.support.role_task:record"
        every = "1s"
        roles = ["reports"]
        kwargs = {{ url = "{url}", name = "{task_name}" }}
        """,
    )
    web = Replica("run", "-c", str(config), cwd=tmp_path)
    worker = Replica("run", "-c", str(config), "--role", "ops", "--role", "reports", cwd=tmp_path)
    replicas += [web, worker]
    assert web.holder and worker.holder  # each logged its start line
    wait_for(lambda: len(ledger.entries(url, task_name)) >= RUNS, 30, f"{RUNS} runs")
    shown = cli("status", "-c", str(config), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert NO_REPLICA not in shown.stdout, shown.stdout
    assert worker.stop() == 0, worker.output
    pids = {pid for _, pid in ledger.entries(url, task_name)}
    assert pids == {worker.process.pid}, (pids, web.process.pid, web.output)
    shown = cli("status", "-c", str(config), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"{task_name}: {NO_REPLICA}" in shown.stdout, shown.stdout
    assert web.stop() == 0, web.output
    # the role-less replica ran nothing of it, before or after the other stopped
    assert {pid for _, pid in ledger.entries(url, task_name)} == {worker.process.pid}
