"""RQ jobs enqueued by every replica, against real parts: replicas declaring
:func:`~cronlease.contrib.rq.rq_sender` tasks (tests/support/queue_replica.py), a real
``rq worker`` (forking a work horse per job, as by default) and Redis, nothing mocked
between them. The jobs (tests/support/rq_jobs.py) append to the side-effect ledger, so a
body run twice is two rows, and a tick never run is a gap.

Each test has a queue of its own (tasks named after it); every Redis key naming the
queue or one of the test's job ids is deleted at the end.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REQUIRED, skip_or_fail, url_for

if "rq" in REQUIRED:  # CI: a missing RQ is a failure, not a skip
    import rq  # noqa: F401
pytest.importorskip("rq")

from redis import Redis
from rq import Queue

from cronlease._send.rq_send import RqSender
from cronlease._send.sending import Message, task_id_of
from cronlease.config import DATABASE_ENV
from tests.support import ledger
from tests.support.beats import QueueFleet, assert_window_ran
from tests.support.procs import Proc, wait_for

pytestmark = pytest.mark.slow

REDIS = os.environ.get("CRONLEASE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def redis_url() -> str:
    """Redis's URL; skips the test if it does not answer (fails it when
    CRONLEASE_TEST_REQUIRE names ``rq`` or ``redis``: CI must not skip)."""
    problem = None
    try:
        Redis.from_url(REDIS, socket_connect_timeout=3).ping()
    except Exception as exc:
        problem = f"redis at {REDIS} is unreachable: {type(exc).__name__}: {exc}"
    skip_or_fail("rq" if "rq" in REQUIRED else "redis", problem)
    return REDIS


class Fleet(QueueFleet):
    """tests/support/queue_replica.py replicas enqueueing RQ jobs, and `rq worker`s."""

    def __init__(self, queue: str, db: str, entries: int) -> None:
        super().__init__(redis_url(), queue, db, entries)
        self.url = self.broker
        self.job_ids: set[str] = set()
        self.redis = Redis.from_url(self.url)

    def replica(self) -> Proc:
        proc = Proc("-m", "tests.support.queue_replica", "rq", env=self.env())
        self.replicas.append(proc)
        return proc

    def worker(self, name: str) -> Proc:
        proc = Proc(
            "-m",
            "rq.cli",
            "worker",
            "--url",
            self.url,
            "--name",
            f"{self.queue}-{name}",
            self.queue,
            env=self.env(),
        )
        self.workers.append(proc)
        return proc

    def replica_up(self, proc: Proc, timeout: float) -> None:
        proc.expect("started", timeout)

    def worker_up(self, proc: Proc, timeout: float) -> None:
        # RQ logs to stdout
        wait_for(lambda: "Listening on" in " ".join(proc.drain()), timeout, proc.stderr)

    def close(self) -> None:
        for proc in self.replicas:
            proc.kill()
        for proc in self.workers:  # SIGTERM: a warm shutdown, the worker unregisters itself
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGTERM)
                try:  # idle, it stops at once; seen once in CI waiting 20 s for nothing
                    proc.popen.wait(timeout=5)
                except Exception:
                    proc.kill()
        self.store.dispose()
        ids = self.job_ids | {task_id_of(key) for key in self.succeeded()}
        ids |= {job_id for _, _, job_id, _, _ in self.rows()}
        for key in self.redis.scan_iter(match="rq:*", count=1000):
            text = key.decode()
            if self.queue in text or any(job_id in text for job_id in ids):
                self.redis.delete(key)
        self.redis.srem("rq:queues", f"rq:queue:{self.queue}")
        # a killed worker did not unregister itself
        for member in self.redis.smembers("rq:workers"):
            if self.queue in member.decode():
                self.redis.srem("rq:workers", member)
        self.redis.close()


@pytest.fixture
def fleets() -> Iterator[list[Fleet]]:
    made: list[Fleet] = []
    yield made
    for fleet in made:
        fleet.close()


def message(key: str, attempt: int = 1) -> Message:
    return Message(key, task_id_of(key), datetime.now(timezone.utc), attempt)


def test_every_tick_runs_once(fleets: list[Fleet], tmp_path: Path, task_name: str) -> None:
    # SQLite for the leases and the guard (replicas and worker share a host), as in
    # test_celery_beat; the claim is proven on every backend by tests/contract/test_deliveries.py
    fleet = Fleet(task_name, url_for("sqlite", tmp_path), 4)
    fleets.append(fleet)
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
    twice = {key: n for key, n in Counter(key for _, key, _, _, _ in rows).items() if n > 1}
    assert not twice, f"bodies run more than once: {twice}"
    by_entry: dict[str, set[int]] = {name: set() for name in fleet.names()}
    for task, key, job_id, slot, _ in rows:
        name = key.rsplit("@", 1)[0]
        by_entry[name].add(slot)
        assert task == f"tick-{name.rsplit('.', 1)[1]}"
        assert job_id == task_id_of(key)
    assert fleet.succeeded() == fleet.keys()
    assert_window_ran(fleet, by_entry, start, end - 1)


def test_a_resend_while_queued_is_one_job(
    fleets: list[Fleet], tmp_path: Path, task_name: str
) -> None:
    """A tick sent again while its job is in Redis (a recovery's resend after the first
    send reached Redis): RQ refuses the id atomically, the send counts as done, one job."""
    fleet = Fleet(task_name, url_for("sqlite", tmp_path), 0)
    fleets.append(fleet)
    queue = Queue(fleet.queue, connection=fleet.redis)
    sender = RqSender(queue, "tests.support.rq_jobs.tick", (1,), None, {"description": "d"})
    key = f"{fleet.queue}.x@{int(time.time()) * 1000}"
    fleet.job_ids.add(task_id_of(key))
    sender.send(message(key))
    sender.send(message(key, attempt=2))
    assert queue.get_job_ids() == [task_id_of(key)]
    job: Any = queue.fetch_job(task_id_of(key))
    assert job.meta["cronlease_key"] == key
    assert job.meta["cronlease_scheduled_for"].endswith("Z")
    assert job.description == "d"


@pytest.mark.parametrize("guard", ["on", "off"])
def test_a_job_enqueued_again_runs_once(
    guard: str, fleets: list[Fleet], tmp_path: Path, task_name: str
) -> None:
    """A tick enqueued again after its first job ran and expired (``result_ttl=0``: at
    once): the guard runs its body once; without it (the negative control), twice."""
    fleet = Fleet(task_name, url_for("sqlite", tmp_path), 0)
    fleets.append(fleet)
    worker = fleet.worker("a")
    fleet.all_up()
    func = "tests.support.rq_jobs.tick" if guard == "on" else "tests.support.rq_jobs.plain"
    sender = RqSender(
        Queue(fleet.queue, connection=fleet.redis), func, (1,), None, {"result_ttl": 0}
    )
    key = f"{fleet.queue}.x@{int(time.time()) * 1000}"
    job_key = f"rq:job:{task_id_of(key)}"
    fleet.job_ids.add(task_id_of(key))
    sender.send(message(key))
    wait_for(fleet.rows, 15, worker.stderr)
    wait_for(lambda: not fleet.redis.exists(job_key), 15, "the finished job deleted")
    sender.send(message(key, attempt=2))
    if guard == "on":
        wait_for(lambda: "delivered before" in worker.stderr(), 15, worker.stderr)
        assert [row[2] for row in fleet.rows()] == [task_id_of(key)]
    else:
        rows = wait_for(lambda: len(fleet.rows()) == 2 and fleet.rows(), 15, worker.stderr)
        assert {row[2] for row in rows} == {task_id_of(key)}


def test_a_retry_runs(
    fleets: list[Fleet], tmp_path: Path, task_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RQ's own SimpleWorker in this process: a job that fails once with ``Retry(max=2)``
    is retried by RQ under the same job id, and the retry runs (it is claimed apart)."""
    from rq import Retry, SimpleWorker

    fleet = Fleet(task_name, url_for("sqlite", tmp_path), 0)
    fleets.append(fleet)
    monkeypatch.setenv("CRONLEASE_TEST_FLAKY_LEDGER", fleet.db)
    monkeypatch.setenv(DATABASE_ENV, fleet.db)
    queue = Queue(fleet.queue, connection=fleet.redis)
    sender = RqSender(
        queue, "tests.support.rq_jobs.flaky", (fleet.queue,), None, {"retry": Retry(max=2)}
    )
    key = f"{fleet.queue}.x@{int(time.time()) * 1000}"
    fleet.job_ids.add(task_id_of(key))
    sender.send(message(key))

    class Worker(SimpleWorker):
        # RQ's command channel (a pubsub thread) is not what is tested, and its stop
        # could wait out the thread's 60 s read: RQ unsubscribes before it stops the
        # thread, and redis-py's stop() joins it; an unsubscribe reply that lands first
        # sends the thread back into its read (seen: this test took 60 s, now and then)
        def subscribe(self) -> None:
            pass

    worker = Worker([queue], connection=fleet.redis, name=f"{fleet.queue}-simple")
    # the worker installs its SIGINT/SIGTERM handlers in this process and leaves them
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        worker.work(burst=True, with_scheduler=False)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert [pid for _, _, pid in ledger.rows_like(fleet.db, f"flaky|{fleet.queue}")] == [
        os.getpid(),
        os.getpid(),
    ]


def test_a_redis_that_refuses_connections_is_an_outage() -> None:
    queue = Queue("nowhere", connection=Redis.from_url("redis://127.0.0.1:1/0"))
    sender = RqSender(queue, "tests.support.rq_jobs.tick")
    with pytest.raises(Exception) as raised:
        sender.send(message("nowhere.x@1000"))
    assert sender.unreachable(raised.value), raised.value
