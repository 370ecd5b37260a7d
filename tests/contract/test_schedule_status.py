"""Schedule rows in the status model, on every backend (docs/design.md §5.28, §5.37).

What ``cronlease status`` (with a ``cronlease.toml``), its ``--check``, the page and the
Django views read: a row is a declared task of the report, from the database — its
lease row and runs are not an orphan's; a row replicas will not load is ``invalid``
with the reason and fails the check; an enabled row whose job no live replica offers
is ``unoffered``; a database without the schedule tables reports as before.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from cronlease import LeaseStore, Scheduler, Schedules
from cronlease._lease.schema import schedules
from cronlease._service import read_report
from cronlease.config import Config, load_config
from cronlease.web import wsgi_app
from tests.support.procs import wait_for


def beat() -> None:
    """The job the rows run."""


@pytest.fixture
def config(tmp_path: Path, db_url: str, task_name: str) -> Config:
    path = tmp_path / "cronlease.toml"
    path.write_text(
        textwrap.dedent(
            f"""\
            database = "{db_url}"
            namespace = "{task_name}"

            [tasks.coded]
            call = "os:getpid"
            every = "1h"
            """
        )
    )
    return load_config(path, import_calls=False)


@pytest.fixture
def replica(db_url: str, task_name: str) -> Iterator[Scheduler]:
    scheduler = Scheduler(db_url, namespace=task_name, schedule_poll=0.1)
    scheduler.register(beat)
    yield scheduler
    scheduler.shutdown()
    scheduler.store.dispose()


def test_a_running_row_is_a_declared_task_not_an_orphan(
    store: LeaseStore, config: Config, replica: Scheduler, task_name: str
) -> None:
    writer = Schedules(store=store, namespace=task_name)
    replica.start()
    writer.add("pulse", job="beat", every="1s", alert_after=3, changed_by="t")
    full = f"{task_name}:pulse"
    wait_for(lambda: store.history(full), 15, "a run of the schedule row")

    report = read_report(store, config, tables=True)
    assert [t.name for t in report.orphaned] == []
    shown = {t.name: t for t in report.tasks}
    assert set(shown) == {f"{task_name}:coded", full}
    row = shown[full]
    assert (row.declared, row.source, row.job, row.task) == (True, "database", "beat", "pulse")
    assert (row.schedule, row.enabled, row.alert_after) == ("every 1s", True, 3)
    assert row.next_fire is not None and row.last_run is not None
    assert (row.invalid, row.unoffered) == (None, False)
    assert row.shown_state in ("idle", "running")
    assert shown[f"{task_name}:coded"].source == "code"
    assert report.health().ok, report.health().problems


def test_an_invalid_row_fails_the_check_with_its_reason(
    store: LeaseStore, config: Config, replica: Scheduler, task_name: str
) -> None:
    writer = Schedules(store=store, namespace=task_name)
    replica.start()
    writer.add("broken", job="beat", every="1m", changed_by="t")
    writer.add("off", job="beat", every="1m", enabled=False, changed_by="t")
    wait_for(lambda: writer.jobs().get("beat"), 10, "the replica's jobs")
    with store.engine.begin() as conn:
        conn.execute(
            sa.update(schedules)
            .where(schedules.c.name.in_([f"{task_name}:broken", f"{task_name}:off"]))
            .values(kwargs="{not json")
        )

    report = read_report(store, config, tables=True)
    row = next(t for t in report.tasks if t.task == "broken")
    assert row.shown_state == "invalid"
    assert "JSON" in (row.invalid or "")
    assert (row.schedule, row.next_fire, row.overdue) == ("every 1m", None, False)
    off = next(t for t in report.tasks if t.task == "off")
    assert off.shown_state == "invalid"  # shown, but a disabled row alerts no one
    health = report.health()
    assert health.invalid == (f"{task_name}:broken",)
    assert not health.ok
    assert health.problems == (f"{task_name}:broken is invalid: {row.invalid}",)


def test_a_row_no_live_replica_offers_is_unoffered_and_not_a_problem(
    store: LeaseStore, config: Config, task_name: str
) -> None:
    """With no replica up nothing judges the job: the row is valid, and none runs it.
    Like a code task no replica runs, it is a problem once a tick of it is overdue."""
    writer = Schedules(store=store, namespace=task_name)
    writer.add("lonely", job="beat", every="1h", changed_by="t")
    writer.add("resting", job="beat", every="1h", enabled=False, changed_by="t")

    report = read_report(store, config, tables=True)
    rows = {t.task: t for t in report.tasks if t.source == "database"}
    assert (rows["lonely"].shown_state, rows["lonely"].unoffered) == ("unoffered", True)
    assert rows["lonely"].next_fire is not None
    assert (rows["resting"].shown_state, rows["resting"].unoffered) == ("idle", False)
    assert report.health().ok


def test_a_database_without_the_schedule_tables_reports_as_before(
    tmp_path: Path, task_name: str
) -> None:
    """An older database: the rows are not read, the code tasks are reported, the lease
    rows of the namespace no declared task owns are orphans, and nothing is created."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = LeaseStore.from_url(url)
    try:
        old.create_tables()
        with old.engine.begin() as conn:
            for table in ("cronlease_schedule_changes", "cronlease_schedules"):
                conn.execute(sa.text(f"DROP TABLE {table}"))
        old.pause(f"{task_name}:gone")  # a lease row no declared task owns
        path = tmp_path / "cronlease.toml"
        path.write_text(
            f'database = "{url}"\nnamespace = "{task_name}"\n'
            '[tasks.coded]\ncall = "os:getpid"\nevery = "1h"\n'
        )
        report = read_report(old, load_config(path, import_calls=False), tables=True)
        assert [t.task for t in report.tasks] == ["coded"]
        assert [t.name for t in report.orphaned] == [f"{task_name}:gone"]
        assert "cronlease_schedules" not in sa.inspect(old.engine).get_table_names()
    finally:
        old.dispose()


def test_the_page_shows_rows_among_the_tasks_an_invalid_one_flagged(
    store: LeaseStore, replica: Scheduler, task_name: str
) -> None:
    """The overview formats the same model: a row is a task row (its schedule in words,
    its own page), an invalid one is flagged first with its reason and counted in the
    banner; the replica's own health is not failed by a row it does not run."""
    writer = Schedules(store=store, namespace=task_name)
    replica.start()
    writer.add("pulse", job="beat", every="1m", changed_by="t")
    writer.add("broken", job="beat", every="1m", changed_by="t")
    wait_for(lambda: writer.jobs().get("beat"), 10, "the replica's jobs")
    with store.engine.begin() as conn:
        conn.execute(
            sa.update(schedules)
            .where(schedules.c.name == f"{task_name}:broken")
            .values(kwargs="{not json")
        )
    transport = httpx.WSGITransport(app=wsgi_app(replica, cache=0))
    with httpx.Client(transport=transport, base_url="http://page") as client:
        page = client.get("/").text
        data = client.get("/status.json").json()
        task_page = client.get("/task", params={"name": f"{task_name}:pulse"})
    order = re.findall(r'<tr id="task-([^"]+)"', page)
    assert order == [f"{task_name}:broken", f"{task_name}:pulse"], order
    broken = page.split(f'<tr id="task-{task_name}:broken"')[1].split("</tr>")[0]
    assert 'class="flag-invalid"' in broken and 'class="s-invalid">invalid' in broken
    assert "its JSON cannot be read" in broken
    banner = page.split('id="banner"')[1].split("</div>")[0]
    assert "<b>1 invalid</b>" in banner
    tasks = {task["task"]: task for task in data["tasks"]}
    assert tasks["pulse"]["schedule_words"] == "every minute"
    assert (tasks["pulse"]["source"], tasks["broken"]["shown_state"]) == ("database", "invalid")
    assert data["orphaned"] == [] and data["invalid"] == [f"{task_name}:broken"]
    assert data["replica"]["health"]["ok"], data["replica"]["health"]
    assert task_page.status_code == 200 and "every 1m" in task_page.text
