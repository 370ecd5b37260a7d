"""Dramatiq's and RQ's senders: what one tick becomes (ids, options, the scheduled time),
the options they refuse, which errors are outages, and the guards' shared parts. No
broker is reached: brokers and queues connect lazily (tests/processes/ test the sends)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from cronlease._send.deliveries import DATABASE_ENV, deliveries, delivery_id
from cronlease._send.sending import Message, task_id_of
from cronlease.config import DATABASE_ENV as CONFIG_DATABASE_ENV
from cronlease.errors import ConfigError

KEY = "reports.daily@1764790000000"
TICK = Message(KEY, task_id_of(KEY), datetime(2025, 12, 3, 19, 26, 40, tzinfo=timezone.utc), 2)


def test_the_guards_read_the_replicas_database_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert DATABASE_ENV == CONFIG_DATABASE_ENV
    monkeypatch.setenv(DATABASE_ENV, "sqlite:///env.db")
    assert deliveries.url("sqlite:///given.db", "G", "g=") == "sqlite:///given.db"
    assert deliveries.url(None, "G", "g=") == "sqlite:///env.db"
    monkeypatch.delenv(DATABASE_ENV)
    with pytest.raises(
        ConfigError, match=f"G needs the cronlease database: set g= or {DATABASE_ENV}"
    ):
        deliveries.url(None, "G", "g=")


def test_a_retry_is_claimed_apart() -> None:
    assert delivery_id("abc") == "abc"
    assert delivery_id("abc", 0) == "abc"
    assert delivery_id("abc", 2) == "abc/retry 2"
    assert delivery_id("abc", "left 1") == "abc/retry left 1"


# --- Dramatiq ----------------------------------------------------------------------------

dramatiq = pytest.importorskip("dramatiq")
from dramatiq.brokers.rabbitmq import RabbitmqBroker  # noqa: E402
from dramatiq.brokers.redis import RedisBroker  # noqa: E402

from cronlease._send.dramatiq_send import DramatiqSender, _confirming  # noqa: E402
from cronlease._send.sending import SendTask  # noqa: E402
from cronlease.contrib.dramatiq import dramatiq_sender  # noqa: E402


def test_a_dramatiq_tick_is_a_message_of_the_ticks_id() -> None:
    broker = RedisBroker(url="redis://:secret@redis.example:6380/3", namespace="n")
    sender = DramatiqSender(
        broker, "report", "reports", (1, "a"), {"b": 2}, {"max_retries": 3, "delay": 1500}
    )
    made = sender.message(TICK)
    assert made.message_id == task_id_of(KEY)
    assert (made.queue_name, made.actor_name, made.args, made.kwargs) == (
        "reports",
        "report",
        (1, "a"),
        {"b": 2},
    )
    assert made.options == {
        "max_retries": 3,
        "cronlease_key": KEY,
        "cronlease_scheduled_for": "2025-12-03T19:26:40.000Z",
    }
    assert sender.delay == 1500
    assert sender.broker == "redis://redis.example:6380/3"  # no password
    assert sender.target == "report (Dramatiq)"


def test_dramatiq_sender_takes_an_actor_or_a_name() -> None:
    from dramatiq.brokers.stub import StubBroker

    broker = StubBroker()
    actor = dramatiq.actor(lambda: None, actor_name="act", queue_name="q1", broker=broker)
    body = dramatiq_sender(actor, delay=timedelta(seconds=2))
    assert isinstance(body, SendTask) and body.name == "act"
    sender = body.sender
    assert isinstance(sender, DramatiqSender)
    assert (sender.queue_name, sender.delay) == ("q1", 2000)
    by_name = dramatiq_sender("act", broker=broker, name="mine", queue_name="q2").sender
    assert isinstance(by_name, DramatiqSender) and by_name.queue_name == "q2"
    with pytest.raises(ConfigError, match="needs broker="):
        dramatiq_sender("act")
    with pytest.raises(ConfigError, match=r"a dramatiq\.Actor or an actor's name"):
        dramatiq_sender(42)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"message_id": "x"}, "'message_id' is cronlease's to set"),
        ({"cronlease_key": "x"}, "'cronlease_key' is cronlease's to set"),
        ({"priority": 1}, "'broker_priority'"),
        ({"delay": -1}, "delay must be whole milliseconds"),
        ({"delay": 1.5}, "delay must be whole milliseconds"),
    ],
)
def test_dramatiq_options_refused(options: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        DramatiqSender(RedisBroker(), "a", "q", (), None, options)


def test_rabbitmq_sends_with_publisher_confirms() -> None:
    plain = RabbitmqBroker(url="amqp://guest:pw@rabbit.example:5673/vh", max_priority=5)
    twin = _confirming(plain)
    assert twin is not plain and twin.confirm_delivery
    assert twin.parameters is plain.parameters and twin.max_priority == 5
    assert _confirming(plain) is twin  # one per broker: its connections are reused
    confirming = RabbitmqBroker(url="amqp://rabbit.example", confirm_delivery=True)
    assert _confirming(confirming) is confirming
    assert DramatiqSender(plain, "a", "q").broker == "amqp://rabbit.example:5673/vh"


def test_dramatiq_outages_are_told_from_refusals() -> None:
    import pika.exceptions
    import redis.exceptions
    from dramatiq.errors import ConnectionClosed

    sender = DramatiqSender(RedisBroker(), "a", "q")
    assert sender.unreachable(ConnectionClosed(pika.exceptions.AMQPConnectionError("refused")))
    assert sender.unreachable(redis.exceptions.ConnectionError("refused"))
    assert sender.unreachable(ConnectionRefusedError())
    assert not sender.unreachable(ConnectionClosed(pika.exceptions.NackError([])))
    assert not sender.unreachable(ConnectionClosed(pika.exceptions.UnroutableError([])))
    assert not sender.unreachable(ValueError("bad"))


# --- RQ -----------------------------------------------------------------------------------

rq = pytest.importorskip("rq")
from redis import Redis  # noqa: E402

from cronlease._send.rq_send import RqSender  # noqa: E402
from cronlease.contrib.rq import _retry_of, once, rq_sender  # noqa: E402


def a_queue() -> object:
    return rq.Queue("reports", connection=Redis(host="redis.example", port=6390, db=2))


def job_body(n: int) -> int:
    return n + 1


def test_an_rq_tick_is_named_and_placed() -> None:
    body = rq_sender(a_queue(), job_body, (1,), timeout=30, meta={"team": "x"})
    assert body.name == f"{__name__}.job_body"
    sender = body.sender
    assert isinstance(sender, RqSender)
    assert sender.target == f"{__name__}.job_body (RQ)"
    assert sender.broker == "redis://redis.example:6390/2 (queue reports)"
    assert sender.options == {"timeout": 30} and sender.meta == {"team": "x"}
    assert rq_sender(a_queue(), "proj.jobs.report").name == "proj.jobs.report"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"job_id": "x"}, "'job_id': cronlease's to set"),
        ({"unique": False}, "'unique': cronlease's to set"),
        ({"depends_on": "x"}, "'depends_on': not supported"),
        ({"repeat": object()}, "'repeat': not supported"),
        ({"queue_name": "x"}, "'queue_name' is not an option of RQ's enqueue_call"),
        ({"meta": ["x"]}, "'meta' must be a dict"),
    ],
)
def test_rq_options_refused(options: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        rq_sender(a_queue(), "proj.jobs.report", **options)


def test_rq_outages() -> None:
    import redis.exceptions

    sender = RqSender(a_queue(), "p.f")
    assert sender.unreachable(redis.exceptions.ConnectionError("refused"))
    assert sender.unreachable(redis.exceptions.TimeoutError("slow"))
    assert not sender.unreachable(redis.exceptions.ResponseError("WRONGTYPE"))


def test_once_outside_a_job_is_the_function() -> None:
    assert once(job_body)(1) == 2
    assert once(database_url="sqlite://")(job_body)(2) == 3
    assert once(job_body).__name__ == "job_body"


def test_rq_retries_are_told_apart() -> None:
    job = rq.job.Job.create("p.f", connection=Redis())
    assert _retry_of(job) is None
    job.retries_left = 3
    assert _retry_of(job) == "left 3"
    job.retries_left, job.number_of_retries = None, 2
    assert _retry_of(job) == "done 2"
