"""The rules of the ping, Sentry and OTel integrations that need no server: URLs, slugs, config."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from cronlease import RunFinished, RunStarted
from cronlease._run.pings import ping_of
from cronlease._task import Task
from cronlease.config import load_config
from cronlease.errors import ConfigError, ConfigFileError
from cronlease.sentry import MAX_SLUG_LENGTH, monitor_config, monitor_slug

URL = "https://hc.example/ping/6f1c"


def finished(outcome: str, error: str | None = None, attempt: int = 1) -> RunFinished:
    return RunFinished(
        task="ns:job", slot=7, fence=3, manual=False, outcome=outcome,  # type: ignore[arg-type]
        duration=0.1, error=error, attempt=attempt,
    )  # fmt: skip


def test_a_run_pings_start_then_success_with_one_run_id() -> None:
    start = ping_of(RunStarted(task="ns:job", slot=7, fence=3, manual=False), URL)
    end = ping_of(finished("succeeded"), URL)
    assert start is not None and end is not None
    assert start.url.startswith(f"{URL}/start?rid=") and start.body == b""
    assert end.url == f"{URL}?rid={start.url.partition('rid=')[2]}" and end.body == b""
    # another attempt of the slot is another run
    retry = ping_of(finished("succeeded", attempt=2), URL)
    assert retry is not None and retry.url != end.url


def test_a_failed_run_pings_fail_with_the_error_summary_not_the_traceback() -> None:
    error = (
        "Traceback (most recent call last):\n"
        '  File "/app/jobs.py", line 3, in job\n'
        "    raise ValueError('disk full')\n"
        "ValueError: disk full"
    )
    ping = ping_of(finished("failed", error), URL)
    assert ping is not None and ping.url.startswith(f"{URL}/fail?rid=")
    assert ping.body == b"failed: ValueError: disk full"
    timed_out = ping_of(finished("timed_out"), URL)
    assert timed_out is not None and timed_out.body == b"timed_out"


@pytest.mark.parametrize(
    ("url", "kept"),
    [(URL, URL), (URL + "/", URL), ("http://127.0.0.1:8000/p", "http://127.0.0.1:8000/p")],
)
def test_ping_url_is_an_http_url(url: str, kept: str) -> None:
    assert Task.declare(lambda: None, every="1m", name="job", ping_url=url).ping_url == kept


@pytest.mark.parametrize(
    "url", ["hc-ping.com/abc", "ftp://hc.example/x", "https://", "https://h/x?a=1", 42]
)
def test_a_bad_ping_url_is_one_line_naming_task_and_key(url: object) -> None:
    with pytest.raises(ConfigError) as raised:
        Task.declare(lambda: None, every="1m", name="job", ping_url=url)
    message = str(raised.value)
    assert message.startswith("task 'job', key 'ping_url': must be ")
    assert "\n" not in message


def test_a_bad_ping_url_error_and_a_tasks_repr_leave_the_secret_path_out() -> None:
    with pytest.raises(ConfigError) as raised:
        Task.declare(lambda: None, every="1m", name="job", ping_url="ftp://hc/secret-uuid")
    assert "secret-uuid" not in str(raised.value) and "ftp://hc/..." in str(raised.value)
    task = Task.declare(lambda: None, every="1m", name="job", ping_url="https://hc/secret-uuid")
    assert "secret-uuid" not in repr(task)


def test_toml_ping_url_reaches_the_spec_and_a_bad_one_names_file_task_key(tmp_path: Path) -> None:
    path = tmp_path / "cronlease.toml"
    body = '[tasks.sync]\ncall = "os:getcwd"\nevery = "1m"\nping_url = "{}"\n'
    path.write_text(body.format(URL + "/"), encoding="utf-8")
    assert load_config(path, import_calls=False).tasks["sync"].ping_url == URL
    path.write_text(body.format("mailto:ops@example.com"), encoding="utf-8")
    with pytest.raises(ConfigFileError) as raised:
        load_config(path, import_calls=False)
    error = raised.value
    assert (error.task, error.key, error.line) == ("sync", "ping_url", 4)
    assert str(path) in str(error)


def test_monitor_slugs_keep_the_task_name_and_stay_distinct() -> None:
    assert monitor_slug("nightly-report") == "nightly-report"
    spaced, namespaced = monitor_slug("billing report"), monitor_slug("billing:report")
    assert spaced.startswith("billing-report-") and namespaced.startswith("billing-report-")
    assert spaced != namespaced
    long = monitor_slug("x" * 200)
    assert len(long) <= MAX_SLUG_LENGTH and long.startswith("xxxx")
    assert monitor_slug("Café") != monitor_slug("cafe") and monitor_slug("Café").startswith("cafe")


def test_monitor_config_from_the_task_schedule_grace_and_timeout() -> None:
    cron = Task.declare(
        lambda: None, cron="30 3 * * 1-5", timezone="Europe/Istanbul", name="c",
        grace="90s", timeout="10m",
    )  # fmt: skip
    assert monitor_config(cron) == {
        "schedule": {"type": "crontab", "value": "30 3 * * 1-5"},
        "timezone": "Europe/Istanbul",
        "checkin_margin": 2,
        "max_runtime": 10,
    }
    hourly = Task.declare(lambda: None, every=timedelta(hours=2), name="h")
    config = monitor_config(hourly)
    assert config["schedule"] == {"type": "interval", "value": 2, "unit": "hour"}
    assert config["checkin_margin"] == 1 and "max_runtime" not in config
    odd = Task.declare(lambda: None, every="90s", name="o", timeout="5s")
    config = monitor_config(odd)
    assert config["schedule"] == {"type": "interval", "value": 2, "unit": "minute"}
    assert config["max_runtime"] == 1
