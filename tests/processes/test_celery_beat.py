"""Celery beat run by every replica, against real parts: ``cronlease run --celery-app``
replicas, ``celery worker`` processes and a real broker (RabbitMQ and Redis), nothing
mocked between them. The task bodies (tests/support/celery_app.py) append to the
side-effect ledger, so a body run twice is two rows, and a tick never run is a gap.

Each test has a queue of its own (and beat entries named after it), deleted at the end:
tests in parallel and earlier runs on the shared brokers never see each other's messages.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REQUIRED, skip_or_fail, url_for

if "celery" in REQUIRED:  # CI: a missing Celery is a failure, not a skip
    import celery  # noqa: F401
pytest.importorskip("celery")

from cronlease._send.celery_beat import CelerySender
from cronlease._send.sending import Message, task_id_of
from tests.support.beats import QueueFleet, assert_window_ran, missing_slots
from tests.support.celery_app import purge
from tests.support.procs import Proc, wait_for
from tests.support.tcpproxy import TcpProxy

pytestmark = pytest.mark.slow

BROKERS = {
    "rabbitmq": os.environ.get(
        "CRONLEASE_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//"
    ),
    "redis": os.environ.get("CRONLEASE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
}
APP = "tests.support.celery_app"
#: the log line that starts a broker outage, and the one that ends it
OUTAGE_LINE = re.compile(r"broker \S+ unavailable: ")
OUTAGE_END = re.compile(r"tick\(s\) in a row not sent \(broker unavailable\)")


def broker_problem(broker: str) -> str | None:
    """Why the broker at ``broker`` cannot be used, or None."""
    from kombu import Connection

    try:
        with Connection(BROKERS[broker], connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
    except Exception as exc:
        return f"{broker} at {BROKERS[broker]} is unreachable: {type(exc).__name__}: {exc}"
    return None


def broker_url(broker: str) -> str:
    """The broker's URL; skips the test if it does not answer, with the reason (fails it
    when CRONLEASE_TEST_REQUIRE names the broker, or ``celery``: CI must not skip)."""
    skip_or_fail("celery" if "celery" in REQUIRED else broker, broker_problem(broker))
    return BROKERS[broker]


class Fleet(QueueFleet):
    """`cronlease run --celery-app` replicas and `celery worker`s."""

    def replica(self, **env: str) -> Proc:
        proc = Proc("-m", "cronlease", "run", "--celery-app", f"{APP}:app", env=self.env(**env))
        self.replicas.append(proc)
        return proc

    def worker(self, name: str, **env: str) -> Proc:
        proc = Proc(
            "-m",
            "celery",
            "-A",
            APP,
            "worker",
            "--pool",
            "solo",
            "--queues",
            self.queue,
            "--hostname",
            f"{name}-{self.queue}@localhost",
            # not --without-heartbeat: without its timer, a worker on RabbitMQ left
            # messages already read into its buffer unhandled for up to 10 s
            "--without-mingle",
            "--without-gossip",
            "--loglevel",
            "INFO",
            env=self.env(**env),
        )
        self.workers.append(proc)
        return proc

    def replica_up(self, proc: Proc, timeout: float) -> None:
        wait_for(lambda: "started with" in proc.stderr(), timeout, proc.stderr)

    def worker_up(self, proc: Proc, timeout: float) -> None:
        wait_for(lambda: " ready." in proc.stderr(), timeout, proc.stderr)

    def close(self) -> None:
        for proc in [*self.replicas, *self.workers]:
            proc.kill()
        self.store.dispose()
        purge(self.broker, self.queue)


MakeFleet = Callable[..., Fleet]


@pytest.fixture
def fleet_db(tmp_path: Path) -> str:
    # SQLite (the replicas and workers share a host): a fleet of processes each holding
    # a few connections would take a fifth of a default PostgreSQL's while other test
    # workers need theirs; the guard's claim is proven on every backend by
    # tests/contract/test_deliveries.py
    return url_for("sqlite", tmp_path)


@pytest.fixture
def make_fleet(fleet_db: str, task_name: str) -> Iterator[MakeFleet]:
    fleets: list[Fleet] = []

    def make(broker: str, entries: int, queue_broker: str | None = None) -> Fleet:
        fleet = Fleet(queue_broker or broker, task_name, fleet_db, entries)
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.close()


def assert_once_each(rows: list[tuple[str, str, str, int, int]]) -> None:
    keys = Counter(key for _, key, _, _, _ in rows)
    twice = {key: n for key, n in keys.items() if n > 1}
    assert not twice, f"bodies run more than once: {twice}"
    for _, key, task_id, _, _ in rows:
        assert task_id == task_id_of(key), (key, task_id)


@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_every_tick_runs_once(broker: str, make_fleet: MakeFleet) -> None:
    fleet: Fleet = make_fleet(broker_url(broker), entries=10)
    for _ in range(3):
        fleet.replica()
    fleet.worker("a")
    fleet.worker("b")
    start = fleet.all_up()
    wait_for(lambda: time.time() > start + 6, 20, "6 s of ticks")
    end = time.time()
    fleet.stop_replicas()
    fleet.drained()
    rows = fleet.rows()
    assert_once_each(rows)
    by_entry: dict[str, set[int]] = {}
    for task, key, _, slot, _ in rows:
        by_entry.setdefault(key.rsplit("@", 1)[0], set()).add(slot)
        assert task == f"tick-{key.rsplit('@', 1)[0].rsplit('.', 1)[1]}"
    assert set(by_entry) == set(fleet.names())
    assert fleet.succeeded() == fleet.keys()  # every send recorded, every run sent
    assert_window_ran(fleet, by_entry, start, end - 1)
    assert {pid for *_, pid in rows} == {w.popen.pid for w in fleet.workers}


def test_replica_killed(make_fleet: MakeFleet) -> None:
    fleet: Fleet = make_fleet(broker_url("rabbitmq"), entries=6)
    for _ in range(3):
        fleet.replica()
    fleet.worker("a")
    fleet.worker("b")
    start = fleet.all_up()
    wait_for(lambda: time.time() > start + 3, 10, "3 s of ticks")
    fleet.replicas[0].kill()
    wait_for(lambda: time.time() > start + 8, 10, "5 s more")
    end = time.time()
    fleet.stop_replicas()
    fleet.drained()
    rows = fleet.rows()
    assert_once_each(rows)
    by_entry: dict[str, set[int]] = {name: set() for name in fleet.names()}
    for _, key, _, slot, _ in rows:
        by_entry[key.rsplit("@", 1)[0]].add(slot)
    gaps = {name: missing_slots(slots, start, end - 1) for name, slots in by_entry.items()}
    assert all(len(missing) <= 1 for missing in gaps.values()), f"ticks lost: {gaps}"


def test_broker_cut(make_fleet: MakeFleet) -> None:
    real = broker_url("rabbitmq")
    proxy = TcpProxy("127.0.0.1", 5672)
    proxy.up()
    try:
        fleet: Fleet = make_fleet(real, entries=3)
        cut = f"amqp://guest:guest@127.0.0.1:{proxy.port}//"
        replicas = [fleet.replica(CRONLEASE_TEST_BROKER=cut) for _ in range(2)]
        fleet.worker("a")  # on the broker itself: only the sends are cut
        start = fleet.all_up()
        wait_for(lambda: time.time() > start + 2, 5, "2 s of ticks")
        proxy.down()
        down = time.time()
        wait_for(lambda: time.time() > down + 4, 6, "4 s of outage")
        proxy.up()
        healed = time.time()
        wait_for(
            lambda: any(slot / 1000 > healed + 1 for *_, slot, _ in fleet.rows()),
            15,
            "a tick sent after the outage",
        )
        # each replica says the outage ended at its first send confirmed after healing
        wait_for(
            lambda: all(OUTAGE_END.search(r.stderr()) for r in replicas),
            15,
            lambda: "\n".join(r.stderr() for r in replicas),
        )
        fleet.stop_replicas()
        fleet.drained()
    finally:
        proxy.down()
    rows = fleet.rows()
    assert_once_each(rows)
    runs = [run for name in fleet.names() for run in fleet.store.history(name, 200)]
    failed = [run for run in runs if run.outcome == "failed"]
    assert failed, "no tick recorded failed during the outage"
    for run in failed:  # the broker's own error, for ticks due while it was cut only
        assert down - 1 <= run.slot / 1000 <= healed + 1, (run, down, healed)
        assert run.error is not None
        assert "not sent to amqp://" in run.error and "Connection refused" in run.error, run
    # sending resumed, and every tick sent ran once
    assert any(r.outcome == "succeeded" and r.slot / 1000 > healed for r in runs)
    assert fleet.succeeded() <= fleet.keys()
    # A send cut after the broker took the message, before its confirm came back, is
    # recorded failed (the sender cannot know) yet runs, once: only a tick due at the cut.
    failed_keys = {f"{run.name}@{run.slot}" for run in failed}
    for key in fleet.keys() - fleet.succeeded():
        assert key in failed_keys, key
        assert down - 1.5 <= int(key.rsplit("@", 1)[1]) / 1000 <= down + 0.5, (key, down)
    for replica in replicas:
        log = replica.stderr()
        starts = [line for line in log.splitlines() if OUTAGE_LINE.search(line)]
        ends = [line for line in log.splitlines() if OUTAGE_END.search(line)]
        assert (len(starts), len(ends)) == (1, 1), log


@pytest.mark.parametrize("guard", ["on", "off"])
def test_redelivered_after_worker_killed(guard: str, make_fleet: MakeFleet) -> None:
    from celery import Celery

    broker = broker_url("rabbitmq")
    fleet: Fleet = make_fleet(broker, entries=0)
    flag = {"CRONLEASE_TEST_GUARD": "1" if guard == "on" else "0"}
    first, second = fleet.worker("a", **flag), fleet.worker("b", **flag)
    fleet.all_up()
    app = Celery("sender", broker=broker, set_as_current=False)
    app.conf.task_default_queue = fleet.queue
    key = f"{fleet.queue}.block@{int(time.time()) * 1000}"
    sender = CelerySender(app, "tests.support.celery_app.block", (60,))
    sender.send(Message(key, task_id_of(key), scheduled_for=_now(), attempt=1))
    [(_, _, task_id, _, pid)] = wait_for(fleet.rows, 15, "the body started")
    running, other = (first, second) if pid == first.popen.pid else (second, first)
    running.kill()  # mid-task: the message was not acknowledged
    if guard == "on":
        wait_for(lambda: "delivered before" in other.stderr(), 15, other.stderr)
        assert [row[4] for row in fleet.rows()] == [pid]
    else:  # the negative control: without the guard, the redelivery runs the body again
        rows = wait_for(lambda: len(fleet.rows()) == 2 and fleet.rows(), 15, other.stderr)
        assert sorted(row[4] for row in rows) == sorted([pid, other.popen.pid])
        assert {row[2] for row in rows} == {task_id}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def test_a_retry_runs_a_duplicate_does_not(tmp_path: Path) -> None:
    """Celery's own worker in this process (solo pool, in-memory broker: FIFO): a task
    that fails once and calls ``self.retry()`` is sent again under its task id, behind a
    duplicate of the first message; the duplicate is skipped, the retry (claimed apart)
    runs."""
    from celery import Celery
    from celery.contrib.testing.worker import start_worker

    from cronlease.contrib.celery import OnceTask

    app = Celery("retries", broker="memory://", set_as_current=False)
    app.conf.update(
        task_ignore_result=True,
        cronlease_database_url=url_for("sqlite", tmp_path),
        broker_connection_retry_on_startup=True,
    )
    runs: list[int] = []

    @app.task(bind=True, base=OnceTask, name="retries.flaky", max_retries=2)
    def flaky(self: Any) -> None:
        runs.append(self.request.retries)
        if len(runs) == 1:
            raise self.retry(countdown=0)

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        flaky.apply_async(task_id="the-task")
        flaky.apply_async(task_id="the-task")  # a duplicate, queued before the retry
        wait_for(lambda: len(runs) >= 2, 15, lambda: f"runs: {runs}")
    assert runs == [0, 1]


@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_a_ticks_sends_reuse_the_connections_of_the_last(broker: str, task_name: str) -> None:
    """Every entry of an instant is sent at once, one worker thread each: later instants'
    sends find the earlier ones' connections idle instead of opening (and, on AMQP,
    setting up and closing) one each — a tick's CPU was mostly that. Counted where Celery
    opens one (``connection_for_write``) and, for the messages, at the broker: every
    message queued, once. The sends' connections number at most the sends at once (an
    instant's threads may not all overlap on a loaded machine, so a later instant may
    still open one the first did not need), never one a send."""
    import threading

    from celery import Celery
    from kombu import Connection
    from kombu import Queue as KombuQueue

    url = broker_url(broker)
    queue = f"{task_name}-pool"
    app = Celery("pool", broker=url, set_as_current=False)
    app.conf.task_default_queue = queue
    opened = Counter[str]()
    open_one = app.connection_for_write

    def counting(*args: Any, **kwargs: Any) -> Any:
        # the sends' own connections ask for publisher confirms or for nothing, by name;
        # Celery's pool and the probe of the broker pass no options
        opened["sends" if "transport_options" in kwargs else "celery"] += 1
        return open_one(*args, **kwargs)

    app.connection_for_write = counting  # type: ignore[method-assign]
    entries, instants = 8, 5
    senders = [CelerySender(app, f"pool.entry{index}") for index in range(entries)]
    try:
        for instant in range(instants):
            start = threading.Barrier(entries)
            errors: list[BaseException] = []

            def send(
                index: int, instant: int = instant, start: Any = start, errors: Any = errors
            ) -> None:
                key = f"{task_name}-{index}@{instant}"
                start.wait(10)
                try:
                    senders[index].send(Message(key, task_id_of(key), _now(), 1))
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=send, args=(i,)) for i in range(entries)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert not errors, errors
            if instant == 0:
                celery_own = opened["celery"]
        with Connection(url, connect_timeout=5) as conn:
            queued = KombuQueue(queue, channel=conn.default_channel).queue_declare(passive=True)
        assert queued.message_count == entries * instants
        # 40 sends on at most 8 connections; Celery opened its own in the first instant only
        assert 1 <= opened["sends"] <= entries, opened
        assert opened["celery"] == celery_own, (celery_own, opened)
    finally:
        senders[0]._connections.close()
        purge(url, queue)
