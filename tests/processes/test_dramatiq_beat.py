"""Dramatiq messages sent by every replica, against real parts: replicas declaring
:func:`~cronlease.contrib.dramatiq.dramatiq_sender` tasks (tests/support/queue_replica.py),
a ``dramatiq`` worker process and a real broker, nothing mocked between them. The actors
(tests/support/dramatiq_app.py) append to the side-effect ledger, so a body run twice is
two rows, and a tick never run is a gap.

Each test has a queue of its own (tasks named after it; on Redis, a key prefix of its
own), deleted at the end: tests in parallel and earlier runs never see each other's
messages.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.conftest import REQUIRED, skip_or_fail, url_for

if "dramatiq" in REQUIRED:  # CI: a missing Dramatiq is a failure, not a skip
    import dramatiq
pytest.importorskip("dramatiq")

import dramatiq

from cronlease._send.sending import Message, task_id_of
from tests.support.beats import QueueFleet, assert_window_ran
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow

BROKERS = {
    "rabbitmq": os.environ.get(
        "CRONLEASE_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/%2F"
    ),
    "redis": os.environ.get("CRONLEASE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
}


def broker_url(broker: str) -> str:
    """The broker's URL; skips the test if it does not answer (fails it when
    CRONLEASE_TEST_REQUIRE names ``dramatiq`` or the broker: CI must not skip)."""
    from tests.support.dramatiq_app import make_broker

    problem = None
    try:
        made = make_broker(BROKERS[broker], "probe")
        if broker == "redis":
            made.client.ping()
        else:
            made.connection  # noqa: B018  (opens it)
        made.close()
    except Exception as exc:
        problem = f"{broker} at {BROKERS[broker]} is unreachable: {type(exc).__name__}: {exc}"
    skip_or_fail("dramatiq" if "dramatiq" in REQUIRED else broker, problem)
    return BROKERS[broker]


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (Dramatiq's CLI forks its worker processes)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            found = [int(child) for child in handle.read().split()]
    except OSError:
        return []
    return found + [grandchild for child in found for grandchild in children(child)]


class Fleet(QueueFleet):
    """tests/support/queue_replica.py replicas sending to Dramatiq, and `dramatiq` workers."""

    def replica(self) -> Proc:
        proc = Proc("-m", "tests.support.queue_replica", "dramatiq", env=self.env())
        self.replicas.append(proc)
        return proc

    def worker(self, **env: str) -> Proc:
        proc = Proc(
            "-m",
            "dramatiq",
            "tests.support.dramatiq_app",
            "--processes",
            "1",
            "--threads",
            "2",
            "--queues",
            self.queue,
            env=self.env(**env),
        )
        self.workers.append(proc)
        return proc

    def replica_up(self, proc: Proc, timeout: float) -> None:
        proc.expect("started", timeout)

    def worker_up(self, proc: Proc, timeout: float) -> None:
        wait_for(lambda: "is ready for action" in proc.stderr(), timeout, proc.stderr)

    def close(self) -> None:
        for proc in self.replicas:
            proc.kill()
        for proc in self.workers:  # SIGTERM: the CLI stops its worker processes with it
            descendants = children(proc.popen.pid)
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGTERM)
                try:
                    proc.popen.wait(timeout=20)
                except Exception:
                    proc.kill()
            for pid in descendants:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.store.dispose()
        purge(self.broker, self.queue)


def purge(url: str, queue: str) -> None:
    """Delete the test's queues (with their delay and dead-letter queues) or keys."""
    from tests.support.dramatiq_app import make_broker, namespace

    broker = make_broker(url, queue)
    try:
        if url.startswith("redis"):
            client = broker.client
            for key in client.scan_iter(match=f"{namespace(queue)}*"):
                client.delete(key)
        else:
            channel = broker.channel
            for name in (queue, f"{queue}.DQ", f"{queue}.XQ"):
                channel.queue_delete(name)
    finally:
        broker.close()


@pytest.fixture
def fleets(tmp_path: Path, task_name: str) -> Iterator[list[Fleet]]:
    made: list[Fleet] = []
    yield made
    for fleet in made:
        fleet.close()


def make(fleets: list[Fleet], broker: str, queue: str, db: str, entries: int) -> Fleet:
    fleet = Fleet(broker, queue, db, entries)
    fleets.append(fleet)
    return fleet


def test_every_tick_runs_once(fleets: list[Fleet], tmp_path: Path, task_name: str) -> None:
    # SQLite for the leases and the guard (replicas and worker share a host), as in
    # test_celery_beat; the claim is proven on every backend by tests/contract/test_deliveries.py
    fleet = make(fleets, broker_url("rabbitmq"), task_name, url_for("sqlite", tmp_path), 4)
    for _ in range(3):
        fleet.replica()
    fleet.worker()
    start = fleet.all_up()
    wait_for(lambda: time.time() > start + 6, 20, "6 s of ticks")
    end = time.time()
    fleet.stop_replicas()
    fleet.drained()
    rows = fleet.rows()
    twice = {key: n for key, n in Counter(key for _, key, _, _, _ in rows).items() if n > 1}
    assert not twice, f"bodies run more than once: {twice}"
    by_entry: dict[str, set[int]] = {name: set() for name in fleet.names()}
    for task, key, message_id, slot, _ in rows:
        name = key.rsplit("@", 1)[0]
        by_entry[name].add(slot)
        assert task == f"tick-{name.rsplit('.', 1)[1]}"
        assert message_id == task_id_of(key)
    assert fleet.succeeded() == fleet.keys()
    assert_window_ran(fleet, by_entry, start, end - 1)


@pytest.mark.parametrize("guard", ["on", "off"])
def test_a_message_sent_twice_runs_once(
    guard: str, fleets: list[Fleet], tmp_path: Path, task_name: str
) -> None:
    """A tick sent twice (a recovery's resend after the first send reached the broker):
    the guard runs its body once; without it (the negative control), twice."""
    from cronlease._send.dramatiq_send import DramatiqSender
    from tests.support.dramatiq_app import make_broker

    url = broker_url("redis")
    fleet = make(fleets, url, task_name, url_for("sqlite", tmp_path), 0)
    worker = fleet.worker(CRONLEASE_TEST_GUARD="1" if guard == "on" else "0")
    fleet.all_up()
    broker = make_broker(url, fleet.queue)
    sender = DramatiqSender(broker, "tick", fleet.queue, (7,))
    key = f"{fleet.queue}.x@{int(time.time()) * 1000}"
    message = Message(key, task_id_of(key), datetime.now(timezone.utc), attempt=1)
    sender.send(message)
    sender.send(Message(key, task_id_of(key), message.scheduled_for, attempt=2))
    broker.close()
    if guard == "on":
        wait_for(lambda: "delivered before" in worker.stderr(), 15, worker.stderr)
        # the duplicate is refused on one worker thread while the first may still be
        # running on another: its ledger row comes when that body ends
        rows = wait_for(fleet.rows, 15, worker.stderr)
        assert [row[2] for row in rows] == [task_id_of(key)]
    else:
        rows = wait_for(lambda: len(fleet.rows()) == 2 and fleet.rows(), 15, worker.stderr)
        assert {row[2] for row in rows} == {task_id_of(key)}


def test_a_retry_runs_a_duplicate_does_not(tmp_path: Path, task_name: str) -> None:
    """In one process, Dramatiq's own Worker on its StubBroker: a message enqueued twice
    runs once; a run that failed is retried by Dramatiq's Retries, and the retry runs
    (it is claimed apart), once."""
    from dramatiq import Worker
    from dramatiq.brokers.stub import StubBroker

    from cronlease.contrib.dramatiq import OnceMiddleware

    db = url_for("sqlite", tmp_path)
    broker = StubBroker()
    broker.add_middleware(OnceMiddleware(db, every_actor=True))
    runs: list[str] = []

    @dramatiq.actor(broker=broker, actor_name=f"{task_name}.flaky", max_retries=3, min_backoff=10)
    def flaky(n: int) -> None:
        runs.append(f"flaky-{n}")
        if runs.count(f"flaky-{n}") == 1:
            raise RuntimeError("the first run fails")

    first = flaky.message(1)
    broker.enqueue(first)
    broker.enqueue(first)  # the same message id again
    worker = Worker(broker, worker_timeout=50)
    worker.start()
    try:
        broker.join(flaky.queue_name, fail_fast=False, timeout=15_000)
        worker.join()
    finally:
        worker.stop()
        broker.close()
    assert runs == ["flaky-1", "flaky-1"]  # the first run, and its retry; not the duplicate


@pytest.mark.parametrize("url", ["amqp://guest:guest@127.0.0.1:1/%2F", "redis://127.0.0.1:1/0"])
def test_a_broker_that_refuses_connections_is_an_outage(url: str) -> None:
    """The errors a real client raises for a broker nobody listens for (Dramatiq wraps
    pika's) are outages: one log line per outage, not a refusal per task."""
    from cronlease._send.dramatiq_send import DramatiqSender
    from tests.support.dramatiq_app import make_broker

    sender = DramatiqSender(make_broker(url, "nowhere"), "tick", "nowhere")
    key = "nowhere.x@1000"
    with pytest.raises(Exception) as raised:
        sender.send(Message(key, task_id_of(key), datetime.now(timezone.utc), attempt=1))
    assert sender.unreachable(raised.value), raised.value
