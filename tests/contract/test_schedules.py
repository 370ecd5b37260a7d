"""``cronlease.Schedules``, the model of schedules kept in the database, on every backend
(docs/design.md §5.37): add, update, remove, get, list and history; a stale version
refused naming the newer one and who made it; bad input refused with nothing written;
history kept after removal; a row corrupted by hand reported invalid, not a crash.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from cronlease import (
    LeaseStore,
    RunContext,
    ScheduleError,
    Scheduler,
    Schedules,
    StaleScheduleError,
    UnknownJobError,
    UnknownScheduleError,
    UnknownTaskError,
)
from cronlease._lease.schema import jobs as jobs_table
from cronlease._lease.schema import members, schedule_changes, schedule_heads, schedules
from tests.conftest import url_for
from tests.contract.test_start_stop import last_ran_hours_ago
from tests.support.procs import wait_for
from tests.support.tcpproxy import TcpProxy


def export(ctx: RunContext, customer: str, limit: int = 10) -> None:
    """A job: its signature is what rows are checked against."""


def purge(days: int) -> None:
    """Another job, without the context."""


@pytest.fixture
def model(db_url: str, task_name: str) -> Iterator[Schedules]:
    # a namespace per test: the servers' databases are shared by the run's tests
    made = Schedules(db_url, namespace=task_name, jobs={"export": export, "purge": purge})
    yield made
    made.close()


def changes_count(model: Schedules) -> int:
    with model.store.engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).where(schedule_changes.c.namespace == model.namespace)
            ).scalar_one()
        )


def test_add_get_list_update_remove_and_history(model: Schedules) -> None:
    added = model.add(
        "nightly",
        job="export",
        cron="0 3 * * *",
        kwargs={"customer": "acme"},
        retries=2,
        changed_by="alice",
    )
    assert (added.version, added.changed_by, added.invalid) == (1, "alice", None)
    assert added.full_name == f"{model.namespace}:nightly"
    assert dict(added.options) == {"retries": 2}
    model.add("weekly", job="purge", every="7d", args=[30], changed_by="bob")
    assert [s.name for s in model.list()] == ["nightly", "weekly"]
    assert model.get("weekly").args == (30,)

    changed = model.update("nightly", expected_version=1, every="1h", changed_by="carol")
    assert (changed.version, changed.every, changed.cron, changed.changed_by) == (
        2,
        "1h",
        None,
        "carol",
    )
    assert model.get("nightly").kwargs == {"customer": "acme"}  # kept

    model.remove("nightly", expected_version=2, changed_by="dave")
    with pytest.raises(UnknownScheduleError):
        model.get("nightly")
    assert issubclass(UnknownScheduleError, UnknownTaskError)
    assert [s.name for s in model.list()] == ["weekly"]

    history = model.history("nightly")  # kept after removal
    assert [(c.version, c.action, c.changed_by) for c in history] == [
        (1, "add", "alice"),
        (2, "set", "carol"),
        (3, "remove", "dave"),
    ]
    assert history[1].changes == {"every": (None, "1h"), "cron": ("0 3 * * *", None)}
    assert history[0].changes["job"] == (None, "export")
    assert history[0].seq < history[1].seq < history[2].seq


def test_a_stale_version_is_refused_naming_the_newer_one_and_who(model: Schedules) -> None:
    model.add("report", job="purge", every="1h", args=[7], changed_by="alice")
    model.update("report", expected_version=1, args=[8], changed_by="bob")
    before = changes_count(model)
    with pytest.raises(StaleScheduleError, match=r"version 2 \(changed by bob") as refused:
        model.update("report", expected_version=1, args=[9], changed_by="carol")
    assert (refused.value.version, refused.value.changed_by) == (2, "bob")
    with pytest.raises(StaleScheduleError, match="version 2"):
        model.remove("report", expected_version=1)
    assert model.get("report").args == (8,)
    assert changes_count(model) == before  # nothing written


@pytest.mark.parametrize(
    ("given", "error", "words"),
    [
        ({"job": "nope", "every": "1m"}, UnknownJobError, "known: export, purge"),
        ({"job": "export", "every": "1m"}, ScheduleError, "missing a required argument"),
        ({"job": "purge", "every": "1m", "args": [1, 2]}, ScheduleError, "key 'args'"),
        (
            {"job": "export", "every": "1m", "kwargs": {"customer": "x", "limt": 1}},
            ScheduleError,
            "did you mean 'limit'",
        ),
        ({"job": "purge", "cron": "61 * * * *", "args": [1]}, ScheduleError, "key 'cron'"),
        ({"job": "purge", "args": [1]}, ScheduleError, "no schedule"),
        ({"job": "purge", "every": "1m", "args": [1], "retries": -1}, ScheduleError, "retries"),
        ({"job": "purge", "every": "1m", "args": [1], "retriez": 1}, ScheduleError, "retriez"),
        ({"job": "purge", "every": "1m", "args": [object()]}, ScheduleError, "key 'args'"),
        ({"job": "purge", "every": "1m", "args": [1], "kwargs": [1]}, ScheduleError, "kwargs"),
        ({"job": "purge", "every": "1m", "args": [1], "kwargs": {1: 2}}, ScheduleError, "kwargs"),
        (
            {"job": "purge", "every": "1m", "args": [1], "ping_url": "https://x.io/a"},
            ScheduleError,
            "not kept in a schedule row",
        ),
    ],
)
def test_bad_input_is_refused_with_nothing_written(
    model: Schedules, given: dict[str, object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(")):
        model.add("bad", **given)  # type: ignore[arg-type]
    assert model.list() == []
    assert changes_count(model) == 0


def test_an_update_that_breaks_a_rule_changes_nothing(model: Schedules) -> None:
    model.add("a", job="purge", every="1m", args=[1])
    with pytest.raises(ScheduleError, match="key 'args'"):
        model.update("a", args=[1, 2, 3])  # purge takes one
    with pytest.raises(UnknownScheduleError):
        model.update("missing", every="1m")
    assert model.get("a").version == 1
    assert changes_count(model) == 1


def test_a_name_a_code_task_uses_is_refused(db_url: str, task_name: str) -> None:
    model = Schedules(db_url, namespace=task_name, jobs={"purge": purge}, code_tasks=lambda: ["x"])
    try:
        with pytest.raises(ScheduleError, match="declared in code"):
            model.add("x", job="purge", every="1m", args=[1])
    finally:
        model.close()


def test_a_row_corrupted_by_hand_is_reported_invalid_not_a_crash(model: Schedules) -> None:
    model.add("good", job="purge", every="1m", args=[1])
    model.add("broken", job="purge", every="1m", args=[1])
    model.add("gone", job="purge", every="1m", args=[1])
    with model.store.engine.begin() as conn:
        conn.execute(
            sa.update(schedules)
            .where(schedules.c.name == f"{model.namespace}:broken")
            .values(kwargs="{not json")
        )
        conn.execute(
            sa.update(schedules)
            .where(schedules.c.name == f"{model.namespace}:gone")
            .values(job="vanished")
        )
    shown = {s.name: s for s in model.list()}
    assert shown["good"].invalid is None
    assert "JSON" in (shown["broken"].invalid or "")
    assert shown["good"].offered_by == ()  # no live replica: status can say none runs it
    assert "vanished" in (shown["gone"].invalid or "")
    assert "JSON" in (model.get("broken").invalid or "")
    # an update repairs it: what it gives replaces what cannot be read
    repaired = model.update("broken", args=[2], kwargs={}, changed_by="fixer")
    assert (repaired.invalid, repaired.version) == (None, 2)
    assert model.get("broken").invalid is None


def test_the_jobs_live_replicas_offer_check_a_writer_without_the_code(
    db_url: str, task_name: str
) -> None:
    """A replica publishes its jobs' signatures; a writer given no registry checks rows
    against them, and lists them when a job is unknown."""
    replica = Scheduler(db_url, namespace=task_name, schedule_poll=0.1)
    replica.register(export)
    replica.start()
    writer = Schedules(db_url, namespace=task_name)
    try:
        deadline_jobs = writer.jobs
        wait_for(lambda: "export" in deadline_jobs(), 10, "the replica's jobs")
        assert deadline_jobs()["export"] == [replica.holder]
        with pytest.raises(ScheduleError, match="missing a required argument: 'customer'"):
            writer.add("x", job="export", every="1m")
        with pytest.raises(UnknownJobError, match="known: export"):
            writer.add("x", job="exprot", every="1m", kwargs={"customer": "c"})
        writer.add("x", job="export", every="1m", kwargs={"customer": "c"})
        assert writer.get("x").offered_by == (replica.holder,)
    finally:
        replica.shutdown()
        assert writer.jobs() == {}  # withdrawn at a clean shutdown
        writer.close()
        replica.store.dispose()


def test_a_replica_starts_with_its_rows_and_catches_them_up(
    db_url: str, task_name: str, store: LeaseStore
) -> None:
    """Rows are loaded before firing starts: ``start()`` returns with them declared, and a
    row whose last tick was missed while every replica was down is caught up like a code
    task (policy ``latest``)."""
    writer = Schedules(store=store, namespace=task_name, jobs={"purge": purge})
    writer.add("hourly", job="purge", every="1h", args=[1])
    writer.add("idle", job="purge", every="1h", args=[1], catchup="skip")
    for name in ("hourly", "idle"):
        last_ran_hours_ago(store, f"{task_name}:{name}", 2)
    ran: list[int] = []
    replica = Scheduler(db_url, namespace=task_name, history_retention=None)
    replica.register(lambda days: ran.append(days), name="purge")
    replica.start()
    try:
        assert replica.get_task("hourly").full_name == f"{task_name}:hourly"
        wait_for(lambda: ran, 10, "the caught-up tick")
        # the job returned; its outcome is recorded just after
        runs = wait_for(
            lambda: (
                [
                    run.outcome
                    for run in store.history(f"{task_name}:hourly")
                    if run.outcome != "running"
                ]
                == ["succeeded", "succeeded"]
                or None
            ),
            10,
            lambda: f"the caught-up run recorded: {store.history(f'{task_name}:hourly')}",
        )
        assert runs
    finally:
        replica.shutdown()
        replica.store.dispose()
    assert ran == [1]  # the "skip" row was not caught up
    assert len(store.history(f"{task_name}:idle")) == 1


def test_rows_first_read_after_a_start_with_the_database_down_are_caught_up(
    tmp_path: Path, task_name: str
) -> None:
    """The database is unreachable when the replica starts: its rows are read only once it
    answers, and the first contact may start the catch-up before that read. A row whose
    tick was missed while every replica was down is caught up all the same, once."""
    real = make_url(url_for("postgresql", tmp_path))
    store = LeaseStore.from_url(real.render_as_string(hide_password=False))
    writer = Schedules(store=store, namespace=task_name, jobs={"purge": purge})
    writer.add("hourly", job="purge", every="1h", args=[1])
    last_ran_hours_ago(store, f"{task_name}:hourly", 2)
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    ran: list[int] = []
    replica = Scheduler(url, namespace=task_name, history_retention=None, schedule_poll=0.2)
    replica.register(lambda days: ran.append(days), name="purge")
    replica.start()  # the database down: no row read
    try:
        assert "hourly" not in replica.tasks
        proxy.up()
        wait_for(lambda: ran, 15, "the caught-up tick of a row read after start")
        wait_for(
            lambda: (
                [run.outcome for run in store.history(f"{task_name}:hourly")].count("succeeded")
                == 2
            ),
            10,
            lambda: f"the caught-up run recorded: {store.history(f'{task_name}:hourly')}",
        )
    finally:
        replica.shutdown()
        replica.store.dispose()
        proxy.down()
        store.dispose()
    assert ran == [1]


def test_the_model_and_the_poll_work_through_pgbouncer(bouncer_url: str, task_name: str) -> None:
    """Every write is one explicit transaction and every read stands alone: nothing is
    left on a server connection between transactions (PgBouncer's transaction pooling)."""
    replica = Scheduler(bouncer_url, namespace=task_name, schedule_poll=0.1)
    ran: list[int] = []
    replica.register(lambda days: ran.append(days), name="purge")
    replica.start()
    model = Schedules(bouncer_url, namespace=task_name)
    try:
        wait_for(lambda: "purge" in model.jobs(), 10, "the replica's jobs")
        model.add("p", job="purge", every="1s", args=[3])
        model.update("p", expected_version=1, args=[4])
        with pytest.raises(StaleScheduleError):
            model.update("p", expected_version=1, args=[5])
        wait_for(lambda: 4 in ran, 10, "a run of version 2")
        assert [c.version for c in model.history("p")] == [1, 2]
    finally:
        replica.shutdown()
        replica.store.dispose()
        model.close()


def test_reads_create_no_tables(tmp_path: Path) -> None:
    """The status commands and page read with this model: reading a database that has no
    schedule tables (none yet, or made by a version before them) creates nothing."""
    path = tmp_path / "reads.db"
    url = f"sqlite:///{path}"
    model = Schedules(url, jobs={"purge": purge})
    try:
        assert model.list() == [] and model.history("x") == []
        assert model.jobs() == {"purge": []}
        with pytest.raises(UnknownScheduleError):
            model.get("x")
        assert not path.exists()  # not even the file
    finally:
        model.close()
    older = LeaseStore.from_url(url)
    older.create_tables()
    with older.engine.begin() as conn:  # a database of a version before schedule rows
        for table in (schedules, schedule_changes, schedule_heads, jobs_table):
            table.drop(conn)
    model = Schedules(url, jobs={"purge": purge})
    try:
        assert model.list() == [] and model.history("x") == []
        assert not sa.inspect(older.engine).has_table(schedules.name)
        model.add("x", job="purge", every="1m", args=[1])  # a write makes them
        assert [s.name for s in model.list()] == ["x"]
    finally:
        model.close()
        older.dispose()


def test_a_changed_task_set_is_written_to_the_member_row_at_once(
    db_url: str, task_name: str, store: LeaseStore
) -> None:
    """An idle replica renews its member row minutes apart; the row's task set (which
    replicas rank ticks together) must not stay the old one that long after a schedule
    row added a task: the replica renews as soon as its tasks change."""
    replica = Scheduler(db_url, namespace=task_name, schedule_poll=0.1, history_retention=None)
    replica.register(purge, name="purge")
    replica.add_task(lambda: None, name="hourly", every="1h")
    replica.start()
    try:

        def task_set() -> str | None:
            with store.engine.connect() as conn:
                return conn.execute(
                    sa.select(members.c.task_set).where(members.c.holder == replica.holder)
                ).scalar()

        def renewal_far() -> str | None:
            with store.engine.connect() as conn:
                row = conn.execute(
                    sa.select(members.c.task_set, members.c.expires_at).where(
                        members.c.holder == replica.holder
                    )
                ).one_or_none()
            # the row promises its next renewal 4 s before it expires: over 8 s away
            return row.task_set if row is not None and row.expires_at - time.time() > 12 else None

        before = wait_for(renewal_far, 70, "an idle replica's renewal planned far ahead")
        Schedules(store=store, namespace=task_name).add(
            "nightly", job="purge", every="1h", args=[1]
        )
        wait_for(lambda: has_task(replica, "nightly"), 10, "the row followed")
        wait_for(lambda: task_set() != before, 3, "the member row's new task set")
    finally:
        replica.shutdown()
        replica.store.dispose()


def has_task(replica: Scheduler, name: str) -> bool:
    try:
        replica.get_task(name)
    except UnknownTaskError:
        return False
    return True
