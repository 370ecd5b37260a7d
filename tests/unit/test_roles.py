"""Roles: which replicas run a task, how rendezvous ranks them, what the status says."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cronlease import Scheduler, Task
from cronlease._roles import can_run, decode, encode, parse_roles
from cronlease._run.acquisition.membership import FleetView, task_set_digest
from cronlease._run.acquisition.rendezvous import PREFERRED, Ranking, rendezvous_order
from cronlease._status import DeclaredTask, Snapshot, build_report
from cronlease._timing.schedule import Schedule
from cronlease.config import load_config
from cronlease.errors import ConfigError, ConfigFileError


def job() -> None:
    pass


def test_a_task_without_roles_runs_anywhere_one_with_roles_where_one_matches() -> None:
    assert can_run((), ()) and can_run((), ("reports",))
    assert can_run(("reports",), ("ops", "reports"))
    assert not can_run(("reports",), ())  # a replica without roles: role-less tasks only
    assert not can_run(("reports",), ("web",))
    assert parse_roles(["b", "a", "b"]) == ("a", "b")
    assert decode(encode(("a", "b"))) == frozenset({"a", "b"}) and decode("") == frozenset()


def test_bad_roles_name_the_task_or_the_replica(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="task 'job', key 'roles': a role is 1 to 64"):
        Task.declare(job, every="1m", roles=["a,b"])
    with pytest.raises(ConfigError, match=r"Scheduler\(roles=\): must be an array"):
        Scheduler(f"sqlite:///{tmp_path / 'x.db'}", roles="reports")
    path = tmp_path / "cronlease.toml"
    path.write_text('[scheduler]\nroles = ["ok", ""]\n')
    with pytest.raises(ConfigFileError) as caught:
        load_config(path, import_calls=False)
    assert caught.value.key == "roles" and str(path) in str(caught.value)
    path.write_text('[scheduler]\nroles = ["reports", "ops"]\n')
    assert load_config(path, import_calls=False).roles == ("ops", "reports")


def test_rendezvous_ranks_a_task_with_roles_among_the_members_that_have_one() -> None:
    cohort = ("web:1", "web:2", "worker:1", "worker:2")
    roles = {h: frozenset({"reports"} if h.startswith("worker") else ()) for h in cohort}
    for me in ("worker:1", "worker:2"):
        view = FleetView(Ranking(me, cohort), True, cohort, 0.0, roles)
        ranking = view.ranking_for(("reports",))
        assert ranking.size == 2 and view.ranking_for(()) is view.ranking
        for slot in range(0, 50_000, 1000):
            first = rendezvous_order(["worker:1", "worker:2"], "report", slot)[0]
            assert (ranking.place("report", slot) == PREFERRED) == (first == me)


def _report(member_roles: tuple[frozenset[str], ...] | None) -> bool:
    declared = [DeclaredTask("report", Schedule.every("1m"), roles=("reports",))]
    snapshot = Snapshot(db_now=0.0, member_roles=member_roles)
    now = datetime.now(timezone.utc)
    report = build_report(snapshot, declared, database="sqlite://", now=now)
    return report.tasks[0].no_live_replica


def test_the_status_says_when_no_live_replica_has_a_tasks_role() -> None:
    assert _report((frozenset(), frozenset({"web"})))
    assert _report(())  # no replica at all
    assert not _report((frozenset(), frozenset({"reports"})))
    assert not _report(None)  # the member rows were not read: not claimed


def test_a_tasks_roles_are_part_of_its_replicas_task_set_digest() -> None:
    # replicas that disagree on who may run a task (mid-deploy) must not rank together
    plain = Task.declare(lambda: None, every="1m", name="report")
    ops = Task.declare(lambda: None, every="1m", name="report", roles=["ops"])
    reports = Task.declare(lambda: None, every="1m", name="report", roles=["reports"])
    digests = {task_set_digest([task]) for task in (plain, ops, reports)}
    assert len(digests) == 3
    # a task without roles hashes as before roles existed: older replicas still agree
    old = f"{plain.full_name}\0{plain.schedule.fingerprint}".encode()
    assert (
        task_set_digest([plain])
        == f"{int.from_bytes(hashlib.blake2b(old, digest_size=8).digest(), 'big'):016x}"
    )
