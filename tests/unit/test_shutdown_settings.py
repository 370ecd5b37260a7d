"""The shutdown's time bound: one name, a default under orchestrators' 30 s, and a
deadline that a second signal ends."""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

import pytest

from cronlease import ConfigFileError, Scheduler
from cronlease._run.recording.recorder import Finisher
from cronlease._run.stopping import Deadline, seconds_text
from cronlease.cli.parser import build_parser
from cronlease.cli.run import resolve_grace
from cronlease.config import load_config
from tests.support.procs import wait_for


def test_the_default_grace_is_under_thirty_seconds(tmp_path: Path) -> None:
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'db'}")
    assert scheduler.shutdown_grace == 25.0 < 30


def test_shutdown_timeout_is_the_deprecated_name_of_shutdown_grace(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match="shutdown_grace"):
        scheduler = Scheduler(f"sqlite:///{tmp_path / 'db'}", shutdown_timeout=7)
    assert scheduler.shutdown_grace == 7.0 == scheduler.shutdown_timeout


def config_with(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "cronlease.toml"
    path.write_text(f'{table}\n[tasks.a]\ncommand = "true"\nevery = 5\n')
    return path


def test_the_grace_comes_from_the_flag_then_the_config_then_the_default(
    tmp_path: Path,
) -> None:
    parser = build_parser()
    configured = load_config(config_with(tmp_path, '[scheduler]\nshutdown_grace = "12s"'))
    assert configured.shutdown_grace == 12.0
    assert resolve_grace(parser.parse_args(["run"]), configured) == 12.0
    assert resolve_grace(parser.parse_args(["run", "--grace", "4"]), configured) == 4.0
    plain = load_config(config_with(tmp_path, ""))
    assert resolve_grace(parser.parse_args(["run"]), plain) == 25.0
    # the deprecated flag still works (it logs a warning)
    assert resolve_grace(parser.parse_args(["run", "--shutdown-grace", "3"]), plain) == 3.0


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[scheduler]\nshutdown_grase = "5s"', "did you mean 'shutdown_grace'"),
        ('[scheduler]\nshutdown_grace = "soon"', "shutdown_grace"),
        ("[scheduler]\nshutdown_grace = true", "must be a duration"),
        ('scheduler = "fast"', "must be a table"),
    ],
)
def test_bad_scheduler_settings_get_a_clear_error(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigFileError, match=message):
        load_config(config_with(tmp_path, table))


def test_a_hurried_deadline_ends_the_wait_in_progress() -> None:
    hurry = False
    deadline = Deadline(600.0, hurried=lambda: hurry)
    calls = 0

    def never_done(seconds: float) -> bool:
        nonlocal calls, hurry
        calls += 1
        if calls == 3:
            hurry = True  # as a second signal would, during the wait
        time.sleep(seconds)
        return False

    assert deadline.wait(never_done, "something that never ends") is False
    assert calls == 3 and deadline.remaining() == 0.0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.000156, "0.16 ms"),
        (0.0659, "66 ms"),
        (0.9999, "1 s"),
        (3.523, "3.52 s"),
        (20.0, "20 s"),
        (24.604, "24.6 s"),
        (125.4, "125 s"),
    ],
)
def test_shutdown_durations_read_to_three_digits(seconds: float, text: str) -> None:
    assert seconds_text(seconds) == text


def test_a_wait_says_what_it_waited_for_in_words_and_a_short_one_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    deadline = Deadline(5.0)
    caplog.set_level(logging.INFO, logger="cronlease")
    quick = threading.Thread(target=lambda: None)
    quick.start()
    assert deadline.join(quick, "the last outcomes to be written")
    assert caplog.messages == []  # over at once: not worth two INFO lines

    release = threading.Event()

    class ReleaseWhenSaid(logging.Handler):  # the thread ends once the wait has said so
        def emit(self, record: logging.LogRecord) -> None:
            if "waiting up to" in record.getMessage():
                release.set()

    slow = threading.Thread(target=lambda: release.wait(5))
    slow.start()
    said = ReleaseWhenSaid()
    logging.getLogger("cronlease").addHandler(said)
    try:
        assert deadline.join(slow, "the last outcomes to be written")
    finally:
        logging.getLogger("cronlease").removeHandler(said)
    waiting, waited = caplog.messages
    what = "for the last outcomes to be written"
    assert re.fullmatch(rf"shutdown: waiting up to (5|4\.\d+) s {what}", waiting), waiting
    # three digits at most (before: "done after 0.000156 s")
    assert re.fullmatch(rf"shutdown: waited (\d{{3}} ms|\d\.\d\d s) {what}", waited), waited


def test_a_finisher_with_nothing_left_to_write_gives_a_shutdown_nothing_to_wait_for() -> None:
    """Before, a stop after the last write still joined the finisher thread, and a
    hurried or spent deadline warned it gave up waiting for "the last outcomes"."""
    recorded: list[list[int]] = []
    finisher: Finisher[int] = Finisher(recorded.append)
    finisher.started()
    finisher.ended(1)
    wait_for(lambda: recorded == [[1]], 5, "the run to be recorded")
    # the write returned: once the finisher says it is done writing, nothing to join
    wait_for(lambda: finisher.stop() is None, 5, "the finisher to have nothing to write")
    finisher.started()
    finisher.ended(2)  # a run that ends later starts it again, and is recorded
    finisher.close()
    assert recorded == [[1], [2]]
