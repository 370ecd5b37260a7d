"""Task declarations and the monotonic-clock liveness a run relies on."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from cronlease._task import Liveness, RunContext, Task
from cronlease._timing.schedule import MAX_TTL, Schedule
from cronlease.errors import ConfigError

WaitFor = Callable[..., Any]
FIRE = datetime(2026, 1, 1, tzinfo=timezone.utc)


def job() -> None:
    pass


# --- Task.declare -----------------------------------------------------------------


def test_declare_every() -> None:
    task = Task.declare(job, every="5m")
    assert task.name == task.full_name == "job"
    assert task.schedule == Schedule.every(300)
    assert task.ttl(FIRE) == MAX_TTL
    assert task.grace_for(FIRE) == 60.0
    assert task.wants_context is False
    assert task.is_async is False


def test_declare_cron_with_timezone_and_name() -> None:
    task = Task.declare(job, cron="0 3 * * *", timezone="Europe/Istanbul", name="nightly-report")
    assert task.full_name == "nightly-report"
    assert task.schedule.kind == "cron"
    assert task.schedule.timezone == "Europe/Istanbul"


def test_neither_every_nor_cron() -> None:
    with pytest.raises(ConfigError, match=r"task 'job': no schedule: give 'every'"):
        Task.declare(job)


def test_both_every_and_cron() -> None:
    with pytest.raises(ConfigError, match="key 'cron': give either 'every' or 'cron', not both"):
        Task.declare(job, every="5m", cron="* * * * *")


def test_timezone_with_every_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"task 'job', key 'timezone': applies to cron"):
        Task.declare(job, every="5m", timezone="Europe/Berlin")


def test_anchor_with_cron_is_rejected() -> None:
    with pytest.raises(ConfigError, match="key 'anchor': applies to every schedules only"):
        Task.declare(job, cron="* * * * *", anchor=FIRE)


def test_invalid_schedule_names_the_task() -> None:
    with pytest.raises(ConfigError, match=r"task 'sync', key 'every': every 'soon'"):
        Task.declare(job, every="soon", name="sync")
    with pytest.raises(ConfigError, match=r"task 'job', key 'cron': cron expression"):
        Task.declare(job, cron="61 * * * *")


@pytest.mark.parametrize("lease_ttl", [0, -5, 0.5, "abc", "2d", 86_401, True])
def test_bad_lease_ttl(lease_ttl: object) -> None:
    with pytest.raises(ConfigError, match="lease_ttl"):
        Task.declare(job, every="1m", lease_ttl=lease_ttl)


def test_lease_ttl_overrides_the_schedule() -> None:
    task = Task.declare(job, every="1h", lease_ttl="20m")
    assert task.lease_ttl == 1200.0
    assert task.ttl(FIRE) == 1200.0
    assert Task.declare(job, every="1h", lease_ttl=1).ttl(FIRE) == 1.0


@pytest.mark.parametrize("grace", [0, -1, "nope", "2d"])
def test_bad_grace(grace: object) -> None:
    with pytest.raises(ConfigError, match="grace"):
        Task.declare(job, every="1m", grace=grace)


def test_grace_overrides_the_schedule() -> None:
    assert Task.declare(job, every="1h", grace="5m").grace_for(FIRE) == 300.0


def test_namespace_prefixes_the_full_name() -> None:
    task = Task.declare(job, every="1m", namespace="billing")
    assert task.name == "job"
    assert task.full_name == "billing:job"
    assert Task.declare(job, every="1m", namespace=None).full_name == "job"


@pytest.mark.parametrize("namespace", [" billing", "bill\ning"])
def test_invalid_namespace(namespace: str) -> None:
    with pytest.raises(ConfigError):
        Task.declare(job, every="1m", namespace=namespace)


def test_full_name_length_includes_the_namespace() -> None:
    Task.declare(job, every="1m", name="n" * 250, namespace="ns")  # 253 characters
    with pytest.raises(ConfigError, match="at most 255"):
        Task.declare(job, every="1m", name="n" * 250, namespace="namespace")


@pytest.mark.parametrize("name", ["", "x" * 256, "trailing ", "ctrl\x01"])
def test_invalid_task_name(name: str) -> None:
    with pytest.raises(ConfigError):
        Task.declare(job, every="1m", name=name)


def test_func_must_be_callable() -> None:
    with pytest.raises(ConfigError, match="not callable"):
        Task.declare("job", every="1m", name="job")  # type: ignore[arg-type]


def test_name_defaults_to_the_function_name() -> None:
    assert Task.declare(without_ctx, every="1m").name == "without_ctx"
    assert Task.declare(CommandLike(), every="1m").name == "command-like"


def test_a_callable_without_a_name_needs_name() -> None:
    # Its repr() holds a memory address: each replica would name the task differently.
    for func in (functools.partial(defaulted, x=2), CallableWithCtx()):
        with pytest.raises(ConfigError, match="pass name="):
            Task.declare(func, every="1m")
        assert Task.declare(func, every="1m", name="named").full_name == "named"


def two_and_a(x: int, y: int, a: int = 0) -> None:
    pass


def test_args_and_kwargs_are_kept() -> None:
    task = Task.declare(two_and_a, every="1m", args=[1, 2], kwargs={"a": 3})
    assert task.args == (1, 2)
    assert task.kwargs == {"a": 3}


# --- wants_context / is_async ---------------------------------------------------------


def with_ctx(ctx: RunContext) -> None:
    pass


def without_ctx() -> None:
    pass


async def async_with_ctx(ctx: RunContext) -> None:
    pass


async def async_without_ctx() -> None:
    pass


def defaulted(x: int = 1) -> None:
    pass


def star_args(*args: Any) -> None:
    pass


def keyword_only(*, ctx: RunContext) -> None:
    pass


def positional_only(ctx: RunContext, /) -> None:
    pass


class CallableWithCtx:
    def __call__(self, ctx: RunContext) -> None:
        pass


class CommandLike:
    __name__ = "command-like"

    def __call__(self) -> None:
        pass


class AsyncCallable:
    async def __call__(self) -> None:
        pass


@pytest.mark.parametrize(
    ("func", "wants_context", "is_async"),
    [
        (with_ctx, True, False),
        (without_ctx, False, False),
        (async_with_ctx, True, True),
        (async_without_ctx, False, True),
        (defaulted, False, False),
        (star_args, False, False),
        (keyword_only, True, False),
        (positional_only, True, False),
        (lambda ctx: None, True, False),
        (CallableWithCtx(), True, False),
        (AsyncCallable(), False, True),
        (functools.partial(defaulted, x=2), False, False),
    ],
    ids=lambda value: getattr(value, "__name__", type(value).__name__),
)
def test_wants_context_and_is_async(
    func: Callable[..., Any], wants_context: bool, is_async: bool
) -> None:
    task = Task.declare(func, every="1m", name="t")
    assert task.wants_context is wants_context
    assert task.is_async is is_async


# --- Liveness -----------------------------------------------------------------------


def test_liveness_is_not_lost_within_its_ttl() -> None:
    liveness = Liveness(ttl=60.0, sent_at=time.monotonic())
    assert liveness.lost is False


def test_liveness_is_lost_once_the_ttl_passed_since_sending() -> None:
    # The TTL runs from when the statement was sent, not from when it answered.
    liveness = Liveness(ttl=10.0, sent_at=time.monotonic() - 10.5)
    assert liveness.lost is True


def test_liveness_is_lost_after_ttl_without_renewals(wait_for: WaitFor) -> None:
    ttl = 0.2
    sent_at = time.monotonic()
    liveness = Liveness(ttl=ttl, sent_at=sent_at)
    assert liveness.lost is False
    wait_for(lambda: liveness.lost, timeout=5.0)
    elapsed = time.monotonic() - sent_at
    assert elapsed >= ttl
    assert elapsed < ttl + 2.0


def test_renewal_extends_liveness(wait_for: WaitFor) -> None:
    ttl = 0.3
    sent_at = time.monotonic()
    liveness = Liveness(ttl=ttl, sent_at=sent_at)
    wait_for(lambda: time.monotonic() >= sent_at + 0.15, timeout=5.0)
    renewed_at = time.monotonic()
    liveness.renewed(renewed_at)
    # Past the first deadline the run is still live: the renewal counts from its own send.
    wait_for(lambda: time.monotonic() >= sent_at + ttl + 0.02, timeout=5.0)
    assert liveness.lost is False
    wait_for(lambda: liveness.lost, timeout=5.0)
    assert time.monotonic() >= renewed_at + ttl


def test_an_older_renewal_does_not_shorten_liveness() -> None:
    now = time.monotonic()
    liveness = Liveness(ttl=10.0, sent_at=now)
    liveness.renewed(now - 9.5)  # a renewal sent before the acquisition answered
    assert liveness.lost is False


def test_mark_lost_is_sticky() -> None:
    liveness = Liveness(ttl=60.0, sent_at=time.monotonic())
    liveness.mark_lost()
    assert liveness.lost is True
    liveness.renewed(time.monotonic() + 1000)
    assert liveness.lost is True


def test_lost_by_expiry_is_sticky() -> None:
    liveness = Liveness(ttl=1.0, sent_at=time.monotonic() - 5.0)
    assert liveness.lost is True
    liveness.renewed(time.monotonic())
    assert liveness.lost is True


def test_run_context_reports_liveness() -> None:
    liveness = Liveness(ttl=60.0, sent_at=time.monotonic())
    ctx = RunContext(
        name="job",
        slot=1_767_225_600_000,
        fence=3,
        scheduled_for=FIRE,
        manual=False,
        liveness=liveness,
    )
    assert (ctx.name, ctx.slot, ctx.fence, ctx.manual) == ("job", 1_767_225_600_000, 3, False)
    assert ctx.lost is False
    assert "fence=3" in repr(ctx)
    liveness.mark_lost()
    assert ctx.lost is True
    assert "lost=True" in repr(ctx)
