"""Hostile text through the real command: escapes shown escaped, passwords never shown
(issue 11, item 13).

An error text or a command's stderr is foreign text: ``\\e]0;title\\a`` retitled
the terminal that ran ``cronlease history`` and ``\\e[2J`` cleared it, because
the commands, and the log lines of a command's output, printed them raw. And
the password scrubber replaced only the decoded database password, and only
one of at least 4 characters: an error text holding the URL with the
password URL-encoded (``s3cr%40t%21x``), or a short one, was shown as it was.

Each test runs ``cronlease`` as a process and reads all it wrote; the stored
text is checked to be unchanged (the rule is for surfaces only).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from cronlease import LeaseStore, Scheduler
from tests.conftest import url_for
from tests.support.cli_forks import CliServer
from tests.support.procs import ROOT

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\u202eevil\x9b"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\u202eevil\\x9b"
RAW = ("\x1b", "\x07", "\u202e", "\x9b")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONLEASE_")}
    return {**env, "PYTHONPATH": str(ROOT)}  # this tree's cronlease


#: each command a fork of one interpreter that imported the CLI, not an interpreter start
SERVER = CliServer(ROOT, _env())


@pytest.fixture(autouse=True, scope="module")
def _cli_server() -> Iterator[None]:
    yield
    SERVER.close()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return SERVER.run(list(args), cwd, _env())


def assert_nothing_raw(output: str) -> None:
    found = [char for char in RAW if char in output]
    assert not found, f"raw control characters {found!r} reached the terminal:\n{output!r}"


def failing_run(url: str, task_name: str, message: str) -> None:
    """Record one failed run of ``task_name`` whose error text holds ``message``."""
    scheduler = Scheduler(url)

    def fails() -> None:
        raise RuntimeError(message)

    task = scheduler.add_task(fails, every="1h", name=task_name)
    try:
        assert scheduler.runner.run_now(task) == "failed"
    finally:
        scheduler.runner.close()
        scheduler.store.dispose()


@pytest.mark.slow
def test_history_and_status_show_terminal_escapes_escaped(tmp_path: Path, task_name: str) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    failing_run(url, task_name, f"it broke {ESCAPES} badly")

    history = cli("history", task_name, "--database", url, cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert_nothing_raw(history.stdout + history.stderr)
    assert SHOWN in history.stdout

    status = cli("status", "--database", url, cwd=tmp_path)
    assert_nothing_raw(status.stdout + status.stderr)
    assert task_name in status.stdout

    store = LeaseStore.from_url(url)
    try:
        (record,) = store.history(task_name, 1)
        assert record.error is not None and ESCAPES in record.error, "stored text changed"
    finally:
        store.dispose()


@pytest.mark.slow
def test_trigger_and_command_output_lines_show_escapes_escaped(tmp_path: Path) -> None:
    config = tmp_path / "cronlease.toml"
    # printf's octal escapes: ESC ] 0 ; title BEL, ESC [ 2 J, and U+202E in UTF-8
    command = (
        r"printf 'out \033]0;title\007 \033[2J\n'; "
        r"printf 'err \033[2J\342\200\256x\n' >&2; exit 3"
    )
    config.write_text(
        f'database = "sqlite:///{tmp_path / "leases.db"}"\n\n'
        f'[tasks.noisy]\ncommand = {json.dumps(command)}\nshell = true\nevery = "1h"\n'
    )
    triggered = cli("trigger", "noisy", "-c", str(config), cwd=tmp_path)
    assert triggered.returncode == 1, triggered.stderr
    output = triggered.stdout + triggered.stderr
    assert_nothing_raw(output)
    assert "out \\x1b]0;title\\x07 \\x1b[2J" in output  # the stdout line, logged
    assert "err \\x1b[2J\\u202ex" in output  # the stderr line, logged and in the summary
    store = LeaseStore.from_url(f"sqlite:///{tmp_path / 'leases.db'}")
    try:
        (record,) = store.history("noisy", 1)
        assert record.error is not None and "\x1b[2J\u202ex" in record.error
    finally:
        store.dispose()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("password", "forms"),
    [
        ("s3cr@t!x", ("s3cr@t!x", "s3cr%40t%21x", "s3cr%40t!x")),  # URL-encoded, any mix
        ("ab", ()),  # short: hidden where a URL shows it
    ],
    ids=["url-encoded", "short"],
)
def test_history_never_shows_the_database_password(
    tmp_path: Path, task_name: str, password: str, forms: tuple[str, ...]
) -> None:
    """The PostgreSQL test server trusts every local user: any password connects."""
    url = make_url(url_for("postgresql", tmp_path)).set(password=password)
    rendered = url.render_as_string(hide_password=False)
    quoted = rendered.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    written = " ".join(f"[{form}]" for form in forms)
    # the forms first: the history table shows the first 100 characters
    failing_run(rendered, task_name, f"{written} cannot reach {rendered}")

    for command in (["history", task_name], ["status"]):
        shown = cli(*command, "--database", rendered, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        output = shown.stdout + shown.stderr
        assert f":{quoted}@" not in output and f":{password}@" not in output, output
        for form in forms:
            assert form not in output, f"{form!r} shown by {command}: {output}"
    history = cli("history", task_name, "--database", rendered, "--json", cwd=tmp_path)
    assert ":***@" in history.stdout and f":{password}@" not in history.stdout
    assert f":{quoted}@" not in history.stdout
    for form in forms:
        assert form not in history.stdout, f"{form!r} in the JSON history"
